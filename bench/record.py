"""One JSON line of a benchmark, appended to bench/results/NAME.jsonl with the date and the machine.

    append_result("heads", {"seed": 7, "formed": True})
"""

import datetime
import json
import os
from pathlib import Path

from training.hardware import cpu_has_native_bf16

RESULTS = Path(__file__).resolve().parent / "results"


def append_result(name: str, record: dict) -> None:
    machine = f"{os.cpu_count()} cores, native bf16: {cpu_has_native_bf16()}"
    with open(RESULTS / f"{name}.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(record | {"date": datetime.date.today().isoformat(), "machine": machine}) + "\n")

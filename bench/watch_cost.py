"""What `train.py --watch` costs a run: its wall time without the page, with one viewer, and with a stalled one.

    python bench/watch_cost.py                                   # configs/heads.toml, 1,000 steps, 3 rounds
    python bench/watch_cost.py --config configs/small.toml --steps 200 --out watch_cost_small.json
    python bench/watch_cost.py --steps 800 --train.snapshots=4     # overrides go to every run (train.py's form)

The three kinds of run take turns (off, one viewer, stalled; then again), so a machine that slows down or speeds up
meets each kind alike, and the medians are compared. "one viewer" is a client that does what the page does: it asks
/api/state every second and, for each new evaluation, its maps. "stalled" is a viewer that sent its request and
reads nothing, beside one that sends half a request's head and then nothing: the trainer must not notice either.
The wall time is the run's own `wall_s` (metrics.jsonl's last line: from the process's start to the end of its final
scores). Figures go to bench/results/watch_cost.json.
"""

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from storage.checkpoint import read_metrics  # noqa: E402

KINDS = ("off", "viewer", "stalled")


def viewer(port: int, stop: threading.Event, asked: list) -> None:
    """The page's requests: the state each second (?since: a few bytes while nothing changed), each new map once."""
    version, mapped = None, set()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    while not stop.wait(1.0):
        try:
            connection.request("GET", "/api/state" + ("" if version is None else f"?since={version}"))
            state = json.loads(connection.getresponse().read())
            version = state["version"]
            for e in state.get("runs", [{}])[0].get("evals", []):
                if e["maps"] and e["step"] not in mapped:
                    connection.request("GET", f"/api/maps?run=0&step={e['step']}")
                    connection.getresponse().read()
                    mapped.add(e["step"])
            asked.append(1)
        except (OSError, http.client.HTTPException, ValueError):
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)


def stall(port: int) -> list[socket.socket]:
    """A viewer that asked and reads nothing, and one that sent half a head."""
    reader = socket.create_connection(("127.0.0.1", port))
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    reader.sendall(f"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode() * 50)  # pipelined, unread
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(b"GET /api/state HTTP/1.1\r\nHo")
    return [reader, half]


def one_run(kind: str, args, work: Path, n: int) -> dict:
    out = work / f"{kind}{n}"
    command = [sys.executable, "train.py", "--config", args.config, "--out", str(out), f"--train.max_steps={args.steps}",
               *args.overrides, *(["--watch", "0"] if kind != "off" else [])]
    trainer = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": str(args.threads)})
    stop, asked, held = threading.Event(), [], []
    thread = None
    if kind != "off":
        port = next(int(m.group(1)) for line in trainer.stdout if (m := re.search(r"http://localhost:(\d+)/", line)))
        if kind == "viewer":
            thread = threading.Thread(target=viewer, args=(port, stop, asked), daemon=True)
            thread.start()
        else:
            time.sleep(1.0)  # the page's process is listening by now (the trainer bound its socket before)
            held = stall(port)
    trainer.stdout.read()
    assert trainer.wait() == 0, f"{kind} run {n} failed"
    stop.set()
    for s in held:
        s.close()
    final = [r for r in read_metrics(out / "metrics.jsonl") if r.get("kind") == "final"][-1]
    return {"kind": kind, "round": n, "wall_s": final["wall_s"], "tokens_per_s": final.get("tokens_per_s"),
            "viewer_requests": len(asked)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/heads.toml")
    parser.add_argument("--steps", type=int, default=1000, help="train.max_steps of each run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of each run")
    parser.add_argument("--note", default="", help="a word on the machine (shared, quiet) for the record")
    parser.add_argument("--out", default="watch_cost.json", help="the record's name in bench/results/")
    args, args.overrides = parser.parse_known_args()
    work, rows = Path(tempfile.mkdtemp()), []
    for n in range(args.rounds):
        for kind in KINDS:
            rows.append(one_run(kind, args, work, n))
            print(json.dumps(rows[-1]), flush=True)
    medians = {k: statistics.median(r["wall_s"] for r in rows if r["kind"] == k) for k in KINDS}
    for kind in KINDS:
        print(f"{kind:8} median wall {medians[kind]:7.1f} s  {100 * (medians[kind] / medians['off'] - 1):+5.1f}%")
    result = {"config": args.config, "steps": args.steps, "overrides": args.overrides, "rounds": args.rounds, "threads": args.threads,
              "note": args.note, "medians_s": medians, "runs": rows}
    out = ROOT / "bench" / "results" / args.out
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

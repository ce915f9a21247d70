"""Ctrl-C and SIGTERM while the live inspector's model works: does `generate.py --serve` stop cleanly every time?

    python bench/live_signals.py --ckpt runs/heads --tries 20

For each signal (SIGINT, SIGTERM) and each route (a generation, an inspect), `--tries` times: start the server,
keep its model busy with requests from a client thread, send the signal after a random 0.1-1.0 s, and check
the process: exit 0, its last line "stopped the live inspector", no traceback, no abort. Prints a line per
case with the count of clean stops and the slowest stop.
"""

import argparse
import http.client
import json
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one(ckpt: str, route: str, signum: int, wait: float) -> tuple[bool, float, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "generate.py"), "--serve", "--ckpt", ckpt, "--port", "0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    port = int(re.search(r":(\d+)/ ", proc.stdout.readline()).group(1))
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                connection.request("POST", f"/api/{route}", body=json.dumps({"text": "대한민국 국회는", "max_new_tokens": 50}),
                                   headers={"Content-Type": "application/json"})  # fmt: skip
                connection.getresponse().read()
            except OSError:
                return

    client = threading.Thread(target=busy)
    client.start()
    time.sleep(wait)
    sent = time.perf_counter()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    took = time.perf_counter() - sent
    stop.set()
    client.join(30)
    clean = (proc.returncode == 0 and out.splitlines()[-1:] == ["stopped the live inspector"]
             and "Traceback" not in err and "terminate called" not in err)  # fmt: skip
    return clean, took, f"exit {proc.returncode}: {err.strip().splitlines()[-1:] if err.strip() else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--tries", type=int, default=20)
    args = parser.parse_args()
    rng = random.Random(0)
    for signum in (signal.SIGINT, signal.SIGTERM):
        for route in ("generate", "inspect"):
            results = [one(args.ckpt, route, signum, rng.uniform(0.1, 1.0)) for _ in range(args.tries)]
            clean = sum(ok for ok, _, _ in results)
            print(f"{signal.Signals(signum).name} during {route}: {clean} of {args.tries} clean, slowest stop "
                  f"{max(t for _, t, _ in results):.2f} s" + "".join(f"\n  {why}" for ok, _, why in results if not ok))


if __name__ == "__main__":
    main()

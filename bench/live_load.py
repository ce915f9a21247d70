"""What one machine's live inspector serves a class: N pages typing and one generating, on loopback.

    python bench/live_load.py --ckpt runs/small                       # N = 1, 5, 20; 20 s each
    python bench/live_load.py --ckpt runs/small --clients 5 --seconds 10 --record

Starts `generate.py --serve` on the run, then for each N: N clients each send an inspect (a keystroke's view:
no walkthrough tensors) every 300 ms, of a text cut from the built-in corpus and growing by a
few characters each time (50-120 tokens: the default model reads 128), without waiting for the answer (as the page does: a newer text supersedes that
page's older one), while one more client generates continuously. When the typing stops, each client's last
text must be answered. Prints, per N: the share of sent texts answered (the rest gave way to the same page's
newer text), p50 and p95 latency of the answered ones, each client's last text answered or not, the tokens
generated meanwhile, and any answer that was not valid JSON or printed a traceback.
"""

import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.record import append_result  # noqa: E402
from data.sources import builtin_files  # noqa: E402


def post(port: int, path: str, body: dict, timeout: float = 60) -> tuple[int, bytes, float]:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data, time.perf_counter() - started


def typist(port: int, name: str, corpus: str, start: int, seconds: float, every: float, log: list) -> None:
    """Send a growing text every `every` s for `seconds`, each on its own thread (no waiting for answers)."""
    threads, n, began = [], 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        n += 1
        text = corpus[start : start + 75 + (5 * n) % 100]  # 75-170 characters (50-120 tokens) as it grows

        def one(n=n, text=text):
            status, data, latency = post(port, "/api/inspect", {"text": text, "client": name, "explain": False})
            log.append((name, n, status, latency, data))

        threads.append(threading.Thread(target=one))
        threads[-1].start()
        time.sleep(every)
    for thread in threads:
        thread.join(120)


def generator(port: int, stop: threading.Event, counts: list) -> None:
    while not stop.is_set():
        status, data, _ = post(port, "/api/generate", {"text": "대한민국", "max_new_tokens": 100, "client": "gen"})
        counts.append(sum('"piece"' in line for line in data.decode("utf-8", "replace").splitlines()))


def measure(port: int, clients: int, seconds: float, corpus: str) -> dict:
    log, counts, stop = [], [], threading.Event()
    gen = threading.Thread(target=generator, args=(port, stop, counts))
    gen.start()
    typists = [threading.Thread(target=typist, args=(port, f"page-{i}", corpus, 300 * i, seconds, 0.3, log))
               for i in range(clients)]  # fmt: skip
    for t in typists:
        t.start()
    for t in typists:
        t.join()
    stop.set()
    gen.join(120)
    invalid = 0
    for *_, data in log:
        try:
            json.loads(data)
        except ValueError:
            invalid += 1
    answered = [latency for _, _, status, latency, _ in log if status == 200]
    last = {name: max(n for nm, n, *_ in log if nm == name) for name, *_ in log}
    last_answered = sum(1 for name, n in last.items() if any(nm == name and k == n and st == 200 for nm, k, st, *_ in log))
    q = statistics.quantiles(answered, n=20) if len(answered) >= 2 else [float("nan")] * 19
    return {"clients": clients, "sent": len(log), "answered": len(answered), "share": round(len(answered) / len(log), 3),
            "p50_ms": round(1000 * statistics.median(answered), 1), "p95_ms": round(1000 * q[18], 1),
            "last_answered": f"{last_answered}/{len(last)}", "statuses": sorted({s for _, _, s, _, _ in log}),
            "generated_tokens": sum(counts), "invalid_json": invalid}  # fmt: skip


def serve(ckpt: str) -> tuple[subprocess.Popen, int]:
    """`generate.py --serve` on ckpt in a process of its own: (process, port)."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "generate.py"), "--serve", "--ckpt", ckpt, "--port", "0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    return proc, int(re.search(r":(\d+)/ ", proc.stdout.readline()).group(1))


def typed_corpus() -> str:
    """The built-in corpus on one line: what the typists cut their texts from."""
    return " ".join(" ".join(f.read_text(encoding="utf-8") for f in builtin_files()).split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", required=True, help="the run to serve (the default config's, for the figures)")
    parser.add_argument("--clients", type=int, nargs="*", default=[1, 5, 20])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--record", action="store_true", help="append the figures to bench/results/live_load.jsonl")
    args = parser.parse_args()
    proc, port = serve(args.ckpt)
    corpus = typed_corpus()
    try:
        for clients in args.clients:
            result = measure(port, clients, args.seconds, corpus)
            print(json.dumps(result, ensure_ascii=False), flush=True)
            if args.record:
                append_result("live_load", {"ckpt": args.ckpt, "seconds": args.seconds, **result})
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    print(f"server: exit {proc.returncode}, {'a traceback' if 'Traceback' in err else 'no traceback'} on stderr")


if __name__ == "__main__":
    main()

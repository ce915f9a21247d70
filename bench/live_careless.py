"""What careless clients cost a class: the live inspector's answers to typing pages while others misbehave.

    python bench/live_careless.py --ckpt RUN                  # 200 idle, 30 hung up, 10 not reading; 30 s
    python bench/live_careless.py --ckpt RUN --record         # appends to bench/results/live_careless.jsonl

Starts `generate.py --serve` on the run, then: PAGES pages type (an inspect every 300 ms of a growing text, no
walkthrough tensors, as bench/live_load.py) for a quiet phase; then, for as long again, the same while
- IDLE sockets connect and send nothing (reopened as soon as the server closes one: always IDLE open),
- HUNG_UP clients start a 127-token generation each, read its first bytes and hang up,
- SLOW clients start a 127-token generation each with a 4 KB receive buffer and never read a byte;
then everything stops and the server gets SETTLE seconds. Prints, per phase: the pages' texts answered, p50 and
p95 answer time, the 503s; the server's CPU (% of one core) and its memory (VmRSS) at the start, at its peak and
after the settle, and whether it printed a traceback.
"""

import argparse
import json
import re
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.live_load import serve, typed_corpus, typist  # noqa: E402
from bench.record import append_result  # noqa: E402


def rss_kb(pid: int) -> int:
    return int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text()).group(1))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks of 1/100 s


def generation_request(port: int, client: str) -> bytes:
    body = json.dumps({"text": "대", "max_new_tokens": 127, "client": client}).encode()
    return (b"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (port, len(body), body))  # fmt: skip


def idle_sockets(port: int, count: int, stop: threading.Event) -> None:
    """Keep `count` connections open that send nothing, reopening each the server closes."""
    sockets = []
    while not stop.is_set():
        sockets = [s for s in sockets if not closed(s)]
        while len(sockets) < count and not stop.is_set():
            try:
                sockets.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                time.sleep(0.05)
        time.sleep(0.1)
    for s in sockets:
        s.close()


def closed(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        gone = s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        gone = True
    if gone:
        s.close()
    return gone


def hung_up(port: int, n: int, stop: threading.Event) -> None:
    """Start a generation, read its first bytes, hang up."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(generation_request(port, f"gone{n}"))
            s.recv(200)
    except OSError:
        pass


def slow_reader(port: int, n: int, stop: threading.Event) -> None:
    """Start a generation and never read it, until the phase ends."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(generation_request(port, f"slow{n}"))
        stop.wait()
    except OSError:
        pass
    finally:
        s.close()


def phase(port: int, pid: int, pages: int, seconds: float, corpus: str, careless: dict | None) -> dict:
    log, stop, hostile = [], threading.Event(), []
    if careless:
        hostile += [threading.Thread(target=idle_sockets, args=(port, careless["idle"], stop))]
        hostile += [threading.Thread(target=hung_up, args=(port, n, stop)) for n in range(careless["hung_up"])]
        hostile += [threading.Thread(target=slow_reader, args=(port, n, stop)) for n in range(careless["slow"])]
    for thread in hostile:
        thread.start()
    time.sleep(2 if careless else 0)  # the careless ones in place before the pages are measured
    peak, cpu0, began = rss_kb(pid), cpu_seconds(pid), time.perf_counter()
    typists = [threading.Thread(target=typist, args=(port, f"page-{i}", corpus, 300 * i, seconds, 0.3, log))
               for i in range(pages)]  # fmt: skip
    for thread in typists:
        thread.start()
    while any(t.is_alive() for t in typists):
        peak = max(peak, rss_kb(pid))
        time.sleep(0.25)
    cpu = (cpu_seconds(pid) - cpu0) / (time.perf_counter() - began)
    stop.set()
    for thread in hostile:
        thread.join(30)
    answered = sorted(latency for _, _, status, latency, _ in log if status == 200)
    q = statistics.quantiles(answered, n=20) if len(answered) >= 2 else [float("nan")] * 19
    return {"phase": "careless" if careless else "quiet", **(careless or {}), "pages": pages, "sent": len(log),
            "answered": len(answered), "p50_ms": round(1000 * statistics.median(answered), 1) if answered else None,
            "p95_ms": round(1000 * q[18], 1), "max_ms": round(1000 * answered[-1], 1) if answered else None,
            "statuses": sorted({s for _, _, s, _, _ in log}), "server_cpu_pct": round(100 * cpu),
            "rss_peak_mb": round(peak / 1024, 1)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", required=True, help="the run to serve (the default config's shape, for the figures)")
    parser.add_argument("--pages", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--idle", type=int, default=200)
    parser.add_argument("--hung-up", type=int, default=30)
    parser.add_argument("--slow", type=int, default=10)
    parser.add_argument("--settle", type=float, default=10, help="seconds after the careless phase before the memory")
    parser.add_argument("--record", action="store_true", help="append the figures to bench/results/live_careless.jsonl")
    args = parser.parse_args()
    proc, port = serve(args.ckpt)
    corpus = typed_corpus()
    try:
        quiet = phase(port, proc.pid, args.pages, args.seconds, corpus, None)
        start_mb = round(rss_kb(proc.pid) / 1024, 1)
        careless = phase(port, proc.pid, args.pages, args.seconds, corpus,
                         {"idle": args.idle, "hung_up": args.hung_up, "slow": args.slow})  # fmt: skip
        time.sleep(args.settle)
        after_mb = round(rss_kb(proc.pid) / 1024, 1)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    memory = {"rss_start_mb": start_mb, "rss_after_mb": after_mb, "rss_after_vs_start": round(after_mb / start_mb, 3),
              "traceback": "Traceback" in err, "exit": proc.returncode}  # fmt: skip
    for result in (quiet, careless):
        print(json.dumps(result, ensure_ascii=False), flush=True)
    print(json.dumps(memory), flush=True)
    if args.record:
        append_result("live_careless", {"ckpt": args.ckpt, "seconds": args.seconds, "quiet": quiet,
                                        "careless": careless, **memory})  # fmt: skip


if __name__ == "__main__":
    main()

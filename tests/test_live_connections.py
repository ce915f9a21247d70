"""The live inspector's connections (inspection/live_connections.py, with inspection/live_server.py and
live_worker.py): what a careless or hostile client costs everyone else, swept over connections × timings; a client
that goes away, one that stops reading, and a stop while pages wait.

    python -m pytest tests/test_live_connections.py -q
"""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from inference.runs import load_run
from inspection import live_connections, live_server
from inspection.live_server import LiveServer
from inspection.live_worker import AHEAD
from tests.conftest import ROOT, TINY

PROMPT = "대한민국 국회는"
HEAD = 0.6  # seconds, the head timeout in these tests (5 s served)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A tiny model with room for long generations (block 128)."""
    import train

    root = tmp_path_factory.mktemp("connections")
    cache = tmp_path_factory.getbasetemp() / "train-data-cache"
    assert train.main(["--config", str(TINY), f"--data.cache_dir={cache}", "--train.threads=1",
                       "--train.sample_tokens=0", "--train.max_steps=2", "--train.eval_interval=2",
                       "--model.block_size=128", "--out", str(root / "run")]) == 0  # fmt: skip
    return root / "run"


@pytest.fixture
def server(run_dir, monkeypatch):
    monkeypatch.setattr(live_connections, "HEAD_TIMEOUT", HEAD)
    server = LiveServer(load_run(run_dir, device="cpu"), "127.0.0.1", 0).start_in_thread()
    steps = counted(server)
    server.steps = steps
    yield server
    server.shutdown()


def counted(server) -> list[int]:
    """Count every step the model thread computes for generations: [steps]."""
    steps, generate = [0], server.inspector.generate

    def counting(body):
        inner = generate(body)

        def each():
            for answer in inner:
                steps[0] += 1
                yield answer

        return each()

    server.inspector.generate = counting
    return steps


def request(server, path="/api/inspect", body=None, raw_body=None) -> bytes:
    data = raw_body if raw_body is not None else json.dumps(body or {"text": PROMPT}).encode()
    return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (path.encode(), server.port, len(data)) + data)  # fmt: skip


def connect(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def closed_by_server(s: socket.socket, within: float) -> bool:
    """Whether the server closed `s` (end of input or reset) within `within` seconds; what it sent is dropped."""
    s.settimeout(within)
    try:
        while s.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def statuses(data: bytes) -> list[int]:
    return [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", data)]


def page_answer(server, timeout=10.0) -> tuple[int, float]:
    """(status, seconds) of a page's inspect on a connection of its own."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        connection.request("POST", "/api/inspect", body=json.dumps({"text": PROMPT, "explain": False}),
                           headers={"Content-Type": "application/json"})  # fmt: skip
        response = connection.getresponse()
        response.read()
        return response.status, time.perf_counter() - started
    finally:
        connection.close()


# ---- connections × timings: what a connection that asks for nothing may hold -------------------------------------

def send_nothing(s, server):
    pass


def send_half_a_head(s, server):
    s.sendall(request(server)[:30])


def drip_a_head(s, server):  # a byte every 0.2 s: uvicorn's keep-alive timer would restart on each
    for byte in request(server)[:12]:
        s.sendall(bytes([byte]))
        time.sleep(0.2)


def answer_then_idle(s, server):  # one request answered, then nothing on the kept-alive connection
    s.sendall(request(server))
    time.sleep(0.3)


def answer_then_half_a_head(s, server):
    s.sendall(request(server))
    time.sleep(0.3)
    s.sendall(request(server)[:40])


@pytest.mark.parametrize("behaviour", [send_nothing, send_half_a_head, drip_a_head, answer_then_idle,
                                       answer_then_half_a_head])  # fmt: skip
def test_a_connection_that_sends_no_whole_request_is_closed_after_the_head_timeout(server, behaviour):
    s = connect(server)
    opened = time.perf_counter()
    try:
        behaviour(s, server)
    except (BrokenPipeError, ConnectionResetError):  # closed while it dripped
        pass
    assert closed_by_server(s, HEAD + 3)
    assert time.perf_counter() - opened < HEAD + 3.0
    s.close()
    assert page_answer(server)[0] == 200


def test_a_request_already_under_way_is_not_cut_by_the_head_timeout(server):
    with connect(server) as s:  # a generation longer than the head timeout, read as it comes
        s.sendall(request(server, "/api/generate", {"text": PROMPT, "max_new_tokens": 100, "seed": 1}))
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            data += s.recv(65536)
    assert statuses(data) == [200] and b'"done": true' in data


@pytest.mark.parametrize("first, then", [
    (request, "half-close"),  # sent whole, then shutdown(SHUT_WR), as nc does: answered, then closed
    (lambda server: request(server, raw_body=b"{bad"), "pipelined"),  # a 400 with its body read, then a good one
    (lambda server: request(server, body={"text": PROMPT, "temperature": "x"}), "pipelined"),
    (lambda server: request(server, body={"text": "가" * 5000}), "pipelined"),  # 413 of the text, the body read
    (request, "pipelined"),
])  # fmt: skip
def test_every_whole_request_on_a_connection_is_answered(server, first, then):
    with connect(server) as s:
        if then == "half-close":
            s.sendall(first(server))
            s.shutdown(socket.SHUT_WR)
            expected = 1
        else:
            s.sendall(first(server) + request(server))
            expected = 2
        data, deadline = b"", time.time() + 10
        while len(statuses(data)) < expected and time.time() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    assert len(statuses(data)) == expected and statuses(data)[-1] == 200, data[:300]


def with_headers(server, extra: bytes) -> bytes:
    data = json.dumps({"text": PROMPT}).encode()
    return (b"POST /api/inspect HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n%s"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (server.port, extra, len(data), data))  # fmt: skip


@pytest.mark.parametrize("extra, status", [
    (b"Origin: http://evil.example\r\nOrigin: http://127.0.0.1:{port}\r\n", 400),  # which one would a proxy read?
    (b"Content-Type: text/plain\r\n", 400),  # a second Content-Type
    (b"Host: 127.0.0.1:{port}\r\n", 400),  # a second Host (h11 refuses it itself)
    (b"X-Pad: " + b"a" * 60_000 + b"\r\n", 431),  # one header line of 60 KB, arriving in one read
    (b"X-Pad: " + b"a" * 15_000 + b"\r\n", 200),  # under 16 KB in all
], ids=["two-origins", "two-content-types", "two-hosts", "60KB-header", "15KB-header"])  # fmt: skip
def test_headers_the_refusals_read_come_once_and_all_of_them_in_16_kb(server, extra, status):
    with connect(server) as s:
        s.sendall(with_headers(server, extra.replace(b"{port}", str(server.port).encode())))
        data = b"".join(iter(lambda: s.recv(65536), b""))
    assert statuses(data) == [status], data[:200]
    if status == 200:
        assert b'"tokens"' in data


def test_past_max_connections_the_oldest_idle_one_makes_room(server, monkeypatch):
    monkeypatch.setattr(live_connections, "HEAD_TIMEOUT", 60.0)  # the idle ones stay; only the cap moves them
    monkeypatch.setattr(live_connections, "MAX_CONNECTIONS", 20)
    idle = []
    for _ in range(23):  # each one past 20 closes the oldest waiting one
        idle.append(connect(server))
        time.sleep(0.02)
    assert [closed_by_server(s, 0.5) for s in idle[:3]] == [True] * 3
    assert not any(closed_by_server(s, 0.1) for s in idle[3:])
    status, seconds = page_answer(server)  # a page's connection too: it is answered, idle[3] makes room
    assert status == 200 and seconds < 2 and closed_by_server(idle[3], 0.5)
    for s in idle:
        s.close()


def test_idle_sockets_at_the_request_limit_lock_no_page_out(server, monkeypatch):
    monkeypatch.setattr(live_connections, "HEAD_TIMEOUT", 60.0)
    idle = [connect(server) for _ in range(live_server.MAX_REQUESTS)]  # uvicorn's limit used to count them: 503
    half = [connect(server) for _ in range(20)]
    for s in half:
        s.sendall(request(server)[:50])
    time.sleep(0.3)
    answers = [page_answer(server) for _ in range(5)]
    assert all(status == 200 and seconds < 2 for status, seconds in answers), answers
    for s in idle + half:
        s.close()


def test_past_max_requests_a_page_gets_a_json_503(server, monkeypatch):
    monkeypatch.setattr(live_server, "MAX_REQUESTS", 2)
    streams = [connect(server) for _ in range(2)]
    for n, s in enumerate(streams):  # two generations under way, never read: they hold their requests
        s.sendall(request(server, "/api/generate", {"text": PROMPT, "max_new_tokens": 100, "client": f"g{n}"}))
    time.sleep(0.5)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("POST", "/api/inspect", body=json.dumps({"text": PROMPT}), headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 503 and "requests under way" in json.loads(response.read())["error"]
    for s in streams:
        s.close()


# ---- clients that go away or stop reading ---------------------------------------------------------------------

def wait_until(condition, seconds: float) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_client_that_hangs_up_stops_its_generation_at_once(server, how):
    clients = []
    for n in range(5):
        s = connect(server)
        s.sendall(request(server, "/api/generate", {"text": PROMPT, "max_new_tokens": 110, "client": f"gone{n}"}))
        assert s.recv(100).startswith(b"HTTP/1.1 200")
        clients.append(s)
    for s in clients:
        if how == "reset":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
    assert wait_until(lambda: not server.worker.jobs, 3), server.worker.jobs
    computed = server.steps[0]
    assert computed < 5 * 30  # of 5 x 110 asked for: each stopped within a few tokens of its hanging up
    time.sleep(0.5)
    assert server.steps[0] == computed  # and nothing more computed for nobody


def test_a_client_that_stops_reading_pauses_its_generation_and_then_loses_it(server, monkeypatch):
    # Room for a few lines only (the kernel's 16 KB, doubled, the transport's 64 KB, the reader's 4 KB) of the
    # ~37 this generation writes (14-38 KB each): with the served 256 KB about 25 fit, and on another kernel's
    # accounting all of them could, the generation ending before it was ever held. SEND_TIMEOUT well past the
    # checks below, so a busy machine cannot drop the stream before they look at it.
    monkeypatch.setattr(live_connections, "SEND_BUFFER", 16 * 1024)
    monkeypatch.setattr(live_server, "SEND_TIMEOUT", 4.0)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", server.port))
    # a seed: unseeded, the sampler draws from torch's global generator in whatever state the tests before this one
    # left it, and after tests/test_live.py the generation ended (<|endoftext|> stops it) before it could be held
    s.sendall(request(server, "/api/generate", {"text": PROMPT * 6, "max_new_tokens": 110, "seed": 0,
                                                "client": "stalled"}))
    assert wait_until(lambda: server.steps[0] > 0, 5)
    time.sleep(1.0)
    paused_at = server.steps[0]
    job = server.worker.jobs.get("stalled")
    assert job is not None and job.unsent <= AHEAD  # never more than AHEAD answers queued for it
    time.sleep(0.5)
    assert server.steps[0] == paused_at < 110  # the model waits for its reader, computing nothing
    status, seconds = page_answer(server)  # others meanwhile: at once
    assert status == 200 and seconds < 2
    assert wait_until(lambda: "stalled" not in server.worker.jobs, 8)  # SEND_TIMEOUT: the stream is dropped
    s.close()


# ---- a stop while pages wait -----------------------------------------------------------------------------------

def serving(run_dir):
    proc = subprocess.Popen([sys.executable, str(ROOT / "generate.py"), "--serve", "--ckpt", str(run_dir), "--port", "0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    found = re.search(r"http://\S+:(\d+)/", proc.stdout.readline())
    assert found, proc.stderr.read()
    return proc, int(found.group(1))


@pytest.mark.parametrize("signals", [[signal.SIGINT], [signal.SIGTERM], [signal.SIGINT, signal.SIGINT]],
                         ids=["SIGINT", "SIGTERM", "SIGINT twice"])  # fmt: skip
def test_a_stop_while_pages_wait_answers_every_page_and_prints_no_traceback(run_dir, signals):
    proc, port = serving(run_dir)
    answers, lock = [], threading.Lock()

    def page(n):
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("POST", "/api/inspect", body=json.dumps({"text": PROMPT * 8, "client": f"p{n}"}),
                               headers={"Content-Type": "application/json"})  # fmt: skip
            response = connection.getresponse()
            result = response.status, response.read()
        except OSError:  # not yet read by the server when it stopped listening: no request of it was taken
            result = None, b""
        with lock:
            answers.append(result)

    pages = [threading.Thread(target=page, args=(n,)) for n in range(60)]
    for thread in pages:
        thread.start()
    assert wait_until(lambda: len(answers) >= 3, 30)  # the model is working through them
    for signum in signals:
        proc.send_signal(signum)
        time.sleep(0.05)
    out, err = proc.communicate(timeout=30)
    for thread in pages:
        thread.join(30)
    assert proc.returncode == 0 and out.splitlines()[-1] == "stopped the live inspector", err
    assert "Traceback" not in err and "Event loop is closed" not in err, err
    taken = [(status, body) for status, body in answers if status is not None]
    assert taken and all(status in (200, 503) for status, _ in taken), [s for s, _ in taken]
    stopped = [json.loads(body) for status, body in taken if status == 503]
    assert all(answer == {"error": "the server is stopping"} for answer in stopped)


def test_a_stop_with_more_work_queued_than_the_grace_period_answers_every_page(run_dir, capfd):
    """The model's queue outlasts uvicorn's 3 s of grace (60 inspects of 0.1 s): the pages not yet served are
    answered the stop, not a 500 when uvicorn cancels them, and the model thread prints no traceback."""
    server = LiveServer(load_run(run_dir, device="cpu"), "127.0.0.1", 0).start_in_thread()
    inspect = server.inspector.inspect

    def slow(body):
        for answer in inspect(body):
            time.sleep(0.1)
            yield answer

    server.inspector.inspect = slow
    answers, lock = [], threading.Lock()

    def page(n):
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        connection.request("POST", "/api/inspect", body=json.dumps({"text": PROMPT, "client": f"p{n}"}),
                           headers={"Content-Type": "application/json"})  # fmt: skip
        response = connection.getresponse()
        with lock:
            answers.append((response.status, response.read()))

    pages = [threading.Thread(target=page, args=(n,)) for n in range(60)]
    for thread in pages:
        thread.start()
    assert wait_until(lambda: len(answers) >= 2, 30)
    server.shutdown()  # what Ctrl-C does: uvicorn's should_exit
    for thread in pages:
        thread.join(30)
    assert len(answers) == 60
    assert sorted({status for status, _ in answers}) == [200, 503]
    assert all(json.loads(body) == {"error": "the server is stopping"} for status, body in answers if status == 503)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Event loop is closed" not in err, err

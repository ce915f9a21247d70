"""The live inspector (inspection/live.py, inspection/live_server.py, generate.py --serve): its answers, its
refusals, its stream, several clients at once, its stop, the page.

    python -m pytest tests/test_live.py -q
"""

import base64
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import socket
import threading
import time

import numpy as np
import torch
import pytest

import generate
from inspection import live_server
from inspection.live_server import MAX_BODY, LiveServer
from inference.runs import load_run
from cli.errors import UserError
from tests.conftest import CHROMIUM, ROOT, trained_tiny_run

PROMPT = "대한민국 국회는"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return trained_tiny_run(tmp_path_factory, "live").run


@pytest.fixture(scope="module")
def server(run_dir):
    server = LiveServer(load_run(run_dir, device="cpu"), "127.0.0.1", 0).start_in_thread()
    yield server
    server.shutdown()


def ask(server, method="POST", path="/api/inspect", body=None, headers=None, raw=None):
    """(status, parsed JSON or text) of one request to the server."""
    connection = http.client.HTTPConnection(getattr(server, "address_to_ask", "127.0.0.1"), server.port, timeout=60)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    headers = ({"Content-Type": "application/json"} if method == "POST" else {}) | (headers or {})
    connection.request(method, path, body=data, headers={k: v for k, v in headers.items() if v is not None})
    response = connection.getresponse()
    text = response.read().decode("utf-8")
    connection.close()
    kind = response.getheader("Content-Type", "")
    if "x-ndjson" in kind:
        return response.status, [json.loads(line) for line in text.splitlines()]
    return response.status, json.loads(text) if "json" in kind else text


def weights_of(view) -> np.ndarray:
    """The (L, H, T, T) maps of a view's frame, unpacked from the page's uint16 lower triangles."""
    T, frame = view["T"], view["frames"][0]
    packed = np.frombuffer(base64.b64decode(frame["att"]), dtype="<u2").astype(np.float64) / 65535
    L, H = len(frame["stats"]["entropy"]), len(frame["stats"]["entropy"][0])
    q, k = np.tril_indices(T)
    out = np.zeros((L, H, T, T))
    out[..., q, k] = packed.reshape(L, H, -1)
    return out


def test_a_text_gets_its_maps_roles_walkthrough_tensors_and_next_token(server, run_dir, tmp_path, capsys):
    status, view = ask(server, body={"text": PROMPT, "temperature": 0})
    assert status == 200
    assert generate.main(["--ckpt", str(run_dir), "--prompt", PROMPT, "--attention", str(tmp_path)]) == 0
    with np.load(tmp_path / "attention.npz") as npz, np.load(tmp_path / "explain.npz") as trace:
        assert view["tokens"] == npz["labels"].tolist()
        np.testing.assert_allclose(weights_of(view), npz["att"], atol=1e-4)
        q = np.frombuffer(base64.b64decode(view["frames"][0]["explain"]["q"]), dtype="<f4").reshape(trace["q"].shape)
        np.testing.assert_allclose(q, trace["q"], atol=1e-6)  # the walkthrough's numbers are explain.npz's
    assert view["frames"][0]["roles"] and view["frames"][0]["scores"]["scores"]["induction"]
    assert [c["p"] for c in view["next"]] == [1.0] + [0.0] * 9  # temperature 0: the greedy choice alone
    status, sampled = ask(server, body={"text": PROMPT, "temperature": 1.0, "top_k": 5})
    assert len(sampled["next"]) == 10 and sum(c["p"] for c in sampled["next"][:5]) == pytest.approx(1, abs=1e-5)
    assert sampled["next"][0]["id"] == view["next"][0]["id"] and sampled["model_ms"] > 0
    status, quick = ask(server, body={"text": PROMPT, "temperature": 0, "explain": False})  # what a keystroke asks
    assert quick["frames"][0]["explain"] is None and quick["frames"][0]["att"] == view["frames"][0]["att"]


def test_a_keystroke_runs_one_forward_whose_path_holds_the_next_token(server):
    model, calls = server.inspector.run.model, []
    hook = model.tok_emb.register_forward_hook(lambda *args: calls.append(1))  # every forward embeds once
    try:
        for explain in (False, True):  # a keystroke, then a click that asks for the walkthrough's tensors
            calls.clear()
            (status, view), = server.inspector.inspect({"text": PROMPT, "temperature": 1.0, "top_k": 5, "explain": explain})
            assert status == 200 and calls == [1]  # maps, walkthrough, lens, path and next token: one forward
            assert view["path"]["first"] == (0 if explain else view["T"] - 1)  # a keystroke: the last token's path
    finally:
        hook.remove()
    last, final = view["T"] - 1, view["path"]["sampling"]["stages"][-1]  # the click's record: every token's
    assert final["name"] == "top_k" and [c["id"] for c in view["next"][:5]] == final["top"][last][:5]
    np.testing.assert_allclose([c["p"] for c in view["next"][:5]], final["p"][last][:5], atol=1e-6)


def test_a_line_of_json_nulls_what_json_cannot_hold():
    assert live_server.json_line({"a": float("nan"), "b": [1.5, float("inf")]}) == b'{"a": null, "b": [1.5, null]}\n'
    assert live_server.json_line({"ok": [0.25]}) == b'{"ok": [0.25]}\n'


BAD = [  # (what, request) -> a 4xx and one line
    ("foreign Host", dict(body={"text": PROMPT}, headers={"Host": "attacker.example:80"}), 403),
    ("not JSON", dict(raw=b"{text: 1"), 400),
    ("not an object", dict(body=[1, 2]), 400),
    ("text not a string", dict(body={"text": 5}), 400),
    ("empty text", dict(body={"text": ""}), 200),  # the end-of-text token alone: a view, not an error
    ("temperature out of range", dict(body={"text": PROMPT, "temperature": -1}), 400),
    ("top_p out of range", dict(body={"text": PROMPT, "top_p": 2}), 400),
    ("top_k not whole", dict(body={"text": PROMPT, "top_k": 2.5}), 400),
    ("explain not a boolean", dict(body={"text": PROMPT, "explain": "yes"}), 400),
    ("seed out of range", dict(path="/api/generate", body={"text": PROMPT, "seed": -3}), 400),
    ("too many new tokens", dict(path="/api/generate", body={"text": PROMPT, "max_new_tokens": 10**9}), 400),
    ("text past block_size", dict(body={"text": "국회 " * 40}), 413),
    ("body too large", dict(raw=b" " * (MAX_BODY + 1)), 413),
    ("a body that never arrives", dict(raw=b"", headers={"Transfer-Encoding": "chunked"}), 408),
    ("a Content-Length past the body", dict(raw=b'{"text": "x"}', headers={"Content-Length": "500"}), 408),
    ("JSON nested 20,000 deep", dict(raw=b'{"text": ' + b"[" * 20000 + b"]" * 20000 + b"}"), 400),
    ("top_k of 400 digits", dict(body={"text": PROMPT, "top_k": 10**400}), 400),
    ("seed of 400 digits", dict(path="/api/generate", body={"text": PROMPT, "seed": 10**400}), 400),
    ("max_new_tokens of 400 digits", dict(path="/api/generate", body={"text": PROMPT, "max_new_tokens": 10**400}), 400),
    ("top_k of 5,000 digits", dict(raw=b'{"text": "x", "top_k": ' + b"9" * 5000 + b"}"), 400),
    ("temperature 1e999", dict(raw=b'{"text": "x", "temperature": 1e999}'), 400),
    ("a form, not JSON", dict(raw=b"text=x", headers={"Content-Type": "application/x-www-form-urlencoded"}), 415),
    ("text/plain, not JSON", dict(body={"text": PROMPT}, headers={"Content-Type": "text/plain"}), 415),
    ("no Content-Type", dict(body={"text": PROMPT}, headers={"Content-Type": None}), 415),
    ("another site's page", dict(body={"text": PROMPT}, headers={"Origin": "http://attacker.example"}), 403),
    ("a foreign DNS name", dict(body={"text": PROMPT}, headers={"Host": "rebind.attacker.example:{port}"}), 403),
    ("this server's own page", dict(body={"text": PROMPT}, headers={"Origin": "http://127.0.0.1:{port}"}), 200),
    ("its address on the network", dict(body={"text": PROMPT}, headers={"Host": "192.168.1.20:{port}"}), 200),
    ("an IPv6 address", dict(body={"text": PROMPT}, headers={"Host": "[::1]:{port}"}), 200),
    ("localhost", dict(body={"text": PROMPT}, headers={"Host": "localhost:{port}"}), 200),
    ("ablate not pairs", dict(body={"text": PROMPT, "ablate": [1, 0]}), 400),
    ("ablate a head the model lacks", dict(body={"text": PROMPT, "ablate": [[5, 0]]}), 400),
    ("ablate a head twice", dict(body={"text": PROMPT, "ablate": [[1, 0], [1, 0]]}), 400),
    ("unknown route", dict(path="/api/files"), 404),
    ("a file path", dict(method="GET", path="/../../etc/passwd"), 404),
    ("another method", dict(method="PUT", path="/"), 405),
]  # fmt: skip


@pytest.mark.parametrize("what, request_, status", BAD, ids=[b[0] for b in BAD])
def test_a_bad_request_gets_a_4xx_line_and_the_server_goes_on(server, what, request_, status, capsys, monkeypatch):
    monkeypatch.setattr(live_server, "BODY_TIMEOUT", 1.0)  # what never arrives is refused sooner than 10 s
    headers = {k: v.format(port=server.port) if v else v for k, v in request_.get("headers", {}).items()}
    got, answer = ask(server, **(request_ | {"headers": headers}))
    assert got == status, answer
    if status != 200:
        assert isinstance(answer, dict) and "\n" not in answer["error"] and answer["error"]
    assert ask(server, body={"text": PROMPT})[0] == 200  # and the next good request is answered
    assert "Traceback" not in capsys.readouterr().err


def test_switched_off_heads_give_the_ablated_models_view_beside_the_full_models(server, run_dir):
    """"ablate": the maps, next-token probabilities and held-out loss of the model with those heads off (their
    mean output, as generate.py --ablate), each candidate's full-model probability beside; the lens too."""
    from common.heads_off import HeadsOff
    from inspection.heldout import held_out_means

    run = server.inspector.run
    ids = run.encode_prompt(PROMPT)
    status, full = ask(server, body={"text": PROMPT, "temperature": 1})
    status, off = ask(server, body={"text": PROMPT, "temperature": 1, "ablate": [[1, 0], [0, 1]]})
    assert status == 200 and "held_out" not in full and "p_full" not in full["next"][0]
    with torch.no_grad(), HeadsOff(run.model, [(0, 1), (1, 0)], "mean", held_out_means(run)):
        expected = run.model(torch.tensor([ids], device=run.device))[0][0, -1].softmax(-1)  # the ablated model's own
    for c in off["next"]:
        assert c["p"] == pytest.approx(float(expected[c["id"]]), abs=1e-5)
        assert c["p_full"] == pytest.approx(next((f["p"] for f in full["next"] if f["id"] == c["id"]), c["p_full"]), abs=1e-6)
    assert off["held_out"]["full"] == pytest.approx(server.inspector.full_loss) != off["held_out"]["loss"]
    assert off["lens"]["top"][-1][-1][0] == int(expected.argmax())  # the last token's output-stage choice
    assert not weights_of(off).tolist() == weights_of(full).tolist()  # layer 1's maps change with 0.1 off


def test_a_switched_off_head_is_shown_off_in_the_live_views_with_its_mean_s_share(server):
    """The live page's path, maps' titles, walkthrough data and lens name head 1.0 off (mean), and its share of
    out is its mean output times W_O at every token, the shares adding up to the recorded out."""
    run, means = server.inspector.run, server.inspector.means.cpu().numpy()  # (L, C): the ablation's means
    status, view = ask(server, body={"text": PROMPT, "ablate": [[1, 0]]})
    assert status == 200
    off = [["", ""], ["mean", ""]]
    assert view["path"]["blocks"]["off"] == off and view["frames"][0]["off"] == off
    assert view["frames"][0]["explain"]["off"] == off and view["lens"]["off"] == [[1, 0, "mean"]]
    c_proj = run.model.blocks[1].attn.c_proj
    w_o, b_o = c_proj.weight.detach().cpu().numpy().T, c_proj.bias.detach().cpu().numpy()  # (C, C), (C,)
    d, T = w_o.shape[0] // 2, view["T"]
    share = np.linalg.norm(means[1, :d] @ w_o[:d])
    np.testing.assert_allclose(view["path"]["blocks"]["share"][1][0], [share] * T, atol=1e-5)
    ex = view["frames"][0]["explain"]
    y = np.frombuffer(base64.b64decode(ex["y"]), dtype="<f4").reshape(2, 2, T, d)  # (L, H, T, d)
    np.testing.assert_allclose(y[1, 0], np.broadcast_to(means[1, :d], (T, d)), atol=1e-6)
    out = np.frombuffer(base64.b64decode(ex["out"]), dtype="<f4").reshape(2, T, ex["dims"] + 1)  # first dims, norm
    made = y[1, 0] @ w_o[:d] + y[1, 1] @ w_o[d:] + b_o  # (T, C): every head's share plus b_O
    np.testing.assert_allclose(made[:, : ex["dims"]], out[1, :, : ex["dims"]], atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(made, axis=-1), out[1, :, -1], atol=1e-5)
    status, full = ask(server, body={"text": PROMPT})
    assert full["path"]["blocks"]["off"] == [["", ""], ["", ""]] and full["lens"]["off"] == []


def test_each_client_gets_its_last_typed_text_answered_and_none_cancels_another(server):
    """Three pages typing at once (a request per keystroke, not waiting for the answers): the last text of
    each is answered; an older one of the same page may give way (409), none of another page's does."""
    results = {}

    def typing(client):
        threads = []
        for n in range(1, 7):
            text = PROMPT[:n] + " " + client
            thread = threading.Thread(target=lambda n=n, text=text: results.__setitem__(
                (client, n), ask(server, body={"text": text, "client": client, "explain": False})))  # fmt: skip
            thread.start()
            threads.append(thread)
            time.sleep(0.02)
        for thread in threads:
            thread.join(60)

    pages = [threading.Thread(target=typing, args=(c,)) for c in ("page-a", "page-b", "page-c")]
    for page in pages:
        page.start()
    for page in pages:
        page.join(120)
    for client in ("page-a", "page-b", "page-c"):
        status, view = results[client, 6]
        last = server.inspector.encode({"text": PROMPT[:6] + " " + client})
        assert status == 200 and view["T"] == len(last)  # the last text, answered
        assert {results[client, n][0] for n in range(1, 6)} <= {200, 409}


def raw_exchange(server, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        return b"".join(iter(lambda: s.recv(65536), b""))


def test_what_http_itself_refuses_gets_a_400_and_a_client_gone_early_costs_nothing(server, capsys):
    host = b"Host: 127.0.0.1:%d\r\n" % server.port
    for request in (b"POST /api/inspect HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
                    b"Content-Length: \xc2\xb2\r\n\r\n{}",  # Content-Length: "²"
                    b"GARBAGE / NOT-HTTP\r\n\r\n"):  # fmt: skip
        head, _, body = raw_exchange(server, request).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and b"application/json" not in head  # no body that claims JSON
    for _ in range(5):  # a client that sends a request and closes at once
        body = json.dumps({"text": PROMPT, "client": "gone"}).encode()
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(b"POST /api/inspect HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
    assert ask(server, body={"text": PROMPT})[0] == 200
    assert "Traceback" not in capsys.readouterr().err


def test_a_client_that_stops_reading_holds_up_nobody(server):
    stalled = socket.create_connection(("127.0.0.1", server.port))  # asks for a generation, never reads it
    body = json.dumps({"text": PROMPT, "max_new_tokens": 12, "client": "stalled"}).encode()
    stalled.sendall(b"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (server.port, len(body), body))
    half_open = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(50)]  # and 50 that send nothing
    started = time.perf_counter()
    status, _ = ask(server, body={"text": PROMPT, "client": "other", "explain": False})
    assert status == 200 and time.perf_counter() - started < 2
    for s in [stalled, *half_open]:
        s.close()


def test_the_stream_is_generate_py_s_text_and_its_maps_follow_the_cached_decoding(server, run_dir, tmp_path, capsys):
    status, lines = ask(server, path="/api/generate", body={"text": PROMPT, "max_new_tokens": 8, "seed": 5,
                                                              "temperature": 0.9, "top_p": 0.95})  # fmt: skip
    assert status == 200 and lines[-1]["done"]
    pieces = [line["piece"] for line in lines if "piece" in line]
    assert "".join(pieces) == lines[-1]["text"] and 1 <= len(pieces) <= 8
    argv = ["--ckpt", str(run_dir), "--prompt", PROMPT, "--max-new-tokens", str(len(pieces)), "--seed", "5",
            "--temperature", "0.9", "--top-p", "0.95"]  # fmt: skip
    assert generate.main(argv) == 0
    assert capsys.readouterr().out.splitlines()[0] == PROMPT + lines[-1]["text"]
    assert generate.main([*argv, "--attention", str(tmp_path)]) == 0  # the maps of the same cached decoding
    with np.load(tmp_path / "attention.npz") as npz:
        final = lines[-1]["view"]
        assert final["prefill"] == int(npz["prefill"]) and final["tokens"] == npz["labels"].tolist()
        np.testing.assert_allclose(weights_of(final), npz["att"], atol=1e-4)
    sizes = [line["view"]["T"] for line in lines if "piece" in line]
    assert sizes == sorted(sizes)  # the maps grow with the decoding


def test_serve_refuses_what_it_cannot_use_and_stops_cleanly_on_ctrl_c(run_dir, capsys):
    assert generate.main(["--serve", "--ckpt", str(run_dir), "--prompt", "x"]) == 2
    assert "--serve takes its texts, sampling settings and switched-off heads from the page; drop --prompt" in (
        capsys.readouterr().err)
    for option in (["--num-samples", "2"], ["--repetition-penalty", "1.2"], ["--no-cache"], ["--seed", "3"],
                   ["--temperature", "0.5"], ["--over-training", str(run_dir), "--attention", "x"]):  # fmt: skip
        assert generate.main(["--serve", "--ckpt", str(run_dir), *option]) == 2
        assert option[0] in capsys.readouterr().err.split("drop ")[1]
    assert generate.main(["--serve", "--ckpt", str(run_dir), "--port", "70000"]) == 2
    assert "--port 70000 must be between 0 and 65535" in capsys.readouterr().err
    assert generate.main(["--ckpt", str(run_dir), "--prompt", "x", "--port", "8001"]) == 2
    assert "--host and --port say where --serve listens; add --serve" in capsys.readouterr().err


def serving(run_dir, *extra):
    """`generate.py --serve` in a process of its own: (process, port)."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "generate.py"), "--serve", "--ckpt", str(run_dir), "--port", "0",
                             *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    line = proc.stdout.readline()
    found = re.search(r"open http://(\S+):(\d+)/ \(Ctrl-C stops it\)", line)
    assert found, line + proc.stderr.read()
    return proc, int(found.group(2))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("route", ["generate", "inspect"])
def test_a_signal_while_the_model_works_stops_the_server_cleanly(run_dir, route, signum):
    """Requests keep the model busy (bench/live_signals.py tries it 20 times each); the signal stops the
    server between two steps: exit 0, one line, no traceback, no abort."""
    proc, port = serving(run_dir, "--host", "0.0.0.0")
    answered, stop = [], threading.Event()

    def busy():
        while not stop.is_set():
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                connection.request("POST", f"/api/{route}", body=json.dumps({"text": PROMPT, "max_new_tokens": 12}),
                                   headers={"Content-Type": "application/json"})  # fmt: skip
                answered.append(connection.getresponse().read())
            except OSError:
                return

    client = threading.Thread(target=busy)
    client.start()
    while len(answered) < 2:  # the server answers the address it was reached at (127.0.0.1 for --host 0.0.0.0)
        time.sleep(0.01)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    stop.set()
    client.join(30)
    assert proc.returncode == 0, err
    assert out.splitlines()[-1] == "stopped the live inspector"
    assert "Traceback" not in err and "terminate called" not in err
    assert err.startswith("warning: --host 0.0.0.0: the live inspector answers every machine that reaches this one")


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 on this machine")
def test_it_serves_on_ipv6_too(run_dir):
    try:
        server = LiveServer(load_run(run_dir, device="cpu"), "::1", 0).start_in_thread()
    except UserError as e:
        pytest.skip(f"::1 cannot be bound here ({e})")
    server.address_to_ask = "::1"
    try:
        assert server.address == f"http://[::1]:{server.port}/"
        assert ask(server, body={"text": PROMPT}, headers={"Host": f"[::1]:{server.port}"})[0] == 200
    finally:
        server.shutdown()


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_typing_clicking_and_generating_in_chromium(server, run_dir, tmp_path, browser, capsys):
    port = server.port
    page = browser(tmp_path / "unused.html")  # a blank tab, then the server's page
    page.evaluate(f"location.href = 'http://127.0.0.1:{port}/#layer=1&head=0'")
    page.wait_for("document.getElementById('live-text') && !document.getElementById('live').hidden")
    page.evaluate("const b = document.getElementById('live-text'); b.value = ''; b.focus()")
    page.type(PROMPT)  # a keystroke's maps follow
    assert generate.main(["--ckpt", str(run_dir), "--prompt", PROMPT, "--attention", str(tmp_path)]) == 0
    with np.load(tmp_path / "attention.npz") as npz, np.load(tmp_path / "explain.npz") as trace:
        labels, weights, q = npz["labels"].tolist(), npz["att"], trace["q"]
    page.wait_for(f"document.body.dataset.shownText === {json.dumps(''.join(labels))}")
    assert page.texts("#tokens .t") == labels
    T = len(labels)
    shown = np.array([float(w) for w in page.texts("#outgoing .w")]).reshape(-1, T)
    np.testing.assert_allclose(shown[0], weights[1, 0, T - 1], atol=6e-4)  # layer 1 head 0, the last token's row
    page.click(*page.centre("#tokens .tok", 2))  # a click opens the walkthrough of head 1.0 at token 2
    first_q = page.wait_for("document.querySelector('#explain .ex-q') && document.querySelector('#explain .ex-q').textContent")
    assert float(re.search(r"q = \[\s*(-?\d+\.\d+)", first_q).group(1)) == pytest.approx(q[1, 0, 2, 0], abs=1e-4)
    assert float(page.evaluate("document.body.dataset.totalMs")) > 0

    page.evaluate("document.getElementById('max-new').value = '6'; document.getElementById('seed').value = '5'")
    page.click(*page.centre("#generate"))
    text = page.wait_for("document.getElementById('generated').dataset.text")
    _, lines = ask(server, path="/api/generate", body={"text": PROMPT, "max_new_tokens": 6, "seed": 5, "temperature": 0.8})
    assert text == lines[-1]["text"] and page.evaluate("document.getElementById('generated').textContent") == text
    assert page.evaluate("document.getElementById('stepper').hidden") is False  # the decoding can be stepped through

    # a switch on a head: the next-token probabilities become those of generate.py --ablate --lens for the text
    page.evaluate("document.getElementById('temperature').value = '1'")  # the lens's: no temperature
    page.evaluate("{ const b = document.getElementById('live-text'); b.value = ''; b.focus() }")
    page.type(PROMPT)
    page.wait_for(f"document.body.dataset.shownText === {json.dumps(''.join(labels))}")
    page.click(*page.centre("#maps input.off[data-head='1.0']"))
    page.wait_for("document.getElementById('held-out').textContent !== ''")
    assert "with heads 1.0 off" in page.evaluate("document.querySelector('#next p').textContent")
    rows = next_rows(page)  # token, p with every head on (the whole model's top 10 first), p with 1.0 off
    code = generate.main(["--ckpt", str(run_dir), "--prompt", PROMPT, "--lens", "--ablate", "1.0"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    output = next(line for line in out if "= output" in line)  # the output stage (the lens's caveat follows it)
    top = re.findall(r"(\S+) (\d\.\d{3})", output.split("rank")[1])  # its top 5 and probabilities
    after = [float(row[2]) for row in rows]
    assert max(after) == pytest.approx(float(top[0][1]), abs=1e-3)  # the ablated model's top candidate, to 3 decimals
    assert [float(row[1]) for row in rows[:10]] == sorted((float(row[1]) for row in rows[:10]), reverse=True)
    page.click(*page.centre("#maps input.off[data-head='1.0']"))  # switched on again: the full model's view
    page.wait_for("document.getElementById('held-out').textContent === ''")
    assert page.problems() == ([], "")


def next_rows(page) -> list[list[str]]:
    """The rows of the live page's next-token table (its header left out), each cell's text."""
    return page.evaluate("Array.from(document.querySelector('#next table').rows, r => Array.from(r.cells, c => "
                         "c.textContent.trim())).slice(1)")


def explain_path_top(run_dir, capsys, *options) -> list[float]:
    """The probabilities of the last sampling stage's top 10 that `generate.py --explain path` prints for PROMPT."""
    assert generate.main(["--ckpt", str(run_dir), "--prompt", PROMPT, "--explain", "path", *options]) == 0
    lines = capsys.readouterr().out.splitlines()
    chosen = next(n for n, line in enumerate(lines) if line.startswith("The next token"))
    header = max(n for n, line in enumerate(lines[:chosen]) if line.split()[:1] == ["rank"])
    return [float(line.split()[-1]) for line in lines[header + 1 : chosen] if line.strip()]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_live_page_shows_one_next_token_list_and_it_is_explain_path_s(server, run_dir, tmp_path, browser, capsys):
    """With the temperature box empty (the one default, model.sampling.TEMPERATURE) and then with top-k 5: one
    list on the page, Python's, the probabilities `--explain path` prints for the same text and settings."""
    page = browser(tmp_path / "unused.html")
    page.evaluate(f"location.href = 'http://127.0.0.1:{server.port}/'")
    page.wait_for("document.getElementById('live-text') && !document.getElementById('live').hidden")
    assert page.evaluate("document.getElementById('temperature').value") == "0.8"
    for options, box in (([], ("temperature", "")), (["--top-k", "5"], ("top-k", "5"))):
        page.evaluate(f"document.getElementById('{box[0]}').value = '{box[1]}'")
        page.evaluate("{ const b = document.getElementById('live-text'); b.value = ''; b.focus() }")
        page.type(PROMPT + ".")
        page.wait_for("document.body.dataset.shownText && document.body.dataset.shownText.endsWith('.')")
        page.evaluate("{ const b = document.getElementById('live-text'); b.focus() }")
        page.backspace()  # the text is PROMPT again, answered anew with the settings now in the boxes
        page.wait_for("document.body.dataset.shownText && !document.body.dataset.shownText.endsWith('.')")
        assert page.texts("#bars td.barcell") == []  # no second list beside the server's
        shown = [float(row[1]) for row in next_rows(page)]
        expected = explain_path_top(run_dir, capsys, *options)
        assert shown[: len(expected)] == pytest.approx(expected, abs=1e-4) and len(expected) >= 5
    assert page.problems() == ([], "")


def test_the_page_opens_for_a_tokenizer_with_an_unused_id(run_dir):
    """An id the tokenizer does not spell (a merge dropped, a model padded past its vocabulary) is left out of
    the page's font instead of failing every GET /."""
    run = load_run(run_dir, device="cpu")

    class Holed:  # the run's tokenizer, with id 7 unused
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def id_to_token(self, i):
            return None if i == 7 else self.inner.id_to_token(i)

    run.tokenizer = Holed(run.tokenizer)
    server = LiveServer(run, "127.0.0.1", 0).start_in_thread()
    try:
        status, page = ask(server, method="GET", path="/")
        assert status == 200 and 'id="live-text"' in page
    finally:
        server.shutdown()


def test_a_model_whose_context_holds_no_induction_test_is_served_without_roles(tmp_path, data_cache):
    # block_size 4: no two copies of 2 random tokens fit, so no head roles; training, --attention and --explain work on
    # such a model, and the live page does too, its captions left out as --attention leaves them
    import train
    from tests.conftest import TINY

    args = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0",
            "--train.max_steps=2", "--train.eval_interval=2", "--model.block_size=4", "--out", str(tmp_path / "run")]
    assert train.main(args) == 0
    server = LiveServer(load_run(tmp_path / "run", device="cpu"), "127.0.0.1", 0).start_in_thread()
    try:
        status, view = ask(server, body={"text": "국회"})
    finally:
        server.shutdown()
    assert status == 200, view
    assert view["frames"][0]["roles"] is None and view["T"] <= 4


@pytest.mark.parametrize("refused, closes", [
    (dict(body={"text": "국회"}, headers={"Content-Type": "text/plain"}), True),  # 415, its body unread
    (dict(path="/nowhere", method="GET"), True),  # 404
    (dict(body={"text": "국회", "temperature": -1}), False),  # 400 from the model's own checks, the body read
    (dict(raw=b"{bad"), False),  # 400: not JSON, the body read
])  # fmt: skip
def test_after_a_refusal_the_same_client_s_next_request_is_answered(server, refused, closes):
    # one keep-alive connection, as a browser or http.client keeps it: a refusal that closed it without saying so lost
    # the next request on it; one whose body was read keeps the connection, so the next goes on the same socket
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    method, path = refused.get("method", "POST"), refused.get("path", "/api/inspect")
    body = refused.get("raw") or (None if "body" not in refused else json.dumps(refused["body"]).encode())
    headers = {"Content-Type": "application/json"} | refused.get("headers", {}) if method == "POST" else {}
    connection.request(method, path, body=body, headers=headers)
    first = connection.getresponse()
    first.read()
    assert 400 <= first.status < 500 and (first.getheader("Connection") == "close") == closes
    kept = connection.sock
    connection.request("POST", "/api/inspect", body=json.dumps({"text": PROMPT}).encode(),
                       headers={"Content-Type": "application/json"})
    second = connection.getresponse()
    assert second.status == 200 and json.loads(second.read())["T"] > 0
    assert (connection.sock is kept) != closes  # http.client opens a new one only after Connection: close
    connection.close()

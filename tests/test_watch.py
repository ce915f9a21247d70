"""The live training page (inspection/watch.py, inspection/watch_server.py; train.py --watch, generate.py --watch):
what it reads of a run, the page following a run as it trains, two runs side by side, a run that is the same with and
without twenty viewers, and the bad inputs.

    python -m pytest tests/test_watch.py -q
"""

import http.client
import json
import os
import re
import subprocess
import threading

import numpy as np
import pytest

import generate
import train
from inference.runs import load_run
from inspection.views import compute
from inspection.views.roles import role_bar
from inspection.watch import RunFollower, formed
from inspection.watch_server import WatchServer
from storage.checkpoint import read_metrics
from tests.conftest import CHROMIUM, ROOT, TINY, hooked_train, refused

TIMINGS = {"tokens_per_s", "mfu", "seconds", "wall_s", "budget_used_s"}  # what differs between two runs of one seed


def base(data_cache, run, *more):
    return ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--out", str(run), *more]


def start_training(args, step_seconds: float):
    """`python train.py ARGS` with each step slowed by `step_seconds`, and its page's port once it prints it (None
    without --watch)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(hooked_train(args, "--step-seconds", str(step_seconds)), cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    if "--watch" not in args:
        return proc, None
    for line in proc.stdout:
        found = re.search(r"open http://localhost:(\d+)/", line)
        if found:
            return proc, int(found.group(1))
    pytest.fail("the run printed no page address")


def without_timings(obj):
    if isinstance(obj, dict):
        return {k: without_timings(v) for k, v in obj.items() if k not in TIMINGS}
    if isinstance(obj, list):
        return [without_timings(v) for v in obj]
    return obj


def evals_of(run):
    return {r["step"]: r for r in read_metrics(run / "metrics.jsonl") if r.get("kind") == "eval"}


# ---- what the page is told ----------------------------------------------------------------------------------------


def eval_line(step, induction):
    scores = {"previous-token": [[0.1, 0.9], [0.1, 0.1]], "induction": [[0.0, 0.0], [0.1, induction]]}
    return {"kind": "eval", "step": step, "train_loss": 5.0 - step / 100, "val_loss": 5.1 - step / 100,
            "heads": {"scores": scores, "chance": {"previous-token": 0.1, "induction": 0.2}, "loss_drop": 0.5}}


def fake_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"model": {"n_layer": 2, "n_head": 2}, "train": {"max_steps": 400}}))
    return run


def test_formed_marks_the_first_evaluation_past_each_role_bar():
    evals = [{"step": s, "scores": eval_line(s, x)["heads"]["scores"], "bars": {"previous-token": role_bar(0.1),
                                                                                 "induction": role_bar(0.2)}}
             for s, x in ((100, 0.2), (200, 0.39), (300, 0.41), (400, 0.2))]  # fmt: skip
    # previous-token: 0.9 >= max(0.3, 0.2) from the first evaluation at head 0.1; induction: the bar is 2 x 0.2 = 0.4
    assert formed(evals) == [{"role": "previous-token", "layer": 0, "head": 1, "step": 100},
                             {"role": "induction", "layer": 1, "head": 1, "step": 300}]


def test_the_follower_reads_whole_lines_and_starts_over_when_the_file_is_rewritten(tmp_path):
    run = fake_run(tmp_path)
    follower = RunFollower(run)
    assert follower.poll() and follower.state()["max_steps"] == 400  # config.json alone: no evaluation, no error
    assert follower.state()["evals"] == [] and not follower.poll()
    line = json.dumps(eval_line(100, 0.5)) + "\n"
    with open(run / "metrics.jsonl", "w") as f:
        f.write(json.dumps({"step": 50, "loss": 6.25, "lr": 1e-3}) + "\n" + line[:30])  # an evaluation half written
    follower.poll()
    assert follower.state()["logged"] == [[50, 6.25]] and follower.state()["evals"] == []
    with open(run / "metrics.jsonl", "a") as f:
        f.write(line[30:])
    follower.poll()
    (shown,) = follower.state()["evals"]
    assert (shown["step"], shown["train_loss"], shown["val_loss"], shown["loss_drop"]) == (100, 4.0, 4.1, 0.5)
    assert shown["scores"] == eval_line(100, 0.5)["heads"]["scores"] and shown["maps"] is False
    assert follower.state()["formed"][-1] == {"role": "induction", "layer": 1, "head": 1, "step": 100}
    replaced = run / "metrics.jsonl.new"  # a resumed run writes the file anew (atomically: another inode)
    replaced.write_text(json.dumps({"step": 20, "loss": 7.0}) + "\n")
    os.replace(replaced, run / "metrics.jsonl")
    assert follower.poll() and follower.state()["logged"] == [[20, 7.0]] and follower.state()["evals"] == []


# ---- the page in Chromium -----------------------------------------------------------------------------------------

SHOWN = """Array.from(document.querySelectorAll('.run[data-run="%d"] table.latest tr[data-step] td'), (td) => td.textContent)"""


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_a_run_with_watch_updates_its_page_without_a_reload(tmp_path, browser, data_cache):
    """The page of `train.py --watch 0` shows evaluation after evaluation in one document, each with the numbers of
    metrics.jsonl, and the maps of the text at the evaluations it saw."""
    run = tmp_path / "run"
    page = browser(tmp_path / "unused.html")  # Chromium started first: on a busy machine it takes seconds
    proc, port = start_training(base(data_cache, run, "--train.max_steps=120", "--train.eval_interval=10",
                                     "--watch", "0"), 0.1)
    try:
        page.evaluate(f"location.href = 'http://127.0.0.1:{port}/'")
        page.wait_for("window.watched && window.watched.runs.length && window.watched.runs[0].evals.length", 60)
        page.evaluate("window.sameDocument = true")
        rows = []
        while proc.poll() is None:
            row = page.evaluate(SHOWN % 0)
            if row and row not in rows:
                rows.append(row)
        assert proc.wait(30) == 0
        assert page.evaluate("window.sameDocument") is True  # never reloaded
        maps = page.evaluate("window.watched.runs[0].evals.filter((e) => e.maps).length")
        canvases = page.evaluate("document.querySelectorAll('.maps canvas[data-head]').length")
    finally:
        proc.kill()
    assert len(rows) >= 2, rows
    recorded = evals_of(run)
    for step, train_loss, val_loss, _, drop in rows:
        r = recorded[int(step)]
        assert [train_loss, val_loss, drop] == [f"{r['train_loss']:.4f}", f"{r['val_loss']:.4f}",
                                                f"{r['heads']['loss_drop']:.4f}"]
    assert maps >= 2 and canvases == 4  # 2 layers x 2 heads


@pytest.fixture
def two_runs(tmp_path, data_cache):
    runs = [tmp_path / "a", tmp_path / "b"]
    assert train.main(base(data_cache, runs[0], "--train.max_steps=20")) == 0
    assert train.main(base(data_cache, runs[1], "--train.max_steps=30", "--train.heads_off=0.1")) == 0
    return runs


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_two_runs_side_by_side_on_one_step_axis(two_runs, tmp_path, browser):
    server = WatchServer(two_runs, port=0).start_in_thread()
    try:
        page = browser(tmp_path / "unused.html")
        page.evaluate(f"location.href = 'http://127.0.0.1:{server.port}/'")
        page.wait_for("document.querySelectorAll('.run table.latest tr[data-step]').length === 2")
        assert page.texts(".run h2") == ["a", "b"]
        for i, run in enumerate(two_runs):
            last = evals_of(run)[max(evals_of(run))]
            assert page.evaluate(SHOWN % i)[:3] == [str(last["step"]), f"{last['train_loss']:.4f}",
                                                    f"{last['val_loss']:.4f}"]
        # one step axis: both runs' curves end at the longer run's last step
        ends = page.evaluate("Array.from(document.querySelectorAll('.run'), (r) => r.querySelector('svg.chart')"
                             ".querySelectorAll('text')[5].textContent)")
        assert ends == ["30", "30"]
        # a typed text: its maps at each run's last evaluation are the model's own (4 decimals), and the page draws them
        page.evaluate("document.getElementById('text').value = '가나다 가나다'; document.getElementById('show').click()")
        page.wait_for("window.watched.typed && document.querySelector('.tokens').textContent.startsWith('<|endoftext|> · 가')")
        for i, run in enumerate(two_runs):
            typed = page.evaluate(f"window.watched.typed.runs[{i}]")
            maps = compute(load_run(run / "last", device="cpu"), "가나다 가나다", ["maps"])["maps"]
            assert typed["tokens"] == maps["tokens"]
            np.testing.assert_allclose(typed["maps"][str(max(evals_of(run)))], maps["att"], atol=6e-5)
        # the tokens' glyphs, once both runs' tokenizers are read: Hangul shows where no Korean font is installed
        page.wait_for("!!document.querySelector('link[href=\"/font.css\"]')")
        assert page.evaluate("(() => { const x = new XMLHttpRequest(); x.open('GET', '/font.css', false); x.send(); "
                             "return x.responseText.includes('font-family: \"WatchTokens\"'); })()")
    finally:
        server.shutdown()


# ---- the run is the same with and without viewers -----------------------------------------------------------------


def view(port: int, stop: threading.Event, served: list) -> None:
    """A viewer that asks as fast as it can: the state, and the maps of every evaluation it is told of."""
    while not stop.is_set():
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("GET", "/api/state")
            state = json.loads(connection.getresponse().read())
            for e in state["runs"][0]["evals"]:
                connection.request("GET", f"/api/maps?run=0&step={e['step']}")
                connection.getresponse().read()
            served.append(1)
            connection.close()
        except (OSError, http.client.HTTPException, ValueError):
            pass


@pytest.mark.slow
def test_twenty_viewers_change_nothing_of_the_run(tmp_path, data_cache):
    """Bit for bit: the weights of last/ and best/, and every number of metrics.jsonl but its timings."""
    runs = {}
    for name in ("alone", "watched"):
        run = tmp_path / name
        args = base(data_cache, run, "--train.max_steps=40", "--train.eval_interval=10")
        proc, port = start_training(args + (["--watch", "0"] if name == "watched" else []), 0.05)
        stop, served = threading.Event(), []
        viewers = [threading.Thread(target=view, args=(port, stop, served)) for _ in range(20 if port else 0)]
        for v in viewers:
            v.start()
        assert proc.wait(120) == 0
        stop.set()
        for v in viewers:
            v.join()
        assert not port or len(served) >= 20  # every viewer was answered while the run trained
        runs[name] = run
    for checkpoint in ("last", "best"):
        weights = [(runs[n] / checkpoint / "model.safetensors").read_bytes() for n in ("alone", "watched")]
        assert weights[0] == weights[1]
    records = [without_timings(read_metrics(runs[n] / "metrics.jsonl")) for n in ("alone", "watched")]
    assert records[0] == records[1] and len(records[0]) > 40


# ---- bad input ----------------------------------------------------------------------------------------------------


def listing(path):
    return sorted((p.relative_to(path), p.stat().st_size, p.stat().st_mtime_ns) for p in path.rglob("*"))


def test_watch_refuses_what_is_not_a_run(tmp_path, capsys, two_runs):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "config.json").write_text('{"name": "an album"}')
    before = listing(folder)
    refused(generate.main, ["--watch", str(folder), "--port", "0"], "is not a run's", capsys)
    refused(generate.main, ["--watch", str(tmp_path / "nowhere"), "--port", "0"], "is not a directory", capsys)
    assert listing(folder) == before
    refused(generate.main, ["--watch", *map(str, two_runs), str(folder)], "one run or two", capsys)
    refused(generate.main, ["--watch", str(two_runs[0]), str(two_runs[0])], "names one run twice", capsys)
    refused(generate.main, ["--watch", str(two_runs[0]), "--prompt", "가"], "drop --prompt", capsys)


def test_watch_refuses_two_runs_of_different_shapes(tmp_path, data_cache, capsys, two_runs):
    wider = tmp_path / "wider"
    assert train.main(base(data_cache, wider, "--train.max_steps=2", "--model.n_head=4")) == 0
    before = [listing(r) for r in (two_runs[0], wider)]
    refused(generate.main, ["--watch", str(two_runs[0]), str(wider), "--port", "0"], "2 layers of 2 heads", capsys)
    assert [listing(r) for r in (two_runs[0], wider)] == before


def test_a_port_in_use_is_one_line_before_the_run_writes_anything(tmp_path, data_cache, capsys):
    taken = WatchServer([tmp_path], port=0)  # holds a port
    try:
        run = tmp_path / "new"
        refused(train.main, base(data_cache, run, "--watch", str(taken.port)), "pick another --watch PORT", capsys)
        assert not run.exists()
        refused(generate.main, ["--watch", str(fake_run(tmp_path)), "--port", str(taken.port)], "pick another --port",
                capsys)
    finally:
        taken.socket.close()
    refused(train.main, base(data_cache, run, "--host", "0.0.0.0"), "add --watch", capsys)
    refused(train.main, base(data_cache, run, "--watch", "70000"), "between 0 and 65535", capsys)
    assert not run.exists()

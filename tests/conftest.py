"""What several test files share: the repository's paths, the tiny shapes, one prepared-data cache, a tiny
run config, a tiny trained run and Korean texts beside it, the arguments and the refusal every command is checked
with, random attention maps and labels, a model with random biases, a hand-built copying model, headless Chromium,
train.py with its test hooks in a process, and the finder of English sentences in a figure drawn in Korean."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from cli.messages import TERMINAL
from model import GPT, GPTConfig
from training.config import load_config

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "configs" / "tiny.toml"  # the smoke-run config: fp32, CPU, seconds
TINY_MODEL = {"vocab_size": 64, "block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 32}
HOOKED_TRAIN = ROOT / "tests" / "train_with_hooks.py"  # train.py's command line with its test hooks
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# what the DevTools protocol answers an evaluation that the page's navigation (a reload) cut off
NAVIGATING = ("Inspected target navigated or closed", "Cannot find context with specified id",
              "Execution context was destroyed")


@pytest.fixture(autouse=True)
def english_locale(monkeypatch):
    """Every test runs in an English locale, so generate.py's default language (the locale's) is English
    wherever the suite runs; tests of Korean ask for it."""
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setitem(TERMINAL, "lang", None)  # a command run in-process sets the language: not the next test's


@pytest.fixture(scope="session")
def data_cache(tmp_path_factory):
    """One prepared-data cache for every test of the session (prepare reuses it by fingerprint)."""
    return tmp_path_factory.getbasetemp() / "train-data-cache"


def tiny(data_cache, *overrides):
    """configs/tiny.toml on the session's data cache and one thread, with `--section.key=value` overrides."""
    return load_config(TINY, [f"--data.cache_dir={data_cache}", "--train.threads=1", *overrides])


def planned(*args, **kwargs) -> tuple[dict, str]:
    """training.recipe.plan_settings' values and the line train.py prints of its reasons (in English)."""
    from training.recipe import plan_line, plan_settings

    values, why = plan_settings(*args, **kwargs)
    return values, plan_line(values, why)


def trained_tiny_run(tmp_path_factory, name: str) -> SimpleNamespace:
    """A tiny run trained two steps in a fresh directory, in this process, and its Hugging Face export: .root,
    .run, .cache (the session's data cache), .base (the arguments every train.py call of the tests shares)."""
    import train
    from hf.export_gpt2 import export

    root = tmp_path_factory.mktemp(name)
    cache = tmp_path_factory.getbasetemp() / "train-data-cache"
    base = ["--config", str(TINY), f"--data.cache_dir={cache}", "--train.threads=1", "--train.sample_tokens=0"]
    assert train.main([*base, "--train.max_steps=2", "--train.eval_interval=2", "--out", str(root / "run")]) == 0
    export(root / "run", root / "hf")
    return SimpleNamespace(root=root, run=root / "run", cache=cache, base=base)


def korean_texts(root: Path) -> Path:
    """root/texts: a Korean text as corpus.txt and corpus.jsonl, and config.toml (a copy of configs/tiny.toml)."""
    texts = root / "texts"
    texts.mkdir()
    korean = "대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다.\n" * 40
    (texts / "corpus.txt").write_text(korean, encoding="utf-8")
    (texts / "corpus.jsonl").write_text("".join(json.dumps({"text": line}, ensure_ascii=False) + "\n"
                                                for line in korean.splitlines()), encoding="utf-8")  # fmt: skip
    shutil.copyfile(TINY, texts / "config.toml")
    return texts


def common_args(command, argv: list[str], env) -> list[str]:
    """The config, cache and thread settings a train.py or data.prepare command needs, unless it names its own."""
    import train
    from data import prepare

    if command is train.main:
        own = ["--config", "{file}"] if "--config" in argv else env.base[:2]
        return [*own, *env.base[2:], *[a for a in argv if a not in ("--config", "{file}")]]
    if command is prepare.main:
        return ([] if "--config" in argv else ["--config", str(TINY)]) + [f"--data.cache_dir={env.cache}", *argv]
    return argv


def refused(main, argv, message, capsys) -> str:
    """Run a command's main(argv); it must exit 2 with one `error:` line holding `message`, no traceback."""
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err
    return err


def copy_run(env, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(env.run, run)
    return run


def random_maps(L, H, T, seed=0):
    """Causal, row-stochastic (L, H, T, T) maps."""
    rng = np.random.default_rng(seed)
    w = rng.random((L, H, T, T)) ** 3 * np.tril(np.ones((T, T)))
    return (w / w.sum(-1, keepdims=True)).astype(np.float32)


# token labels of every kind a plot or a page must show: special, Korean, byte, markers, markup, outside the BMP
LABELS = ["<|endoftext|>", "대한", "민국", "␣은", "<0xEC>", "↵", "⇥", "␣서울", "<U+200B>", "</script>", "\"'&", "𓀀"]


# The English a figure drawn in Korean keeps: the technical terms Korean explainers keep (README.ko.md), units and
# the tokens' own labels. Anything else English in a Korean figure is a text left untranslated.
KEPT_ENGLISH = {"layer", "head", "heads", "step", "loss", "nats", "token", "query", "key", "attention", "induction",
                "in-context", "block", "mlp", "run", "snapshot", "stream", "residual", "logit", "lens", "embedding",
                "embeddings", "softmax", "patch", "patching", "cone", "bits", "char", "endoftext", "script", "id"}
ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}(?:-[A-Za-z]{2,})*")


def english_sentences(text: str) -> list[str]:
    """The English sentences in `text`: runs of three or more English words that are not KEPT_ENGLISH, with no
    Hangul between them (digits, signs and the kept terms do not end a run; a Hangul letter does)."""
    runs = re.split(r"[\uac00-\ud7a3\u3131-\u318e]+", text)
    found = []
    for run in runs:
        words = [w for w in ENGLISH_WORD.findall(run) if w.lower() not in KEPT_ENGLISH]
        if len(words) >= 3:
            found.append(run.strip())
    return found


def figure_texts(fig) -> list[str]:
    """Every text a matplotlib Figure draws: titles, axis labels, tick labels, legends and boxes."""
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text) if t.get_text().strip()]


def biased_model(seed=0, block_size=16):
    """A tiny GPT (2 layers, 2 heads, n_embd 32) whose biases and LayerNorm gains are random too, so every
    term of the attention formulas counts."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=64, block_size=block_size, n_layer=2, n_head=2, n_embd=32)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name:
                p.add_(0.3 * torch.randn_like(p))
    return model


def toy_run(model, eot_id=None):
    """A Run of a hand-built model, its V tokens named t0, t1, ... by a word-level tokenizer (texts: "t3 t5 t1"),
    so the views (inspection/views/) can be computed of it as of a trained run's."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from inference.runs import Run

    tokenizer = Tokenizer(models.WordLevel({f"t{i}": i for i in range(model.config.vocab_size)}, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return Run(model, tokenizer, ROOT / "no-such-run", eot_id)


def look_at(model, ids, labels=None, query=-1, off=None):
    """What the views read of `ids` (inspection.views.Look) for a hand-built model, its tokens labelled `labels`
    (default: t<id>) and the heads `off` ({(layer, head): mode}) recorded as switched off."""
    from inspection.trace import trace_ids
    from inspection.views import Look

    from inspection.views.words import label_bytes

    trace = trace_ids(model, ids, off)
    run = toy_run(model)
    if labels:  # the bytes of a token are what its label shows (an id given twice with two labels: the last)
        run._token_bytes = list(run.token_bytes)
        for i, label in zip(ids, labels):
            run._token_bytes[i] = label_bytes(label)
    return Look(run, list(ids), labels or [f"t{i}" for i in ids], trace, trace.att, None, query % len(ids),
                lambda i: f"t{i}")


V, P = 8, 16  # vocabulary (token 0 is the end of text) and block size of the hand-built model
TOK, PREV, POS = 0, 8, 16  # residual dims: the token (one-hot), the previous token, the position


def copying_model(scale=3.0):
    """Two layers that copy by construction (every other weight zero, LayerNorm gains 1, no MLP):

    layer 0 head 0 matches query position i with key position i-1 (q reads POS, k reads POS shifted by
    one) and writes the key's token into the PREV dims: a previous-token head. Layer 1 head 0 matches
    the query's token with each key's PREV dims, so it attends to the token after an earlier occurrence
    of the query's token and writes that token into the TOK dims, which the tied head reads out: an
    induction head. Heads 0.1 and 1.1 have zero weights, so they spread evenly.
    """
    model = GPT(GPTConfig(vocab_size=V, block_size=P, n_layer=2, n_head=2, n_embd=32))
    spike = 3.87  # a one-hot pair through LayerNorm: (1 - 2/32) / std
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.fill_(1.0)
        model.tok_emb.weight[:, TOK : TOK + V] = scale * torch.eye(V)
        model.pos_emb.weight[:, POS : POS + P] = scale * torch.eye(P)
        w0, w1 = model.blocks[0].attn.c_attn.weight, model.blocks[1].attn.c_attn.weight  # rows: q 0..31, k, v
        for i in range(P):
            w0[i, POS + i] = 2.0  # q_i: position i
        for j in range(P - 1):
            w0[32 + j + 1, POS + j] = 2.0  # k_j: position j + 1
        for t in range(V):
            w0[64 + t, TOK + t] = 1.0  # v: the token
            model.blocks[0].attn.c_proj.weight[PREV + t, t] = scale / spike  # -> PREV dims
            w1[t, TOK + t] = 3.0  # q: the query's token
            w1[32 + t, PREV + t] = 3.0  # k: the key's previous token
            w1[64 + t, TOK + t] = 1.0  # v: the key's token
            model.blocks[1].attn.c_proj.weight[TOK + t, t] = 3.0 * scale / spike  # -> TOK dims, outvoting the query's own
    return model.eval()


def render(page_url, tmp_path, *extra):
    """Run headless Chromium on a file:// URL: (the rendered DOM, Chromium's log)."""
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0", *extra, page_url],
        capture_output=True, text=True, timeout=120)  # fmt: skip
    return result.stdout, result.stderr


def console_errors(log: str) -> list[str]:
    """The lines of Chromium's log that report a script error or a console message."""
    return [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]


def hooked_train(args, *hooks: str) -> list[str]:
    """The command line that runs `python train.py ARGS` with test hooks ("--signal-after", "7:TERM", ...)."""
    return [sys.executable, str(HOOKED_TRAIN), *hooks, "--", *map(str, args)]


def train_paused_in_a_save(args, pause: str):
    """Start `python train.py ARGS` paused halfway through a save (pause "20": the save of last/ at step 20;
    "20:best": of best/) and return the process once it sleeps there, for a test to kill or probe; fail if
    it ends first."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(hooked_train(args, "--pause-in-save", pause), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    marker = "SAVE_PAUSED " + pause.replace(":", " ")
    for line in proc.stdout:
        if line.startswith(marker):
            return proc
    proc.wait(timeout=60)
    pytest.fail(f"the run ended without reaching its save ({pause})")


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4): no extra packages.

    `evaluate(js)` runs JavaScript in the page; `move(x, y)` and `click(x, y)` send real mouse input.
    """

    def __init__(self, url, profile):
        to_chrome, self._send = os.pipe()
        self._recv, from_chrome = os.pipe()

        def connect():  # in the child: the protocol pipes must be fds 3 (commands) and 4 (replies)
            a, b = os.dup(to_chrome), os.dup(from_chrome)
            os.dup2(a, 3, inheritable=True)
            os.dup2(b, 4, inheritable=True)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--window-size=1200,900", f"--user-data-dir={profile}", url],
            preexec_fn=connect, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome)
        os.close(from_chrome)
        self._buffer, self._id, self.events = b"", 0, []
        page = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        self.call("Runtime.enable", session=self.session)
        for _ in range(200):  # the first document may still be about:blank
            if self.evaluate("location.protocol === 'file:' && document.readyState === 'complete'"):
                break
            time.sleep(0.05)

    def call(self, method, session=None, **params):
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._send, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._recv, 1 << 16)
                assert chunk, "chromium closed the DevTools pipe"
                self._buffer += chunk
            line, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(line)
            if reply.get("id") == self._id:
                assert "error" not in reply, reply["error"]
                return reply["result"]
            self.events.append(reply)  # console messages, exceptions, ...

    def evaluate(self, js):
        result = self.call("Runtime.evaluate", session=self.session, expression=js, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def move(self, x, y):
        self.call("Input.dispatchMouseEvent", session=self.session, type="mouseMoved", x=x, y=y)

    def click(self, x, y):
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", session=self.session, type=kind, x=x, y=y, button="left", clickCount=1)

    def centre(self, selector, index=0):
        """Viewport coordinates of the centre of the index-th element matching selector (scrolled into view)."""
        return self.evaluate(f"""(() => {{ const e = document.querySelectorAll({json.dumps(selector)})[{index}];
            e.scrollIntoView({{block: "center"}}); const r = e.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")

    def type(self, text):
        """Type `text` into the focused element, as a keyboard (or an input method) would."""
        self.call("Input.insertText", session=self.session, text=text)

    def backspace(self):
        """Press Backspace in the focused element."""
        for kind in ("rawKeyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", session=self.session, type=kind, key="Backspace",
                      code="Backspace", windowsVirtualKeyCode=8)

    def wait_for(self, js, timeout=20.0):
        """The value of `js` once it is truthy (polled; an evaluation the page cut off by navigating, as a reload
        does, is polled again), else fail after `timeout` seconds."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                value = self.evaluate(js)
            except AssertionError as e:
                if not any(cut in str(e) for cut in NAVIGATING):
                    raise
                value = None
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {js}")

    def texts(self, selector):
        return self.evaluate(f"Array.from(document.querySelectorAll({json.dumps(selector)}), e => e.textContent)")

    def problems(self):
        """Uncaught exceptions and console errors so far, and what the page's error hook recorded."""
        bad = [e for e in self.events if e.get("method") == "Runtime.exceptionThrown"
               or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "warning"))]
        return bad, self.evaluate("document.getElementById('errors').textContent")

    def close(self):
        try:
            self.call("Browser.close")
        finally:
            self.proc.wait(timeout=30)
            os.close(self._send)
            os.close(self._recv)


@pytest.fixture
def browser(tmp_path):
    opened = []

    def open_page(path, fragment=""):
        opened.append(Browser(path.as_uri() + fragment, tmp_path / f"profile{len(opened)}"))
        return opened[-1]

    yield open_page
    for b in opened:
        b.close()


def read_only_dir(path: Path):
    """A directory nothing can be written to, even by root (a read-only tmpfs); None if none can be made."""
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        return path
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)], capture_output=True).returncode:
        return None
    return path

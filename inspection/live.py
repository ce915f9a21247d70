"""The live inspector: a local page where a text, as it is typed, shows the model's attention, walkthrough and
next-token choice at once, and a Generate button streams a continuation with the maps following the decoding.

    python generate.py --serve [--ckpt RUN] [--port 8000] [--host 127.0.0.1]
    server = LiveServer(run, "127.0.0.1", 8000); server.serve()      # until Ctrl-C

The standard library's ThreadingHTTPServer is enough for one user on one machine (no package added). Routes:

    GET  /              the page: inspection/page.html in live mode, opened on a first text
    POST /api/inspect   {"text", "temperature", "top_k", "top_p", "explain", "ablate"} -> the text's view: its tokens,
                        every layer and head's map, with the walkthrough's tensors unless "explain" is false
                        (html.frame_data, explain.npz's numbers; most of the bytes, so the page asks for them
                        only when a token is clicked), each head's role scores, the statistics, the next
                        token's top 10, every token's logit lens and "model_ms"; "ablate", a list of [layer, head]
                        pairs, switches those heads off (their mean output on held-out text, model/ablation.py):
                        then the view is the ablated model's, with the full model's next-token probabilities
                        ("p_full") and held-out loss beside
    POST /api/generate  {"text", "max_new_tokens", "temperature", "top_k", "top_p", "seed", "ablate"} -> one JSON object
                        a line (application/x-ndjson) per new token: its text and the view so far, each row of
                        a generated token as the KV cache computed it; the last line holds the whole view

Limits: the server answers only requests whose Host header names it (a page elsewhere cannot reach it by
a DNS name that points here); a text may hold at most the model's block_size tokens, a body 64 KB, a
generation block_size tokens in all; bad JSON, a bad value, an unknown route or method gets a 4xx with a
one-line JSON `{"error": ...}` and the server goes on. The model runs one request at a time; a request
that waited while a newer one came in gives way (409), and a newer request stops a generation between two
tokens. No path or file name is ever read from a request.
"""

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

from inference.runs import Run
from inference.textgen import TEMPERATURE, check_sampling, stream_text
from inspection.heads import measure_heads
from inspection.heldout import held_out_ids, usable_ids
from inspection.importance import ablation_means, held_out_windows
from inspection.lens import labeller, lens_table
from inspection.html import frame_data, frames_page
from inspection.labels import token_labels
from inspection.maps import attention_for_ids, attention_from_decoding
from inspection.trace import trace_ids
from model.ablation import ablated, check_heads
from model.errors import UserError
from model.sampling import sampling_probs

MAX_BODY = 64 * 1024  # bytes of a request body
FIRST_TEXT = "대한민국 국회는 법률을 제정한다. 대한민국 국회는"  # what the page opens on
TOP = 10  # next-token candidates shown
MAX_NEW = 200  # tokens a Generate may ask for (block_size bounds it too)
DEBOUNCE_MS = 60  # the page asks for a view this long after the last keystroke


class BadRequest(UserError):
    """A request the server refuses with a 4xx and one line."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def number(body: dict, name: str, default, kind=float, low=None, high=None):
    """body[name] as `kind` (None allowed where the default is None), or BadRequest naming it."""
    value = body.get(name, default)
    if value is None and default is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not float(value).is_integer()):
        raise BadRequest(f"{name} must be {'a whole number' if kind is int else 'a number'}, not {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise BadRequest(f"{name} = {value} must be between {low} and {high}")
    return kind(value)


class LiveInspector:
    """The model side: views of texts and generations, one at a time (see the module docstring)."""

    def __init__(self, run: Run, lang: str = "en"):
        self.run, self.lang = run, lang
        self.layers = list(range(run.model.config.n_layer))
        # every head's roles do not depend on the text: measured once, on the run's held-out text, which also
        # gives a switched-off head its mean output and the held-out loss the page compares
        held_out = held_out_ids(run, lang=lang)[0]
        self.roles = measure_heads(run.model, held_out, usable_ids(run), run.eot_id)
        self.windows = held_out_windows(run.model, held_out)
        self.means = ablation_means(run.model, held_out)
        self.full_loss = self.held_out_loss()
        self.lock = threading.Lock()
        self.counter = itertools.count(1)
        self.latest = 0  # the number of the newest request: older ones waiting for the model give way

    def ticket(self) -> int:
        self.latest = number = next(self.counter)
        return number

    def encode(self, body: dict) -> list[int]:
        """The request's text as token ids (the <|endoftext|> first), at most block_size of them."""
        text = body.get("text")
        if not isinstance(text, str):
            raise BadRequest(f"text must be a string, not {type(text).__name__}")
        try:
            ids = ([self.run.eot_id] if self.run.eot_id is not None else []) + self.run.encode(text)
        except UserError as e:  # not text (a lone surrogate)
            raise BadRequest(str(e)) from None
        if not ids:
            raise BadRequest("the text is empty; type some")
        block = self.run.block_size
        if len(ids) > block:
            raise BadRequest(f"the text is {len(ids)} tokens with <|endoftext|>; this model reads at most {block} "
                             f"(its block_size): shorten it", 413)
        return ids

    def switched_off(self, body: dict) -> list[tuple[int, int]]:
        """The heads the page switched off: "ablate", a list of [layer, head] pairs (model.ablation.check_heads)."""
        pairs = body.get("ablate", [])
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 and all(
                isinstance(x, int) and not isinstance(x, bool) for x in p) for p in pairs):  # fmt: skip
            raise BadRequest("ablate must be a list of [layer, head] pairs of whole numbers")
        try:
            return check_heads(self.run.model, pairs)
        except UserError as e:
            raise BadRequest(str(e)) from None

    @torch.inference_mode()
    def held_out_loss(self) -> float:
        """The model's mean next-token loss on the held-out windows, as it runs now (heads off included)."""
        logits = self.run.model(self.windows[:, :-1], all_logits=True)[0]
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), self.windows[:, 1:].flatten()).item()

    def sampling(self, body: dict) -> dict:
        options = {"temperature": number(body, "temperature", TEMPERATURE, float, 0.0, 100.0),
                   "top_k": number(body, "top_k", None, int, 1, self.run.model.config.vocab_size),
                   "top_p": number(body, "top_p", None, float, 0.0, 1.0)}
        try:
            check_sampling(**options)
        except UserError as e:
            raise BadRequest(str(e)) from None
        return options

    @torch.inference_mode()
    def view(self, ids: list[int], options: dict, recorded=None, explain: bool = True, full=None) -> dict:
        """The page's data for ids: tokens, one frame (maps, statistics, roles, walkthrough tensors), the next
        token's top candidates, every token's logit lens; `recorded`: the maps of a cached decoding
        (inspection.maps.attention_from_decoding). `full`: the full model's next-token probabilities, when this
        runs with heads switched off: then each candidate's "p_full" and the "held_out" loss beside the full's."""
        run = self.run
        maps = attention_from_decoding(run, ids, recorded) if recorded else attention_for_ids(run, ids)
        trace = trace_ids(run.model, maps.ids) if explain else None
        frame = frame_data(maps.weights, self.layers, trace=trace, roles=self.roles)
        probs = self.next_probs(maps.ids, options)
        p, top = probs.topk(min(TOP, probs.numel()))
        candidates = [{"id": i, "token": label, "p": round(float(q), 6)}
                      for i, label, q in zip(top.tolist(), token_labels(run.tokenizer, top.tolist()), p.tolist())]
        view = {"tokens": maps.labels, "T": len(maps.ids), "prefill": maps.prefill or len(maps.ids),
                "frames": [frame], "next": candidates, "lens": lens_table(run.model, maps.ids, labeller(run.tokenizer))}
        if full is not None:
            for c in candidates:
                c["p_full"] = round(float(full[c["id"]]), 6)
            view["held_out"] = {"loss": round(self.held_out_loss(), 6), "full": round(self.full_loss, 6)}
        return view

    @torch.inference_mode()
    def next_probs(self, ids: list[int], options: dict) -> torch.Tensor:
        """The next token's probabilities after ids under the sampling options: (V,)."""
        logits = self.run.model(torch.tensor([ids], device=self.run.device))[0][:, -1].float()  # (1, V)
        return sampling_probs(logits, **options)[0]

    def inspect(self, body: dict) -> tuple[int, dict]:
        ids, options, off = self.encode(body), self.sampling(body), self.switched_off(body)
        explain = body.get("explain", True)
        if not isinstance(explain, bool):
            raise BadRequest(f"explain must be true or false, not {explain!r}")
        ticket = self.ticket()
        with self.lock:
            if ticket != self.latest:  # a newer keystroke is waiting: this one's answer would be stale
                return 409, {"error": "superseded by a newer request"}
            started = time.perf_counter()
            full = self.next_probs(ids, options) if off else None
            with ablated(self.run.model, off, self.means):
                view = self.view(ids, options, explain=explain, full=full)
            view["model_ms"] = round(1000 * (time.perf_counter() - started), 1)
        return 200, view

    def generate(self, body: dict, write) -> None:
        """Stream a continuation: write(line) per new token, the view so far in each; the last line complete."""
        ids, options, off = self.encode(body), self.sampling(body), self.switched_off(body)
        room = self.run.block_size - len(ids)
        wanted = number(body, "max_new_tokens", 50, int, 0, MAX_NEW)
        seed = number(body, "seed", None, int, 0, 2**63 - 1)
        ticket = self.ticket()
        with self.lock, ablated(self.run.model, off, self.means):
            recorded, new, text = [], [], ""
            for step, pieces in stream_text(self.run, ids, min(wanted, room), seed=seed, attention=recorded, **options):
                if ticket != self.latest:  # a newer request: stop between two tokens
                    write({"stopped": True})
                    return
                new += step
                text += pieces[0]
                if step:
                    write({"piece": pieces[0], "view": self.view(ids + new, options, recorded, explain=False)})
            final = self.view(ids + new, options, recorded) if new else self.view(ids, options)
            write({"done": True, "text": text, "view": final})


class Handler(BaseHTTPRequestHandler):
    server: "LiveServer"
    error_content_type = "application/json"
    error_message_format = '{"error": "%(message)s"}\n'

    def log_message(self, format, *args):  # quiet: the terminal shows the address and errors only
        pass

    def send_error(self, code, message=None, explain=None):
        # a method the server does not implement is the client's mistake here: 405, not 501
        super().send_error(405 if code == 501 else code, message)

    def allowed_host(self) -> bool:
        return self.headers.get("Host", "") in self.server.hosts

    def reply(self, status: int, obj, content_type: str = "application/json") -> None:
        data = obj if isinstance(obj, bytes) else (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", f"{content_type}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if not self.allowed_host():
            return self.reply(403, {"error": "this server answers only at its own address"})
        if self.path.split("?")[0] != "/":
            return self.reply(404, {"error": f"no page at {self.path[:100]}; open /"})
        self.reply(200, self.server.page().encode("utf-8"), "text/html")

    def do_POST(self):
        if not self.allowed_host():
            return self.reply(403, {"error": "this server answers only at its own address"})
        route = {"/api/inspect": self.inspect, "/api/generate": self.generate}.get(self.path)
        if route is None:
            return self.reply(404, {"error": f"no route {self.path[:100]}; POST /api/inspect or /api/generate"})
        try:
            route(self.body())
        except BadRequest as e:
            self.reply(e.status, {"error": str(e)})
        except UserError as e:  # the model's own refusals (a sampling option it cannot take)
            self.reply(400, {"error": str(e)})

    def body(self) -> dict:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise BadRequest("send a JSON body with its Content-Length", 411)
        if int(length) > MAX_BODY:
            raise BadRequest(f"the body is {int(length):,} bytes; at most {MAX_BODY:,}", 413)
        try:
            body = json.loads(self.rfile.read(int(length)).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BadRequest(f"the body is not JSON ({e})") from None
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        return body

    def inspect(self, body: dict) -> None:
        self.reply(*self.server.inspector.inspect(body))

    def generate(self, body: dict) -> None:
        started = []

        def write(obj) -> None:
            if not started:  # the first line: headers of a stream that ends when the connection closes
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson; charset=utf-8")
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                started.append(True)
            self.wfile.write((json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8"))
            self.wfile.flush()

        try:
            self.server.inspector.generate(body, write)
        except (BrokenPipeError, ConnectionResetError):  # the page went away or stopped reading
            pass


class LiveServer(ThreadingHTTPServer):
    daemon_threads = True  # a generation still streaming does not hold up Ctrl-C

    def __init__(self, run: Run, host: str = "127.0.0.1", port: int = 8000, lang: str = "en"):
        try:
            super().__init__((host, port), Handler)
        except OSError as e:
            raise UserError(f"cannot listen on {host}:{port} ({e.strerror}); pick another --port or --host") from None
        self.inspector = LiveInspector(run, lang)
        self.lang = lang
        port = self.server_address[1]  # the one the system gave, for port 0
        names = {host, "localhost", "127.0.0.1", "[::1]"} if host in ("127.0.0.1", "localhost", "::1") else {host}
        self.hosts = {f"{name}:{port}" for name in names} | ({"localhost", "127.0.0.1"} if port == 80 else set())
        self.address = f"http://{'localhost' if host in ('127.0.0.1', '::1') else host}:{port}/"
        self._page = None

    def page(self) -> str:
        """The live page, opened on FIRST_TEXT (built once)."""
        if self._page is None:
            inspector, words = self.inspector, FIRST_TEXT.split(" ")
            while len(words) > 1 and len(inspector.run.encode(" ".join(words))) >= inspector.run.block_size:
                words.pop()  # a small model's context may hold only the first words
            text = " ".join(words)
            ids = inspector.encode({"text": text})
            options = {"temperature": TEMPERATURE, "top_k": None, "top_p": None}
            with inspector.lock:
                view = inspector.view(ids, options)
            live = {"text": text, "next": view["next"], "block_size": inspector.run.block_size,
                    "max_new": MAX_NEW, "temperature": TEMPERATURE, "debounce_ms": DEBOUNCE_MS}
            run = inspector.run
            every_token = "".join(token_labels(run.tokenizer, list(range(run.tokenizer.get_vocab_size()))))
            self._page = frames_page(view["frames"], view["tokens"], f"{run.ckpt_dir}", inspector.layers,
                                     run.model.config.n_head, lang=self.lang, live=live, glyphs=every_token)
        return self._page

    def serve(self) -> None:
        """Answer requests until Ctrl-C (or SIGTERM), then close the socket."""
        try:
            self.serve_forever(poll_interval=0.2)
        except KeyboardInterrupt:
            pass
        finally:
            self.server_close()

"""The live training page's server: one or two run directories followed as they grow, drawn by one page.

    server = WatchServer([Path("runs/heads")], host="127.0.0.1", port=8000); server.serve()   # until Ctrl-C
    main([RUN, '--socket', FD, '--parent', PID])                       # what train.py --watch and nb.watch start

    GET  /              the page (inspection/page/watch.html and watch.js)
    GET  /font.css      the glyphs of the runs' tokens, once a checkpoint of each run has been read
    GET  /api/state     every run's record (inspection/watch.py RunFollower.state); ?since=VERSION: {"version"} alone
                        while nothing changed, so a page that asks each second costs a few bytes
    GET  /api/maps      ?run=I&step=S: the fixed text's attention at that evaluation
    POST /api/text      {"text"}: a typed text's attention at every evaluation whose weights are held, each run's

The checks of who may ask, the limits on connections and requests, the refusals and the ways to stop are the live
inspector's (inspection/live_server.py GuardedServer): one set of protections whatever page is served. The runs are
read on a thread of their own every POLL seconds; the typed texts are computed on the model thread, in turns.

train.py --watch binds the socket itself, before it writes anything (a port in use is its one error line), and hands
it to this module in a process of its own: the trainer never waits for a page, and the page's work (reading the
files, computing the maps of each evaluation) never runs in the training loop. That process ends with the trainer.
"""

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import torch
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from cli.messages import messages, page_messages, use_language
from inference.runs import warn
from inspection.html import font_face_css
from inspection.live import BadRequest
from inspection.live_server import JSON, LOCAL, GuardedServer, address_of, error, json_line, listen, read_body
from inspection.live_worker import STOPPED, SUPERSEDED
from inspection.watch import RunFollower, check_run
from cli.errors import UserError

HERE = Path(__file__).parent
ROOT = HERE.parent  # where `python -m inspection.watch_server` finds the package
POLL = 0.5  # seconds between two reads of the runs
ASK_EVERY_MS = 1000  # how often the page asks for what is new
TOKEN_FONT = "WatchTokens"  # the font of the runs' tokens (font.css), beside the page's own
MAX_TEXT = 1000  # characters of a typed text (the model reads block_size tokens of it)


class WatchServer(GuardedServer):
    """The live training page of `runs` (one or two run directories, checked by the caller: watch.check_run)."""

    API = "GET /api/state, /api/maps; POST /api/text"

    def __init__(self, runs: list[Path], host: str = "127.0.0.1", port: int = 8000, lang: str = "en",
                 port_option: str = "--port", sock: socket.socket | None = None, parent: int | None = None):
        self.followers = [RunFollower(Path(r)) for r in runs]
        self.parent, self.page_html, self.font_css, self.stopped = parent, None, None, threading.Event()
        self.reader = threading.Thread(target=self.follow, name="watch-runs", daemon=True)
        self.lock = threading.Lock()  # the cached state and page
        self.cached = (None, b"")
        super().__init__(host, port, lang, port_option, sock)

    def routes(self) -> list[Route]:
        return [Route("/", self.get_page, methods=["GET"]), Route("/font.css", self.get_font, methods=["GET"]),
                Route("/api/state", self.api_state, methods=["GET"]),
                Route("/api/maps", self.api_maps, methods=["GET"]), Route("/api/text", self.api_text, methods=["POST"])]

    # ---- the runs ------------------------------------------------------------------------------------------

    def follow(self) -> None:
        """Read the runs every POLL seconds until the server stops (or, started by a trainer, the trainer ends)."""
        while not self.stopped.is_set():
            for follower in self.followers:
                try:
                    follower.poll()
                except UserError as e:  # a file the run is rewriting, read half: the next poll reads it whole
                    print(f"watch: {e}", file=sys.stderr)
            if self.parent is not None and os.getppid() != self.parent:
                self.server.should_exit = True  # the trainer is gone: nothing more will come
                return
            self.stopped.wait(POLL)

    def version(self) -> int:
        return sum(f.version for f in self.followers)

    def state(self) -> bytes:
        """Every run's record as one JSON line, made once per version."""
        version = self.version()
        with self.lock:
            if self.cached[0] != version:
                self.cached = (version, json_line({"version": version, "runs": [f.state() for f in self.followers]}))
            return self.cached[1]

    # ---- the routes ----------------------------------------------------------------------------------------

    async def get_page(self, request: Request) -> Response:
        return HTMLResponse(self.page(), headers={"Cache-Control": "no-store"})

    async def get_font(self, request: Request) -> Response:
        return Response(self.font(), media_type="text/css", headers={"Cache-Control": "no-store"})

    async def api_state(self, request: Request) -> Response:
        since = request.query_params.get("since")
        if since is not None and since.isascii() and since.isdigit() and int(since) == self.version():
            return JSON({"version": int(since)}, headers={"Cache-Control": "no-store"})
        return Response(self.state(), media_type="application/json", headers={"Cache-Control": "no-store"})

    async def api_maps(self, request: Request) -> Response:
        run, step = (request.query_params.get(name, "") for name in ("run", "step"))
        if not (run.isascii() and run.isdigit() and step.isascii() and step.isdigit()):
            return error(400, "ask /api/maps?run=I&step=S with whole numbers", close=False)
        found = self.followers[int(run)].maps_at(int(step)) if int(run) < len(self.followers) else None
        if found is None:
            return error(404, f"no maps of run {run} at step {step}", close=False)
        return JSON(found, headers={"Cache-Control": "no-store"})

    async def api_text(self, request: Request) -> Response:
        body = await read_body(request)
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest("text must be a string of some characters")
        if len(text) > MAX_TEXT:
            raise BadRequest(f"the text is {len(text):,} characters; type at most {MAX_TEXT:,}", 413)

        def steps():
            try:
                yield 200, {"runs": [f.text_maps(text) for f in self.followers]}
            except UserError as e:  # not text the tokenizer reads (a lone surrogate)
                yield 400, {"error": str(e)}

        answers, _ = self.submit(body, request, steps(), SUPERSEDED, single=True)
        answer, _ = await answers.get()
        if answer is None or answer == STOPPED:
            return error(503, "the server is stopping", close=False)
        status, found = answer
        return JSON(found, status, headers={"Cache-Control": "no-store"})

    # ---- the page and the process --------------------------------------------------------------------------

    def page(self) -> str:
        """watch.html with its script, its texts and the font of their glyphs (the tokens' come with font.css)."""
        with self.lock:
            if self.page_html is None:
                data = {"lang": self.lang, "messages": page_messages(), "ask_every_ms": ASK_EVERY_MS,
                        "runs": [f.run_dir.name for f in self.followers]}
                texts = "".join(ko for _, ko in data["messages"].values()) + "한국어"
                fields = {"FONT_CSS": font_face_css(texts), "SCRIPT": (HERE / "page" / "watch.js").read_text("utf-8"),
                          "DATA": json.dumps(data, ensure_ascii=False).replace("<", "\\u003c")}
                page = (HERE / "page" / "watch.html").read_text(encoding="utf-8")
                # one pass over the template, so a text that spells a placeholder stays text
                self.page_html = re.sub(r"__(FONT_CSS|DATA|SCRIPT)__", lambda m: fields[m.group(1)], page)
            return self.page_html

    def font(self) -> str:
        """The glyphs of every token of the runs (and of the fixed text), as the font family TOKEN_FONT: the page
        asks for it once a run's tokenizer is read, so Hangul shows where no Korean font is installed."""
        with self.lock:
            if self.font_css is None and all(f.vocab for f in self.followers):
                glyphs = "".join(f.vocab + "".join(f.tokens or []) for f in self.followers)
                self.font_css = font_face_css(glyphs).replace("EmbeddedNanumGothic", TOKEN_FONT)
            return self.font_css or ""

    def serve(self) -> None:
        self.reader.start()
        try:
            super().serve()
        finally:
            self.stopped.set()

    def start_in_thread(self) -> "WatchServer":
        self.reader.start()
        return super().start_in_thread()

    def shutdown(self) -> None:
        self.stopped.set()
        super().shutdown()


def serve_runs(runs: list[Path], host: str, port: int, lang: str) -> None:
    """generate.py --watch RUN [RUN2]: the page of one run, or of two side by side, until Ctrl-C."""
    shapes = [check_run(run, "--watch") for run in runs]
    if len(runs) == 2:
        if runs[0].resolve() == runs[1].resolve():
            raise UserError(f"--watch {runs[0]} {runs[1]} names one run twice; pass two runs to compare, or one")
        sizes = [(s.get("n_layer"), s.get("n_head")) for s in shapes]
        if sizes[0] != sizes[1]:
            raise UserError(f"{runs[0]} has {sizes[0][0]} layers of {sizes[0][1]} heads and {runs[1]} {sizes[1][0]} "
                            f"of {sizes[1][1]}: side by side compares head by head; pick two runs of one shape")
    say = messages(lang)
    server = WatchServer(runs, host, port, lang)
    if host not in LOCAL:
        warn(say("serve.host", host=host, port=server.port))
    print(say("watch.open_runs", runs=" | ".join(map(str, runs)), address=server.address), flush=True)
    try:
        server.serve()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM, after the server stopped gracefully: the normal way to end it
        pass
    print(say("watch.stopped"), flush=True)


CHILD = "import sys; from inspection.watch_server import main; sys.exit(main(sys.argv[1:]))"


@contextlib.contextmanager
def watching(run_dir: Path, host: str, port: int, lang: str):
    """train.py --watch: the page of `run_dir` in a process of its own for as long as the block runs. The socket is
    bound here first (a port in use is a UserError before the run writes anything) and handed to that process."""
    sock = listen(host, port, "--watch PORT")
    port, say = sock.getsockname()[1], messages(lang)
    if host not in LOCAL:
        warn(say("serve.host", host=host, port=port))
    # no command of its own (a user never starts it), and a session of its own: the terminal's Ctrl-C goes to the
    # trainer, which saves and then ends this process; it ends itself if the trainer dies
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(Path(run_dir).resolve()),
                              "--socket", str(sock.fileno()), "--parent", str(os.getpid()), "--host", host,
                              "--lang", lang], cwd=ROOT, pass_fds=[sock.fileno()], stdin=subprocess.DEVNULL,
                             start_new_session=True)
    sock.close()  # the page's process holds it now
    print(say("watch.open", run=run_dir, address=address_of(host, port)), flush=True)
    try:
        yield port
    finally:
        child.kill()  # it only reads: nothing of the run is left half-done, and the trainer waits for no page
        child.wait()
        print(say("watch.ended", run=run_dir), flush=True)


def main(argv: list[str] | None = None) -> int:
    """train.py --watch's process (and nb.watch's): serve the page of one run, or two, on the socket its parent bound,
    until the parent ends."""
    p = argparse.ArgumentParser(prog="train.py --watch")
    p.add_argument("runs", nargs="+")
    p.add_argument("--socket", type=int, required=True)
    p.add_argument("--parent", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--lang", default="en")
    args = p.parse_args(argv)
    use_language(args.lang)  # its warnings, as the page
    torch.set_num_threads(1)  # beside a trainer: one core's worth at most
    sock = socket.socket(fileno=args.socket)
    server = WatchServer([Path(r) for r in args.runs[:2]], args.host, sock.getsockname()[1], args.lang, sock=sock, parent=args.parent)
    try:
        server.serve()
    except KeyboardInterrupt:  # the server stopped (the trainer ended it)
        pass
    return 0


"""The live inspector's server: the page and its two routes, on Starlette (the app) and uvicorn (the server).

    server = LiveServer(run, host="127.0.0.1", port=8000); server.serve()   # until Ctrl-C or SIGTERM

Its guarded base, `GuardedServer` (everything below but the routes), serves the live training page too
(inspection/watch_server.py): one server, one set of checks, whatever page it serves.

    GET  /              the page: inspection/page.html in live mode, opened on a first text
    POST /api/inspect   a text's view (inspection/live.py), one JSON object
    POST /api/generate  a generation, one JSON object a line (application/x-ndjson) per new token

Why these two: uvicorn is the server the Python web world runs (asyncio, one thread for every connection, its
own limits on headers, keep-alive and connections, a graceful stop on SIGINT and SIGTERM), and Starlette the
small toolkit under FastAPI: routes, requests and responses, nothing more. The model runs on its own thread
(inspection/live_worker.py) and hands each answer to the connection's queue, so a client that stops reading
holds nothing anyone else needs: its generation waits for it (live_worker.AHEAD answers ahead at most), its
send times out (SEND_TIMEOUT) and its generation is cancelled. A client that goes away cancels its work at
once: each request watches its connection (`receive()` says `http.disconnect`). What a connection may cost
before it asks anything is inspection/live_connections.py's; the requests under way are at most MAX_REQUESTS.

Who may ask: the Host header must name this server (an IP address, `localhost`, the machine's name or the
--host given: a web page cannot reach it through a DNS name of its own that points here), a request with an
`Origin` must come from this server's own page, and the API takes `application/json` only, so another site's
page cannot make the machine compute (its form posts and simple requests are refused, its preflights fail).
Every refusal is one JSON line `{"error": ...}` with a 4xx; a body is at most MAX_BODY bytes and must arrive
within BODY_TIMEOUT seconds; JSON nested too deep or numbers of thousands of digits are a 400.
"""

import asyncio
import ipaddress
import json
import socket
import sys
import threading
import time
import traceback

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from cli.errors import UserError
from inference.runs import Run
from inspection.html import finite, frames_page, title_of
from inspection.labels import vocab_text
from inspection.live import DEBOUNCE_MS, FIRST_TEXT, MAX_NEW, BadRequest, LiveInspector, fitting_text
from inspection.live_connections import Connection
from inspection.live_worker import STOPPED, SUPERSEDED, ModelWorker
from model.sampling import TEMPERATURE

MAX_BODY = 64 * 1024  # bytes of a request body
BODY_TIMEOUT = 10.0  # seconds a body may take to arrive
SEND_TIMEOUT = 15.0  # seconds a client may leave a line of its generation unread before it is dropped
MAX_REQUESTS = 200  # under way at once; a 503 past it (idle connections do not count: live_connections.py)
MAX_HEADERS = 16 * 1024  # bytes of a request's headers; a 431 past it
CHECKED_HEADERS = ("host", "origin", "content-type")  # the refusals read them: each at most once
LOCAL = ("127.0.0.1", "localhost", "::1")


def json_line(obj) -> bytes:
    """obj as one line of JSON. A view's numbers are finite as made (html.frame nulls the statistics of a
    text too short for them), so the walk that nulls NaN, slow on a view's many numbers, runs only if one is left."""
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(finite(obj), ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


class JSON(JSONResponse):
    """Valid JSON whatever the numbers: one line, UTF-8, never cached."""

    def render(self, content) -> bytes:
        return json_line(content)


def error(status: int, message: str, close: bool = True) -> JSONResponse:
    """A refusal. One made before the body was read ends its connection and says so (`Connection: close`): the
    unread body is on the connection, where the next request would be lost; a client told opens a new one. One
    made after (close=False) keeps it, so the next request on it, pipelined or not, is answered."""
    headers = {"Cache-Control": "no-store"} | ({"Connection": "close"} if close else {})
    return JSON({"error": message}, status, headers=headers)


def split_host(header: str) -> tuple[str, int | None]:
    """("name", port) of a Host header: `name:8000`, `[::1]:8000`, `name`; ValueError if it is none of them."""
    if header.startswith("["):
        name, _, rest = header[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ("" if not rest else "x")
    else:
        name, _, port = header.rpartition(":") if ":" in header else (header, "", "")
    if not name or (port and not port.isascii()) or (port and not port.isdigit()):
        raise ValueError(header)
    return name.lower(), int(port) if port else None


class GuardedServer:
    """What every page served here shares (the live inspector's, the live training page's): the socket, the checks of
    who may ask (`refusal`), the cap on requests under way, uvicorn with live_connections' limits, the model thread
    (live_worker.ModelWorker) that computes every client's work in turns, the refusals as one JSON line, and the
    ways to run and stop. A subclass gives its routes (`routes()`) and what its 404 names (`API`)."""

    API = ""  # the routes a 404 names beside the page

    def __init__(self, host: str = "127.0.0.1", port: int = 8000, lang: str = "en", port_option: str = "--port",
                 sock: socket.socket | None = None):
        """`sock`: a socket already listening (train.py --watch binds it before it writes anything), else one on
        host:port (`port_option`: the option a refusal names)."""
        self.socket = sock or listen(host, port, port_option)
        self.host, self.port, self.lang = host, self.socket.getsockname()[1], lang
        self.address = address_of(host, self.port)
        self.names = {"localhost", host.lower(), socket.gethostname().lower(), socket.gethostname().lower() + ".local"}
        self.worker = ModelWorker()
        self.requests = 0  # under way (MAX_REQUESTS)
        # the refusals of the API are answered by Starlette's ExceptionMiddleware, which ends there; the handler
        # for Exception (a bug of ours) sits in ServerErrorMiddleware, which answers and raises again, so uvicorn
        # closes the connection after it
        self.app = Starlette(routes=self.routes(),
                             exception_handlers={HTTPException: self.http_error, UserError: self.refused,
                                                 ClientDisconnect: self.refused, Exception: self.server_error})
        config = uvicorn.Config(self.guarded, http=Connection, interface="asgi3", proxy_headers=False,
                                log_level="critical", access_log=False, lifespan="off",
                                limit_concurrency=None, timeout_keep_alive=5, timeout_graceful_shutdown=3,
                                h11_max_incomplete_event_size=MAX_HEADERS)  # fmt: skip
        self.server = Server(config, self.worker.stop_soon)

    def routes(self) -> list[Route]:
        raise NotImplementedError

    # ---- who may ask ---------------------------------------------------------------------------------------

    def refusal(self, scope) -> JSONResponse | None:
        """Why this request is refused (a 4xx), or None: the Host, the Origin, the content type."""
        if sum(len(k) + len(v) + 4 for k, v in scope["headers"]) > MAX_HEADERS:  # h11 checks only what is pending
            return error(431, f"the request's headers are more than {MAX_HEADERS:,} bytes")
        names = [k.decode("latin-1") for k, _ in scope["headers"]]
        twice = [name for name in CHECKED_HEADERS if names.count(name) > 1]
        if twice:  # which one would a proxy before us have read? neither is taken
            return error(400, f"the request has {names.count(twice[0])} {twice[0].title()} headers; send one")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            name, port = split_host(headers.get("host", ""))
        except ValueError:
            return error(400, "the request has no valid Host header")
        if (port or 80) != self.port or not self.names_me(name):  # no port in the header: 80
            return error(403, "this server answers only at its own address")
        origin = headers.get("origin")
        if origin is not None and origin.lower() != f"http://{headers['host'].lower()}":
            return error(403, f"requests from another site ({origin[:80]}) are refused; open this server's own page")
        if scope["method"] == "POST" and headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return error(415, "send the body as Content-Type: application/json")
        return None

    def names_me(self, name: str) -> bool:
        try:
            ipaddress.ip_address(name)  # an address: a DNS name of a foreign page never is one
            return True
        except ValueError:
            return name in self.names

    async def guarded(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            refused = self.refusal(scope)
            if refused is None and self.requests >= MAX_REQUESTS:
                refused = error(503, f"the server has {MAX_REQUESTS} requests under way; try again in a moment")
            if refused is not None:
                return await refused(scope, receive, send)
        self.requests += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.requests -= 1

    def submit(self, body: dict, request: Request, steps, on_cancel=None, single: bool = False, paced: bool = False):
        """Queue `steps` as the client's job ("client" of the body: the page's own id, else the connection's);
        its answers arrive in the returned queue as (answer, last). (queue, job)."""
        client = body.get("client")
        if not (isinstance(client, str) and 0 < len(client) <= 64):
            client = f"{request.client.host}:{request.client.port}" if request.client else "?"
        loop, answers = asyncio.get_running_loop(), asyncio.Queue()

        def emit(answer, last):  # on the model thread: never blocks
            try:
                loop.call_soon_threadsafe(answers.put_nowait, (answer, last))
            except RuntimeError:  # the loop is closed: the server stopped, and nobody waits for this answer
                pass

        kwargs = {} if on_cancel is None else {"on_cancel": on_cancel}
        return answers, self.worker.submit(client, steps, emit, single=single, paced=paced, **kwargs)

    async def http_error(self, request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 404:
            return error(404, f"no page at {request.url.path[:100]}; open / (the API: {self.API})")
        if exc.status_code == 405:
            return error(405, f"{request.method[:10]} is not answered at {request.url.path[:100]}")
        return error(exc.status_code, str(exc.detail)[:200])

    async def refused(self, request: Request, exc: Exception) -> Response:
        """A request refused after it arrived: its body read whole (read_body), the connection goes on."""
        close = not getattr(request.state, "body_read", False)
        if isinstance(exc, BadRequest):
            return error(exc.status, str(exc), close)
        if isinstance(exc, UserError):  # the model's own refusals (a sampling option it cannot take)
            return error(400, str(exc), close)
        return error(400, "the client went away")  # ClientDisconnect: nobody reads it

    async def server_error(self, request: Request, exc: Exception) -> Response:
        traceback.print_exception(exc, file=sys.stderr)  # a bug of ours: the server goes on
        return error(500, "the server failed on this request; see its terminal")

    # ---- the process ------------------------------------------------------------------------------------

    def serve(self) -> None:
        """Answer until Ctrl-C or SIGTERM (which uvicorn turns into a graceful stop, then raises again for the
        command's own handler), the model thread stopped between two steps first."""
        self.worker.start()
        try:
            self.server.run(sockets=[self.socket])
        finally:
            self.worker.stop()
            self.socket.close()

    def start_in_thread(self) -> "GuardedServer":
        """Serve on a thread of this process (tests, benchmarks; uvicorn leaves the signals alone there)."""
        self.worker.start()
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()
        while not self.server.started and self.thread.is_alive():
            time.sleep(0.01)
        return self

    def shutdown(self) -> None:
        """Stop what `start_in_thread` started."""
        self.server.should_exit = True
        self.thread.join(10)
        self.worker.stop()
        self.socket.close()


class LiveServer(GuardedServer):
    """The live inspector: the page in live mode, a text's view and a generation, of one run's model."""

    API = "POST /api/inspect, /api/generate"

    def __init__(self, run: Run, host: str = "127.0.0.1", port: int = 8000, lang: str = "en"):
        self.inspector = LiveInspector(run)
        super().__init__(host, port, lang)
        self.page_html = self.page()

    def routes(self) -> list[Route]:
        return [Route("/", self.get_page, methods=["GET"]), Route("/api/inspect", self.api_inspect, methods=["POST"]),
                Route("/api/generate", self.api_generate, methods=["POST"])]

    # ---- the routes ----------------------------------------------------------------------------------------

    async def get_page(self, request: Request) -> Response:
        return HTMLResponse(self.page_html, headers={"Cache-Control": "no-store"})

    async def api_inspect(self, request: Request) -> Response:
        body = await read_body(request)
        steps = self.inspector.inspect(body)
        answers, job = self.submit(body, request, steps, SUPERSEDED, single=True)
        watch = asyncio.ensure_future(until_gone(request.receive, lambda: self.worker.cancel(job)))
        try:
            (answer, _) = await answers.get()
        except asyncio.CancelledError:  # a second Ctrl-C: the server ends now, and still says why
            return error(503, "the server is stopping", close=False)
        finally:
            watch.cancel()
        if answer is None or answer == STOPPED:
            return error(503, "the server is stopping", close=False)
        status, view = answer
        return JSON(view, status, headers={"Cache-Control": "no-store"})

    async def api_generate(self, request: Request) -> Response:
        body = await read_body(request)
        steps = self.inspector.generate(body)
        answers, job = self.submit(body, request, steps, paced=True)
        return Lines(answers, lambda: self.worker.cancel(job), lambda: self.worker.sent(job))

    def page(self) -> str:
        """The live page, opened on FIRST_TEXT cut to what the model reads."""
        inspector, run = self.inspector, self.inspector.run
        text = fitting_text(run, FIRST_TEXT)  # a small model's context holds its first words only
        options = {"temperature": TEMPERATURE, "top_k": None, "top_p": None}
        (_, view), = inspector.inspect({"text": text, **options})
        live = {"text": text, "next": view["next"], "block_size": run.block_size, "max_new": MAX_NEW,
                "temperature": TEMPERATURE, "debounce_ms": DEBOUNCE_MS, "glyphs": vocab_text(run.tokenizer)}
        shown = {"lens": view.get("lens"), "path": view.get("path"), "open": view["open"]}
        return frames_page(view["frames"], view["tokens"], title_of(text), inspector.layers, self.lang, view["prefill"],
                           shown, live)


class Server(uvicorn.Server):
    """uvicorn's server, which on Ctrl-C or SIGTERM first stops the model thread (`stop_soon`): every job open
    is answered {"stopped": true} while the connections can still send it; uvicorn then waits for them (3 s)."""

    def __init__(self, config: uvicorn.Config, stop_soon):
        super().__init__(config)
        self.stop_soon = stop_soon

    async def shutdown(self, sockets=None) -> None:
        self.stop_soon()
        await super().shutdown(sockets)


async def until_gone(receive, cancel) -> None:
    """Call `cancel` when the client goes away (uvicorn's `http.disconnect`); the request's body has been read,
    so `receive` has nothing else to say. Cancelled when the answer is complete."""
    while (await receive())["type"] != "http.disconnect":
        pass
    cancel()


class Lines(Response):
    """A generation's lines as they come: each sent within SEND_TIMEOUT, else the client is dropped and its
    generation cancelled; a client that went away cancels it too. `sent` tells the model thread each line is
    out, so it computes the next (live_worker.AHEAD)."""

    def __init__(self, answers: asyncio.Queue, cancel, sent):
        self.answers, self.cancel, self.sent = answers, cancel, sent
        self.status_code, self.background = 200, None

    async def __call__(self, scope, receive, send) -> None:
        headers = [(b"content-type", b"application/x-ndjson; charset=utf-8"), (b"cache-control", b"no-store")]
        watch = asyncio.ensure_future(until_gone(receive, self.cancel))
        try:
            first, last = await self.answers.get()
            if isinstance(first, tuple):  # refused before a token: (status, {"error"}), e.g. superseded at once
                status, obj = first
                return await error(status, obj.get("error", "error"))(scope, receive, send)
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            answer = first
            while True:
                if answer is not None:
                    line = json_line(answer)
                    await asyncio.wait_for(send({"type": "http.response.body", "body": line, "more_body": True}),
                                           SEND_TIMEOUT)  # fmt: skip
                self.sent()
                if last:
                    break
                answer, last = await self.answers.get()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except (asyncio.TimeoutError, OSError, ClientDisconnect):
            self.cancel()  # the client stopped reading or went away: nothing else waits on it
        except asyncio.CancelledError:  # the server stopping
            self.cancel()
            raise
        finally:
            watch.cancel()


async def read_body(request: Request) -> dict:
    """The request's JSON object: at most MAX_BODY bytes, within BODY_TIMEOUT, no deeper than the parser goes."""
    length = request.headers.get("content-length")
    if length is not None and not (length.isascii() and length.isdigit()):
        raise BadRequest("Content-Length must be a number of bytes", 400)
    if length is not None and int(length) > MAX_BODY:
        raise BadRequest(f"the body is {int(length):,} bytes; at most {MAX_BODY:,}", 413)

    async def collect() -> bytes:
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > MAX_BODY:
                raise BadRequest(f"the body is more than {MAX_BODY:,} bytes", 413)
        return bytes(data)

    try:
        data = await asyncio.wait_for(collect(), BODY_TIMEOUT)
    except asyncio.TimeoutError:
        raise BadRequest(f"the body did not arrive within {BODY_TIMEOUT:g} s", 408) from None
    request.state.body_read = True  # a refusal from here on leaves nothing unread on the connection
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadRequest(f"the body is not JSON ({' '.join(str(e).split())[:120]})") from None
    except (RecursionError, ValueError):  # nested thousands deep, or an integer of thousands of digits
        raise BadRequest("the body nests too deep or holds a number too long to read") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def address_of(host: str, port: int) -> str:
    """The page's address as a browser opens it: http://localhost:8000/, http://[::1]:8000/."""
    shown = f"[{host}]" if ":" in host else ("localhost" if host == "127.0.0.1" else host)
    return f"http://{shown}:{port}/"


def listen(host: str, port: int, port_option: str = "--port") -> socket.socket:
    """A listening socket on host:port (IPv4 or IPv6), or a UserError that says what to change (`port_option`: the
    option that names the port)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as e:
        raise UserError(f"cannot listen on {host}:{port} ({e.strerror or e}); pick another {port_option} or --host") from None
    sock.set_inheritable(True)
    return sock

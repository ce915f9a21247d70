"""The live inspector's connections: uvicorn's HTTP/1.1 protocol (h11), with the limits a classroom needs.

    config = uvicorn.Config(app, http=Connection, limit_concurrency=None, ...)

uvicorn holds a connection that has not sent a request for as long as its client likes, and counts it in its
limit of connections: 200 sockets that send nothing (or half a header, a byte now and then) lock every page
out with 503s for as long as they stay open. Here a connection's cost is bounded by what it has asked for:
- HEAD_TIMEOUT: a connection gets that many seconds to send each request's line and headers, from its opening
  or from its last answer. A byte now and then does not renew it (uvicorn's keep-alive timer restarts on any
  byte), so a slow drip is closed as surely as silence.
- MAX_CONNECTIONS: past it, a new connection closes the oldest one that is waiting for a request (it holds no
  work of anyone); if every one is busy, the new one is closed. uvicorn's own limit, which counts idle
  connections as busy, is off: the app limits the requests under way (inspection/live_server.py MAX_REQUESTS).
- SEND_BUFFER: what the kernel holds of a connection's unread output. Left to itself it grows to megabytes (4 MB
  on Linux), and a generation for a client that reads nothing would be computed until its lines filled that;
  with the queue's 2 lines (live_worker.AHEAD) and the transport's 64 KB, a stalled client holds about 1 MB.
- A client that sends its request and then closes its side (`shutdown(SHUT_WR)`, as `nc` and some scripts do)
  gets its answer, then the connection closes; uvicorn read that end of the input as the client gone.
"""

import asyncio
import socket

from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_TIMEOUT = 5.0  # seconds to send a request's head, from the connection's opening or its last answer
MAX_CONNECTIONS = 512  # open at once; under the 1,024 files a process may usually open
SEND_BUFFER = 256 * 1024  # bytes of the kernel's send buffer per connection (Linux doubles it): ample for a LAN


class Connection(H11Protocol):
    head_timer: asyncio.TimerHandle | None = None
    waiting_since = 0.0

    def waiting(self) -> bool:
        """No request under way: before the first, or after the last answer (self.cycle is the request's)."""
        return self.cycle is None or self.cycle.response_complete

    def watch(self) -> None:
        """Arm the head timer when the connection starts waiting for a request, disarm it when one arrives."""
        if self.waiting():
            if self.head_timer is None and not self.transport.is_closing():
                self.waiting_since = self.loop.time()
                self.head_timer = self.loop.call_later(HEAD_TIMEOUT, self.close_if_waiting)
        elif self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def close_if_waiting(self) -> None:
        self.head_timer = None
        if self.waiting() and not self.transport.is_closing():
            self.transport.close()  # connection_lost follows, as for a client that closed

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        self.watch()
        if len(self.connections) > MAX_CONNECTIONS:
            idle = [c for c in self.connections if isinstance(c, Connection) and c is not self and c.waiting()]
            oldest = min(idle, key=lambda c: c.waiting_since) if idle else self
            oldest.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        self.watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.watch()

    def connection_lost(self, exc) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None
        super().connection_lost(exc)

    def eof_received(self) -> bool:
        """The client closed its side. Waiting for a request: nothing more can come, close. With a request under
        way: keep the connection open to send its answer, then close (True keeps asyncio from closing it now).
        A client that closed both sides is found when its answer's bytes are refused (connection_lost)."""
        if self.waiting():
            return False
        self.cycle.keep_alive = False
        return True

"""The project's HTTP listeners, on aiohttp's server, hardened alike.

Two kinds use it: ``lingjun restd`` (lingjun_restd/daemon.py, a process of its own) and
the read-only doors the daemons serve from their own asyncio loop (the
controller's ``/metrics`` and dashboard, each agent's ``/metrics``:
``HttpDoor`` below). Served on the loop, not in a thread as
prometheus-client's ``start_http_server`` would: what a scrape reads (the
controller's live state, the agent's jobs and samples) is changed by this
loop only, so reading it from another thread would race with those changes
(a dict that changes size while it is iterated); answering between two
events of the loop sees a consistent state with no lock. A scrape is kept
cheap instead (bench/metrics_scrape.py measures it at 10,000 nodes and
100,000 pending jobs).

*Why aiohttp.* Its HTTP/1.1 parser (llhttp) is maintained and fuzzed by
others; it runs on the daemon's own loop beside grpc.aio, with no thread per
connection; it bounds request lines, header fields and their count. What it
does not bound, this module does, for every listener alike:

- **connections**, overall and per peer (a unix socket's peer uid from
  SO_PEERCRED; for TCP from this host, the uid owning the client's socket,
  else the peer's address): one more is answered 503 and closed;
- **requests in flight**, overall and per client: one more is answered 503
  ("busy") at once, never queued;
- **time**: a connection must send its first byte within ``first_byte_s``
  (of connecting, or of its last answer) or is closed, and a request head
  that has begun must be complete within ``head_s`` (slowloris) or is
  answered 408 and closed; a body must arrive within ``body_s``;
- **every malformed request gets an answer** with a 4xx code in the
  listener's own form (``Answers``: slurmrestd's JSON error document for
  restd, one plain line for the metrics door): a bad request line, a
  negative or non-numeric Content-Length, oversized headers. aiohttp would
  answer those itself in text and log each with a traceback; here each
  answer is the listener's and the log is bounded;
- **refusals are logged at a bounded rate**: one line per kind of refusal
  per ``LOG_EVERY_S``, with how many there were, so a flood costs no disk.

The state of one connection, for the timers::

    idle --first byte--> reading --head complete--> busy --answered--> idle
      |                     |
      first_byte_s          head_s: 408, closed
      closed
"""
from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Awaitable, Callable, Protocol
from urllib.parse import parse_qs

from aiohttp import web

from lingjun import procnet

log = logging.getLogger(__name__)

LOG_EVERY_S = 10.0


@dataclass(frozen=True)
class Limits:
    """What one listener (or several sharing one ``Gate``) admits."""
    max_connections: int = 512
    max_connections_per_peer: int = 64
    max_requests: int = 128             # in flight at once
    max_requests_per_client: int = 16
    first_byte_s: float = 10.0
    head_s: float = 10.0
    body_s: float = 30.0
    max_line: int = 8190                # request line, and each header line
    max_headers: int = 100
    max_body: int = 1024 * 1024


class Busy(Exception):
    """A request or connection over a limit: answered 503 at once."""


class Gate:
    """Counts connections by peer and requests in flight by client, against ``Limits``."""

    def __init__(self, limits: Limits, name: str):
        self.limits, self.name = limits, name
        self.connections: Counter[str] = Counter()
        self.open = 0
        self.requests: Counter[str] = Counter()
        self.in_flight = 0
        self.refusals = RefusalLog(name)

    def connect(self, peer: str) -> None:
        lim = self.limits
        if self.open >= lim.max_connections:
            raise Busy("too many connections")
        if self.connections[peer] >= lim.max_connections_per_peer:
            raise Busy(f"too many connections from {peer}")
        self.connections[peer] += 1
        self.open += 1

    def disconnect(self, peer: str) -> None:
        self.open -= 1
        self.connections[peer] -= 1
        if self.connections[peer] <= 0:
            del self.connections[peer]

    def enter(self, *clients: str) -> None:
        """Admit one request counted against each of ``clients``; Busy when over."""
        lim = self.limits
        if self.in_flight >= lim.max_requests:
            raise Busy("too many requests in flight")
        for c in clients:
            if self.requests[c] >= lim.max_requests_per_client:
                raise Busy(f"too many requests in flight from {c}")
        self.in_flight += 1
        for c in clients:
            self.requests[c] += 1

    def leave(self, *clients: str) -> None:
        self.in_flight -= 1
        for c in clients:
            self.requests[c] -= 1
            if self.requests[c] <= 0:
                del self.requests[c]


class RefusalLog:
    """One warning per kind of refusal per ``LOG_EVERY_S``, with the count since."""

    def __init__(self, name: str):
        self.name = name
        self.last: dict[str, float] = {}
        self.count: Counter[str] = Counter()

    def note(self, kind: str, peer: str) -> None:
        self.count[kind] += 1
        now = time.monotonic()
        if now - self.last.get(kind, -LOG_EVERY_S) >= LOG_EVERY_S:
            log.warning("%s: refused %d request(s) (%s) in the last %.0f s, the latest from %s",
                        self.name, self.count[kind], kind, LOG_EVERY_S, ascii(peer))
            self.last[kind] = now
            self.count[kind] = 0


class Answers(Protocol):
    """How a listener words its refusals."""

    def error(self, status: int, text: str) -> web.Response: ...


def peer_of(transport: asyncio.BaseTransport | None) -> tuple[str, int | None]:
    """(the key a peer's connections and requests are counted by, its uid when
    the kernel vouches for it on a unix socket). A unix socket's peer is
    ``uid:N`` (SO_PEERCRED); a TCP peer on this host is ``local uid:N``
    (the owner of its socket, as the controller finds it: lingjun/procnet.py),
    so local users do not share one address's quota; any other is its address."""
    if transport is None:
        return "?", None
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family == socket.AF_UNIX:
        uid = peer_uid(sock)
        return f"uid:{uid}", uid
    addr = transport.get_extra_info("peername")
    if not (isinstance(addr, (tuple, list)) and addr):
        return "?", None
    if procnet.is_loopback(addr[0]):
        here = transport.get_extra_info("sockname")
        uid = procnet.socket_uid((addr[0], addr[1]), here[1]) if here else None
        if uid is not None:
            return f"local uid:{uid}", None
    return str(addr[0]), None


def peer_uid(sock) -> int:
    """The uid of the process at the other end of a unix socket (the kernel's word)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", raw)[1]


def raw_answer(response: web.Response) -> bytes:
    """An answer written straight to a transport (before or after aiohttp's own
    request cycle: a refused connection, a head that never ended)."""
    body = response.body if isinstance(response.body, bytes) else b""
    status = HTTPStatus(response.status)
    head = [f"HTTP/1.1 {status.value} {status.phrase}",
            f"Content-Type: {response.content_type}", f"Content-Length: {len(body)}",
            "Connection: close"]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


IDLE, READING, BUSY = "idle", "reading", "busy"


class Connection(web.RequestHandler):
    """aiohttp's protocol for one connection, with this module's limits and timers
    and the listener's own words for what aiohttp's parser refuses."""

    def __init__(self, manager: "Listener", **kwargs):
        super().__init__(manager, **kwargs)
        self.listener = manager
        self.peer = "?"
        self.unix_uid: int | None = None     # the kernel's word for a unix socket's peer
        self.counted = False
        self.state = IDLE
        self.deadline = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.transport_: asyncio.Transport | None = None

    # -- the connection's life ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.transport_ = transport      # type: ignore[assignment]
        gate = self.listener.gate
        try:
            self.peer, self.unix_uid = peer_of(transport)
        except OSError:
            self.peer, self.unix_uid = "?", None
        try:
            gate.connect(self.peer)
        except Busy as e:
            gate.refusals.note(str(e).split(" from ")[0], self.peer)
            self.refuse(self.listener.answers.error(503, "busy"))
            return
        self.counted = True
        self.go_idle()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.counted:
            self.listener.gate.disconnect(self.peer)
            self.counted = False
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.state == IDLE and data:
            self.state = READING
            self.deadline = time.monotonic() + self.listener.gate.limits.head_s
        super().data_received(data)

    def refuse(self, response: web.Response) -> None:
        t = self.transport_
        if t is not None and not t.is_closing():
            t.write(raw_answer(response))
            t.close()

    # -- timers ---------------------------------------------------------------------------
    def go_idle(self) -> None:
        self.state = IDLE
        self.deadline = time.monotonic() + self.listener.gate.limits.first_byte_s
        self.arm()

    def go_busy(self) -> None:
        self.state = BUSY

    def arm(self) -> None:
        if self.timer is None:
            delay = max(0.05, self.deadline - time.monotonic())
            self.timer = asyncio.get_running_loop().call_later(delay, self.expire)

    def expire(self) -> None:
        self.timer = None
        if self.transport_ is None or self.transport_.is_closing():
            return
        if self.state == BUSY:
            return                      # the handler's own timeouts bound it; re-armed when idle
        if time.monotonic() < self.deadline:
            self.arm()
            return
        if self.state == READING:       # a head begun and never ended
            self.listener.gate.refusals.note("request head too slow", self.peer)
            self.refuse(self.listener.answers.error(408, "request head not complete in time"))
        else:
            self.transport_.close()

    # -- what aiohttp's parser refuses ------------------------------------------------------
    def handle_error(self, request, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500:
            log.error("%s: error answering %s", self.listener.gate.name, ascii(self.peer),
                      exc_info=exc)
            text = "internal error"
        else:
            self.listener.gate.refusals.note("malformed request", self.peer)
            text = f"malformed request: {_reason(exc, message)}"
        resp = self.listener.answers.error(status, text)
        resp.force_close()
        return resp


def _reason(exc: BaseException | None, message: str | None) -> str:
    """One printable line saying what was wrong (aiohttp's words)."""
    text = message or (getattr(exc, "message", "") or type(exc).__name__ if exc else "")
    lines = str(text).strip().splitlines()
    return ascii(lines[0] if lines else "bad request")[1:-1][:200]


class Listener(web.Server):
    """aiohttp's low-level server whose connections are ``Connection``s."""

    def __init__(self, handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
                 gate: Gate, answers: Answers):
        lim = gate.limits
        # aiohttp's own keep-alive timer closes idle connections too, after ours
        self.connection_args = dict(max_line_size=lim.max_line, max_field_size=lim.max_line,
                                    max_headers=lim.max_headers, access_log=None, lingering_time=1.0,
                                    keepalive_timeout=lim.first_byte_s + lim.head_s + 5)
        super().__init__(self._guarded(handler), **self.connection_args)
        self.loop = asyncio.get_running_loop()
        self.gate, self.answers = gate, answers

    def __call__(self) -> Connection:
        return Connection(self, loop=self.loop, **self.connection_args)

    def _guarded(self, handler):
        async def guarded(request: web.BaseRequest) -> web.StreamResponse:
            conn = request.protocol
            if isinstance(conn, Connection):
                conn.go_busy()
            try:
                return await handler(request)
            finally:
                if isinstance(conn, Connection):
                    conn.go_idle()
        return guarded


async def read_body(request: web.BaseRequest, limits: Limits) -> bytes:
    """The body, within ``limits.max_body`` and ``limits.body_s``: BodyRefused otherwise."""
    if request.content_length is not None and request.content_length > limits.max_body:
        raise BodyRefused(413, f"request body of {request.content_length} bytes is over "
                               f"the limit of {limits.max_body}")
    chunks, size = [], 0
    try:
        async with asyncio.timeout(limits.body_s):
            async for chunk in request.content.iter_any():
                size += len(chunk)
                if size > limits.max_body:
                    raise BodyRefused(413, f"request body over the limit of {limits.max_body} bytes")
                chunks.append(chunk)
    except BodyRefused:
        raise
    except TimeoutError:
        raise BodyRefused(408, "request body not complete in time") from None
    except Exception as e:     # noqa: BLE001 - aiohttp's payload errors: a bad chunked body
        raise BodyRefused(400, f"malformed request body: {_reason(e, None)}") from None
    return b"".join(chunks)


class BodyRefused(Exception):
    def __init__(self, status: int, text: str):
        super().__init__(text)
        self.status = status


class Site:
    """One listener on ``HOST:PORT`` or ``unix:/PATH``, with its runner."""

    def __init__(self, listener: Listener):
        self.runner = web.ServerRunner(listener, handle_signals=False)
        self.site: web.BaseSite | None = None
        self.port = 0

    async def start(self, where: str, mode: int = 0o666) -> int:
        await self.runner.setup()
        if where.startswith("unix:"):
            path = where[len("unix:"):]
            if os.path.exists(path):
                os.unlink(path)
            self.site = web.UnixSite(self.runner, path)
            await self.site.start()
            os.chmod(path, mode)
            return 0
        host, port = parse_address(where)
        self.site = web.TCPSite(self.runner, host, port, reuse_address=True)
        await self.site.start()
        self.port = self.runner.addresses[-1][1]
        return self.port

    async def close(self) -> None:
        await self.runner.cleanup()


def parse_address(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """ "HOST:PORT" or ":PORT" -> (host, port); ValueError when it is neither."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"want HOST:PORT, got {text!r}")
    return host.strip("[]") or default_host, int(port)


# -- the read-only door of the daemons ---------------------------------------------------------


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]          # names lower-cased

    def param(self, name: str, default: str = "") -> str:
        return self.query.get(name, [default])[0]

    def cookie(self, name: str) -> str:
        from http.cookies import CookieError, SimpleCookie
        jar = SimpleCookie()
        try:
            jar.load(self.headers.get("cookie", ""))
        except CookieError:
            return ""
        morsel = jar.get(name)
        return morsel.value if morsel is not None else ""


@dataclass(frozen=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = field(default=())


Handler = Callable[[Request], "Response | Awaitable[Response]"]

# A scrape or a page view is one short GET; a handful at once is plenty.
DOOR_LIMITS = Limits(max_connections=128, max_connections_per_peer=32, max_requests=32,
                     max_requests_per_client=8, first_byte_s=10.0, head_s=10.0, body_s=5.0,
                     max_line=8190, max_headers=64, max_body=0)


class PlainAnswers:
    """The door's refusals: one line of text."""

    def error(self, status: int, text: str) -> web.Response:
        return web.Response(status=status, body=f"{text}\n".encode(), content_type="text/plain",
                            charset="utf-8")


class HttpDoor:
    """Answers GET (and HEAD) requests by path: ``routes`` maps a path (exact) to
    a handler; a handler may be a coroutine function. One request per
    connection (``Connection: close``): scrapes and page views are rare."""

    def __init__(self, routes: dict[str, Handler], name: str = "http", limits: Limits = DOOR_LIMITS):
        self.routes = routes
        self.name = name
        self.limits = limits
        self.site: Site | None = None
        self.port = 0

    async def start(self, address: str) -> int:
        """Listen on ``address`` (HOST:PORT, port 0 = any free one); the bound port."""
        parse_address(address)
        site = Site(Listener(self._serve, Gate(self.limits, self.name), PlainAnswers()))
        try:
            self.port = await site.start(address)
        except OSError as e:
            await site.close()
            raise OSError(e.errno or errno.EADDRINUSE,
                          f"cannot listen on {address} for {self.name}: {e.strerror or e}") from None
        self.site = site
        return self.port

    async def close(self) -> None:
        if self.site is not None:
            await self.site.close()
            self.site = None

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        listener = request.protocol.listener if isinstance(request.protocol, Connection) else None
        gate = listener.gate if listener is not None else Gate(self.limits, self.name)
        peer = request.protocol.peer if isinstance(request.protocol, Connection) else "?"
        if request.method not in ("GET", "HEAD"):
            resp = web.Response(status=405, text="read-only: GET only\n", headers={"Allow": "GET, HEAD"})
        elif request.body_exists and (request.content_length or 0) > self.limits.max_body:
            resp = web.Response(status=413, text="a GET takes no body\n")
        else:
            try:
                gate.enter(peer)
            except Busy as e:
                gate.refusals.note(str(e).split(" from ")[0], peer)
                resp = PlainAnswers().error(503, "busy")
            else:
                try:
                    resp = _to_aiohttp(await self._answer(_request(request)))
                finally:
                    gate.leave(peer)
        resp.headers["Cache-Control"] = "no-store"
        resp.force_close()
        return resp

    async def _answer(self, req: Request) -> Response:
        handler = self.routes.get(req.path)
        if handler is None:
            return Response(HTTPStatus.NOT_FOUND, b"not found\n")
        try:
            resp = handler(req)
            if asyncio.iscoroutine(resp):
                resp = await resp
            return resp
        except Exception:       # noqa: BLE001 - one page's bug is a 500, not a dead door
            log.exception("%s: %s %s failed", self.name, req.method, ascii(req.path))
            return Response(HTTPStatus.INTERNAL_SERVER_ERROR, b"internal error\n")


def _request(r: web.BaseRequest) -> Request:
    return Request(r.method, r.path or "/", parse_qs(r.query_string),
                   {k.lower(): v for k, v in r.headers.items()})


def _to_aiohttp(resp: Response) -> web.Response:
    out = web.Response(status=int(resp.status), body=resp.body)
    out.headers["Content-Type"] = resp.content_type
    for k, v in resp.headers:
        out.headers[k] = v
    return out

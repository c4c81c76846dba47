"""A small read-only HTTP door served from the daemon's own asyncio loop.

The controller's ``/metrics`` and its dashboard, and each agent's
``/metrics``, are answered here. On the loop, not in a thread as
prometheus-client's ``start_http_server`` would: what a scrape reads (the
controller's live state, the agent's jobs and samples) is changed by this
loop only, so reading it from another thread would race with those changes
(a dict that changes size while it is iterated); answering between two
events of the loop sees a consistent state with no lock. A scrape is kept
cheap instead (bench/metrics_scrape.py measures it at 10,000 nodes and
100,000 pending jobs), and nothing else waits on the network: a slow
client costs a coroutine, not the loop.

Only GET (and HEAD) of a path with a query string; one request per
connection (``Connection: close``); the request line and headers must
arrive within ``READ_TIMEOUT_S`` and in ``MAX_HEAD_BYTES``.
"""
from __future__ import annotations

import asyncio
import errno
import logging
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 16 * 1024


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


def parse_address(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """ "HOST:PORT" or ":PORT" -> (host, port); ValueError when it is neither."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"want HOST:PORT, got {text!r}")
    return host.strip("[]") or default_host, int(port)


class HttpDoor:
    """Answers GET requests by path: ``routes`` maps a path (exact) to a
    handler; a handler may be a coroutine function."""

    def __init__(self, routes: dict[str, Handler], name: str = "http"):
        self.routes = routes
        self.name = name
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self, address: str) -> int:
        """Listen on ``address`` (HOST:PORT, port 0 = any free one); the bound port."""
        host, port = parse_address(address)
        try:
            self.server = await asyncio.start_server(self._serve, host, port,
                                                     reuse_address=True, limit=MAX_HEAD_BYTES)
        except OSError as e:
            raise OSError(e.errno or errno.EADDRINUSE,
                          f"cannot listen on {address} for {self.name}: {e.strerror or e}") from None
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                return
            req = _parse(head)
            if req is None:
                resp = Response(HTTPStatus.BAD_REQUEST, b"bad request\n")
            elif req.method not in ("GET", "HEAD"):
                resp = Response(HTTPStatus.METHOD_NOT_ALLOWED, b"read-only: GET only\n",
                                headers=(("Allow", "GET, HEAD"),))
            else:
                resp = await self._answer(req)
            body = b"" if req is not None and req.method == "HEAD" else resp.body
            lines = [f"HTTP/1.1 {int(resp.status)} {HTTPStatus(resp.status).phrase}",
                     f"Content-Type: {resp.content_type}", f"Content-Length: {len(resp.body)}",
                     "Connection: close", "Cache-Control: no-store",
                     *(f"{k}: {v}" for k, v in resp.headers)]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

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
            log.exception("%s: %s %s failed", self.name, req.method, req.path)
            return Response(HTTPStatus.INTERNAL_SERVER_ERROR, b"internal error\n")


def _parse(head: bytes) -> Request | None:
    try:
        text = head.decode("latin-1")
        line, *rest = text.split("\r\n")
        method, target, version = line.split(" ")
        if not version.startswith("HTTP/1."):
            return None
        headers = {}
        for h in rest:
            if h:
                k, _, v = h.partition(":")
                headers[k.strip().lower()] = v.strip()
        parts = urlsplit(target)
        return Request(method, parts.path or "/", parse_qs(parts.query), headers)
    except ValueError:
        return None

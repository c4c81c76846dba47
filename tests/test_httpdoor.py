"""The read-only HTTP door the daemons serve /metrics and the dashboard from:
a real listener on loopback, spoken to over a raw socket."""
from __future__ import annotations

import asyncio

import pytest

from lingjun import httpdoor
from lingjun.httpdoor import HttpDoor, Response


async def exchange(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return data


def serve(routes, *requests: bytes) -> list[bytes]:
    async def go():
        door = HttpDoor(routes)
        port = await door.start("127.0.0.1:0")
        try:
            return [await exchange(port, r) for r in requests]
        finally:
            await door.close()
    return asyncio.run(go())


def test_get_head_query_and_the_answers_for_what_it_does_not_serve():
    seen = []

    def page(req):
        seen.append((req.path, req.param("x"), req.cookie("c")))
        return Response(200, b"hello", "text/plain")

    async def later(req):
        return Response(201, b"async")
    got = serve({"/": page, "/later": later},
                b"GET /?x=1&x=2 HTTP/1.1\r\nHost: a\r\nCookie: c=v; d=w\r\n\r\n",
                b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n",
                b"GET /later HTTP/1.0\r\n\r\n",
                b"GET /other HTTP/1.1\r\nHost: a\r\n\r\n",
                b"DELETE / HTTP/1.1\r\nHost: a\r\n\r\n",
                b"nonsense\r\n\r\n")
    assert got[0].startswith(b"HTTP/1.1 200 OK\r\n") and got[0].endswith(b"\r\n\r\nhello")
    assert b"Content-Length: 5\r\n" in got[0] and b"Connection: close\r\n" in got[0]
    assert got[1].startswith(b"HTTP/1.1 200 OK") and got[1].endswith(b"\r\n\r\n"), "HEAD: no body"
    assert got[2].startswith(b"HTTP/1.0 201 Created") and got[2].endswith(b"async")
    assert got[3].startswith(b"HTTP/1.1 404 Not Found")
    assert got[4].startswith(b"HTTP/1.1 405 Method Not Allowed") and b"Allow: GET, HEAD" in got[4]
    assert got[5].split(b"\r\n")[0].endswith(b" 400 Bad Request")
    assert seen == [("/", "1", "v"), ("/", "", "")]


def test_a_handler_that_fails_is_a_500_and_the_door_stays_open():
    def broken(req):
        raise RuntimeError("bug")
    got = serve({"/": broken, "/ok": lambda r: Response(200, b"ok")},
                b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", b"GET /ok HTTP/1.1\r\nHost: a\r\n\r\n")
    assert got[0].startswith(b"HTTP/1.1 500 Internal Server Error")
    assert got[1].endswith(b"ok")


def test_an_oversized_request_head_is_answered_400_in_one_line():
    got = serve({"/": lambda r: Response(200, b"ok")},
                b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"a" * (httpdoor.DOOR_LIMITS.max_line + 10)
                + b"\r\n\r\n")
    assert got[0].split(b"\r\n")[0].endswith(b" 400 Bad Request"), got
    assert got[0].endswith(b"\n") and got[0].split(b"\r\n\r\n", 1)[1].startswith(b"malformed request")


def test_a_taken_port_is_said_so():
    async def go():
        first = HttpDoor({}, "the dashboard")
        port = await first.start("127.0.0.1:0")
        try:
            with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port} for the dashboard"):
                await HttpDoor({}, "the dashboard").start(f"127.0.0.1:{port}")
        finally:
            await first.close()
    asyncio.run(go())


@pytest.mark.parametrize("text", ["6920", "host:", "host:99999", "a:b"])
def test_an_address_without_a_port_is_refused(text):
    with pytest.raises(ValueError, match="want HOST:PORT"):
        httpdoor.parse_address(text)

"""One HTTP exchange over a raw socket: what a hostile client sends is sent
byte for byte (no client library would send a negative Content-Length), and
what comes back is read as it is (status, Content-Type, body), or said to
be missing."""
from __future__ import annotations

import socket
import time


def exchange(where, raw: bytes, timeout: float = 30) -> tuple[int, bytes, bytes]:
    """Send ``raw``; (status, Content-Type, body) of the answer, (0, b"", why) for none."""
    fam = socket.AF_UNIX if isinstance(where, str) else socket.AF_INET
    with socket.socket(fam) as s:
        s.settimeout(timeout)
        s.connect(where)
        try:
            s.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass                         # answered and closed before all was sent (413)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    return 0, b"", b"connection closed with no answer: " + data[:200]
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            status = int(lines[0].split()[1])
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(b":") for h in lines[1:])}
            length = int(headers.get(b"content-length", b"0"))
            while len(body) < length:
                chunk = s.recv(65536)
                if not chunk:
                    break
                body += chunk
            return status, headers.get(b"content-type", b""), body
        except (TimeoutError, socket.timeout):
            return 0, b"", b"no answer within %d s" % timeout
        except ConnectionResetError:
            return 0, b"", b"connection reset with no answer"


def slowloris(where: tuple[str, int], request_line: str, head_s: float) -> tuple[bytes, float]:
    """Start a request's head and add a header line now and then, never ending
    it, for up to ``head_s`` + 5 s: (what came back, seconds until the door
    answered or closed)."""
    with socket.create_connection(where) as s:
        s.sendall(f"{request_line}\r\nHost: x\r\n".encode())
        t0, data = time.monotonic(), b""
        s.settimeout(1)
        while time.monotonic() - t0 < head_s + 5:
            try:
                s.sendall(b"X-A: b\r\n")
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            except socket.timeout:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
        return data, time.monotonic() - t0

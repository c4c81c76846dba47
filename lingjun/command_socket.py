"""The local command socket: a command's call to the controller in one unix-socket round trip.

Beside the credential socket (``lingjun/credential.py``) the same daemon
serves a second one, ``commands_path(auth_socket)``: a command connects,
writes one request and reads one answer, each a line of JSON, and the
connection ends. The daemon asks the kernel who is calling (``SO_PEERCRED``)
instead of a token, and answers through the controller's own SlurmApi code
(``lingjund/transport/command_socket.py``; an agent serving it relays the
call to its controller with a token minted for that uid). So a command needs
neither gRPC nor protobuf, TLS or JWT: only ``socket`` and ``json``.

    request:  {"method": "SubmitJob", "request": {...SubmitJobRequest's fields...}}
    answer:   {"reply": {...SubmitJobResponse's fields...}}
          or  {"error": {"code": "NOT_FOUND", "message": "Invalid job id specified"}}
          or  {"use_grpc": {"reply_bytes": 6400000}}   (a read too large for JSON)

Fields are keyed by their proto names (``lingjun/messages.py`` converts).
When no daemon serves the socket the command falls back to gRPC
(``lingjun.client.Api``), which stays the interface for other tools.

    $ python -c 'from lingjun import command_socket as c, endpoints as e, messages as m
    > print(c.LocalApi(c.commands_path(e.auth_socket())).call("Ping", m.PingRequest()))'
"""
from __future__ import annotations

import json
import socket

from lingjun.endpoints import RPC_TIMEOUT_S, ControllerUnreachable, beside_auth_socket
from lingjun.messages import METHODS, Message, from_protobuf, message_class
from lingjun.refusal import RATE_LIMITED, RESOURCE_EXHAUSTED, RETRY_DELAYS_S, UNAVAILABLE

MAX_REQUEST_BYTES = 64 * 1024 * 1024       # a request line; the daemon refuses longer ones


def commands_path(auth_socket: str) -> str:
    """The command socket beside the credential socket ``auth_socket``:
    /run/lingjun/auth.sock -> /run/lingjun/auth.commands.sock."""
    return beside_auth_socket(auth_socket, "commands")


class ControllerError(Exception):
    """The controller refused the call: its status name and Slurm's words.

    ``code()`` and ``details()`` read as a ``grpc.RpcError``'s do, so a
    command treats both alike; ``code().name`` is the status's name."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self._code = StatusName(code)
        self._message = message

    def code(self) -> "StatusName":
        return self._code

    def details(self) -> str:
        return self._message


class StatusName(str):
    """A status as a string that also answers ``.name``, like grpc.StatusCode."""

    @property
    def name(self) -> str:
        return str(self)


class SocketUnavailable(OSError):
    """Nothing serves the command socket (no daemon, an old daemon): use gRPC."""


class LargeReply(SocketUnavailable):
    """The answer to this read is large: ask it over gRPC (the socket stays in use)."""


def _request_line(method: str, request) -> bytes:
    if not isinstance(request, Message):
        request = from_protobuf(request)        # a caller that built a protobuf message
    return json.dumps({"method": method, "request": request.to_dict()}, ensure_ascii=False,
                      separators=(",", ":"), check_circular=False).encode(
        "utf-8", "surrogatepass") + b"\n"


class LocalApi:
    """``Api``'s ``call`` over the command socket at ``path``."""

    def __init__(self, path: str):
        self.path = path

    def call(self, method: str, request, timeout: float = RPC_TIMEOUT_S, wait_ready: float = 0.0):
        """The reply (a ``lingjun.messages`` message); ControllerError when refused.

        SocketUnavailable when nothing could be asked (the caller may use
        gRPC instead); ControllerUnreachable when the request went out and no
        answer came, or the daemon cannot reach its controller."""
        if method not in METHODS:
            raise SocketUnavailable(f"{method} is not served on the command socket")
        line = _request_line(method, request)
        for delay in RETRY_DELAYS_S:
            answer = self._ask(line, timeout)
            if _busy(answer):
                import time     # only a refused command needs it
                time.sleep(delay)
                continue
            break
        else:
            answer = self._ask(line, timeout)
        if not isinstance(answer, dict):
            raise ControllerUnreachable(f"{self.path}: no answer")
        if "use_grpc" in answer:
            raise LargeReply(f"{method}: {answer['use_grpc']}")
        if "error" in answer:
            err = answer["error"]
            if err.get("code") == UNAVAILABLE:
                raise ControllerUnreachable(err.get("message", ""))
            raise ControllerError(str(err.get("code", "UNKNOWN")), str(err.get("message", "")))
        return message_class(METHODS[method][1]).from_dict(answer.get("reply") or {})

    def _ask(self, line: bytes, timeout: float):
        """The decoded answer to one request line (None when it is not JSON)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        chunks = []
        try:
            s.settimeout(timeout)
            try:
                s.connect(self.path)
            except BlockingIOError:     # the daemon's backlog is full: busy, as a refusal
                return {"error": {"code": RESOURCE_EXHAUSTED, "message": RATE_LIMITED}}
            except OSError as e:
                raise SocketUnavailable(f"{self.path}: {e.strerror or e}") from None
            try:
                s.sendall(line)
                while True:
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    chunks.append(chunk)
            except OSError as e:
                # A refusal is written and the connection closed before the
                # request is read: the send may then fail, or the read after
                # the refusal's line (the kernel's ECONNRESET for the unread
                # request). The line, when it came whole, is the answer.
                if not (chunks and chunks[-1].endswith(b"\n")):
                    try:
                        chunks.append(s.recv(1 << 16))
                    except OSError:
                        pass
                if not (chunks and chunks[-1].endswith(b"\n")):
                    raise ControllerUnreachable(f"{self.path}: {e.strerror or e}") from None
        finally:
            s.close()
        try:
            return json.loads(b"".join(chunks))
        except (ValueError, RecursionError):
            return None

    def close(self) -> None:
        pass


def _busy(answer) -> bool:
    """Whether ``answer`` is a door's refusal of a caller holding too much already."""
    if not isinstance(answer, dict):
        return False
    err = answer.get("error")
    return isinstance(err, dict) and err.get("code") == RESOURCE_EXHAUSTED


class CommandApi:
    """A command's way to the controller: the command socket when a daemon
    serves it, else gRPC (imported only then). ``call`` as ``Api.call``."""

    def __init__(self, socket_path: str | None = None):
        from lingjun.endpoints import auth_socket, socket_is_the_clusters  # here: a caller that names the socket never reads the config
        self.auth_socket = socket_path or auth_socket()
        # never the command socket of another cluster than the one the
        # command was told to reach (lingjun/endpoints.py: one cluster)
        same = socket_path is not None or socket_is_the_clusters()
        self.local: LocalApi | None = LocalApi(commands_path(self.auth_socket)) if same else None
        self._grpc = None

    def call(self, method: str, request, timeout: float = RPC_TIMEOUT_S, wait_ready: float = 0.0):
        if self.local is not None and method in METHODS:
            try:
                return self.local.call(method, request, timeout, wait_ready)
            except LargeReply:
                pass
            except SocketUnavailable:
                self.local = None
        return self.grpc().call(method, request, timeout=timeout, wait_ready=wait_ready)

    def stream(self, method: str, request, timeout: float | None = None):
        return self.grpc().stream(method, request, timeout=timeout)

    def grpc(self):
        if self._grpc is None:
            from lingjun.client import Api  # here: grpc only for a call the socket cannot take (bench/README.md)
            self._grpc = Api(socket_path=self.auth_socket)
        return self._grpc

    @property
    def stub(self):
        return self.grpc().stub

    @property
    def address(self) -> str:
        return self.grpc().address

    def close(self) -> None:
        if self._grpc is not None:
            self._grpc.close()


__all__ = ["CommandApi", "ControllerError", "LargeReply", "LocalApi", "SocketUnavailable",
           "commands_path"]

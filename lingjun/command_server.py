"""The local command socket's server side: one JSON line in, one out, the caller from the kernel.

A command's call over gRPC costs it the import of grpc, protobuf, asyncio,
TLS and JWT, several times Slurm's whole run; over this unix socket it costs
one JSON line each way (``lingjun/command_socket.py`` is the client side and
says the protocol). The caller is who the kernel says it is
(``SO_PEERCRED``), as on the credential socket beside it; no token.

``CommandSocketServer`` decodes a line into the SlurmApi request message,
hands it with the caller's identity to an ``Answer`` and writes back the
reply, or the status and Slurm's words of a refusal. A line that is not such
a request is refused ("Unable to decode the request") and reaches nothing;
only unary methods are served (srun, salloc and sacct's streams stay on gRPC).

Each connection is admitted first (lingjun/admission.py, shared with the
credential socket beside it): a user holding ``[limits] connections_per_user``
connections already, or ``requests_per_user`` calls in progress, is answered
at once with one line, ``{"error": {"code": "RESOURCE_EXHAUSTED", ...}}``,
and the connection closed, nothing of it read. A connection that sends
nothing within ``first_byte_timeout_s`` is closed; its request must then be
whole within ``READ_TIMEOUT_S``. Refusals and undecodable requests are
logged at a bounded rate, never a line per connection.

Two answers: the controller's (``lingjund/transport/command_socket.py``:
its own SlurmApi servicer, the gRPC path's code) and an agent's
(``relay_answer``: the call forwarded to its controller over gRPC with a
token minted for the caller, as munge's credential would carry the uid).
"""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
from pathlib import Path
from typing import Awaitable, Callable

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from lingjun import admission as admission_mod
from lingjun import auth, credential
from lingjun.command_socket import commands_path
from lingjun.refusal import RATE_LIMITED, RESOURCE_EXHAUSTED, UNAVAILABLE
from lingjun.v1 import api_pb2

log = logging.getLogger("lingjun.commands")

_SERVICE = api_pb2.DESCRIPTOR.services_by_name["SlurmApi"]
# method -> (request class, reply class): the unary calls only
METHODS = {m.name: (getattr(api_pb2, m.input_type.name), getattr(api_pb2, m.output_type.name))
           for m in _SERVICE.methods if not m.client_streaming and not m.server_streaming}
READ_TIMEOUT_S = 30.0
READ_CHUNK_BYTES = 64 * 1024
# A read whose reply encodes larger than this is not converted to JSON: the
# command is told to ask over gRPC, where protobuf's C code decodes it (JSON
# costs both sides tens of microseconds a job; 64 KiB is about a thousand
# squeue rows). Calls that change something are always answered here: asking
# twice would do it twice.
LARGE_REPLY_BYTES = 64 * 1024
READS = frozenset({"GetJobs", "GetNodes", "GetPartitions", "GetConfig", "Ping", "GetBatchScript",
                   "GetJobEvents", "GetSanityResults", "GetPriorityFactors",
                   "GetAssociations"})
DECODE_FAILURE = "Unable to decode the request"

# (method, request with the caller's identity written in, caller) -> the reply,
# or a Refusal
Answer = Callable[[str, Message, auth.Identity], Awaitable[Message | bytes]]


class Refusal(grpc.aio.AbortError):
    """A call ended with a status: what a servicer's ``context.abort`` raises here.

    An AbortError, so the servicer's wrapper lets it through as it does gRPC's."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


class Busy(Exception):
    """The caller holds too much of the daemon already (lingjun/admission.py)."""


class ControllerChannel:
    """A relaying daemon's gRPC channel to the controller, opened on first use
    (inside the event loop) and kept; TLS when ``tls_ca`` (PEM bytes) is given."""

    def __init__(self, address: str, tls_ca: bytes | None = None):
        self.address, self.tls_ca = address, tls_ca
        self._channel = None
        self._stub = None

    def stub(self):
        if self._stub is None:
            from lingjun.v1 import api_pb2_grpc  # here: grpc's stubs only once a call is relayed over gRPC
            options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
            if self.tls_ca:
                creds = grpc.ssl_channel_credentials(root_certificates=self.tls_ca)
                self._channel = grpc.aio.secure_channel(self.address, creds, options=options)
            else:
                self._channel = grpc.aio.insecure_channel(self.address, options=options)
            self._stub = api_pb2_grpc.SlurmApiStub(self._channel)
        return self._stub

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()


def relay_answer(stub_for: Callable[[], object], key: auth.ClusterKey, ttl_s: float) -> Answer:
    """Answers from the controller over gRPC, each call with a token minted for its caller."""

    async def answer(method: str, request: Message, who: auth.Identity):
        token = auth.mint_token(key, who.uid, who.gid, ttl_s)
        try:
            return await getattr(stub_for(), method)(
                request, metadata=((auth.TOKEN_METADATA, token),), timeout=30.0)
        except grpc.aio.AioRpcError as e:
            raise Refusal(e.code().name, e.details() or "") from None
    return answer


def plain(msg: Message) -> dict:
    """A message's set fields as JSON takes them, keyed by proto name (bytes as base64).

    By ListFields and a per-field kind worked out once, rather than
    json_format.MessageToDict: several times faster on a reply of jobs."""
    out = {}
    for fd, value in msg.ListFields():
        how = _HOW.get(fd)
        if how is None:
            how = _HOW[fd] = _how(fd)
        if how == _SCALAR:
            out[fd.name] = value
        elif how == _SCALARS:
            out[fd.name] = list(value)
        elif how == _MESSAGE:
            out[fd.name] = plain(value)
        elif how == _MESSAGES:
            out[fd.name] = [plain(v) for v in value]
        elif how == _MAP:
            out[fd.name] = dict(value)
        elif how == _BYTES:
            out[fd.name] = base64.b64encode(value).decode()
        else:
            out[fd.name] = [base64.b64encode(v).decode() for v in value]
    return out


_SCALAR, _SCALARS, _MESSAGE, _MESSAGES, _MAP, _BYTES, _BYTES_LIST = range(7)
_HOW: dict = {}


def _how(fd) -> int:
    many = _repeated(fd)
    if fd.message_type is not None:
        if fd.message_type.GetOptions().map_entry:
            return _MAP
        return _MESSAGES if many else _MESSAGE
    if fd.type == fd.TYPE_BYTES:
        return _BYTES_LIST if many else _BYTES
    return _SCALARS if many else _SCALAR


def _repeated(fd) -> bool:
    return fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED


def _line(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass") + b"\n"


def _error(code: str, message: str) -> bytes:
    return _line({"error": {"code": code, "message": message}})


def decode(line: bytes) -> tuple[str, Message]:
    """(method, request) from a request line; ValueError when it is not one."""
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(obj, dict) or set(obj) != {"method", "request"}:
        raise ValueError("not a request object")
    method, body = obj["method"], obj["request"]
    if not isinstance(method, str) or method not in METHODS or not isinstance(body, dict):
        raise ValueError(f"no such call {method!r}" if isinstance(method, str) else "no method")
    try:
        return method, json_format.ParseDict(body, METHODS[method][0]())
    except (json_format.ParseError, TypeError, ValueError, RecursionError) as e:
        raise ValueError(f"{method}: {e}") from None


class CommandSocketServer:
    """Serves the command socket beside the credential socket ``auth_socket``."""

    def __init__(self, auth_socket: str, answer: Answer, max_request_bytes: int,
                 admission: admission_mod.Admission | None = None):
        self.path = commands_path(auth_socket)
        self.answer = answer
        # the daemon's, shared with its credential socket
        self.admission = admission or admission_mod.Admission.for_daemon(
            admission_mod.LimitsConfig(), log)
        # JSON spells a request out at about twice its protobuf size
        self.limit = 2 * max_request_bytes + 4096
        # one user's requests being read, together: two of the largest
        self.bytes_per_user = 2 * self.limit
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        p = Path(self.path)
        if p.is_socket():
            if credential._answers(self.path):
                raise OSError(f"{self.path}: another daemon already serves commands there")
            p.unlink()           # left by an earlier run of this daemon
        # limit: what the reader buffers before it stops reading the socket
        # (twice it); the request is taken from it in READ_CHUNK_BYTES pieces
        self._server = await asyncio.start_unix_server(self._serve, path=self.path,
                                                        limit=READ_CHUNK_BYTES,
                                                        backlog=credential.BACKLOG)
        os.chmod(self.path, 0o666)    # every user: the kernel says who each one is
        log.info("serving commands on %s", self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        caller = credential.admitted(writer, self.admission, "command socket")
        if caller is None:
            return
        pid, uid, gid = caller
        try:
            answer = await self._answer(reader, pid, auth.Identity(uid=uid, gid=gid))
            if answer:
                writer.write(answer)
                await asyncio.wait_for(writer.drain(), credential.WRITE_TIMEOUT_S)
        except (OSError, ConnectionError, asyncio.TimeoutError) as e:
            log.debug("command socket: uid %d: %s", uid, e or type(e).__name__)
        finally:
            writer.close()
            self.admission.disconnect(uid)

    async def _answer(self, reader: asyncio.StreamReader, pid: int, who: auth.Identity) -> bytes:
        """The answer line; b"" for a connection that said nothing in time (closed unanswered)."""
        refusals = self.admission.refusals
        try:
            first = await asyncio.wait_for(reader.read(READ_CHUNK_BYTES),
                                           self.admission.budget.first_byte_timeout_s)
        except asyncio.TimeoutError:
            refusals.note(who.uid, "silent connections at the command socket",
                          "nothing sent within [limits] first_byte_timeout_s")
            return b""
        if not first:
            return b""                   # closed before asking anything
        held = [0]       # bytes of this request counted against the caller's share
        try:
            try:
                line = await self._read_line(reader, first, who.uid, held)
                method, request = decode(line)
            except Busy as e:
                refusals.note(who.uid, "request bytes at the command socket", str(e))
                return _error(RESOURCE_EXHAUSTED, RATE_LIMITED)
            except (ValueError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
                refusals.note(who.uid, "undecodable requests at the command socket",
                              f"pid {pid}: {str(e)[:200] or type(e).__name__}")
                return _error("INVALID_ARGUMENT", DECODE_FAILURE)
            del line
            why = self.admission.begin(who.uid)
            if why is not None:
                refusals.note(who.uid, "calls at the command socket", why)
                return _error(RESOURCE_EXHAUSTED, RATE_LIMITED)
            try:
                return await self._reply(method, request, pid, who)
            finally:
                self.admission.end(who.uid)
        finally:
            self.admission.release_bytes(who.uid, held[0])

    async def _read_line(self, reader: asyncio.StreamReader, first: bytes, uid: int,
                         held: list[int]) -> bytes:
        """The request line begun with ``first`` (the first piece read), whole within
        READ_TIMEOUT_S.

        Read in pieces, each counted against the caller's share of request
        bytes (``held[0]`` says how many, for the caller to give back once
        the request is answered): one user's partly sent requests hold at
        most ``bytes_per_user`` of the daemon's memory, not 128 lines of
        ``self.limit`` each. Busy when over it; ValueError past ``self.limit``."""
        parts: list[bytes] = []
        size = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READ_TIMEOUT_S
        chunk = first                        # read already, not empty
        while True:
            end = chunk.find(b"\n")
            if end >= 0:
                chunk = chunk[:end + 1]      # one request per connection: the rest is not read
            size += len(chunk)
            if size > self.limit:
                raise ValueError(f"request longer than {self.limit} bytes")
            why = self.admission.hold_bytes(uid, len(chunk), self.bytes_per_user)
            if why is not None:
                raise Busy(why)
            held[0] += len(chunk)
            parts.append(chunk)
            if end >= 0:
                return b"".join(parts)
            chunk = await asyncio.wait_for(reader.read(READ_CHUNK_BYTES),
                                           max(0.0, deadline - loop.time()))
            if not chunk:
                raise asyncio.IncompleteReadError(b"".join(parts), None)

    async def _reply(self, method: str, request: Message, pid: int, who: auth.Identity) -> bytes:
        try:
            reply = await self.answer(method, request, who)
        except Refusal as e:
            return _error(e.code, e.message)
        except (OSError, ConnectionError, grpc.RpcError) as e:
            log.warning("command socket: %s for pid %d failed: %s", method, pid, e)
            return _error(UNAVAILABLE, "Unable to contact slurm controller (connect failure)")
        except Exception:   # noqa: BLE001 - a bug: logged, answered, the daemon lives on
            log.exception("command socket: %s failed", method)
            return _error("INTERNAL", "Unexpected error in lingjund (see its log)")
        size = len(reply) if isinstance(reply, bytes) else reply.ByteSize()
        if method in READS and size > LARGE_REPLY_BYTES:
            return _line({"use_grpc": {"reply_bytes": size}})
        if isinstance(reply, bytes):      # GetJobs' reply kept encoded for gRPC
            reply = METHODS[method][1].FromString(reply)
        return _line({"reply": plain(reply)})

    async def close(self) -> None:
        await credential.close_unix_server(self._server, self.path)


__all__ = ["Answer", "CommandSocketServer", "ControllerChannel", "Refusal", "decode", "plain", "relay_answer"]

"""How a command finds and talks to lingjund.

The controller's address comes from, in order: ``LINGJUN_CONTROLLER``, the
config file (``LINGJUN_CONF`` or /etc/lingjun/lingjun.toml, when it exists),
and the local cluster that ``lingjun up`` started (``$LINGJUN_HOME/local.json``, default ``~/.lingjun``).

every call carries a token that says who the caller is, fetched
from the credential socket (``LINGJUN_AUTH_SOCKET``, else ``[auth] socket``
of the config file, else the local cluster's, else /run/lingjun/auth.sock);
with ``[auth] tls_ca`` (or the local cluster's) the channel speaks TLS.

``ControllerUnreachable`` is what every command turns into Slurm's own words
("Unable to contact slurm controller (connect failure)") and a non-zero exit.

Every error the controller answers names its failure as Slurm does, in a
``google.rpc.ErrorInfo`` (domain "lingjun") in the status details:
``error_reason(err)`` is that name ("ESLURM_INVALID_JOB_ID",
"ESLURM_ACCESS_DENIED"...), and ``Api.call`` sets it on the errors it
raises as ``err.reason``, so a program need not parse the message.
"""
from __future__ import annotations

import collections
import sys
from pathlib import Path

import grpc

from lingjun import auth, credential, messages
from lingjun.endpoints import (RPC_TIMEOUT_S, ControllerUnreachable, auth_socket,
                               controller_address, lingjun_home, local_pointer, tls_ca)
from lingjun.v1 import api_pb2, api_pb2_grpc


ERROR_DOMAIN = "lingjun"


def error_info(err: grpc.RpcError):
    """The ``google.rpc.ErrorInfo`` the controller put in ``err``'s status, or None."""
    # imported here: commands that never meet an error do not pay for them
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status
    try:
        status = rpc_status.from_call(err)
    except ValueError:           # details that contradict the call's code or message
        return None
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            if info.domain == ERROR_DOMAIN:
                return info
    return None


def error_reason(err: grpc.RpcError) -> str:
    """Slurm's name for the failure ("ESLURM_INVALID_JOB_ID"); "" when it says none."""
    info = error_info(err)
    return info.reason if info is not None else ""


class _Details(collections.namedtuple("_Details", ("method", "timeout", "metadata", "credentials",
                                                   "wait_for_ready", "compression")),
               grpc.ClientCallDetails):
    pass


class TokenInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                       grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds the caller's token to every call. Without one the call still goes
    out, and the controller answers "Protocol authentication error"; why there
    is no token is said once on stderr, as Slurm prints munge's complaint."""

    def __init__(self, socket_path: str):
        self.cache = credential.TokenCache(socket_path)
        self._warned = False

    def _details(self, d):
        md = list(d.metadata or ())
        try:
            md.append((auth.TOKEN_METADATA, self.cache.get()))
        except credential.CredentialUnavailable as e:
            if not self._warned:
                print(f"{Path(sys.argv[0]).name}: error: {e}", file=sys.stderr)
                self._warned = True
        return _Details(d.method, d.timeout, md, d.credentials, getattr(d, "wait_for_ready", None),
                        getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)


def channel(address: str | None = None, socket_path: str | None = None,
            ca_file: str | None = None) -> grpc.Channel:
    """A channel to the controller whose calls carry the caller's token."""
    address = address or controller_address()
    options = [("grpc.max_receive_message_length", 64 * 1024 * 1024), ("grpc.enable_retries", 0)]
    ca_file = tls_ca() if ca_file is None else ca_file
    if ca_file:
        try:
            ca = Path(ca_file).read_bytes()
        except OSError as e:
            raise ControllerUnreachable(f"cannot read the TLS CA {ca_file}: {e.strerror}") from None
        ch = grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=ca), options=options)
    else:
        ch = grpc.insecure_channel(address, options=options)
    return grpc.intercept_channel(ch, TokenInterceptor(socket_path or auth_socket()))


class Api:
    """A thin wrapper over the SlurmApi stub that maps transport failures."""

    def __init__(self, address: str | None = None, socket_path: str | None = None,
                 ca_file: str | None = None):
        self.address = address or controller_address()
        self._channel = channel(self.address, socket_path, ca_file)
        self.stub = api_pb2_grpc.SlurmApiStub(self._channel)

    def call(self, method: str, request, timeout: float = RPC_TIMEOUT_S, wait_ready: float = 0.0):
        """Call ``method``; UNAVAILABLE becomes ControllerUnreachable.

        Other gRPC errors propagate (grpc.RpcError with Slurm's message in
        ``details()`` and Slurm's error name in ``reason``) for the command to print.
        """
        fn = getattr(self.stub, method)
        request = _protobuf(request)
        try:
            if wait_ready:
                return fn(request, timeout=timeout, wait_for_ready=True)
            return fn(request, timeout=timeout)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise ControllerUnreachable(e.details() or str(e.code())) from None
            e.reason = error_reason(e)
            raise

    def stream(self, method: str, request, timeout: float | None = None):
        return getattr(self.stub, method)(_protobuf(request), timeout=timeout)

    def close(self) -> None:
        self._channel.close()


def _protobuf(request):
    """A request built as the commands build them (lingjun.messages) as protobuf's message."""
    if isinstance(request, messages.Message):
        return messages.to_protobuf(request)
    return request


__all__ = ["Api", "ControllerUnreachable", "RPC_TIMEOUT_S", "api_pb2", "auth_socket", "controller_address",
           "error_info", "error_reason", "lingjun_home", "local_pointer", "tls_ca"]

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
import functools
import json
import os
import sys
from pathlib import Path

import grpc

from lingjun import auth, credential

from lingjun.v1 import api_pb2, api_pb2_grpc

def lingjun_home() -> Path:
    """Where ``lingjun up`` leaves the pointer to the running local cluster."""
    return Path(os.environ.get("LINGJUN_HOME") or Path(os.path.expanduser("~")) / ".lingjun")


def local_pointer() -> Path:
    return lingjun_home() / "local.json"
RPC_TIMEOUT_S = 30.0


class ControllerUnreachable(RuntimeError):
    pass


def controller_address() -> str:
    addr = os.environ.get("LINGJUN_CONTROLLER")
    if addr:
        return addr
    conf = os.environ.get("LINGJUN_CONF")
    if conf or Path("/etc/lingjun/lingjun.toml").exists():
        from lingjun import config
        try:
            return _config(conf).controller.connect_address
        except config.ConfigError as e:
            raise ControllerUnreachable(str(e)) from None
    try:
        return json.loads(local_pointer().read_text())["address"]
    except (OSError, ValueError, KeyError):
        pass
    from lingjun.config import DEFAULT_PORT
    return f"127.0.0.1:{DEFAULT_PORT}"


def _config(path: str | None):
    """The config file, parsed once per process while it is unchanged: a
    command needs three of its settings, and parsing it expands every node
    (10,000 nodes: 40 ms each time)."""
    from lingjun import config
    try:
        st = os.stat(path or config.config_path())
    except OSError:
        return config.load(path)        # its own words for a file it cannot read
    return _parsed(path, st.st_mtime_ns, st.st_size, st.st_ino)


@functools.lru_cache(maxsize=4)
def _parsed(path: str | None, mtime_ns: int, size: int, inode: int):
    from lingjun import config
    return config.load(path)


def _client_setting(env: str, key: str, local_key: str, default: str) -> str:
    """One [auth] setting for a command: the environment, the config file, the
    local cluster's pointer, the default: the order controller_address uses."""
    value = os.environ.get(env)
    if value is not None:
        return value
    conf = os.environ.get("LINGJUN_CONF")
    if conf or Path("/etc/lingjun/lingjun.toml").exists():
        from lingjun import config
        try:
            return getattr(_config(conf).auth, key)
        except config.ConfigError:
            return default
    try:
        return str(json.loads(local_pointer().read_text()).get(local_key, default))
    except (OSError, ValueError):
        return default


def auth_socket() -> str:
    from lingjun.config import AuthConfig
    return _client_setting("LINGJUN_AUTH_SOCKET", "socket", "auth_socket", AuthConfig.socket)


def tls_ca() -> str:
    """PEM file of the CA that signed the controller's certificate ("" = plaintext)."""
    return _client_setting("LINGJUN_TLS_CA", "tls_ca", "tls_ca", "")


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
        return getattr(self.stub, method)(request, timeout=timeout)

    def close(self) -> None:
        self._channel.close()


__all__ = ["Api", "ControllerUnreachable", "controller_address", "error_info", "error_reason", "api_pb2"]

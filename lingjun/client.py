"""How a command finds and talks to lingjund.

The controller's address comes from, in order: ``LINGJUN_CONTROLLER``, the
config file (``LINGJUN_CONF`` or /etc/lingjun/lingjun.toml, when it exists),
and the local cluster that ``lingjun up`` started (``$LINGJUN_HOME/local.json``, default ``~/.lingjun``).

``ControllerUnreachable`` is what every command turns into Slurm's own words
("Unable to contact slurm controller (connect failure)") and a non-zero exit.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import grpc

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
            return config.load(conf).controller.connect_address
        except config.ConfigError as e:
            raise ControllerUnreachable(str(e)) from None
    try:
        return json.loads(local_pointer().read_text())["address"]
    except (OSError, ValueError, KeyError):
        pass
    from lingjun.config import DEFAULT_PORT
    return f"127.0.0.1:{DEFAULT_PORT}"


def channel(address: str | None = None) -> grpc.Channel:
    return grpc.insecure_channel(
        address or controller_address(),
        options=[("grpc.max_receive_message_length", 64 * 1024 * 1024),
                 ("grpc.enable_retries", 0)])


class Api:
    """A thin wrapper over the SlurmApi stub that maps transport failures."""

    def __init__(self, address: str | None = None):
        self.address = address or controller_address()
        self._channel = channel(self.address)
        self.stub = api_pb2_grpc.SlurmApiStub(self._channel)

    def call(self, method: str, request, timeout: float = RPC_TIMEOUT_S, wait_ready: float = 0.0):
        """Call ``method``; UNAVAILABLE becomes ControllerUnreachable.

        Other gRPC errors propagate (grpc.RpcError with Slurm's message in
        ``details()``) for the command to print.
        """
        fn = getattr(self.stub, method)
        try:
            if wait_ready:
                return fn(request, timeout=timeout, wait_for_ready=True)
            return fn(request, timeout=timeout)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise ControllerUnreachable(e.details() or str(e.code())) from None
            raise

    def stream(self, method: str, request, timeout: float | None = None):
        return getattr(self.stub, method)(request, timeout=timeout)

    def close(self) -> None:
        self._channel.close()


__all__ = ["Api", "ControllerUnreachable", "controller_address", "api_pb2"]

"""The controller's answers on the local command socket: its own SlurmApi servicer.

This is a door, not a second API (DESIGN.md: the transport layer's "local
command socket"): the request a command sent over the unix socket
(``lingjun/command_server.py``) gets the caller's identity written into its
identity fields, as ``authn`` does for a gRPC call, and goes through the same
servicer method (``api.SlurmApiServicer``: validation, one service call,
error mapping) as a gRPC call would. The caller is the kernel's word
(SO_PEERCRED) instead of a token's.
"""
from __future__ import annotations

import grpc
from google.protobuf.message import Message

from lingjun import auth
from lingjun.command_server import Answer, Refusal
from lingjund.transport import authn


class _Context:
    """What a SlurmApi servicer method asks of its gRPC context, for a local caller."""

    def __init__(self, pid: int):
        self.pid = pid

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata=()):
        # The trailing metadata holds the status details (google.rpc.ErrorInfo)
        # for gRPC callers; a command reads Slurm's words and the code only.
        raise Refusal(code.name, details)

    def peer(self) -> str:
        return f"unix:pid={self.pid}"

    def invocation_metadata(self):
        return ()


def servicer_answer(servicer) -> Answer:
    """Answers from the controller's own SlurmApi servicer (the gRPC path's code)."""

    async def answer(method: str, request: Message, who: auth.Identity):
        authn.overwrite_identity(request, who)
        token = authn.CALLER.set(who)
        try:
            return await getattr(servicer, method)(request, _Context(0))
        finally:
            authn.CALLER.reset(token)
    return answer


__all__ = ["servicer_answer"]

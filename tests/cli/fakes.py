"""Stand-ins for the controller's side of a call, for tests of the commands."""
from __future__ import annotations

import grpc


class RpcFailure(grpc.RpcError):
    """A controller error as the commands receive it: a status and Slurm's words."""

    def __init__(self, code, text):
        self._code, self._text = code, text

    def code(self):
        return self._code

    def details(self):
        return self._text

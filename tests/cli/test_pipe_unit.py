"""A command whose stdout reader has gone ends with 128+SIGPIPE and prints nothing."""
from __future__ import annotations

import io

from cli.common import run


class ClosedPipe(io.StringIO):
    def write(self, s):
        raise BrokenPipeError(32, "Broken pipe")


def test_a_broken_pipe_ends_the_command_quietly_with_141():
    err = io.StringIO()

    def listing(argv, api, out, err_):
        for i in range(10):
            out.write(f"line {i}\n")
        return 0

    assert run(listing, [], None, ClosedPipe(), err) == 141
    assert err.getvalue() == ""

"""The agent's MPS control daemons: one per GPU, from its first MPS job to its last.

The control program is a stand-in that records each call (arguments, the
CUDA_* environment, what it read on stdin); everything else is real: files,
processes, a fresh ``MpsDaemons`` standing for a restarted agent.
"""
from __future__ import annotations

import json

import pytest

from lingjun_agent.launcher.mps import MpsDaemons, MpsError

STUB = """#!/bin/sh
stdin=""
[ "$1" = "-d" ] || stdin=$(cat)
printf '{"argv": "%s", "gpu": "%s", "pipe": "%s", "stdin": "%s"}\\n' \\
    "$*" "$CUDA_VISIBLE_DEVICES" "$CUDA_MPS_PIPE_DIRECTORY" "$stdin" >> "$(dirname "$0")/calls"
exit ${STUB_RC:-0}
"""


@pytest.fixture
def control(tmp_path):
    stub = tmp_path / "mps-control"
    stub.write_text(STUB)
    stub.chmod(0o755)
    return stub


def calls(control) -> list[dict]:
    f = control.parent / "calls"
    return [json.loads(line) for line in f.read_text().splitlines()] if f.exists() else []


def test_one_daemon_per_gpu_from_its_first_mps_job_to_its_last(tmp_path, control):
    d = MpsDaemons(str(control), tmp_path / "state" / "mps")
    d.acquire(7, 0)
    d.acquire(8, 0)            # same GPU: the daemon runs already
    d.acquire(8, 0)            # a launch sent again changes nothing
    d.acquire(9, 1)
    assert [(c["argv"], c["gpu"]) for c in calls(control)] == [("-d", "0"), ("-d", "1")]
    assert calls(control)[0]["pipe"] == str(tmp_path / "state" / "mps" / "gpu0" / "pipe")
    assert d.job_env(0, 25) == {
        "CUDA_VISIBLE_DEVICES": "0", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
        "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "state" / "mps" / "gpu0" / "pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "state" / "mps" / "gpu0" / "log")}

    d.release(7)               # job 8 still uses GPU 0
    assert len(calls(control)) == 2
    assert d.held_jobs() == {8, 9}
    restarted = MpsDaemons(str(control), tmp_path / "state" / "mps")   # the agent restarted
    restarted.release(8)
    restarted.release(9)
    restarted.release(9)       # an end reported twice stops nothing more
    assert [(c["argv"], c["gpu"], c["stdin"]) for c in calls(control)[2:]] == [
        ("", "0", "quit"), ("", "1", "quit")]


def test_a_daemon_that_cannot_start_fails_the_launch_and_holds_nothing(tmp_path, control,
                                                                        monkeypatch):
    d = MpsDaemons(str(control), tmp_path / "mps")
    monkeypatch.setenv("STUB_RC", "3")
    with pytest.raises(MpsError, match="cannot start the MPS control daemon of GPU 0"):
        d.acquire(7, 0)
    assert d.holders(0) == set()
    monkeypatch.delenv("STUB_RC")
    d.acquire(8, 0)            # the next job tries again
    assert [c["argv"] for c in calls(control)] == ["-d", "-d"]
    with pytest.raises(MpsError, match="No such file"):
        MpsDaemons(str(tmp_path / "nowhere"), tmp_path / "mps2").acquire(1, 0)

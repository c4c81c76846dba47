"""srun tasks under the step supervisor: streamed output, exit codes, Slurm's errors."""
import asyncio
import os
import time
import uuid

import pytest

from lingjun_agent.launcher.procs import job_processes
from tests.agent.taskrun import TaskResult, run_task

PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture
def node():
    n = f"testnode-{uuid.uuid4().hex[:8]}"
    yield n
    for p in job_processes(n, 1):
        p.kill()


class Output:
    """What on_output received, with arrival times."""

    def __init__(self):
        self.chunks: list[tuple[int, bytes, float]] = []

    def __call__(self, stream: int, data: bytes) -> None:
        self.chunks.append((stream, data, time.monotonic()))

    def text(self, stream: int) -> str:
        return b"".join(d for s, d, _ in self.chunks if s == stream).decode()


def task(node, argv, out, *, env=None, cwd="/", uid=None, gid=None):
    return run_task(node=node, job_id=1, step_id=0, rank=0, argv=argv,
                    env={"PATH": PATH} if env is None else env, cwd=cwd,
                    uid=os.getuid() if uid is None else uid,
                    gid=os.getgid() if gid is None else gid, on_output=out)


def test_output_is_streamed_in_order_as_it_is_written(node):
    out = Output()
    script = "echo one; sleep 0.4; echo two >&2; sleep 0.4; echo three"

    async def main():
        t0 = time.monotonic()
        result = await task(node, ["bash", "-c", script], out)
        return t0, time.monotonic(), result

    t0, t_end, result = asyncio.run(main())
    assert (result.exit_code, result.signal, result.error) == (0, 0, "")
    assert out.text(1) == "one\nthree\n"
    assert out.text(2) == "two\n"
    order = [d for _, d, _ in out.chunks]
    assert order == [b"one\n", b"two\n", b"three\n"], f"got {order}"
    first_at = out.chunks[0][2]
    # t0 is before the supervisor's own start-up (a Python process, ~0.1-0.4 s on
    # a busy host); what shows streaming is that 'one' came well before the end.
    assert first_at - t0 < 1.5, "want 'one' delivered soon after the start"
    assert t_end - first_at >= 0.6, "the first chunk came only at the end"


def test_large_output_arrives_whole(node):
    out = Output()
    result = asyncio.run(task(node, ["head", "-c", "3000000", "/dev/zero"], out))
    assert result.exit_code == 0
    assert len(out.text(1)) == 3_000_000


@pytest.mark.parametrize("script,want", [
    ("exit 3", (3, 0)),
    ("kill -TERM $$", (0, 15)),
    ("true", (0, 0)),
], ids=["exit code 3 is kept", "a task killed by SIGTERM is 0:15", "success is 0:0"])
def test_exit_codes(node, script, want):
    result = asyncio.run(task(node, ["bash", "-c", script], Output()))
    assert (result.exit_code, result.signal) == want


def test_command_not_found_is_slurms_execve_error(node):
    out = Output()
    result = asyncio.run(task(node, ["no-such-command-xyz", "arg"], out))
    msg = "execve(): no-such-command-xyz: No such file or directory"
    assert result == TaskResult(exit_code=2, signal=0, error=msg)
    assert out.text(2) == f"slurmstepd: error: {msg}\n"


def test_not_executable_is_permission_denied(node, tmp_path):
    f = tmp_path / "notexec"
    f.write_text("#!/bin/sh\necho hi\n")
    f.chmod(0o644)
    result = asyncio.run(task(node, [str(f)], Output()))
    assert (result.exit_code, result.error) == (
        13, f"execve(): {f}: Permission denied")


def test_environment_marker_and_cwd(node, tmp_path):
    out = Output()
    result = asyncio.run(task(node, ["sh", "-c", 'echo "$FOO $LINGJUN_JOB_MARK"; pwd'],
                              out, env={"PATH": PATH, "FOO": "bar"}, cwd=str(tmp_path)))
    assert result.exit_code == 0
    assert out.text(1) == f"bar {node}:1\n{tmp_path}\n"


def test_missing_cwd_runs_in_tmp_with_slurms_error(node):
    out = Output()
    asyncio.run(task(node, ["pwd"], out, cwd="/nonexistent/dir"))
    assert out.text(2) == ("slurmstepd: error: couldn't chdir to `/nonexistent/dir': "
                           "No such file or directory: going to /tmp instead\n")
    assert out.text(1) == "/tmp\n"


def test_background_children_end_with_the_task(node):
    out = Output()
    t0 = time.monotonic()
    result = asyncio.run(task(node, ["bash", "-c", "sleep 30 & echo started"], out))
    assert result.exit_code == 0 and out.text(1) == "started\n"
    assert time.monotonic() - t0 < 2.0
    assert job_processes(node, 1) == [], "want the background sleep killed"


def test_cancellation_kills_the_process_group(node):
    out = Output()

    async def main():
        t = asyncio.create_task(
            task(node, ["bash", "-c", "sleep 30 & sleep 30 & echo up; wait"], out))
        while out.text(1) != "up\n":
            await asyncio.sleep(0.01)
        assert len(job_processes(node, 1)) == 3
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        await asyncio.sleep(0.2)  # let the background reaper run

    asyncio.run(main())
    deadline = time.monotonic() + 2
    while job_processes(node, 1) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert job_processes(node, 1) == []


def test_the_loop_keeps_running_while_a_task_runs(node):
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        t = asyncio.create_task(ticker())
        await task(node, ["sleep", "0.3"], Output())
        t.cancel()
        return ticks

    assert asyncio.run(main()) >= 8


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users")
def test_runs_as_the_user(node):
    out = Output()
    result = asyncio.run(task(node, ["sh", "-c", "id -u; id -g"], out,
                              uid=65534, gid=65534))
    assert result.exit_code == 0
    assert out.text(1) == "65534\n65534\n"

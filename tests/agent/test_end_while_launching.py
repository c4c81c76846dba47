"""A batch job told to end, or signalled, while its script is still being
started gets it as soon as it has started: the kill or the signal is not lost
to the moment when there was no process to find (a scancel right after the
job went RUNNING)."""
from __future__ import annotations

import asyncio
import os
import time

import pytest

from lingjun import auth
from lingjun.v1 import agent_pb2
from lingjun_agent import runner as runner_mod
from lingjun_agent.runner import Agent


@pytest.fixture
def slow_start(monkeypatch):
    """The start of a loaded node: a second in its thread before the script runs."""
    real = runner_mod.batch.start_batch

    def slow(*args, **kw):
        time.sleep(1.0)
        return real(*args, **kw)
    monkeypatch.setattr(runner_mod.batch, "start_batch", slow)


def test_a_job_terminated_while_its_script_starts_is_ended_once_started(tmp_path, slow_start):
    out = tmp_path / "job.out"

    async def scenario() -> list:
        r = Agent("n1", "127.0.0.1:1", str(tmp_path / "agent"), cpus=1, memory_mb=100,
                   key=auth.ClusterKey.from_bytes(b"k" * 32))
        r.outbox = asyncio.Queue()
        lb = agent_pb2.LaunchBatch(job_id=7, script="#!/bin/sh\necho started\nexec sleep 300\n",
                                   work_dir=str(tmp_path), stdout_path=str(out),
                                   uid=os.getuid(), gid=os.getgid(), user="root")
        launch = asyncio.create_task(r._launch_batch(lb))
        await asyncio.sleep(0.3)
        assert 7 in r.launching
        r._terminate(7, 0.5, report=True)          # scancel, while the start is in its thread
        await launch
        sent = []
        deadline = time.time() + 20
        # the script's end and the node's cleanup are reported in either order
        while time.time() < deadline and not (any(m.HasField("job_cleaned") for m in sent)
                                              and any(m.HasField("batch_finished") for m in sent)):
            try:
                sent.append(await asyncio.wait_for(r.outbox.get(), 0.5))
            except asyncio.TimeoutError:
                pass
        r.forks.close()
        return sent

    sent = asyncio.run(scenario())
    kinds = [m.WhichOneof("msg") for m in sent]
    assert "batch_started" in kinds and "job_cleaned" in kinds, kinds
    finished = [m.batch_finished for m in sent if m.HasField("batch_finished")]
    assert finished and finished[0].signal in (15, 9), (kinds, finished)


def test_a_signal_sent_while_its_script_starts_is_delivered_once_started(tmp_path, slow_start):
    """scancel -s USR1 (or a --signal warning) right after the job went RUNNING."""
    out = tmp_path / "job.out"

    async def scenario() -> list:
        r = Agent("n1", "127.0.0.1:1", str(tmp_path / "agent"), cpus=1, memory_mb=100,
                   key=auth.ClusterKey.from_bytes(b"k" * 32))
        r.outbox = asyncio.Queue()
        lb = agent_pb2.LaunchBatch(
            job_id=8, script="#!/bin/sh\ntrap 'echo got-usr1; exit 0' USR1\n"
                             "while :; do sleep 0.1; done\n",
            work_dir=str(tmp_path), stdout_path=str(out), uid=os.getuid(), gid=os.getgid(),
            user="root")
        launch = asyncio.create_task(r._launch_batch(lb))
        await asyncio.sleep(0.3)
        assert 8 in r.launching
        r._signal(agent_pb2.SignalJob(job_id=8, signal=10, step_id=-1))
        await launch
        sent = []
        deadline = time.time() + 20
        while time.time() < deadline and not any(m.HasField("batch_finished") for m in sent):
            try:
                sent.append(await asyncio.wait_for(r.outbox.get(), 0.5))
            except asyncio.TimeoutError:
                pass
        if not any(m.HasField("batch_finished") for m in sent):
            r._terminate(8, 0.1, report=False)
            await asyncio.sleep(0.5)
        r.forks.close()
        return sent

    sent = asyncio.run(scenario())
    finished = [m.batch_finished for m in sent if m.HasField("batch_finished")]
    assert finished, [m.WhichOneof("msg") for m in sent]
    # the trap ran (exit 0), or USR1 came before the shell had set it (killed by 10)
    f = finished[0]
    assert (f.exit_code == 0 and "got-usr1" in out.read_text()) or f.signal == 10, f

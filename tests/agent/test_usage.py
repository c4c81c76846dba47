"""MaxRSS and CPU time as the launchers measure them, with real processes.

The peak is the sampled sum over the step's process tree, so a job that
holds ~200 MiB reads ~200 MiB, and a job that does nothing reads a few MiB
at most -- not the forking supervisor's own size, which wait4's ru_maxrss
reported before.
"""
import asyncio
import os
import sys
import uuid

import pytest

from lingjun_agent.launcher import usage
from lingjun_agent.launcher.batch import BatchSpec, start_batch
from lingjun_agent.launcher.procs import job_processes
from tests.agent.taskrun import run_task

PATH = "/usr/local/bin:/usr/bin:/bin"
MIB = 1024
HOLD_200M = "b = bytearray(200 * 2**20); import time; time.sleep(1.5)"
# a child holds the memory while the parent waits: only the tree sum sees it
CHILD_HOLDS_200M = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
                    f"{HOLD_200M!r}])")
BURN_CPU = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"


@pytest.fixture
def node():
    n = f"testnode-{uuid.uuid4().hex[:8]}"
    yield n
    for p in job_processes(n, 1):
        p.kill()


def batch_result(node, tmp_path, script):
    spec = BatchSpec(job_id=1, node=node, script=script, argv=(), env={"PATH": PATH},
                     work_dir=str(tmp_path), stdout="slurm-1.out", stderr="", stdin="",
                     uid=os.getuid(), gid=os.getgid())
    return asyncio.run(start_batch(tmp_path / "state", spec).wait())


def task_result(node, argv):
    return asyncio.run(run_task(node=node, job_id=1, step_id=0, rank=0, argv=argv,
                                env={"PATH": PATH}, cwd="/", uid=os.getuid(),
                                gid=os.getgid(), on_output=lambda s, d: None))


@pytest.mark.parametrize("body,low_mib,high_mib", [
    (f"{sys.executable} -c '{HOLD_200M}'", 150, 400),
    (f"{sys.executable} -c \"{CHILD_HOLDS_200M}\"", 150, 450),
    ("true", 0, 8),
], ids=["a batch script holding 200 MiB peaks near 200 MiB",
        "memory held by a grandchild counts: the whole tree is summed",
        "a script that does nothing peaks at a few MiB, not the supervisor's size"])
def test_batch_max_rss_is_the_tree_peak(node, tmp_path, body, low_mib, high_mib):
    res = batch_result(node, tmp_path, f"#!/bin/sh\n{body}\n")
    assert (res.exit_code, res.error) == (0, ""), (tmp_path / "slurm-1.out").read_text()
    got = res.max_rss_kb / MIB
    assert low_mib <= got <= high_mib, f"want MaxRSS in [{low_mib}, {high_mib}] MiB, got {got:.1f}"
    assert res.ave_rss_kb <= res.max_rss_kb


@pytest.mark.parametrize("argv,low_mib,high_mib", [
    ([sys.executable, "-c", HOLD_200M], 150, 400),
    (["true"], 0, 8),
], ids=["an srun task holding 200 MiB peaks near 200 MiB",
        "a task that does nothing peaks at a few MiB"])
def test_task_max_rss_is_the_tree_peak(node, argv, low_mib, high_mib):
    res = task_result(node, argv)
    assert (res.exit_code, res.error) == (0, "")
    got = res.max_rss_kb / MIB
    assert low_mib <= got <= high_mib, f"want MaxRSS in [{low_mib}, {high_mib}] MiB, got {got:.1f}"


def test_cpu_time_of_a_busy_script_is_reported(node, tmp_path):
    (tmp_path / "burn.py").write_text(BURN_CPU)
    res = batch_result(node, tmp_path, f"#!/bin/sh\n{sys.executable} {tmp_path}/burn.py\n")
    assert res.user_cpu_ms + res.system_cpu_ms >= 250, res


def test_cpu_time_of_a_busy_task_is_reported(node):
    res = task_result(node, [sys.executable, "-c", BURN_CPU])
    assert res.user_cpu_ms + res.system_cpu_ms >= 250, res


def test_sampler_keeps_peak_and_mean_and_skips_empty_samples():
    s = usage.RssSampler()
    for kb in (1200, 0, 5200, 800):
        s.add(kb)
    assert (s.peak_kb, s.average_kb) == (5200, 2400)


def test_tree_rss_of_a_gone_process_is_zero():
    assert usage.tree_rss_kb(2 ** 22 + 12345) == 0

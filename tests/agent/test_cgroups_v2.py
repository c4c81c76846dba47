"""The cgroup v2 writer on a fake cgroupfs tree (the lowest layer: this
host's v2 mount has no controllers, so the real v2 path cannot run here).

The test lays out what the kernel shows a delegated unit (cgroup.controllers,
cgroup.procs, cgroup.subtree_control) and checks what the agent writes: its
own processes moved to a leaf, the controllers handed down level by level,
the job's limits and the step's own below it.
"""
from __future__ import annotations

import logging
import os

import pytest

from lingjun_agent.launcher import cgroups

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="job cgroups are made by root only")

UNIT = "system.slice/lingjun-agent.service"


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "cgroup"
    unit = root / UNIT
    unit.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (root / "cgroup.procs").write_text("1\n")
    (unit / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (unit / "cgroup.subtree_control").write_text("")
    (unit / "cgroup.procs").write_text("4242\n")
    return root


def read(p) -> str:
    return p.read_text().strip()


def test_v2_is_chosen_where_the_agents_cgroup_has_controllers(tree):
    u, why = cgroups.probe_unified(tree, f"0::/{UNIT}\n")
    assert why == "" and u is not None
    assert u.mount == tree and u.delegated == tree / UNIT
    assert u.controllers == ("memory", "cpuset", "cpu", "pids"), "io is not ours to hand down"
    assert u.base == tree / UNIT / "lingjun"


def test_no_controllers_or_no_v2_means_v1_or_nothing(tmp_path, tree):
    (tree / UNIT / "cgroup.controllers").write_text("\n")       # this host's hybrid mount
    u, why = cgroups.probe_unified(tree, f"0::/{UNIT}\n")
    assert u is None and "no memory, cpuset or pids controller" in why
    hybrid = tmp_path / "hybrid"
    (hybrid / "unified").mkdir(parents=True)
    (hybrid / "unified" / "cgroup.controllers").write_text("")
    u, why = cgroups.probe_unified(hybrid, "0::/\n")
    assert u is None and str(hybrid / "unified") in why
    u, why = cgroups.probe_unified(tmp_path / "none", "0::/\n")
    assert u is None and why.startswith("no cgroup v2 hierarchy")


def test_a_job_and_its_steps_get_their_limits_in_v2(tree, caplog):
    u, _ = cgroups.probe_unified(tree, f"0::/{UNIT}\n")
    unit = tree / UNIT
    job = cgroups.create("node1", 7, limits=cgroups.Limits(
        memory_bytes=100 << 20, cpus=(0, 1, 3), deny_devices=("c 195:1",)), unified=u)
    assert job is not None and job.unified
    assert job.path == unit / "lingjun" / "node1" / "job_7"
    # the agent left its unit's cgroup for a leaf: v2 hands controllers down
    # only from a cgroup without processes
    assert read(unit / "agent" / "cgroup.procs") == "4242"
    for level in (unit, unit / "lingjun", unit / "lingjun" / "node1", job.path):
        assert read(level / "cgroup.subtree_control") == "+memory +cpuset +cpu +pids", level
    assert read(job.path / "memory.max") == str(100 << 20)
    assert read(job.path / "memory.swap.max") == "0"
    assert read(job.path / "cpuset.cpus") == "0-1,3"
    # a fake tree is no cgroup: the kernel will not attach the device program
    # there (test_devfilter.py attaches it to real ones), and the agent says so
    assert "cannot confine device files" in caplog.text, "not enforced: said, not silent"

    step = cgroups.create_step(job, "0", cgroups.Limits(memory_bytes=40 << 20, cpus=(0, 1, 3)))
    assert step.path == job.path / "step_0" and step.name == "7.0"
    assert read(step.path / "memory.max") == str(40 << 20), "the step's own --mem"
    assert read(step.path / "cpuset.cpus") == "0-1,3"
    batch = cgroups.create_step(job, "batch", cgroups.Limits(cpus=(0, 1, 3)))
    assert not (batch.path / "memory.max").exists(), "no --mem of its own: the job's holds it"


def test_v2_usage_and_oom_kills_are_read_from_the_steps_cgroup(tree):
    u, _ = cgroups.probe_unified(tree, f"0::/{UNIT}\n")
    job = cgroups.create("node1", 8, limits=cgroups.Limits(memory_bytes=64 << 20), unified=u)
    step = cgroups.create_step(job, "batch")
    (step.path / "memory.peak").write_text(str(50 << 20))
    (step.path / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\n"
                                        "system_usec 500000\n")
    (step.path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert cgroups.usage(step) == cgroups.Usage(max_rss_kb=50 << 10, user_cpu_ms=1000,
                                                system_cpu_ms=500)
    assert cgroups.oom_kills(step) == 1
    (job.path / "memory.events").write_text("oom_kill 0\n")
    assert cgroups.oom_kills(job) == 0


def test_a_v2_job_without_memory_controller_says_so(tree, caplog):
    (tree / UNIT / "cgroup.controllers").write_text("cpuset cpu pids\n")
    u, _ = cgroups.probe_unified(tree, f"0::/{UNIT}\n")
    cgroups._said.discard("memory limits")
    with caplog.at_level(logging.WARNING):
        job = cgroups.create("node1", 9, limits=cgroups.Limits(memory_bytes=64 << 20), unified=u)
    assert not (job.path / "memory.max").exists()
    assert "memory limits not enforced here" in caplog.text
    assert read(tree / UNIT / "cgroup.subtree_control") == "+cpuset +cpu +pids"

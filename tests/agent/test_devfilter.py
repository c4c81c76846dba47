"""GPU device files refused under cgroup v2 by the agent's BPF_CGROUP_DEVICE program.

Real kernel, real cgroups: each test makes a cgroup in this host's cgroup v2
mount (it has no controllers, and needs none: device access in v2 is the BPF
program's alone), attaches the program and opens device files from a process
moved into it. The GPUs are device nodes made with mknod under major 195 (as
/dev/nvidiaN): no driver answers there, so an access the program allows
fails with ENXIO from the kernel's lookup, and one it refuses fails first,
with EPERM. /dev/zero and /dev/null are real devices that open.
"""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from lingjun_agent.launcher import cgroups, devfilter

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="bpf(2) and cgroups need root")


def v2_mount() -> Path:
    with open("/proc/mounts") as f:
        for line in f:
            _, where, fstype, *_ = line.split()
            if fstype == "cgroup2":
                return Path(where)
    raise AssertionError("this host has no cgroup v2 mount")


@pytest.fixture
def cgroup():
    d = v2_mount() / f"lj-devfilter-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    made = [d]
    yield d, made
    for m in reversed(made):
        for _ in range(50):
            try:
                m.rmdir()
                break
            except OSError:
                import time
                time.sleep(0.05)


@pytest.fixture
def gpus(tmp_path):
    """/dev/nvidia0..3 stand-ins: character nodes 195:0..3."""
    for i in range(4):
        os.mknod(tmp_path / f"nvidia{i}", 0o666 | 0o020000, os.makedev(195, i))
    return tmp_path


OPENER = """
import errno, os, sys
cg = sys.argv[1]
with open(os.path.join(cg, "cgroup.procs"), "w") as f:
    f.write(str(os.getpid()))
for path in sys.argv[2:]:
    try:
        os.close(os.open(path, os.O_RDONLY))
        print(path, "open")
    except OSError as e:
        print(path, errno.errorcode[e.errno])
"""


def opened(cg: Path, *paths) -> dict[str, str]:
    """What a process in ``cg`` gets opening each path: open, EPERM, ENXIO..."""
    p = subprocess.run([sys.executable, "-c", OPENER, str(cg), *map(str, paths)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return dict(line.rsplit(" ", 1) for line in p.stdout.splitlines())


def test_a_job_cannot_open_the_gpus_it_was_not_given(cgroup, gpus):
    cg, _ = cgroup
    deny = cgroups.gpu_device_denials(gpus, [1, 2])        # the job has GPUs 1 and 2
    assert deny == ("c 195:0", "c 195:3")
    devfilter.attach(cg, list(deny))
    got = opened(cg, *(gpus / f"nvidia{i}" for i in range(4)), "/dev/null", "/dev/zero")
    assert got == {
        str(gpus / "nvidia0"): "EPERM", str(gpus / "nvidia3"): "EPERM",      # refused
        str(gpus / "nvidia1"): "ENXIO", str(gpus / "nvidia2"): "ENXIO",      # allowed, no driver
        "/dev/null": "open", "/dev/zero": "open"}


def test_a_step_below_the_job_is_held_too(cgroup, gpus):
    cg, made = cgroup
    devfilter.attach(cg, ["c 195:0"])
    step = cg / "step_0"
    step.mkdir()
    made.append(step)
    got = opened(step, gpus / "nvidia0", gpus / "nvidia1")
    assert got == {str(gpus / "nvidia0"): "EPERM", str(gpus / "nvidia1"): "ENXIO"}


def test_outside_the_cgroup_nothing_changes(cgroup, gpus):
    cg, made = cgroup
    devfilter.attach(cg, ["c 195:*", "c 1:5"])
    sibling = cg.parent / (cg.name + "-free")
    sibling.mkdir()
    made.insert(0, sibling)
    assert opened(sibling, gpus / "nvidia0", "/dev/zero") == {
        str(gpus / "nvidia0"): "ENXIO", "/dev/zero": "open"}
    assert opened(cg, gpus / "nvidia2", "/dev/zero", "/dev/null") == {
        str(gpus / "nvidia2"): "EPERM", "/dev/zero": "EPERM", "/dev/null": "open"}


def test_many_gpus_load(cgroup):
    """A 64-GPU node's worst case: 63 rules pass the verifier."""
    cg, _ = cgroup
    devfilter.attach(cg, [f"c 195:{i}" for i in range(63)])


def test_the_v2_writer_attaches_it_to_the_jobs_cgroup(cgroup, gpus, caplog):
    """cgroups.apply on a unified job cgroup: the GPU denial is the program."""
    cg, _ = cgroup
    job = cgroups.JobCgroup(cg, 9, (), True, (), mount=cg.parent, enabled=())
    cgroups.apply(job, cgroups.Limits(deny_devices=("c 195:3",)))
    assert "cannot confine" not in caplog.text
    assert opened(cg, gpus / "nvidia3", gpus / "nvidia0") == {
        str(gpus / "nvidia3"): "EPERM", str(gpus / "nvidia0"): "ENXIO"}


@pytest.mark.parametrize("rule,want", [
    ("c 195:2", (devfilter.DEV_CHAR, 195, 2)),
    ("b 8:*", (devfilter.DEV_BLOCK, 8, None)),
    ("c *:*", (devfilter.DEV_CHAR, None, None)),
    ("a", (0, None, None)),
])
def test_rules_in_v1s_words(rule, want):
    assert devfilter.parse_rule(rule) == want


@pytest.mark.parametrize("rule", ["", "x 1:2", "c 195", "c 19a:1", "c 1:2 rwm extra"])
def test_a_bad_rule_is_refused(rule):
    with pytest.raises(ValueError, match="device rule"):
        devfilter.parse_rule(rule)


def test_not_a_cgroup_is_refused_in_the_kernels_words(tmp_path):
    with pytest.raises(devfilter.DeviceFilterError) as e:
        devfilter.attach(tmp_path, ["c 195:0"])
    assert e.value.errno in (errno.EBADF, errno.EINVAL)
    assert "attaching the device program" in str(e.value)

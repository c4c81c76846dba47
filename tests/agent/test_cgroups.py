"""Per-job cgroups for real, under a parent cgroup this test owns and removes."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from lingjun_agent.launcher import cgroups

pytestmark = pytest.mark.skipif(not cgroups.available(), reason="needs root and the v1 freezer")


@pytest.fixture
def base():
    b = cgroups.FREEZER / f"lingjun-test-{uuid.uuid4().hex[:8]}"
    yield b
    # whatever a failed test left: empty it, then remove bottom-up
    for d in sorted(b.rglob("*"), key=lambda p: -len(p.parts)) if b.exists() else []:
        if d.is_dir():
            cg = cgroups.JobCgroup(d, 0)
            cgroups.kill(cg, unkillable_s=5)
            cgroups.remove(cg)
    if b.exists():
        os.rmdir(b)


def gone(pids, timeout=5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                   for p in pids):
            return True
        time.sleep(0.05)
    return False


ESCAPES = r"""
setsid sleep 1000 &
( ( env -i sleep 1001 & ) & )
echo $! > /dev/null
sleep 0.3
"""


def test_everything_a_process_born_inside_starts_is_found_and_killed(base):
    cg = cgroups.create("node1@t", 7, base)
    assert cg is not None and cg.path == base / "node1@t" / "job_7"
    assert cgroups.create("node1@t", 7, base) == cg, "create finds an existing one"
    with cgroups.inside(cg):
        p = subprocess.Popen(["bash", "-c", ESCAPES])
    assert os.getpid() not in cgroups.pids(cg), "the caller went back out"
    p.wait(10)                                      # the script exits 0, its children live
    left = cgroups.pids(cg)
    names = sorted(psutil.Process(x).name() for x in left)
    assert names == ["sleep", "sleep"], f"want the setsid and the double-forked sleep, got {names}"
    assert cgroups.jobs("node1@t", base) == [cg]
    assert cgroups.find("node1@t", 7, base) == cg and cgroups.find("node1@t", 8, base) is None
    t = time.monotonic()
    assert cgroups.kill(cg)
    assert gone(left) and cgroups.pids(cg) == []
    assert time.monotonic() - t < 2, "SIGKILL under freeze is quick"
    assert cgroups.remove(cg) and not cg.path.exists()
    cgroups.remove_node("node1@t", base)
    assert not (base / "node1@t").exists()


def test_terminate_gives_the_grace_then_kills(base):
    cg = cgroups.create("n", 1, base)
    trap = "trap 'echo term; sleep 0.2; exit 0' TERM; while true; do sleep 0.05; done"
    stubborn = "trap '' TERM; while true; do sleep 0.05; done"
    with cgroups.inside(cg):
        polite = subprocess.Popen(["bash", "-c", trap], stdout=subprocess.PIPE, text=True)
        deaf = subprocess.Popen(["bash", "-c", stubborn])
    time.sleep(0.2)
    t = time.monotonic()
    assert cgroups.terminate(cg, grace_s=1.0)
    took = time.monotonic() - t
    assert polite.wait(5) == 0 and "term" in polite.stdout.read()
    assert deaf.wait(5) == -9, "ignored SIGTERM: killed after the grace"
    assert 0.9 < took < 3, f"want about the 1 s grace, took {took:.2f} s"
    cgroups.remove(cg)


def test_join_moves_a_started_process_in(base):
    cg = cgroups.create("n", 2, base)
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        cgroups.join(cg, p.pid)
        assert cgroups.pids(cg) == [p.pid]
        assert cgroups.signal_frozen(cg, 15) == 1
        assert p.wait(5) == -15
    finally:
        p.kill()
    cgroups.remove(cg)


def test_unavailable_without_root_or_freezer(tmp_path):
    assert not cgroups.available(tmp_path / "x"), "no freezer hierarchy there"
    assert cgroups.create("n", 1, tmp_path / "x") is None


# -- limits: memory, CPUs, devices, usage --------------------------------------------
limited_hierarchies = pytest.mark.skipif(
    not all(cgroups.mounted(h) for h in ("memory", "cpuset", "devices", "cpuacct")),
    reason="needs the v1 memory, cpuset, devices and cpuacct hierarchies")


@pytest.fixture
def lbase(base):
    """``base``, and its twins in the other hierarchies, removed bottom-up after."""
    yield base
    rel = base.relative_to(cgroups.FREEZER)
    for h in cgroups.LIMITED:
        top = cgroups.ROOT / h / rel
        if not top.exists():
            continue
        for d in sorted(top.rglob("*"), key=lambda p: -len(p.parts)):
            if d.is_dir():
                os.rmdir(d)
        os.rmdir(top)


def run_inside(cg, script: str) -> subprocess.CompletedProcess:
    with cgroups.inside(cg):
        p = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    out, _ = p.communicate(timeout=60)
    return subprocess.CompletedProcess(p.args, p.returncode, out)


@limited_hierarchies
def test_a_job_over_its_memory_is_oom_killed_in_its_cgroup_and_counted(lbase):
    cg = cgroups.create("n", 3, lbase, cgroups.Limits(memory_bytes=64 << 20))
    mem = cg.controller("memory")
    assert mem == cgroups.ROOT / "memory" / lbase.relative_to(cgroups.FREEZER) / "n" / "job_3"
    assert (mem / "memory.limit_in_bytes").read_text().strip() == str(64 << 20)
    assert cgroups.oom_kills(cg) == 0
    r = run_inside(cg, "python3 -c 'b = bytearray(512 << 20); print(\"fit\")'; echo rc=$?")
    assert "rc=137" in r.stdout and "fit" not in r.stdout.split(), r.stdout
    assert cgroups.oom_kills(cg) == 1
    used = cgroups.usage(cg)
    assert 32 << 10 < used.max_rss_kb <= 64 << 10, used    # the peak, up to the limit
    assert os.getpid() not in cgroups.pids(cg)
    assert cgroups.remove(cg) and not mem.exists() and not cg.path.exists()


@limited_hierarchies
def test_a_job_runs_on_its_cpus_only(lbase):
    host = sorted(os.sched_getaffinity(0))
    mine = (host[-1],)
    cg = cgroups.create("n", 4, lbase, cgroups.Limits(cpus=mine, cpu_ids=(1,)))
    cpuset = cg.controller("cpuset")
    assert cgroups.parse_cpu_list((cpuset / "cpuset.cpus").read_text()) == mine
    assert (cpuset / "cpuset.mems").read_text().strip(), "mems copied from the parent"
    r = run_inside(cg, "python3 -c 'import os; print(sorted(os.sched_getaffinity(0)))'")
    assert r.stdout.strip() == str(list(mine))
    assert sorted(os.sched_getaffinity(0)) == host, "the caller got its own CPUs back"
    assert cgroups.find("n", 4, lbase).cpus == mine, "found again with its CPUs"
    # CPU time comes from the cgroup's accounting (cpuacct): a background child
    # that burns 0.3 s of its own CPU time is counted, however loaded the host
    burn = "import time\nwhile time.process_time() < 0.3: pass"
    r = run_inside(cg, f"python3 -c '{burn}' & wait")
    used = cgroups.usage(cg)
    assert used.user_cpu_ms + used.system_cpu_ms >= 300, used
    assert cgroups.remove(cg)


@limited_hierarchies
def test_a_job_may_not_open_the_gpu_device_files_of_others(lbase, tmp_path):
    for i in range(3):
        os.mknod(tmp_path / f"nvidia{i}", 0o666 | 0o020000, os.makedev(195, i))
    os.mknod(tmp_path / "nvidiactl", 0o666 | 0o020000, os.makedev(195, 255))
    (tmp_path / "nvidia-notes").write_text("not a device")
    deny = cgroups.gpu_device_denials(tmp_path, [1])
    assert deny == ("c 195:0", "c 195:2")
    cg = cgroups.create("n", 5, lbase, cgroups.Limits(deny_devices=deny))
    probe = ("for f in nvidia0 nvidia1 nvidia2 nvidiactl; do "
             f"cat {tmp_path}/$f 2>&1 | sed 's/.*: //'; done")
    r = run_inside(cg, probe)
    assert r.stdout.splitlines() == ["Operation not permitted", "No such device or address",
                                     "Operation not permitted", "No such device or address"]
    assert cgroups.remove(cg)


@limited_hierarchies
def test_a_step_over_its_own_memory_is_oom_killed_in_its_cgroup_not_its_siblings(lbase):
    """Slurm's layout: job_N/step_batch and job_N/step_0 below the job's
    cgroup; the step's --mem holds it inside the job's, its OOM kill and
    peak memory are its own, and the job's kill and removal take every step."""
    job = cgroups.create("n", 6, lbase, cgroups.Limits(memory_bytes=200 << 20))
    batch = cgroups.create_step(job, "batch", cgroups.Limits())
    step = cgroups.create_step(job, "0", cgroups.Limits(memory_bytes=48 << 20))
    assert step.path == job.path / "step_0" and step.name == "6.0"
    mem = step.controller("memory")
    assert mem == job.controller("memory") / "step_0"
    assert (mem / "memory.limit_in_bytes").read_text().strip() == str(48 << 20)
    r = run_inside(step, "python3 -c 'b = bytearray(128 << 20); print(\"fit\")'; echo rc=$?")
    assert "rc=137" in r.stdout and "fit" not in r.stdout.split(), r.stdout
    assert cgroups.oom_kills(step) == 1 and cgroups.oom_kills(batch) == 0
    assert cgroups.usage(step).max_rss_kb > 24 << 10
    with cgroups.inside(batch):
        sleeper = subprocess.Popen(["setsid", "sleep", "1000"])
    assert sleeper.pid in cgroups.pids(job), "the job's processes include its steps'"
    assert cgroups.kill(job) and gone([sleeper.pid])
    sleeper.wait(5)
    assert cgroups.remove(job) and not job.path.exists() and not mem.exists()


def test_what_is_written_for_each_limit_v1_and_v2():
    lim = cgroups.Limits(memory_bytes=100 << 20, cpus=(0, 1, 3), deny_devices=("c 195:0",))
    assert cgroups.settings(lim, unified=False, parent_mems="0") == [
        ("memory", "memory.limit_in_bytes", "104857600"),
        ("memory", "memory.memsw.limit_in_bytes", "104857600"),
        ("cpuset", "cpuset.cpus", "0-1,3"),
        ("cpuset", "cpuset.mems", "0"),
        ("devices", "devices.deny", "c 195:0 rwm"),
    ]
    assert cgroups.settings(lim, unified=True) == [
        ("memory", "memory.max", "104857600"),
        ("memory", "memory.swap.max", "0"),
        ("cpuset", "cpuset.cpus", "0-1,3"),
    ], "v2: no device files (BPF)"
    assert cgroups.settings(cgroups.Limits(), unified=False) == [], "nothing given, nothing held"
    assert cgroups.cpu_bind_env((0, 3))["SLURM_CPU_BIND"] == "quiet,mask_cpu:0x9"


def test_a_limit_the_host_cannot_hold_is_said_once(caplog, monkeypatch):
    monkeypatch.setattr(cgroups, "_said", set())
    cg = cgroups.JobCgroup(cgroups.FREEZER / "nowhere" / "job_1", 1)   # no other hierarchy
    with caplog.at_level("WARNING", logger=cgroups.__name__):
        cgroups.apply(cg, cgroups.Limits(memory_bytes=1 << 20))
        cgroups.apply(cg, cgroups.Limits(memory_bytes=1 << 20))
    said = [r.getMessage() for r in caplog.records]
    assert said == ["memory limits not enforced here: "
                    "no memory controller for job cgroups on this host"], said


def test_pinned_without_a_cgroup_sets_the_affinity_of_what_starts_inside():
    host = sorted(os.sched_getaffinity(0))
    with cgroups.pinned(host[-1:]):
        p = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                           capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == str(host[-1:])
    assert sorted(os.sched_getaffinity(0)) == host

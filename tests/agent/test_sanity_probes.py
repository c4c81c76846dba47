"""Each probe's decision over supplied facts: fake NVML, fake sysfs, real tmp dirs."""
from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from lingjun.config import SanityConfig
from lingjun_agent.network.reconcile import Link
from lingjun_agent.sanity import facts, probes
from lingjun_agent.sanity.runner import SanityRunner
from tests.agent import fake_nvml

CFG = SanityConfig()


def host(**kw) -> facts.HostFacts:
    return facts.HostFacts(**{"cpus": 8, "memory_mb": 64000, "free_memory_mb": 30000,
                              "load1": 1.0, **kw})


@pytest.mark.parametrize("h, cpus, mem, min_free, load, want", [
    (host(), 8, 64000, 0, 0.0, ""),
    (host(cpus=4), 8, 0, 0, 0.0, "4 CPUs < 8 configured"),
    (host(memory_mb=32000), 0, 64000, 0, 0.0, "32000 MB memory < 64000 MB configured"),
    (host(free_memory_mb=100), 0, 0, 1024, 0.0, "100 MB free memory < 1024 MB"),
    (host(load1=20.0), 0, 0, 0, 2.0, "load 20.00 > 16.00"),
], ids=["a node as configured passes", "fewer CPUs than configured fails",
        "less memory than configured fails", "free memory under the floor fails",
        "load over the per-CPU bound fails"])
def test_cpu_and_memory(h, cpus, mem, min_free, load, want):
    got = [v.reason for v in (probes.check_cpu(h, cpus, load), probes.check_memory(h, mem, min_free))
           if not v.ok]
    assert got == ([want] if want else []), f"want {want!r}, got {got}"


def disk(**kw) -> facts.DiskFacts:
    return facts.DiskFacts(**{"path": "/scratch", "total_mb": 1000.0, "free_mb": 500.0,
                              "inodes_total": 1000, "inodes_free": 500, "writable": True, **kw})


@pytest.mark.parametrize("d, want", [
    (disk(), ""),
    (disk(free_mb=10.0), "/scratch: 10 MB free < 64 MB"),
    (disk(total_mb=100000.0, free_mb=500.0), "/scratch: 0.5% free < 1%"),
    (disk(inodes_free=5), "/scratch: 0.5% inodes free < 1%"),
    (disk(writable=False, error="Read-only file system"), "/scratch: not writable: Read-only file system"),
    (facts.DiskFacts(path="/scratch", error="No such file or directory"), "/scratch: No such file or directory"),
], ids=["half free passes", "under the MB floor fails", "under the percent floor fails",
        "out of inodes fails", "read-only fails", "missing path fails"])
def test_disk(d, want):
    v = probes.check_disk(d, CFG.disk_min_free_pct, CFG.disk_min_free_mb, CFG.disk_min_free_inodes_pct)
    assert (v.ok, v.reason) == (not want, want)


def test_disk_facts_read_a_real_directory_and_its_writability(tmp_path):
    d = facts.disk(str(tmp_path))
    assert d.writable and d.total_mb > 0 and d.inodes_total > 0 and not d.error
    gone = facts.disk(str(tmp_path / "missing"))
    assert not probes.check_disk(gone, 1, 1, 1).ok
    assert not any(p.name.startswith(".lingjun-sanity") for p in tmp_path.iterdir())


@pytest.mark.parametrize("offset, want", [
    (None, True), (0.3, True), (-4.9, True), (5.5, False), (-30.0, False),
], ids=["no exchange yet passes", "a small offset passes", "just inside the bound passes",
        "ahead past the bound fails", "behind past the bound fails"])
def test_clock(offset, want):
    v = probes.check_clock(offset, 5.0)
    assert v.ok is want, v
    if not want:
        assert f"clock {offset:+.1f} s off the controller's (max 5 s)" == v.reason


def test_processes_flags_zombies_stray_jobs_and_users_without_jobs():
    p = facts.ProcFacts(zombies=(11, 12, 13), job_ids=(7, 8), user_pids={1001: [50], 1002: [60]})
    assert probes.check_processes(p, {7, 8}, zombie_max=5).ok
    v = probes.check_processes(p, {7}, zombie_max=2, job_users={1001})
    assert v.reason == ("3 defunct processes > 2; processes of ended job(s) 8; "
                        "processes of uid(s) with no job here: 1002"), v.reason


# -- GPUs through the fake NVML -------------------------------------------------------
@pytest.fixture
def nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "fake_nvml_for_test", fake_nvml)
    fake_nvml.reset([])
    return lambda: facts.Nvml("fake_nvml_for_test")


@pytest.mark.parametrize("gpus, missing, configured, want", [
    ([], True, 0, ""),
    ([], True, 8, "8 GPUs configured but NVML unavailable (NVMLError_LibraryNotFound: NVML Shared Library Not Found)"),
    ([{}] * 8, False, 8, ""),
    ([{}] * 7, False, 8, "7 GPUs < 8 configured"),
    ([{}, {"ecc": 3}], False, 2, "GPU 1: 3 uncorrected ECC errors"),
    ([{"retired_pending": True}], False, 1, "GPU 0: page retirement pending (reset needed)"),
    ([{"remap_failed": True}], False, 1, "GPU 0: row remapping failed"),
    ([{"temp": 95}], False, 1, "GPU 0: 95 C > 90 C"),
    ([{"persistence": False}], False, 1, "GPU 0: persistence mode off"),
], ids=["a CPU node without NVML passes", "a GPU node without NVML fails",
        "all GPUs healthy passes", "a missing GPU fails", "uncorrected ECC fails",
        "pending page retirement fails", "failed row remap fails", "too hot fails",
        "persistence off fails"])
def test_gpus(nvml, gpus, missing, configured, want):
    fake_nvml.reset(gpus, missing)
    v = probes.check_gpus(nvml().read(), configured, CFG)
    assert (v.ok, v.reason) == (not want, want)


def test_a_fatal_xid_between_passes_fails_the_next_pass_only(nvml):
    fake_nvml.reset([{}, {}])
    reader = nvml()
    assert probes.check_gpus(reader.read(), 2, CFG).ok
    fake_nvml.PENDING_XIDS.extend([(1, 13), (1, 79)])      # 13 is an app error, 79 fell off the bus
    v = probes.check_gpus(reader.read(), 2, CFG)
    assert v.reason == "GPU 1: XID 79", v.reason
    assert probes.check_gpus(reader.read(), 2, CFG).ok


# -- RDMA over a fake sysfs tree ---------------------------------------------------------
def ib_port(root: Path, dev: str, port: int, state="4: ACTIVE", phys="5: LinkUp",
            rate="400 Gb/sec (4X NDR)", gid="fe80:0000:0000:0000:0000:0000:0000:0001") -> None:
    p = root / dev / "ports" / str(port)
    (p / "gids").mkdir(parents=True)
    (p / "state").write_text(state + "\n")
    (p / "phys_state").write_text(phys + "\n")
    (p / "rate").write_text(rate + "\n")
    (p / "link_layer").write_text("InfiniBand\n")
    (p / "gids" / "0").write_text(gid + "\n")
    (p / "gids" / "1").write_text(facts.ZERO_GID + "\n")


@pytest.mark.parametrize("ports, required, rate, want", [
    ([], (), 0, ""),
    ([("mlx5_0", {}), ("mlx5_1", {})], (), 400, ""),
    ([("mlx5_0", {})], ("mlx5_0", "mlx5_1"), 0, "mlx5_1: not found"),
    ([("mlx5_0", {"state": "1: DOWN"})], (), 0, "mlx5_0/1: state DOWN"),
    ([("mlx5_0", {"phys": "3: Disabled"})], (), 0, "mlx5_0/1: phys_state Disabled"),
    ([("mlx5_0", {"rate": "100 Gb/sec (4X EDR)"})], (), 400, "mlx5_0/1: rate 100 Gb/sec (4X EDR) < 400 Gb/sec"),
    ([("mlx5_0", {"gid": facts.ZERO_GID})], (), 0, "mlx5_0/1: no GID"),
], ids=["no RDMA devices on a node that needs none passes", "active ports at rate pass",
        "a required device missing fails", "a port DOWN fails", "a disabled link fails",
        "a slow port fails", "a port without GIDs fails"])
def test_rdma(tmp_path, ports, required, rate, want):
    root = tmp_path / "infiniband"
    root.mkdir()
    for dev, kw in ports:
        ib_port(root, dev, 1, **kw)
    v = probes.check_rdma(facts.rdma_ports(str(root)), required, rate)
    assert (v.ok, v.reason) == (not want, want)


# -- NICs: decisions (the netlink read is tested for real in test_sanity_netns.py) -------
def link(name, up=True, carrier=True, mtu=1500) -> Link:
    return Link(index=1, name=name, mac="", mtu=mtu, min_mtu=68, max_mtu=9000, up=up, carrier=carrier)


def test_nics_decisions():
    n = facts.NicFacts(links={"a": link("a"), "b": link("b", up=False), "c": link("c", carrier=False),
                              "d": link("d", mtu=1500)})
    assert probes.check_nics(n, {"a": 1500}).ok
    v = probes.check_nics(n, probes.parse_nics(("b", "c", "d:9000", "e")))
    assert v.reason == "b: down; c: no carrier; d: MTU 1500 != 9000; e: not found", v.reason


# -- drop-ins and the runner -------------------------------------------------------------
def script(d: Path, name: str, body: str) -> Path:
    p = d / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)
    return p


def test_dropins_pass_on_zero_fail_with_first_line_and_time_out(tmp_path):
    d = tmp_path / "checks"
    d.mkdir()
    script(d, "ok", "exit 0")
    script(d, "bad", "echo 'fs /data: stale handle'; echo second; exit 3")
    script(d, "silent", "exit 2")
    script(d, "hang", "sleep 30")
    (d / "notes.txt").write_text("not executable")
    cfg = SanityConfig(dropin_dir=str(d), timeout_s=0.5, disabled=tuple(
        p for p in ("cpu", "memory", "disk", "clock", "processes", "gpu", "rdma", "nic",
                    "kernel_xid")))
    r = SanityRunner(cfg, probes.NodeContext(node="n1", spool=str(tmp_path)))
    got = {x.name: (x.ok, x.reason) for x in asyncio.run(r.run("periodic"))}
    assert got == {"dropin:bad": (False, "fs /data: stale handle"), "dropin:hang": (False, "timed out after 0.5 s"),
                   "dropin:ok": (True, ""), "dropin:silent": (False, "exit 2")}, got


def test_dropins_see_their_node_phase_and_job(tmp_path):
    d = tmp_path / "checks"
    d.mkdir()
    script(d, "env", 'echo "$LINGJUN_NODE $LINGJUN_SANITY_PHASE $LINGJUN_JOB_ID"; exit 1')
    r = SanityRunner(SanityConfig(dropin_dir=str(d)), probes.NodeContext(node="n7", spool=str(tmp_path)))
    res = {x.name: x for x in asyncio.run(r.run("prolog", job_id=42))}
    assert res["dropin:env"].reason == "n7 prolog 42"
    assert res["dropin:env"].severity == "drain"


def test_a_hung_probe_fails_by_timeout_and_the_pass_goes_on(tmp_path):
    import threading
    from lingjun_agent.sanity.checks import PASS, Probe
    release = threading.Event()
    r = SanityRunner(SanityConfig(enabled=True), probes.NodeContext(node="n1", spool=str(tmp_path)))
    r.probes = [Probe("stuck", "drain", lambda: release.wait(5) and PASS, timeout_s=0.2),
                Probe("fine", "warn", lambda: PASS)]
    try:
        res = {x.name: (x.ok, x.reason) for x in asyncio.run(r.run("periodic"))}
    finally:
        release.set()
    assert res == {"stuck": (False, "timed out after 0.2 s"), "fine": (True, "")}


def test_each_phase_runs_its_probes_and_disabled_ones_never(tmp_path):
    cfg = SanityConfig(disabled=("gpu",), scratch_paths=(str(tmp_path / "{node}"),))
    (tmp_path / "n1").mkdir()
    r = SanityRunner(cfg, probes.NodeContext(node="n1", spool=str(tmp_path)))
    names = {ph: {x.name for x in asyncio.run(r.run(ph))} for ph in ("register", "periodic", "prolog")}
    assert names == {"register": {"cpu", "memory", "disk", "rdma", "kernel_xid"},
                     "periodic": {"cpu", "memory", "disk", "clock", "processes", "rdma",
                                  "kernel_xid"},
                     "prolog": {"disk", "clock", "rdma", "kernel_xid"}}, names


def test_a_fatal_xid_line_in_the_kernel_log_fails_once_and_old_lines_are_not_read(tmp_path):
    from lingjun_agent.sanity import facts as sanity_facts
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n")
    log = sanity_facts.KernelLog(str(kmsg))
    fatal = (48, 79)
    assert probes.check_kernel_xids(log.new_lines(), fatal).ok, "what was there before the agent"
    with kmsg.open("a") as f:
        f.write("usb 1-1: new device\n"
                "NVRM: Xid (PCI:0000:5e:00): 13, Graphics Exception\n"       # not fatal
                "NVRM: Xid (PCI:0000:3b:00): 48, pid=2, DBE (double bit error)\n"
                "NVRM: Xid (PCI:0000:3b:00): 48, pid=3, DBE (double bit error)\n"
                "NVRM: Xid (PCI:0000:3b:00): 7")                               # half written
    v = probes.check_kernel_xids(log.new_lines(), fatal)
    assert not v.ok and v.reason == "NVRM: Xid 48 (PCI:0000:3b:00)", v.reason
    with kmsg.open("a") as f:
        f.write("9, pid=4\n")
    v = probes.check_kernel_xids(log.new_lines(), fatal)
    assert not v.ok and v.reason == "NVRM: Xid 79 (PCI:0000:3b:00)", "the line, once whole"
    assert probes.check_kernel_xids(log.new_lines(), fatal).ok, "each line is read once"
    assert sanity_facts.KernelLog(str(tmp_path / "none")).new_lines() == []

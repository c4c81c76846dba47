"""What each probe decides, over facts, and the node's list of probes.

Every ``check_*`` is a pure function: facts and thresholds in, a Verdict out.
``build`` binds them to this node's facts readers and configuration.

Worked example: [sanity] disk_min_free_mb = 64 and a scratch path on a tmpfs
with 10 MB left: ``check_disks`` answers
``fail("/scratch/node1: 10 MB free < 64 MB")``; the probe is ``disk`` with
severity ``drain``, so the controller drains the node with
``Reason=disk: /scratch/node1: 10 MB free < 64 MB``.
"""
from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lingjun.config import SanityConfig
from lingjun_agent.sanity import facts
from lingjun_agent.sanity.checks import (DRAIN, PASS, PERIODIC, PROLOG, REGISTER, WARN, Probe,
                                         Result, Verdict, fail)

# Default severities: what makes a job fail or hang drains; what is only a
# symptom (load, zombies) warns.
DEFAULT_SEVERITY = {"cpu": DRAIN, "memory": DRAIN, "disk": DRAIN, "clock": DRAIN,
                    "processes": WARN, "gpu": DRAIN, "rdma": DRAIN, "nic": DRAIN,
                    "kernel_xid": DRAIN}
DROPIN = "dropin"


# -- decisions ---------------------------------------------------------------------
def check_cpu(h: facts.HostFacts, configured: int, max_load_per_cpu: float = 0.0) -> Verdict:
    if configured and h.cpus < configured:
        return fail(f"{h.cpus} CPUs < {configured} configured")
    if max_load_per_cpu and h.load1 > max_load_per_cpu * h.cpus:
        return fail(f"load {h.load1:.2f} > {max_load_per_cpu * h.cpus:.2f}")
    return PASS


def check_memory(h: facts.HostFacts, configured_mb: int, min_free_mb: int = 0) -> Verdict:
    if configured_mb and h.memory_mb < configured_mb:
        return fail(f"{h.memory_mb} MB memory < {configured_mb} MB configured")
    if min_free_mb and h.free_memory_mb < min_free_mb:
        return fail(f"{h.free_memory_mb} MB free memory < {min_free_mb} MB")
    return PASS


def check_disk(d: facts.DiskFacts, min_free_pct: float, min_free_mb: float,
               min_inodes_pct: float) -> Verdict:
    if d.error and not d.total_mb:
        return fail(f"{d.path}: {d.error}")
    if not d.writable:
        return fail(f"{d.path}: not writable: {d.error}")
    if min_free_mb and d.free_mb < min_free_mb:
        return fail(f"{d.path}: {d.free_mb:.0f} MB free < {min_free_mb:.0f} MB")
    if min_free_pct and d.total_mb and 100 * d.free_mb / d.total_mb < min_free_pct:
        return fail(f"{d.path}: {100 * d.free_mb / d.total_mb:.1f}% free < {min_free_pct:g}%")
    if min_inodes_pct and d.inodes_total and 100 * d.inodes_free / d.inodes_total < min_inodes_pct:
        return fail(f"{d.path}: {100 * d.inodes_free / d.inodes_total:.1f}% inodes free "
                    f"< {min_inodes_pct:g}%")
    return PASS


def check_disks(disks: list[facts.DiskFacts], cfg: SanityConfig) -> Verdict:
    bad = [v.reason for d in disks
           if not (v := check_disk(d, cfg.disk_min_free_pct, cfg.disk_min_free_mb,
                                   cfg.disk_min_free_inodes_pct)).ok]
    return fail("; ".join(bad)) if bad else PASS


def check_clock(offset_s: float | None, max_offset_s: float) -> Verdict:
    """``offset_s`` is controller time minus ours at the midpoint of the last
    heartbeat exchange; None before the first exchange (nothing to judge)."""
    if offset_s is not None and abs(offset_s) > max_offset_s:
        return fail(f"clock {offset_s:+.1f} s off the controller's (max {max_offset_s:g} s)")
    return PASS


def check_processes(p: facts.ProcFacts, expected_jobs: set[int], zombie_max: int,
                    job_users: set[int] | None = None) -> Verdict:
    """Leftovers: zombies of our jobs, processes of jobs the node no longer
    runs, and (when asked) processes of users with no job here."""
    bad = []
    if len(p.zombies) > zombie_max:
        bad.append(f"{len(p.zombies)} defunct processes > {zombie_max}")
    stray = sorted(set(p.job_ids) - expected_jobs)
    if stray:
        bad.append("processes of ended job(s) " + ",".join(map(str, stray)))
    if job_users is not None:
        users = sorted(u for u in p.user_pids if u not in job_users)
        if users:
            bad.append("processes of uid(s) with no job here: " + ",".join(map(str, users)))
    return fail("; ".join(bad)) if bad else PASS


def check_gpus(g: facts.GpuFacts, configured: int, cfg: SanityConfig) -> Verdict:
    if not g.nvml:
        # A CPU node without NVML is fine; a GPU node without it cannot run GPU jobs.
        return fail(f"{configured} GPUs configured but NVML unavailable ({g.error})") \
            if configured else PASS
    if g.error:
        return fail(f"NVML: {g.error}")
    if len(g.gpus) < configured:
        return fail(f"{len(g.gpus)} GPUs < {configured} configured")
    bad = []
    for d in g.gpus:
        fatal = sorted(set(d.xids) & set(cfg.gpu_fatal_xids))
        if fatal:
            bad.append(f"GPU {d.index}: XID {','.join(map(str, fatal))}")
        if d.ecc_uncorrected > cfg.gpu_ecc_max:
            bad.append(f"GPU {d.index}: {d.ecc_uncorrected} uncorrected ECC errors")
        if d.retired_pending:
            bad.append(f"GPU {d.index}: page retirement pending (reset needed)")
        if d.remap_failed:
            bad.append(f"GPU {d.index}: row remapping failed")
        if cfg.gpu_max_temp_c and d.temperature_c > cfg.gpu_max_temp_c:
            bad.append(f"GPU {d.index}: {d.temperature_c} C > {cfg.gpu_max_temp_c} C")
        if cfg.gpu_require_persistence and not d.persistence:
            bad.append(f"GPU {d.index}: persistence mode off")
    return fail("; ".join(bad)) if bad else PASS


XID_LINE = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")


def check_kernel_xids(lines: list[str], fatal: tuple[int, ...]) -> Verdict:
    """The NVIDIA driver's XID lines in the kernel log since the last pass: a
    fatal one fails (the controller then quarantines the node as a suspect)."""
    seen = []
    for line in lines:
        m = XID_LINE.search(line)
        if m and int(m.group(2)) in fatal:
            seen.append(f"NVRM: Xid {m.group(2)} ({m.group(1)})")
    return fail("; ".join(dict.fromkeys(seen))) if seen else PASS


def _gbps(rate: str) -> float:
    # "400 Gb/sec (4X NDR)" -> 400.0
    try:
        return float(rate.split()[0])
    except (IndexError, ValueError):
        return 0.0


def check_rdma(r: facts.RdmaFacts, required: tuple[str, ...], min_rate_gbps: float) -> Verdict:
    """NHC's check_hw_ib: each port ACTIVE / LinkUp, at least the rate, with GIDs."""
    present = {p.device for p in r.ports}
    bad = [f"{d}: not found" for d in required if d not in present]
    for p in r.ports:
        if required and p.device not in required:
            continue
        where = f"{p.device}/{p.port}"
        if p.state != "ACTIVE":
            bad.append(f"{where}: state {p.state or '?'}")
        elif p.phys_state != "LinkUp":
            bad.append(f"{where}: phys_state {p.phys_state or '?'}")
        elif min_rate_gbps and _gbps(p.rate) < min_rate_gbps:
            bad.append(f"{where}: rate {p.rate or '?'} < {min_rate_gbps:g} Gb/sec")
        elif not r.gids.get((p.device, p.port)):
            bad.append(f"{where}: no GID")
    return fail("; ".join(bad)) if bad else PASS


def parse_nics(specs: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for s in specs:
        name, _, mtu = s.partition(":")
        out[name] = int(mtu) if mtu else 0
    return out


def check_nics(n: facts.NicFacts, wanted: dict[str, int]) -> Verdict:
    if n.error:
        return fail(f"netlink: {n.error}")
    bad = []
    for name, mtu in wanted.items():
        link = n.links.get(name)
        if link is None:
            bad.append(f"{name}: not found")
        elif not link.up:
            bad.append(f"{name}: down")
        elif not link.carrier:
            bad.append(f"{name}: no carrier")
        elif mtu and link.mtu != mtu:
            bad.append(f"{name}: MTU {link.mtu} != {mtu}")
    return fail("; ".join(bad)) if bad else PASS


# -- drop-ins ----------------------------------------------------------------------
def dropin_probes(directory: str) -> list[Path]:
    """Every executable regular file in the directory, by name (NHC's checks dir)."""
    d = Path(directory)
    if not directory or not d.is_dir():
        return []
    return sorted(p for p in d.iterdir()
                  if p.is_file() and os.access(p, os.X_OK) and not p.name.startswith("."))


async def run_dropin(path: Path, timeout_s: float, env: dict[str, str]) -> Verdict:
    """Exit 0 passes; anything else fails with the first line of stdout as the reason."""
    proc = await asyncio.create_subprocess_exec(
        str(path), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env={**os.environ, **env}, cwd="/",
        start_new_session=True)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except asyncio.TimeoutError:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        await proc.wait()
        return fail(f"timed out after {timeout_s:g} s")
    if proc.returncode == 0:
        return PASS
    first = out.decode(errors="replace").strip().splitlines()
    return fail(first[0].strip() if first else f"exit {proc.returncode}")


# -- this node's probes --------------------------------------------------------------
@dataclass
class NodeContext:
    """What the probes need to know of the node and its agent."""
    node: str
    spool: str
    cpus: int = 0                     # configured (0 = not checked)
    memory_mb: int = 0
    gpus: int = 0
    mark: str = ""                    # the launcher's job mark for this node
    rdma_root: str = "/sys/class/infiniband"
    clock_offset: Callable[[], float | None] = lambda: None
    expected_jobs: Callable[[], set[int]] = set
    job_users: Callable[[], set[int]] = set   # uids of the jobs running here
    # What the agent was told it has (--cpus/--memory-mb of the local cluster,
    # whose agents share one host), as its inventory reports; 0 = this host's own.
    declared_cpus: int = 0
    declared_memory_mb: int = 0


def build(cfg: SanityConfig, ctx: NodeContext, nvml: facts.Nvml) -> list[Probe]:
    """The built-in probes not disabled, in a fixed order."""
    def sev(name: str) -> str:
        return cfg.severity.get(name, DEFAULT_SEVERITY[name])

    def host() -> facts.HostFacts:
        return facts.host(ctx.declared_cpus, ctx.declared_memory_mb)

    paths = [ctx.spool] + (["/tmp"] if cfg.check_tmp else []) + \
        [cfg.path(p, ctx.node) for p in cfg.scratch_paths]
    every = (REGISTER, PERIODIC, PROLOG)
    klog = facts.KernelLog(cfg.path(cfg.kernel_log, ctx.node)) if cfg.kernel_log else None
    table: list[tuple[str, Callable[[], Verdict], tuple[str, ...]]] = [
        ("cpu", lambda: check_cpu(host(), ctx.cpus, cfg.max_load_per_cpu), (REGISTER, PERIODIC)),
        ("memory", lambda: check_memory(host(), ctx.memory_mb, cfg.min_free_memory_mb),
         (REGISTER, PERIODIC)),
        ("disk", lambda: check_disks([facts.disk(p) for p in paths], cfg), every),
        ("clock", lambda: check_clock(ctx.clock_offset(), cfg.clock_max_offset_s),
         (PERIODIC, PROLOG)),
        ("processes", lambda: check_processes(
            facts.processes(ctx.mark, cfg.stray_user_min_uid), ctx.expected_jobs(), cfg.zombie_max,
            ctx.job_users() if cfg.stray_user_min_uid else None), (PERIODIC,)),
        ("gpu", lambda: check_gpus(nvml.read(), ctx.gpus, cfg), every),
        ("rdma", lambda: check_rdma(facts.rdma_ports(ctx.rdma_root), cfg.rdma_devices,
                                    cfg.rdma_min_rate_gbps), every),
        ("nic", lambda: check_nics(facts.nics(), parse_nics(cfg.nics)), every),
        ("kernel_xid", lambda: check_kernel_xids(klog.new_lines() if klog else [],
                                                 cfg.gpu_fatal_xids), every),
    ]
    out = []
    for name, fn, phases in table:
        if name in cfg.disabled or (name == "nic" and not cfg.nics):
            continue
        out.append(Probe(name=name, severity=sev(name), run=fn, timeout_s=cfg.timeout_s,
                         phases=phases))
    return out


def timed(name: str, severity: str, phase: str, fn: Callable[[], Verdict]) -> Result:
    t0 = time.monotonic()
    v = fn()
    return Result(name=name, severity=severity, ok=v.ok, reason=v.reason,
                  duration_s=time.monotonic() - t0, time=time.time(), phase=phase)

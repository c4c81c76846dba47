"""scontrol show node (src/api/node_info.c, slurm_sprint_node_table) and the
node reports of our own `lingjun health show` and `lingjun net show`, which
print the same node records in the same Key=Value style.
"""
from __future__ import annotations

TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Sequence

from lingjun import slurm
if TYPE_CHECKING:     # hints only: the commands read our messages or protobuf's alike
    from lingjun.v1 import api_pb2

SLURM_VERSION = "22.05.8"


def node_port(node: api_pb2.NodeInfo) -> tuple[str, str]:
    addr = node.address or node.name
    host, sep, port = addr.rpartition(":")
    if sep and port.isdigit() and "]" not in port:
        return host, port
    return addr, getattr(node, "port", 0) or "0"


def node_tres(n: api_pb2.NodeInfo) -> tuple[str, str]:
    """A node's configured and allocated TRES ("cpu=2,mem=2000M,billing=2", "cpu=1"),
    as scontrol's CfgTRES/AllocTRES and sinfo --json's tres/tres_used write them."""
    cfg = [f"cpu={n.cpus}", f"mem={n.real_memory_mb}M", f"billing={n.cpus}"]
    if n.gpus:
        cfg.append(f"gres/gpu={n.gpus}")
    cfg += [f"gres/{k}={v}" for k, v in (("mps", n.mps), ("shard", n.shards)) if v]
    alloc = [f"{name}={value}" for name, value in (
        ("cpu", n.cpus_alloc), ("mem", f"{n.alloc_memory_mb}M" if n.alloc_memory_mb else 0),
        ("gres/gpu", n.gpus_alloc), ("gres/mps", n.mps_alloc),
        ("gres/shard", n.shards_alloc)) if value]
    return ",".join(cfg), ",".join(alloc)


def node_gres(n: api_pb2.NodeInfo) -> str:
    """Gres= / sinfo %G: "gpu:2", "gpu:a100:2", "gpu:1,shard:4", "(null)"."""
    if not n.gpus:
        return "(null)"
    gpus = f"gpu:{n.gpu_type}:{n.gpus}" if n.gpu_type else f"gpu:{n.gpus}"
    return ",".join([gpus] + [f"{k}:{v}" for k, v in (("mps", n.mps), ("shard", n.shards)) if v])


def _node_gres_sockets(n: api_pb2.NodeInfo) -> str:
    """scontrol's Gres=: with the sockets (NUMA nodes) its GPUs sit on where
    known, as Slurm prints an autodetected GPU's core affinity: "gpu:a100:4(S:0-1)"."""
    gres = node_gres(n)
    numa = sorted({d.numa_node for d in n.gpu_devices if d.numa_node >= 0})
    return f"{gres}(S:{slurm.fold_indices(numa)})" if n.gpus and numa else gres


def _node_gres_used(n: api_pb2.NodeInfo) -> str:
    """scontrol -d's GresUsed=: "gpu:a100:2(IDX:0-1)", "gpu:a100:0(IDX:N/A)"."""
    kind = f"gpu:{n.gpu_type}" if n.gpu_type else "gpu"
    if n.gpu_ids_alloc:
        return f"{kind}:{len(n.gpu_ids_alloc)}(IDX:{slurm.fold_indices(n.gpu_ids_alloc)})"
    return f"{kind}:{n.gpus_alloc}(IDX:N/A)"


def scontrol_show_node(nodes: Sequence[api_pb2.NodeInfo], oneliner: bool = False,
                       details: bool = False) -> str:
    """``details`` (-d): the GPUs in use (GresDrain=, GresUsed=) after Gres=, on a node with GPUs."""
    ts = slurm.format_timestamp
    out = []
    for n in nodes:
        addr, port = node_port(n)
        threads = n.threads_per_core or 1
        sockets = n.sockets or 1
        cores = n.cores_per_socket or max(1, n.cpus // (sockets * threads))
        cfg, alloc = node_tres(n)
        state = slurm.node_state_long(n.state, n.drain, n.not_responding, n.completing)
        lines = [
            f"NodeName={n.name} Arch={n.arch or 'x86_64'} CoresPerSocket={cores} ",
            f"CPUAlloc={n.cpus_alloc} CPUEfctv={n.cpus} CPUTot={n.cpus} CPULoad={n.cpu_load:.2f}",
            f"AvailableFeatures={','.join(n.features) or '(null)'}",
            f"ActiveFeatures={','.join(n.features) or '(null)'}",
            f"Gres={_node_gres_sockets(n)}",
            *(("GresDrain=N/A", f"GresUsed={_node_gres_used(n)}") if details and n.gpus else ()),
            f"NodeAddr={addr} NodeHostName={n.hostname or n.name} Port={port} "
            f"Version={n.version or SLURM_VERSION}",
            f"OS={n.os} ",
            f"RealMemory={n.real_memory_mb} AllocMem={n.alloc_memory_mb} "
            f"FreeMem={n.free_memory_mb} Sockets={sockets} Boards=1",
            f"State={state} ThreadsPerCore={threads} TmpDisk={n.tmp_disk_mb} "
            f"Weight={n.weight or 1} Owner=N/A MCS_label=N/A",
            f"Partitions={','.join(n.partitions)} ",
            f"BootTime={ts(n.boot_time, 'None')} SlurmdStartTime={ts(n.agent_start_time, 'None')}",
            f"LastBusyTime={ts(n.last_busy_time, 'None')}",
            f"CfgTRES={cfg}",
            f"AllocTRES={alloc}",
            "CapWatts=n/a",
            "CurrentWatts=0 AveWatts=0",
            "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
        ]
        net = net_status_line(n)
        if net:
            lines.append(net)
        health = health_line(n)
        if health:
            lines.append(health)
        if n.reason:
            lines.append(f"Reason={n.reason} [{n.reason_user or 'root'}@{ts(n.reason_time)}]")
        if oneliner:
            out.append(" ".join(l.strip() for l in lines) + "\n")
        else:
            out.append(lines[0] + "\n" + "".join(f"   {l}\n" for l in lines[1:]) + "\n")
    return "".join(out)


def health_line(n: api_pb2.NodeInfo) -> str:
    """`scontrol show node`'s probe line, only when a probe fails (a
    healthy node prints exactly as Slurm's): ``HealthCheck=disk:FAIL(drain),processes:FAIL(warn)``."""
    bad = [r for r in n.sanity_results if not r.ok]
    if not bad:
        return ""
    return "HealthCheck=" + ",".join(f"{r.name}:FAIL({r.severity})" for r in bad)


def health_show(nodes: Sequence[api_pb2.SanityNode]) -> str:
    """lingjun health: every probe's last result per node, then recent events."""
    ts = slurm.format_timestamp
    rows = [("NODE", "PROBE", "SEVERITY", "RESULT", "DURATION", "TIME", "PHASE", "REASON")]
    events = []
    for n in nodes:
        if not n.results:
            rows.append((n.name, "-", "-", "none", "-", "-", "-", "no probe results yet"))
        for r in n.results:
            rows.append((n.name, r.name, r.severity, "ok" if r.ok else "FAIL",
                         f"{r.duration_s:.3f}s", ts(int(r.time)), r.phase, r.reason))
        for e in n.events:
            events.append(f"{ts(int(e.time))} {e.node} {e.event}" + (f" by {e.by}" if e.by else "")
                          + (f" job {e.job_id}" if e.job_id else "") + (f": {e.reason}" if e.reason else ""))
    w = [max(len(r[k]) for r in rows) for k in range(7)]
    out = [("  ".join(f"{r[k]:<{w[k]}}" for k in range(7)) + "  " + r[7]).rstrip() + "\n"
           for r in rows]
    if events:
        out.append("\nEVENTS\n" + "".join(e + "\n" for e in events))
    return "".join(out)


def net_status_line(n: api_pb2.NodeInfo) -> str:
    """scontrol show node's one network line ("" for a node with neither a
    profile nor RDMA devices, so such nodes print exactly as Slurm's do):
    ``Network=converged Profile=rails Interfaces=2/2 Uplinks=storage:primary RDMA=mlx5_0/1:ACTIVE``."""
    if not n.HasField("net_status"):
        return ""
    s = n.net_status
    if not s.profile and not s.rdma and s.state in ("", "none"):
        return ""
    words = [f"Network={s.state or 'unknown'}"]
    if s.profile:
        words.append(f"Profile={s.profile}")
    if s.interfaces:
        words.append(f"Interfaces={sum(i.ok for i in s.interfaces)}/{len(s.interfaces)}")
    if s.uplinks:
        words.append("Uplinks=" + ",".join(f"{u.name}:{u.active}" for u in s.uplinks))
    if s.rdma:
        words.append("RDMA=" + ",".join(f"{p.device}/{p.port}:{p.state or '?'}" for p in s.rdma))
    if s.message:
        words.append(f"NetReason={s.message.replace(' ', '_')}")
    return " ".join(words)


def net_show(nodes: Sequence[api_pb2.NodeInfo]) -> str:
    """lingjun net show: per node its profile's state, then desired vs live per interface."""
    out = []
    for n in nodes:
        s = n.net_status if n.HasField("net_status") else None
        if s is None:
            out.append(f"{n.name}: no network report\n")
            continue
        head = f"{n.name}: profile {s.profile or '(none)'} {s.state}"
        out.append(head + (f": {s.message}" if s.message else "") + "\n")
        if s.interfaces:
            rows = [("INTERFACE", "DESIRED", "LIVE", "OK")] + [
                (i.name, i.desired, i.live, "yes" if i.ok else "NO") for i in s.interfaces]
            w = [max(len(r[k]) for r in rows) for k in range(3)]
            out.extend(f"  {r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  {r[3]}\n" for r in rows)
        for u in s.uplinks:
            out.append(f"  uplink {u.name}: on its {u.active}\n")
        for p in s.rdma:
            out.append(f"  rdma {p.device} port {p.port}: {p.state} {p.phys_state} {p.link_layer} "
                       f"{p.rate} netdev {p.netdev or '-'}\n")
    return "".join(out)

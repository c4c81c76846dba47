"""The agent's Prometheus page (``[agent] metrics_address``): its jobs' use of
the node, its probes' last results and its network's state, read when
Prometheus scrapes (a custom collector; served from the agent's loop by
lingjun/httpdoor.py, which says why not from a thread)::

    lingjun_job_cpu_seconds_total{job_id}            CPU time of everything the job ran here
    lingjun_job_memory_bytes{job_id}                 memory it uses here now
        (both from the job's cgroup: cpu.stat / cpuacct, memory.current /
        memory.usage_in_bytes; without cgroups, from its processes)
    lingjun_job_gpu_utilization_ratio{job_id,gpu}    NVML's last sample of each GPU it holds (0..1)
    lingjun_job_gpu_memory_used_bytes{job_id,gpu}    memory used on it
    lingjun_probe_ok{probe,severity,phase}           1 when the probe passed its last run
    lingjun_probe_duration_seconds{probe}            how long that run took
    lingjun_probe_last_run_timestamp_seconds{probe}
    lingjun_net_state{profile,state}                 1 for the network profile's state
                                                      (converged degraded refused failed none)
    lingjun_net_interface_ok{interface}              1 when the kernel has what the profile wants
    lingjun_net_uplink_backup_active{uplink}         1 while the backup carries the traffic
    lingjun_net_failovers_total{uplink}              primary -> backup moves since the agent started
    lingjun_rdma_port_up{device,port,link_layer}     1 when the port is ACTIVE

Every series carries the node's name as Prometheus' target (its ``instance``);
``lingjun_agent_info{node}`` names it once.
"""
from __future__ import annotations

import contextlib

import psutil
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from lingjun_agent.launcher import cgroups

NET_STATES = ("converged", "degraded", "refused", "failed", "none")


def job_cpu_memory(node: str, job_id: int, pid: int) -> tuple[float, int] | None:
    """(CPU seconds, memory bytes now) of the job here, from its cgroup; from
    its script's process tree when it has no cgroup; None when neither is there."""
    cg = cgroups.find(node, job_id)
    if cg is not None:
        use = cgroups.usage(cg)
        mem = 0
        d = cg.controller("memory")
        if d is not None:
            with contextlib.suppress(OSError, ValueError):
                mem = int((d / ("memory.current" if cg.unified else "memory.usage_in_bytes"))
                          .read_text())
        return (use.user_cpu_ms + use.system_cpu_ms) / 1000, mem
    if not pid:
        return None
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    cpu, mem = 0.0, 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            cpu += t.user + t.system + t.children_user + t.children_system
            mem += p.memory_info().rss
    return cpu, mem


class AgentCollector:
    def __init__(self, agent):
        self.agent = agent

    def describe(self):
        return []

    def collect(self):
        a = self.agent
        info = GaugeMetricFamily("lingjun_agent_info", "The node this agent serves",
                                 labels=["node"])
        info.add_metric([a.node], 1)
        yield info
        yield from self._jobs()
        yield from self._gpus()
        yield from self._probes()
        yield from self._network()

    def _jobs(self):
        a = self.agent
        cpu = CounterMetricFamily("lingjun_job_cpu_seconds", "CPU time of the job on this node",
                                  labels=["job_id"])
        mem = GaugeMetricFamily("lingjun_job_memory_bytes", "Memory the job uses on this node",
                                labels=["job_id"])
        jobs = {jid: h.pid for jid, h in a.batches.items()}
        for (jid, _), h in a.steps.items():
            if h.running():
                jobs.setdefault(jid, 0)
        for jid in sorted(jobs):
            got = job_cpu_memory(a.node, jid, jobs[jid])
            if got is None:
                continue
            cpu.add_metric([str(jid)], got[0])
            mem.add_metric([str(jid)], got[1])
        yield cpu
        yield mem

    def _gpus(self):
        util = GaugeMetricFamily("lingjun_job_gpu_utilization_ratio",
                                 "GPU utilization NVML last sampled, per job and GPU (0..1)",
                                 labels=["job_id", "gpu"])
        used = GaugeMetricFamily("lingjun_job_gpu_memory_used_bytes",
                                 "GPU memory used NVML last sampled, per job and GPU",
                                 labels=["job_id", "gpu"])
        a = self.agent
        seen: set[tuple[int, int]] = set()
        # the sampler writes from its worker thread: a copy, taken at once
        latest = dict(a.gpu_usage.latest)
        for key in sorted(latest, key=lambda k: (k,) if isinstance(k, int) else tuple(k)):
            jid = key if isinstance(key, int) else key[0]
            if key not in a.batches and key not in a.steps:      # ended since
                continue
            for gpu, pct, mem_bytes in latest[key]:
                if (jid, gpu) in seen:       # a step's GPU is its job's too
                    continue
                seen.add((jid, gpu))
                util.add_metric([str(jid), str(gpu)], pct / 100)
                used.add_metric([str(jid), str(gpu)], mem_bytes)
        yield util
        yield used

    def _probes(self):
        ok = GaugeMetricFamily("lingjun_probe_ok", "1 when the health probe passed its last run",
                               labels=["probe", "severity", "phase"])
        took = GaugeMetricFamily("lingjun_probe_duration_seconds",
                                 "How long the probe's last run took", labels=["probe"])
        when = GaugeMetricFamily("lingjun_probe_last_run_timestamp_seconds",
                                 "When the probe last ran, Unix time", labels=["probe"])
        for _, r in sorted(self.agent.sanity.latest.items()):
            ok.add_metric([r.name, r.severity, r.phase], 1 if r.ok else 0)
            took.add_metric([r.name], r.duration_s)
            when.add_metric([r.name], r.time)
        yield ok
        yield took
        yield when

    def _network(self):
        net = self.agent.net
        rep = net.last_sent
        state = GaugeMetricFamily("lingjun_net_state", "1 for the state of the node's network "
                                  "profile", labels=["profile", "state"])
        iface = GaugeMetricFamily("lingjun_net_interface_ok", "1 when the interface is as the "
                                  "profile wants it", labels=["interface"])
        backup = GaugeMetricFamily("lingjun_net_uplink_backup_active", "1 while the uplink's "
                                   "backup carries its traffic", labels=["uplink"])
        moves = CounterMetricFamily("lingjun_net_failovers", "Moves of an uplink's traffic from "
                                    "primary to backup since the agent started", labels=["uplink"])
        rdma = GaugeMetricFamily("lingjun_rdma_port_up", "1 when the RDMA port is ACTIVE",
                                 labels=["device", "port", "link_layer"])
        if rep is not None:
            for s in NET_STATES:
                state.add_metric([rep.profile, s], 1 if rep.state == s else 0)
            for i in rep.interfaces:
                iface.add_metric([i.name], 1 if i.ok else 0)
            for u in rep.uplinks:
                backup.add_metric([u.name], 1 if u.active == "backup" else 0)
            for p in rep.rdma:
                rdma.add_metric([p.device, str(p.port), p.link_layer],
                                1 if p.state.upper() == "ACTIVE" else 0)
        for name, n in sorted(net.failovers.items()):
            moves.add_metric([name], n)
        yield from (state, iface, backup, moves, rdma)


def registry(agent) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(AgentCollector(agent))
    return reg


def render(reg: CollectorRegistry) -> bytes:
    return generate_latest(reg)

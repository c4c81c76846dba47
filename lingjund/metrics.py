"""The controller's Prometheus metrics (``[controller] metrics_address``).

Two kinds:

- gauges of the live state, computed when Prometheus scrapes (``LiveCollector``,
  a custom collector): nothing is counted per pass or per RPC, and a scrape
  reads the live state once (bench/metrics_scrape.py: 10,000 nodes and
  100,000 pending jobs);
- histograms the daemon feeds as things happen: the scheduling pass's
  duration (``observe_pass``) and each unary RPC's (``RpcTimer``, a gRPC
  interceptor outermost in the server's chain, so it counts decoding and
  authentication too). Streams (agents' sessions, allocations) live for hours
  and are not timed.

The names, as Prometheus' conventions want them (a ``lingjun_`` prefix, base
units, ``_total`` for counters)::

    lingjun_jobs{state,partition,account,reason}     jobs in squeue (reason: PENDING only;
                                                      a pending array counts each task)
    lingjun_nodes{state,partition}                   sinfo %T words: idle mixed allocated
                                                      down drained draining completing unknown
    lingjun_node_drained{node,reason,by}             1 per drained node; by="probe" | "admin"
    lingjun_partition_gpus{partition,state}          allocated | idle | unavailable (down,
                                                      drained, not responding)
    lingjun_partition_cpus{partition,state}          the same for CPUs
    lingjun_account_gpus_allocated{partition,account}
    lingjun_job_last_activity_timestamp_seconds{job_id,user}
                                                     running jobs' last sign of life (output
                                                      written, a heartbeat's activity)
    lingjun_job_hang_timeout_seconds{job_id}         --hang-timeout of those that have one
    lingjun_scheduler_pass_seconds                   histogram
    lingjun_rpc_duration_seconds{service,method,door}
                                                     histogram; door: grpc, or socket (the
                                                      local command socket's calls)
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import grpc
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from lingjun import slurm
from lingjund import lifecycle
from lingjund.service.context import Controller
from lingjund.service.views import allocations, node_capacity

SLURM_API = "lingjun.v1.SlurmApi"
PASS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)

# the node states that give nothing to new jobs
_UNAVAILABLE = frozenset({"down", "drained", "draining", "unknown"})


@dataclass
class NodeSummary:
    """What the nodes hold, by partition: enough for the gauges and for the
    dashboard's utilization samples."""
    nodes: Counter = field(default_factory=Counter)          # (state, partition) -> n
    gpus: Counter = field(default_factory=Counter)           # (partition, state) -> n
    cpus: Counter = field(default_factory=Counter)           # (partition, state) -> n
    account_gpus: Counter = field(default_factory=Counter)   # (partition, account) -> n
    drained: list = field(default_factory=list)              # (node, reason, by)
    states: dict = field(default_factory=dict)               # node -> sinfo %T word

    def total(self, counter: Counter, state: str) -> int:
        return sum(n for (_, s), n in counter.items() if s == state)


def node_state(rec, alloc: dict | None, cpus: int, completing: bool) -> str:
    """A node's sinfo %T word (as GetNodes says it, without the '*')."""
    if rec is None or not rec.registered:
        base = slurm.NODE_UNKNOWN
    elif rec.down:
        base = slurm.NODE_DOWN
    elif not alloc or not alloc["jobs"]:
        base = slurm.NODE_IDLE
    elif (cpus if alloc["exclusive"] else alloc["cpus"]) >= cpus:
        base = slurm.NODE_ALLOCATED
    else:
        base = slurm.NODE_MIXED
    return slurm.node_state_sinfo_long(base, bool(rec and rec.drain), False, completing)


def summarize_nodes(ctl: Controller) -> NodeSummary:
    out = NodeSummary()
    holding = ctl.store.holding_jobs()
    alloc = allocations(holding)
    completing = {n for j in holding for n in j.completing}
    records = ctl.store.live.nodes
    layout = ctl.node_layout()
    connected = ctl.agents.connected
    for name in layout.names:
        rec = records.get(name)
        cap = node_capacity(ctl, name, rec) or (0, 0, 0)
        a = alloc.get(name)
        state = node_state(rec, a, cap[0], name in completing)
        out.states[name] = state
        usable = state not in _UNAVAILABLE and connected(name)
        cpus_alloc = (cap[0] if a["exclusive"] else min(a["cpus"], cap[0])) if a else 0
        gpus_alloc = min(a["gpus"], cap[2]) if a else 0
        for part in layout.partitions_of.get(name, ()):
            out.nodes[(state, part)] += 1
            out.cpus[(part, "allocated")] += cpus_alloc
            out.cpus[(part, "idle" if usable else "unavailable")] += cap[0] - cpus_alloc
            if cap[2]:
                out.gpus[(part, "allocated")] += gpus_alloc
                out.gpus[(part, "idle" if usable else "unavailable")] += cap[2] - gpus_alloc
        if rec is not None and rec.drain:
            out.drained.append((name, rec.reason, "probe" if rec.drain_by_probe else "admin"))
    for job in holding:
        gpus = sum(job.gpus_per_node)
        if gpus:
            out.account_gpus[(job.partition, job.spec.account)] += gpus
    return out


def count_jobs(ctl: Controller) -> Counter:
    """(state, partition, account, reason) -> jobs, over everything squeue shows."""
    counts: Counter = Counter()
    pending = slurm.PENDING
    for job in ctl.store.live.jobs.values():
        state = job.state
        if state == pending:
            weight = slurm.count_indices(job.array_task_str) if job.array_task_str else 1
            counts[(state, job.partition, job.spec.account, job.reason or "None")] += weight
        else:
            counts[(state, job.partition, job.spec.account, "")] += 1
    return counts


class LiveCollector:
    """The live-state gauges, computed at scrape time (prometheus-client calls
    ``collect`` on the thread that renders the page: the daemon's loop)."""

    def __init__(self, ctl: Controller):
        self.ctl = ctl

    def describe(self):
        return []       # no collect() at registration: the live state may not be loaded yet

    def collect(self):
        ctl = self.ctl
        jobs = GaugeMetricFamily("lingjun_jobs", "Jobs the controller holds (squeue's), by state, "
                                 "partition, account and pending reason",
                                 labels=["state", "partition", "account", "reason"])
        for (state, part, account, reason), n in sorted(count_jobs(ctl).items()):
            jobs.add_metric([state, part, account, reason], n)
        yield jobs
        s = summarize_nodes(ctl)
        nodes = GaugeMetricFamily("lingjun_nodes", "Nodes by state (sinfo %T) and partition",
                                  labels=["state", "partition"])
        for (state, part), n in sorted(s.nodes.items()):
            nodes.add_metric([state, part], n)
        yield nodes
        drained = GaugeMetricFamily("lingjun_node_drained", "1 for each drained or draining node, "
                                    "with its reason; by: probe (a health probe) or admin",
                                    labels=["node", "reason", "by"])
        for name, reason, by in s.drained:
            drained.add_metric([name, reason, by], 1)
        yield drained
        for what, counter in (("gpus", s.gpus), ("cpus", s.cpus)):
            fam = GaugeMetricFamily(f"lingjun_partition_{what}",
                                    f"{what.upper()} of each partition: allocated, idle, or "
                                    "unavailable (down, drained, not responding)",
                                    labels=["partition", "state"])
            for (part, state), n in sorted(counter.items()):
                fam.add_metric([part, state], n)
            yield fam
        acc = GaugeMetricFamily("lingjun_account_gpus_allocated",
                                "GPUs held by running jobs, by partition and account",
                                labels=["partition", "account"])
        for (part, account), n in sorted(s.account_gpus.items()):
            acc.add_metric([part, account], n)
        yield acc
        yield from self._activity()

    def _activity(self):
        ctl = self.ctl
        seen = GaugeMetricFamily("lingjun_job_last_activity_timestamp_seconds",
                                 "Running jobs' last sign of life (output written, "
                                 "activity their agents report), Unix time",
                                 labels=["job_id", "user"])
        hang = GaugeMetricFamily("lingjun_job_hang_timeout_seconds",
                                 "--hang-timeout of running jobs that have one",
                                 labels=["job_id"])
        live = ctl.store.live
        for jid in sorted(live.by_state.get(slurm.RUNNING, ())):
            job = live.jobs[jid]
            if not job.launched:
                continue
            seen.add_metric([str(jid), job.user], lifecycle.last_sign_of_life(job, ctl.activity))
            if job.spec.hang_timeout_s > 0:
                hang.add_metric([str(jid)], job.spec.hang_timeout_s)
        yield seen
        yield hang


class ControllerMetrics:
    """The registry the controller's /metrics page renders."""

    def __init__(self, ctl: Controller):
        self.registry = CollectorRegistry(auto_describe=False)
        self.passes = Histogram("lingjun_scheduler_pass_seconds",
                                "Duration of a scheduling pass (snapshot, core, commit)",
                                buckets=PASS_BUCKETS, registry=self.registry)
        self.rpcs = Histogram("lingjun_rpc_duration_seconds",
                              "Duration of unary RPCs the controller answered, by method and "
                              "door (grpc, or socket: the local command socket)",
                              ["service", "method", "door"], buckets=RPC_BUCKETS,
                              registry=self.registry)
        self.registry.register(LiveCollector(ctl))

    def observe_pass(self, seconds: float) -> None:
        self.passes.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def timed_answer(self, answer):
        """The command socket's ``answer`` (transport/command_socket.py), timed
        like a gRPC call of the same method."""
        children: dict[str, object] = {}

        async def timed(method: str, request, who):
            child = children.get(method)
            if child is None:
                child = children[method] = self.rpcs.labels(SLURM_API, method, "socket")
            t0 = time.perf_counter()
            try:
                return await answer(method, request, who)
            finally:
                child.observe(time.perf_counter() - t0)
        return timed


class RpcTimer(grpc.aio.ServerInterceptor):
    """Times each unary-unary call into ``ControllerMetrics.rpcs``."""

    def __init__(self, metrics: ControllerMetrics):
        self.metrics = metrics
        self._children: dict[str, object] = {}

    def _child(self, method: str):
        child = self._children.get(method)
        if child is None:
            service, _, name = method.lstrip("/").rpartition("/")
            child = self._children[method] = self.metrics.rpcs.labels(service, name, "grpc")
        return child

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_streaming or handler.response_streaming:
            return handler
        inner = handler.unary_unary
        child = self._child(handler_call_details.method)

        async def unary_unary(request, context):
            t0 = time.perf_counter()
            try:
                return await inner(request, context)
            finally:
                child.observe(time.perf_counter() - t0)
        return grpc.unary_unary_rpc_method_handler(
            unary_unary, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)

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
                                                     last sign of life (output written, a
                                                      heartbeat's activity) of the running jobs
                                                      silent for SILENT_AFTER_S (5 minutes, or
                                                      half their --hang-timeout) or more
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
from lingjund.service.resources import node_capacity

SLURM_API = "lingjun.v1.SlurmApi"
# lingjun_job_last_activity_timestamp_seconds names only jobs silent this
# long (or half their --hang-timeout, if shorter): a busy cluster's 10,000
# running jobs would otherwise be 10,000 series in every scrape, all saying
# "alive"; the alerts on silence wait far longer than this.
SILENT_AFTER_S = 300.0
PASS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)

# the node states that give nothing to new jobs
_UNAVAILABLE = frozenset({"down", "drained", "draining", "unknown"})


@dataclass
class NodeSummary:
    """What the nodes hold, by partition (for the gauges) and over the whole
    cluster, each node once (for the dashboard's utilization samples)."""
    nodes: Counter = field(default_factory=Counter)          # (state, partition) -> n
    gpus: Counter = field(default_factory=Counter)           # (partition, state) -> n
    cpus: Counter = field(default_factory=Counter)           # (partition, state) -> n
    account_gpus: Counter = field(default_factory=Counter)   # (partition, account) -> n
    drained: list = field(default_factory=list)              # (node, reason, by)
    states: dict = field(default_factory=dict)               # node -> sinfo %T word
    cpus_total: int = 0
    cpus_allocated: int = 0
    gpus_total: int = 0
    gpus_allocated: int = 0


_WORDS: dict[tuple[str, bool, bool], str] = {}


def node_state(rec, held: list[int] | None, cpus: int) -> str:
    """A node's sinfo %T word (as GetNodes says it, without the '*'); ``held``:
    what the jobs there hold (``NodeScan.per_node``)."""
    if rec is None or not rec.registered:
        base = slurm.NODE_UNKNOWN
    elif rec.down:
        base = slurm.NODE_DOWN
    elif not held or not held[2]:
        base = slurm.NODE_IDLE
    elif held[3] or held[0] >= cpus:
        base = slurm.NODE_ALLOCATED
    else:
        base = slurm.NODE_MIXED
    key = (base, bool(rec and rec.drain), bool(held and held[4]))
    word = _WORDS.get(key)
    if word is None:
        word = _WORDS[key] = slurm.node_state_sinfo_long(base, key[1], False, key[2])
    return word


class NodeScan:
    """Summaries of the nodes, one pass over them each, with what does not
    change between two scrapes kept:

    - what the jobs holding resources hold on each node (``per_node``: CPUs,
      GPUs, jobs, exclusive jobs, jobs still completing there), kept by
      difference: records are replaced, never changed, so only a job whose
      record is not the one seen last time is taken out and put in again;
    - a node's capacity, while its configuration and record are the same objects;
    - nodes alike (same partitions, state, and whether they can take work) are
      summed first and spread over their partitions once per kind.
    """

    def __init__(self, ctl: Controller):
        self.ctl = ctl
        self.caps: dict[str, tuple[object, object, tuple[int, int, int]]] = {}
        self.held: dict[int, object] = {}                    # job id -> record counted
        self.per_node: dict[str, list[int]] = {}             # [cpus, gpus, jobs, excl, completing]
        self.account_gpus: Counter = Counter()

    def capacity(self, name: str, rec) -> tuple[int, int, int]:
        config = self.ctl.config
        kept = self.caps.get(name)
        if kept is not None and kept[0] is config and kept[1] is rec:
            return kept[2]
        cap = node_capacity(self.ctl, name, rec) or (0, 0, 0)
        self.caps[name] = (config, rec, cap)
        return cap

    def _count(self, job, sign: int) -> None:
        per_node = self.per_node
        cpus, gpus = job.cpus_per_node, job.gpus_per_node
        for i, node in enumerate(job.nodes):
            a = per_node.get(node)
            if a is None:
                a = per_node[node] = [0, 0, 0, 0, 0]
            a[0] += sign * (cpus[i] if i < len(cpus) else 0)
            a[1] += sign * (gpus[i] if i < len(gpus) else 0)
            a[2] += sign
            a[3] += sign * job.exclusive
            a[4] += sign * (node in job.completing)
        total = sum(gpus)
        if total:
            self.account_gpus[(job.partition, job.spec.account)] += sign * total

    def _update_held(self) -> None:
        live = self.ctl.store.live
        jobs, holding, held = live.jobs, live.holding, self.held
        for jid in holding:
            job = jobs[jid]
            old = held.get(jid)
            if old is job:
                continue
            if old is not None:
                self._count(old, -1)
            self._count(job, 1)
            held[jid] = job
        if len(held) != len(holding):
            for jid in [j for j in held if j not in holding]:
                self._count(held.pop(jid), -1)

    def summarize(self) -> NodeSummary:
        ctl = self.ctl
        out = NodeSummary()
        self._update_held()
        per_node = self.per_node
        records = ctl.store.live.nodes
        layout = ctl.node_layout()
        partitions_of = layout.partitions_of
        connected = ctl.agents.connected
        states = out.states
        kinds: dict[tuple, list[int]] = {}   # (partitions, state, usable) -> [nodes, cpus, cpus
        capacity = self.capacity             #   allocated, gpus, gpus allocated]
        for name in layout.names:
            rec = records.get(name)
            cap = capacity(name, rec)
            a = per_node.get(name)
            state = node_state(rec, a, cap[0])
            states[name] = state
            usable = state not in _UNAVAILABLE and connected(name)
            key = (partitions_of.get(name, ()), state, usable)
            k = kinds.get(key)
            if k is None:
                k = kinds[key] = [0, 0, 0, 0, 0]
            k[0] += 1
            k[1] += cap[0]
            k[3] += cap[2]
            if a and a[2]:
                k[2] += cap[0] if a[3] else min(a[0], cap[0])
                k[4] += min(a[1], cap[2])
            if rec is not None and rec.drain:
                out.drained.append((name, rec.reason, "probe" if rec.drain_by_probe else "admin"))
        for (parts, state, usable), (n, cpus, cpus_a, gpus, gpus_a) in kinds.items():
            out.cpus_total += cpus
            out.cpus_allocated += cpus_a
            out.gpus_total += gpus
            out.gpus_allocated += gpus_a
            free = "idle" if usable else "unavailable"
            for part in parts:
                out.nodes[(state, part)] += n
                out.cpus[(part, "allocated")] += cpus_a
                out.cpus[(part, free)] += cpus - cpus_a
                if gpus:
                    out.gpus[(part, "allocated")] += gpus_a
                    out.gpus[(part, free)] += gpus - gpus_a
        out.account_gpus = +self.account_gpus
        return out


def summarize_nodes(ctl: Controller) -> NodeSummary:
    """The nodes' summary, computed afresh."""
    return NodeScan(ctl).summarize()


def job_key(job) -> tuple[tuple[str, str, str, str], int]:
    """A job's labels (state, partition, account, reason) and how many jobs it
    counts as (a pending array's remainder: each of its tasks)."""
    if job.state == slurm.PENDING:
        weight = slurm.count_indices(job.array_task_str) if job.array_task_str else 1
        return (job.state, job.partition, job.spec.account, job.reason or "None"), weight
    return (job.state, job.partition, job.spec.account, ""), 1


class JobCounts:
    """(state, partition, account, reason) -> jobs, over everything squeue
    shows, kept between scrapes: records are replaced, never changed, when a
    job changes, so a scrape recomputes the labels of the jobs whose record is
    not the one it saw last time and only checks identity for the others."""

    def __init__(self):
        self.seen: dict[int, tuple[object, tuple, int]] = {}
        self.counts: Counter = Counter()

    def update(self, jobs: dict) -> Counter:
        seen, counts = self.seen, self.counts
        for jid, job in jobs.items():
            old = seen.get(jid)
            if old is not None:
                if old[0] is job:
                    continue
                counts[old[1]] -= old[2]
            key, weight = job_key(job)
            counts[key] += weight
            seen[jid] = (job, key, weight)
        if len(seen) != len(jobs):          # some left the live state
            for jid in [j for j in seen if j not in jobs]:
                _, key, weight = seen.pop(jid)
                counts[key] -= weight
        for key in [k for k, n in counts.items() if n <= 0]:
            del counts[key]
        return counts


def count_jobs(ctl: Controller) -> Counter:
    """(state, partition, account, reason) -> jobs, computed afresh."""
    return Counter(JobCounts().update(ctl.store.live.jobs))


class LiveCollector:
    """The live-state gauges, computed at scrape time (prometheus-client calls
    ``collect`` on the thread that renders the page: the daemon's loop)."""

    def __init__(self, ctl: Controller):
        self.ctl = ctl
        self.jobs = JobCounts()
        self.nodes = NodeScan(ctl)

    def describe(self):
        return []       # no collect() at registration: the live state may not be loaded yet

    def collect(self):
        ctl = self.ctl
        jobs = GaugeMetricFamily("lingjun_jobs", "Jobs the controller holds (squeue's), by state, "
                                 "partition, account and pending reason",
                                 labels=["state", "partition", "account", "reason"])
        counts = self.jobs.update(ctl.store.live.jobs)
        for (state, part, account, reason), n in sorted(counts.items()):
            jobs.add_metric([state, part, account, reason], n)
        yield jobs
        s = self.nodes.summarize()
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
                                 "Last sign of life (output written, activity their agents "
                                 "report) of the running jobs silent for 5 minutes (or half "
                                 "their --hang-timeout) or more, Unix time",
                                 labels=["job_id", "user"])
        hang = GaugeMetricFamily("lingjun_job_hang_timeout_seconds",
                                 "--hang-timeout of running jobs that have one",
                                 labels=["job_id"])
        live = ctl.store.live
        now = ctl.clock()
        for jid in sorted(live.by_state.get(slurm.RUNNING, ())):
            job = live.jobs[jid]
            if not job.launched:
                continue
            last = lifecycle.last_sign_of_life(job, ctl.activity)
            timeout = job.spec.hang_timeout_s
            quiet_for = SILENT_AFTER_S if timeout <= 0 else min(SILENT_AFTER_S, timeout / 2)
            if now - last < quiet_for:
                continue
            seen.add_metric([str(jid), job.user], last)
            if timeout > 0:
                hang.add_metric([str(jid)], timeout)
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
        self.live = LiveCollector(ctl)
        self.registry.register(self.live)

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

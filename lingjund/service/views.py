"""The scheduling core's views of the live records, kept from pass to pass.

A pass hands the pure core a ``Snapshot``: a ``JobRequest`` per pending job,
a ``RunningJob`` per job holding nodes, a ``NodeView`` per node. Building
them afresh every pass cost more than the core itself (100,000 pending jobs:
1.8 s of a 3.9 s pass). The live state replaces a record whenever it
changes (records are frozen), so a view built from a record stays right for
as long as the record is the same object: ``Views`` keeps each view with the
record it came from and builds again only when that record was replaced.

What a view also takes from outside its record is checked too: a node's
allocation and connection, the configuration (a reconfigure starts afresh).
What changes every pass whatever the record (an array's free slots, a
dependency's pending reason) is applied on top of the kept view.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

from lingjun import slurm
from lingjund.sched.gpu_topology import GpuTopology
from lingjund.sched.snapshot import (MPS, SHARD, UNLIMITED, JobRequest, NodeView, PartitionView,
                                     RunningJob, Snapshot)
from lingjund.sched import spares as sparesmod
from lingjund.service import devices, priority
from lingjund.service.resources import job_request, node_capacity, node_features, node_gpu_type
from lingjund.store.records import JobRecord, NodeRecord

if TYPE_CHECKING:
    from lingjund.service.context import Controller


def running_job(job: JobRecord) -> RunningJob:
    return RunningJob(
        job_id=job.job_id, nodes=job.nodes, exclusive=job.exclusive,
        end_time=(job.start_time + job.time_limit_min * 60) if job.time_limit_min > 0 else 0.0,
        cpus_per_node=job.cpus_per_node, mem_per_node_mb=job.mem_per_node,
        gpus_per_node=job.gpus_per_node, gpu_ids_per_node=job.gpu_ids,
        shards_per_node=job.spec.shards_per_node, mps_per_node=job.spec.mps_per_node,
        partition=job.partition, priority=job.priority,
        start_time=job.start_time,
        stopping=job.state != slurm.RUNNING or bool(job.kill_reason),
        account=job.spec.account, qos=job.spec.qos or "normal",
        borrowed=job.reason == slurm.REASON_BORROWED)


class Views:
    """The core's views of live records, kept from pass to pass.

    Pending jobs are followed through the live state's change list
    (``Live.take_changed``): a pass rebuilds the requests of the jobs written
    since the last one and reuses the rest, in job id order, so 100,000
    pending jobs of which none changed cost a list copy, not 100,000 checks.
    """

    def __init__(self) -> None:
        self._pending: dict[int, tuple[JobRecord, JobRequest]] = {}
        self._running: dict[int, tuple[JobRecord, RunningJob]] = {}
        self._nodes: dict[str, tuple[tuple, NodeView]] = {}
        # node -> (inventory, gpus, topology): a node's GPU layout is built once
        # per reported inventory (the object, kept here so its id stays its own)
        self._topology: dict[str, tuple[object, int, GpuTopology | None]] = {}
        self._config = None
        self._ctl = None                          # the controller whose records these are
        self._live = None
        self._order: list[int] | None = None   # pending job ids, ascending
        self._pos: dict[int, int] = {}          # job id -> its place in _order
        self._base: list[JobRequest] = []       # their requests, in that order
        self._arrays: set[int] = set()          # those with pending array tasks

    def forget_config(self, config) -> None:
        """A view built under another configuration is not reused."""
        if config is not self._config:
            self._config = config
            self._nodes.clear()
            self._topology.clear()
            self._pending.clear()
            self._order = None

    def forget_requests(self) -> None:
        """Build every pending request again at the next pass: what a request takes
        from outside its record changed for many jobs at once (the fair-share,
        QOS or association factors of service/priority.py)."""
        self._pending.clear()
        self._order = None

    def pending(self, job: JobRecord) -> JobRequest:
        kept = self._pending.get(job.job_id)
        if kept is not None:
            was = kept[0]
            if was is job:
                return kept[1]
            if _same_request(was, job):       # only its reason (or the like) changed
                self._pending[job.job_id] = (job, kept[1])
                return kept[1]
        if self._ctl is not None:
            req = priority.request(self._ctl, job)
        else:                                     # no controller: the neutral factors
            req = job_request(
                job.job_id, job.spec, job.partition, priority=job.priority,
                submit_time=job.submit_time, time_limit_min=job.time_limit_min,
                exclusive=job.exclusive, held=job.held, begin_time=job.eligible_time,
                hold_admin=job.hold_admin, priority_set=job.priority_set, user=job.user,
                max_switch_wait_s=self._config.topology.max_switch_wait_s if self._config else 300.0,
                restarts=job.restarts)
        self._pending[job.job_id] = (job, req)
        return req

    def seen(self, job_id: int) -> JobRecord | None:
        """The record the last snapshot's request for ``job_id`` was built from."""
        kept = self._pending.get(job_id)
        return kept[0] if kept is not None else None

    def running(self, job: JobRecord) -> RunningJob:
        kept = self._running.get(job.job_id)
        if kept is not None and kept[0] is job:
            return kept[1]
        view = running_job(job)
        self._running[job.job_id] = (job, view)
        return view

    def gpu_topology(self, name: str, rec: NodeRecord | None, cfg, gpus: int
                     ) -> GpuTopology | None:
        """The node's GPU layout for the core, built when its inventory was
        replaced (a registration), not on every pass or allocation change."""
        inv = rec.inventory if rec is not None else None
        kept = self._topology.get(name)
        if kept is not None and kept[0] is inv and kept[1] == gpus:
            return kept[2]
        if gpus and ((inv is not None and inv.gpu_devices) or (cfg is not None and cfg.gpu)):
            topo = devices.topology(devices.node_devices(cfg, inv, gpus))
        else:
            topo = None
        self._topology[name] = (inv, gpus, topo)
        return topo

    def node(self, key: tuple, build) -> NodeView:
        """The node view for ``key`` (its name first, then all it is built from)."""
        kept = self._nodes.get(key[0])
        if kept is not None and kept[0] == key:
            return kept[1]
        view = build()
        self._nodes[key[0]] = (key, view)
        return view

    def pending_requests(self, live, running_tasks: dict[int, int],
                         dependency_reasons: dict[int, str]) -> tuple[JobRequest, ...]:
        """The requests of every pending job (but those still completing a
        requeued run), in job id order, with this pass's dependency reasons
        and array slots on top."""
        changed = live.take_changed()
        full = changed is None or live is not self._live or self._order is None
        pending_ids = live.by_state.get(slurm.PENDING, set())
        kept = self._pending
        if full:
            self._live = live
            for jid in [j for j in kept if j not in pending_ids]:
                del kept[jid]
            self._arrays.clear()
            todo = pending_ids
        else:
            todo = changed
        members = full
        updated = []
        for jid in todo:
            job = live.jobs.get(jid)
            if job is None or job.state != slurm.PENDING or job.completing:
                if kept.pop(jid, None) is not None:
                    members = True
                self._arrays.discard(jid)
                continue
            members |= jid not in kept
            updated.append((jid, self.pending(job)))
            if job.array_task_str:
                self._arrays.add(jid)
            else:
                self._arrays.discard(jid)
        if members:
            self._order = sorted(kept)
            self._pos = {jid: i for i, jid in enumerate(self._order)}
            self._base = [kept[jid][1] for jid in self._order]
        else:
            base, pos = self._base, self._pos
            for jid, req in updated:
                base[pos[jid]] = req
        out = self._base
        extra = self._arrays.union(j for j in dependency_reasons if j in self._pos)
        if extra:
            out = list(out)
            jobs, pos = live.jobs, self._pos
            for jid in extra:
                job = jobs[jid]
                array: dict = {}
                if job.array_task_str:   # an array's pending remainder: one request for all
                    slots = UNLIMITED
                    if job.array_max_running:
                        slots = max(0, job.array_max_running
                                    - running_tasks.get(job.array_job_id, 0))
                    array = dict(array_tasks=_tasks(job.array_task_str), array_slots=slots)
                i = pos[jid]
                out[i] = with_pass_fields(out[i], dependency_reasons.get(jid, ""), array)
        return tuple(out)

    def prune_running(self, running: set[int]) -> None:
        """Forget the views of jobs no longer running (or completing)."""
        if len(self._running) > len(running):
            for jid in [j for j in self._running if j not in running]:
                del self._running[jid]


def _same_request(a: JobRecord, b: JobRecord) -> bool:
    """Would ``job_request`` make the same request of both? (A record written
    with a new reason keeps its spec object: only what is asked of the store
    is replaced.)"""
    return (a.spec is b.spec and a.priority == b.priority and a.partition == b.partition
            and a.priority_set == b.priority_set
            and a.time_limit_min == b.time_limit_min and a.exclusive == b.exclusive
            and a.held == b.held and a.hold_admin == b.hold_admin
            and a.eligible_time == b.eligible_time and a.submit_time == b.submit_time
            and a.restarts == b.restarts)


def with_pass_fields(req: JobRequest, dependency: str, array: dict) -> JobRequest:
    """A kept request with what this pass says of it on top."""
    if not dependency and not array:
        return req
    return dataclasses.replace(req, dependency=dependency, **array)


def node_key(name: str, rec: NodeRecord | None, connected: bool, alloc: dict | None) -> tuple:
    a = alloc or {}
    return (name, rec, connected, a.get("cpus", 0), a.get("mem", 0), a.get("gpus", 0),
            a.get("exclusive", False), len(a.get("jobs", ())), a.get("gpu_ids", ()),
            a.get("shared", ()))


@functools.lru_cache(maxsize=256)
def _tasks(task_str: str) -> tuple[int, ...]:
    return tuple(slurm.unfold_indices(task_str))


def allocations(holding: list[JobRecord]) -> dict[str, dict]:
    """node -> {cpus, mem, gpus, gpu_ids, shared, jobs, exclusive} held by running/completing
    jobs (gpu_ids: the whole GPUs they hold there, ascending, as a tuple; shared:
    (GPU, "shard" or "mps", count) per shard or MPS job there)."""
    out: dict[str, dict] = {}
    for job in holding:
        gpu_ids = job.gpu_ids
        spec = job.spec
        kind, count = ((SHARD, spec.shards_per_node) if spec.shards_per_node else
                       (MPS, spec.mps_per_node) if spec.mps_per_node else ("", 0))
        for i, node in enumerate(job.nodes):
            a = out.setdefault(node, {"cpus": 0, "mem": 0, "gpus": 0, "jobs": [], "exclusive": False})
            a["cpus"] += job.cpus_per_node[i] if i < len(job.cpus_per_node) else 0
            a["mem"] += job.mem_per_node[i] if i < len(job.mem_per_node) else 0
            a["gpus"] += job.gpus_per_node[i] if i < len(job.gpus_per_node) else 0
            if count and i < len(gpu_ids) and gpu_ids[i]:
                a["shared"] = a.get("shared", ()) + ((gpu_ids[i][0], kind, count),)
            elif i < len(gpu_ids) and gpu_ids[i]:
                a["gpu_ids"] = a.get("gpu_ids", ()) + gpu_ids[i]
            a["jobs"].append(job.job_id)
            a["exclusive"] |= job.exclusive
    for a in out.values():
        if "gpu_ids" in a:
            a["gpu_ids"] = tuple(sorted(a["gpu_ids"]))
    return out


def build_snapshot(ctl: Controller, now: float,
                   dependency_reasons: dict[int, str] | None = None) -> Snapshot:
    """The core's snapshot of the live state; views of records unchanged since
    the last pass are reused (``Views``)."""
    views: Views = ctl.views
    views.forget_config(ctl.config)
    views._ctl = ctl
    st = ctl.store
    holding = st.holding_jobs()
    alloc = allocations(holding)
    records = st.live.nodes
    parts = ctl.partitions()
    layout = ctl.node_layout()
    connected = ctl.agents.connected
    config_node = ctl.config.node
    node_views = []
    for name in layout.names:
        rec = records.get(name)
        a = alloc.get(name)
        on = connected(name)

        def build(name=name, rec=rec, a=a, on=on):
            cap = node_capacity(ctl, name, rec)
            if cap is None:
                return None
            a = a or {"cpus": 0, "mem": 0, "gpus": 0, "jobs": (), "exclusive": False}
            cfg = config_node(name)
            shared = (cfg.shards, cfg.mps) if cfg else (0, 0)
            return NodeView(
                name=name, cpus=cap[0], memory_mb=cap[1], gpus=cap[2],
                alloc_cpus=a["cpus"], alloc_memory_mb=a["mem"], alloc_gpus=a["gpus"],
                exclusive=a["exclusive"], running_jobs=len(a["jobs"]),
                schedulable=bool(rec and rec.registered and not rec.drain and not rec.down and on),
                partitions=layout.partitions_of[name],
                weight=cfg.weight if cfg else 1,
                features=node_features(ctl, name), gpu_type=node_gpu_type(ctl, name, rec),
                alloc_gpu_ids=a.get("gpu_ids", ()), shards=shared[0], mps=shared[1],
                alloc_shared=tuple(sorted(a.get("shared", ()))),
                gpu_topology=views.gpu_topology(name, rec, cfg, cap[2]) if cap[2] else None)
        view = views.node(node_key(name, rec, on, a), build)
        if view is not None:
            node_views.append(view)
    cpus_of = {v.name: v.cpus for v in node_views}
    fit = {v.name for v in node_views if v.schedulable}
    part_views = tuple(PartitionView(
        name=p.name, nodes=layout.nodes_of[p.name], default=p.default, state=p.state,
        max_time_min=p.max_time_min, default_time_min=p.default_time_min,
        max_nodes=p.max_nodes, min_nodes=p.min_nodes, priority_tier=p.priority_tier,
        total_cpus=sum(cpus_of.get(n, 0) for n in layout.nodes_of[p.name]),
        preempt_mode=ctl.config.preempt_mode(p), priority_job_factor=p.priority_job_factor,
        spares=sparesmod.spares(layout.nodes_of[p.name], fit, p.spare_nodes))
        for p in parts)
    running_tasks: dict[int, int] = {}
    for j in holding:
        if j.array_job_id and j.state == slurm.RUNNING:
            running_tasks[j.array_job_id] = running_tasks.get(j.array_job_id, 0) + 1
    pending = views.pending_requests(st.live, running_tasks, dependency_reasons or {})
    running = tuple(views.running(j) for j in holding)
    views.prune_running({j.job_id for j in holding})
    return Snapshot(nodes=tuple(node_views), partitions=part_views,
                    pending=pending, running=running,
                    preempt_exempt_s=ctl.config.preempt.exempt_time_s,
                    topology=ctl.config.topology.index)

"""Policy hooks of the scheduling core, and the one table that names them.

Three kinds of hook, each a ``typing.Protocol`` so a type checker confirms a
plugin fits:

- ``QueueSort.order``   the pending queue in the order the pass walks it
                        (priority/basic: the stored priority; priority/multifactor:
                        weighted factors computed per pass).
- ``JobFilter.check``   a reason this job will not start in this pass that
                        waiting for resources does not cure, or None.
- ``GangSelect.place_gang``  a whole placement for a job, or None
                        (``IndexedGangSelect.place_in``: the same over the
                        pass's free-capacity index).
- ``NodeFilter.check_node`` / ``check_required``  which nodes a job may use
                        at all (-w, -x, -C, GPU type), and a reason when a
                        node it insists on is unavailable.
- ``Preemptor.victims`` running jobs to preempt so a pending job fits
                        (optional: a profile without one never preempts).

A ``Profile`` picks one sort, filters in order and one select, by the
names in ``REGISTRY`` (Slurm-style ``type/name``); configuration chooses
the names, ``DEFAULT_PROFILE`` is what a plain cluster gets.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Mapping, Protocol, Sequence, runtime_checkable

from lingjund.sched.backfill import Backfill
from lingjund.sched.capacity import FreeNodes
from lingjund.sched.plugins.eligibility import JobEligibility
from lingjund.sched.plugins.gang import GangPlacement
from lingjund.sched.plugins.nodes import NodeRequest
from lingjund.sched.plugins.partition import PartitionLimits
from lingjund.sched.plugins.preempt import PartitionPrioPreempt, QosPreempt
from lingjund.sched.plugins.multifactor import MultifactorPriority
from lingjund.sched.plugins.priority import BasicPriority
from lingjund.sched.pool import NodeFree, Placement
from lingjund.sched.snapshot import (JobRequest, NodeView, PartitionView, QosView, RunningJob,
                                     Snapshot)


@runtime_checkable
class QueueSort(Protocol):
    name: str

    def order(self, pending: Sequence[JobRequest], now: float = 0.0,
              snapshot: Snapshot | None = None) -> list[JobRequest]:
        """Every pending job exactly once, first to consider first. Must be a
        total order (ties broken by job id) so a pass is deterministic. ``now``
        and ``snapshot`` are the pass's (a sort that computes priorities reads
        them; priority/basic does not)."""
        ...

    # Optional: ``rank(pending, now, snapshot) -> (queue, {job_id: priority})``, the
    # same queue and the priority of every job in it, for a sort that computes
    # priorities each pass (the plan carries them, so commands show them).


@runtime_checkable
class JobFilter(Protocol):
    name: str

    def check(self, job: JobRequest, partition: PartitionView, now: float) -> str | None:
        """A Slurm pending-reason word if ``job`` may not start now whatever is
        free, else None. Such a refusal never blocks lower-priority jobs; a
        filter must not look at free resources (that is the select's job)."""
        ...


@runtime_checkable
class GangSelect(Protocol):
    name: str

    def place_gang(self, job: JobRequest, candidates: Sequence[NodeFree],
                   most_nodes: int) -> Placement | None:
        """All of ``job`` on distinct nodes among ``candidates``, or None.
        Must not change ``candidates`` (the caller commits the shares); must
        be deterministic for equal inputs."""
        ...


@runtime_checkable
class IndexedGangSelect(GangSelect, Protocol):
    """A select that also searches the pass's free-capacity index. The pass
    uses ``place_in`` when a select has it (and ``place_gang`` otherwise, over
    lists it builds per job: correct, but a scan of the partition per start)."""

    def shape(self, job: JobRequest) -> Hashable:
        """Everything of ``job`` the placement reads. Two jobs with equal
        shapes, asked of the same nodes, must get the same answer: once a
        shape finds no room in a pass, the pass asks no more for it."""
        ...

    def place_in(self, job: JobRequest, free: FreeNodes, most_nodes: int) -> Placement | None:
        """As ``place_gang``, over ``free`` (``capacity.FreeNodes``). Read only."""
        ...


@runtime_checkable
class NodeFilter(Protocol):
    name: str

    def check_node(self, job: JobRequest, node: NodeView) -> str | None:
        """Why ``node`` can never serve ``job`` (static facts only: its name,
        features, GPU type), or None. Must not look at free resources."""
        ...

    def check_required(self, job: JobRequest, nodes: Mapping[str, NodeView]) -> str | None:
        """A Slurm pending reason when nodes ``job`` insists on (``req_nodes``)
        cannot take work now, or None. Such a job never blocks the jobs behind
        it. Not asked for a job that insists on none."""
        ...

    # Optional: ``node_key(job) -> Hashable``, everything of ``job`` that
    # ``check_node`` reads, ``()`` when it refuses no node to the job. Jobs with
    # equal keys then share one scan of the partition per pass; without the
    # hook every job gets its own scan.


@runtime_checkable
class Preemptor(Protocol):
    name: str

    def victims(self, job: JobRequest, part: PartitionView, candidates: Sequence[NodeFree],
                running: Sequence[RunningJob], partitions: Mapping[str, PartitionView],
                select: GangSelect, most_nodes: int, now: float, exempt_s: float,
                claimed: frozenset[int] = frozenset(),
                qos: Mapping[str, QosView] | None = None) -> tuple[int, ...] | None:
        """Whole running jobs whose resources give ``job`` a placement on
        ``candidates``; an empty tuple when it only waits for jobs already
        stopping; None when preempting cannot make it fit. ``claimed``: victims
        already chosen in this pass; ``qos``: the snapshot's QOS views. Pure."""
        ...


class PluginError(RuntimeError):
    """A plugin failed; the message starts with the plugin's name."""


REGISTRY: dict[str, QueueSort | JobFilter | GangSelect | NodeFilter | Preemptor] = {
    p.name: p for p in (BasicPriority(), MultifactorPriority(), JobEligibility(), PartitionLimits(),
                        GangPlacement(), NodeRequest(), PartitionPrioPreempt(), QosPreempt())
}


@dataclass(frozen=True)
class Profile:
    queue_sort: QueueSort
    filters: tuple[JobFilter, ...]
    select: GangSelect
    node_filters: tuple[NodeFilter, ...] = ()
    preempt: Preemptor | None = None
    # sched/backfill (``sched/backfill.py``): None is Slurm's sched/builtin, strict
    # priority per partition.
    backfill: Backfill | None = None


def build_profile(queue_sort: str, filters: Sequence[str], select: str,
                  node_filters: Sequence[str] = ("node_features/request",),
                  preempt: str | None = None) -> Profile:
    """A profile from plugin names; ValueError naming the first unknown or misplaced one."""
    def pick(name: str, kind: type):
        plugin = REGISTRY.get(name)
        if plugin is None:
            raise ValueError(f"unknown scheduler plugin {name!r} (known: {', '.join(sorted(REGISTRY))})")
        if not isinstance(plugin, kind):
            raise ValueError(f"scheduler plugin {name!r} is not a {kind.__name__}")
        return plugin
    return Profile(queue_sort=pick(queue_sort, QueueSort),
                   filters=tuple(pick(n, JobFilter) for n in filters),
                   select=pick(select, GangSelect),
                   node_filters=tuple(pick(n, NodeFilter) for n in node_filters),
                   preempt=pick(preempt, Preemptor) if preempt else None)


# Eligibility before partition limits: a held job in a DOWN partition shows
# JobHeldUser, since releasing it is the first thing its owner must do.
DEFAULT_PROFILE = build_profile("priority/basic",
                                ("eligibility/basic", "partition/limits"),
                                "select/gang")
# PreemptType=preempt/partition_prio: the default profile plus preemption.
PARTITION_PRIO_PROFILE = build_profile("priority/basic",
                                       ("eligibility/basic", "partition/limits"),
                                       "select/gang", preempt="preempt/partition_prio")
# PreemptType=preempt/qos: the default profile plus preemption by QOS.
QOS_PREEMPT_PROFILE = build_profile("priority/basic",
                                    ("eligibility/basic", "partition/limits"),
                                    "select/gang", preempt="preempt/qos")

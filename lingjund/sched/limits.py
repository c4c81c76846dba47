"""QOS and association limits within one scheduling pass (Slurm's accounting policy).

The service hands the core ``Limits`` (``Snapshot.limits``; None when
``[accounting] enforce`` lacks "limits"): for each QOS its GrpTRES and its
per-user limits (MaxTRESPerUser, MaxJobsPerUser), for each (account, user)
the limits of its association chain (the user's association, then every
account up to root, each with its own GrpTRES/GrpJobs; the user's MaxJobs,
inherited), and what the running jobs already use of each, per scope key.
``PassLimits`` then asks, per pending job, whether it would exceed one, and
charges every job the pass starts, so two jobs in one pass cannot both slip
under a limit. A held job gets the limit's reason and blocks nobody (Slurm
skips it in its main loop).

Example: QOS ``normal`` with GrpTRES=gres/gpu=6, nothing running, two jobs
asking 4 GPUs each: the first starts (4 of 6), the second would make 8 and
pends ``QOSGrpGRES``; a 1-GPU job behind it of any user starts (5 of 6).

TRES counted: CPUs (``cpu``), nodes (``node``) and GPUs (``gres/gpu``).
A job's check before placement uses the least it can take (its minimum
nodes, tasks x CPUs per task, GPUs per node x nodes); the placement found is
checked again with what it really holds before it is committed.

Lending (``Limits.lend``, lending.py): a job that only a GrpTRES (of its
QOS or of an association in its chain) holds back may borrow:
``refusal(..., borrowing=True)`` leaves those TRES caps out (every other
limit, GrpJobs included, still holds), and a borrowed job, running or
started in the pass, is charged to the group scopes ("qos", "assoc",
"account") as one job holding nothing: its TRES are not its account's own
quota's (``charged``).

Cost: one dict lookup per job for its scopes (kept per (qos, account, user)
in the pass), then a few integer comparisons per scope.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Mapping

from lingjun.slurm import (REASON_ASSOC_GRP_CPU, REASON_ASSOC_GRP_GRES, REASON_ASSOC_GRP_JOBS,
                           REASON_ASSOC_GRP_NODE, REASON_ASSOC_MAX_JOBS, REASON_QOS_GRP_CPU,
                           REASON_QOS_GRP_GRES, REASON_QOS_GRP_NODE, REASON_QOS_MAX_CPU_PER_USER,
                           REASON_QOS_MAX_GRES_PER_USER, REASON_QOS_MAX_JOBS_PER_USER,
                           REASON_QOS_MAX_NODE_PER_USER)
from lingjund.sched.snapshot import UNLIMITED, JobRequest


@dataclass(frozen=True)
class Limit:
    """Caps on what running jobs of one scope hold together; UNLIMITED = none.
    ``reasons``: the pending reason for (cpu, node, gpu, jobs)."""

    cpu: int = UNLIMITED
    node: int = UNLIMITED
    gpu: int = UNLIMITED
    jobs: int = UNLIMITED
    reasons: tuple[str, str, str, str] = ("", "", "", "")
    # a GrpTRES: its cpu/node/gpu caps may be lent (lending.py); jobs never are
    lendable: bool = False

    @property
    def any(self) -> bool:
        return (self.cpu, self.node, self.gpu, self.jobs) != (UNLIMITED,) * 4


def qos_grp(cpu=UNLIMITED, node=UNLIMITED, gpu=UNLIMITED) -> Limit:
    """A QOS's GrpTRES."""
    return Limit(cpu, node, gpu, UNLIMITED,
                 (REASON_QOS_GRP_CPU, REASON_QOS_GRP_NODE, REASON_QOS_GRP_GRES, ""), lendable=True)


def qos_per_user(cpu=UNLIMITED, node=UNLIMITED, gpu=UNLIMITED, jobs=UNLIMITED) -> Limit:
    """A QOS's MaxTRESPerUser and MaxJobsPerUser."""
    return Limit(cpu, node, gpu, jobs, (REASON_QOS_MAX_CPU_PER_USER, REASON_QOS_MAX_NODE_PER_USER,
                                        REASON_QOS_MAX_GRES_PER_USER, REASON_QOS_MAX_JOBS_PER_USER))


def assoc_grp(cpu=UNLIMITED, node=UNLIMITED, gpu=UNLIMITED, jobs=UNLIMITED) -> Limit:
    """An association's GrpTRES and GrpJobs (its own and everything below it)."""
    return Limit(cpu, node, gpu, jobs, (REASON_ASSOC_GRP_CPU, REASON_ASSOC_GRP_NODE,
                                        REASON_ASSOC_GRP_GRES, REASON_ASSOC_GRP_JOBS),
                 lendable=True)


def assoc_max_jobs(jobs: int) -> Limit:
    """A user association's MaxJobs."""
    return Limit(jobs=jobs, reasons=("", "", "", REASON_ASSOC_MAX_JOBS))


# Scope keys: ("qos", name), ("qos_user", name, user), ("assoc", account, user),
# ("account", name). A running job counts once against each of its scopes.
def qos_key(qos: str) -> tuple:
    return ("qos", qos)


def qos_user_key(qos: str, user: str) -> tuple:
    return ("qos_user", qos, user)


# the scopes whose GrpTRES may be lent: a borrowed job counts there as a job only
GROUP_SCOPES = frozenset({"qos", "assoc", "account"})
NOTHING = (0, 0, 0)


def charged(key: tuple, took: tuple[int, int, int], borrowed: bool) -> tuple[int, int, int]:
    """The (cpus, nodes, gpus) a job holding ``took`` counts against scope ``key``."""
    return NOTHING if borrowed and key[0] in GROUP_SCOPES else took


def add_usage(usage: dict, keys, took: tuple[int, int, int], borrowed: bool = False) -> None:
    """Count one job holding ``took`` against each scope of ``keys`` in ``usage``
    (key -> [cpus, nodes, gpus, jobs])."""
    for key in keys:
        c, n, g = charged(key, took, borrowed)
        u = usage.get(key)
        if u is None:
            usage[key] = [c, n, g, 1]
        else:
            u[0] += c
            u[1] += n
            u[2] += g
            u[3] += 1


@dataclass(frozen=True)
class Limits:
    """The limits a pass holds pending jobs to, and the running jobs' usage."""

    # QOS name -> its GrpTRES / its per-user limits (only QOS that set one)
    qos_grp: Mapping[str, Limit] = field(default_factory=dict)
    qos_user: Mapping[str, Limit] = field(default_factory=dict)
    # (account, user) -> ((scope key, limit), ...): the association chain's
    # limits, user association first; a key may come twice (GrpJobs and MaxJobs)
    assoc: Mapping[tuple[str, str], tuple[tuple[Hashable, Limit], ...]] = field(default_factory=dict)
    # (account, user) -> every scope key of its chain (what a start is charged to)
    chain: Mapping[tuple[str, str], tuple[Hashable, ...]] = field(default_factory=dict)
    # scope key -> (cpus, nodes, gpus, jobs) of its running jobs (``add_usage``)
    usage: Mapping[Hashable, tuple[int, int, int, int]] = field(default_factory=dict)
    # [scheduler] lend_idle_quota: a job held only by a GrpTRES may borrow (lending.py)
    lend: bool = False


def least(job: JobRequest) -> tuple[int, int, int]:
    """(cpus, nodes, gpus) the job takes at the least."""
    nodes = job.min_nodes if job.min_nodes > 1 else 1
    tasks = job.num_tasks or (job.ntasks_per_node or 1) * nodes
    gpus = job.gpus_per_node * nodes
    cpus = max(tasks * (job.cpus_per_task if job.cpus_per_task > 1 else 1), gpus * job.cpus_per_gpu)
    return cpus, nodes, gpus


class PassLimits:
    """The limits and the usage of one pass; charged as the pass starts jobs."""

    __slots__ = ("limits", "used", "_scopes")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.used: dict[Hashable, list[int]] = {k: list(v) for k, v in limits.usage.items()}
        # (qos, account, user) -> (((key, limit), ...), keys charged)
        self._scopes: dict[tuple[str, str, str], tuple[tuple, tuple]] = {}

    def _of(self, job: JobRequest) -> tuple[tuple, tuple]:
        k = (job.qos, job.account, job.user)
        hit = self._scopes.get(k)
        if hit is None:
            lim = self.limits
            checks, charged = [], [qos_key(job.qos), qos_user_key(job.qos, job.user)]
            g = lim.qos_grp.get(job.qos)
            if g is not None:
                checks.append((charged[0], g))
            u = lim.qos_user.get(job.qos)
            if u is not None:
                checks.append((charged[1], u))
            checks += lim.assoc.get((job.account, job.user), ())
            charged += lim.chain.get((job.account, job.user), ())
            hit = self._scopes[k] = (tuple(checks), tuple(charged))
        return hit

    def refusal(self, job: JobRequest, cpus: int, nodes: int, gpus: int,
                borrowing: bool = False) -> str | None:
        """The reason of the first limit starting ``job`` with this much would pass, or
        None. ``borrowing``: as a borrowed job, past which GrpTRES caps do not hold it."""
        checks = self._of(job)[0]
        if not checks:
            return None
        used = self.used
        for key, lim in checks:
            u = used.get(key)
            c, n, g, j = u if u is not None else (0, 0, 0, 0)
            if lim.jobs != UNLIMITED and j + 1 > lim.jobs:
                return lim.reasons[3]
            if borrowing and lim.lendable:
                continue
            if lim.gpu != UNLIMITED and gpus and g + gpus > lim.gpu:
                return lim.reasons[2]
            if lim.cpu != UNLIMITED and c + cpus > lim.cpu:
                return lim.reasons[0]
            if lim.node != UNLIMITED and n + nodes > lim.node:
                return lim.reasons[1]
        return None

    def borrower(self, job: JobRequest, cpus: int, nodes: int, gpus: int) -> bool:
        """Whether lending is on and only lendable GrpTRES caps hold ``job`` back
        (call after ``refusal`` gave a reason)."""
        return self.limits.lend and self.refusal(job, cpus, nodes, gpus, borrowing=True) is None

    def charge(self, job: JobRequest, cpus: int, nodes: int, gpus: int,
               borrowed: bool = False) -> None:
        """Count a start of ``job`` holding this much against all its scopes."""
        add_usage(self.used, self._of(job)[1], (cpus, nodes, gpus), borrowed)

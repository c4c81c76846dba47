"""Job priority: what the configured plugin (``[priority] type``) gives a job.

- priority/basic: at submission, one less than the job before (job 1 gets
  4294901759, as Slurm), less the job's nice; ``scontrol update Nice=``
  moves it by the difference. The pass orders by it.
- priority/multifactor: the weighted factors of
  ``lingjund/sched/plugins/multifactor.py``, computed at submission and again
  by every pass (age grows); a pass stores the priorities that changed, so
  ``squeue %Q``, ``scontrol show job`` and preemption read the job's record.

A priority an operator set (``scontrol update Priority=N``) is kept by both
(``priority_set``). The inputs that come from accounts (QOS priority and fair
share, ``service/associations.py``) are asked of the hooks below; associations
carry no Priority of their own yet, so the association factor is 0. They are
asked when a job's request is built (``views.Views``: again only when
its record changes), so whoever changes their answers for jobs whose records
stay the same (a new decayed usage, a QOS's Priority) calls
``ctl.views.forget_requests()``, and the next pass asks them again for all.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from lingjun import slurm
from lingjun.v1 import api_pb2
from lingjund.sched.plugins import multifactor
from lingjund.sched.plugins.multifactor import Cluster, MultifactorPriority, Weights
from lingjund.sched.snapshot import JobRequest, PartitionView
from lingjund.service import associations
from lingjund.service.resources import job_request, node_capacity

if TYPE_CHECKING:
    from lingjund.service.context import Controller
    from lingjund.store.records import JobRecord

# priority/basic: the first job gets the highest priority, each later one one less
# (Slurm prints 4294901759 for job 1).
PRIORITY_BASE = 4294901760


def fairshare(ctl: Controller, job: JobRecord) -> float:
    """The Fair Tree factor of the job's association, in [0, 1] (sshare's FairShare);
    1.0 for a job of no association (nothing used)."""
    return associations.fairshare_factor(ctl, job.user, job.spec.account)


_QOS_TOP: dict[int, tuple[int, int]] = {}


def qos_factor(ctl: Controller, job: JobRecord) -> float:
    """The job's QOS Priority over the highest QOS Priority, in [0, 1]; 0 without QOS records."""
    t = ctl.store.assoc
    kept = _QOS_TOP.get(id(t))
    if kept is None or kept[0] != t.version:
        kept = (t.version, max((q.priority for q in t.qos.values()), default=0))
        _QOS_TOP[id(t)] = kept
    q = t.qos.get(job.spec.qos or "normal")
    return q.priority / kept[1] if q is not None and kept[1] > 0 else 0.0


def assoc_factor(ctl: Controller, job: JobRecord) -> float:
    """The association's Priority over the highest association Priority; 0 without them."""
    return 0.0


def weights(ctl: Controller) -> Weights:
    c = ctl.config.priority
    return Weights(age=c.weight_age, assoc=c.weight_assoc, fairshare=c.weight_fairshare,
                   job_size=c.weight_job_size, partition=c.weight_partition, qos=c.weight_qos,
                   max_age_s=c.max_age_min * 60, favor_small=c.favor_small)


_SORTS: dict[int, tuple[object, MultifactorPriority]] = {}


def queue_sort(ctl: Controller) -> MultifactorPriority | None:
    """The multifactor sort for this configuration (one object per configuration,
    so what it keeps between passes survives), or None under priority/basic."""
    if not ctl.config.priority.multifactor:
        return None
    kept = _SORTS.get(id(ctl))
    if kept is None or kept[0] is not ctl.config:
        kept = (ctl.config, MultifactorPriority(weights(ctl)))
        _SORTS[id(ctl)] = kept
    return kept[1]


_CLUSTERS: dict[int, tuple[object, object, Cluster]] = {}


def cluster(ctl: Controller) -> Cluster:
    """Node and CPU counts and the highest PriorityJobFactor (job size, partition factors),
    as the pass counts them; kept while the configuration and the node layout stand
    (a submission asks, and counting 10,000 nodes each time would be most of it)."""
    layout = ctl.node_layout()
    kept = _CLUSTERS.get(id(ctl))
    if kept is not None and kept[0] is ctl.config and kept[1] is layout:
        return kept[2]
    nodes = cpus = 0
    for name in layout.names:
        cap = node_capacity(ctl, name)
        if cap:
            nodes += 1
            cpus += cap[0]
    clu = Cluster(nodes=nodes, cpus=cpus,
                  max_partition_factor=max((p.priority_job_factor for p in ctl.partitions()),
                                           default=0))
    _CLUSTERS[id(ctl)] = (ctl.config, layout, clu)
    return clu


def partition_view(ctl: Controller, name: str) -> PartitionView | None:
    part = ctl.partition(name)
    if part is None:
        return None
    return PartitionView(name=part.name, nodes=(), priority_job_factor=part.priority_job_factor)


def request(ctl: Controller, job: JobRecord) -> JobRequest:
    """The job as the core sees it (the view kept for the last pass when there is one)."""
    return job_request(job.job_id, job.spec, job.partition, priority=job.priority,
                       submit_time=job.submit_time, time_limit_min=job.time_limit_min,
                       exclusive=job.exclusive, held=job.held, begin_time=job.eligible_time,
                       hold_admin=job.hold_admin, priority_set=job.priority_set,
                       user=job.user, fairshare=fairshare(ctl, job),
                       max_switch_wait_s=ctl.config.topology.max_switch_wait_s,
                       restarts=job.restarts,
                       qos_factor=qos_factor(ctl, job), assoc_factor=assoc_factor(ctl, job))


def at_submit(ctl: Controller, job: JobRecord, now: float) -> int:
    """The priority a job just written gets (Slurm's priority_g_set at submission)."""
    if not ctl.config.priority.multifactor:
        return max(PRIORITY_BASE - job.job_id - job.spec.nice, 1)
    return multifactor.job_priority(request(ctl, job), partition_view(ctl, job.partition),
                                    cluster(ctl), weights(ctl), now)


def after_nice(ctl: Controller, job: JobRecord, nice: int, now: float) -> int:
    """The job's priority once its nice is ``nice`` (scontrol update Nice=; Slurm moves
    it by the difference, and a set priority stays)."""
    if job.priority_set:
        return job.priority
    if not ctl.config.priority.multifactor:
        return max(job.priority + job.spec.nice - nice, 1)
    spec = type(job.spec)()
    spec.CopyFrom(job.spec)
    spec.nice = nice
    return at_submit(ctl, replace(job, spec=spec), now)


def factors(ctl: Controller, job: JobRecord, now: float, clu: Cluster | None = None
            ) -> multifactor.Factors:
    """The job's factors at ``now`` (sprio)."""
    return multifactor.factors(request(ctl, job), partition_view(ctl, job.partition),
                               clu or cluster(ctl), weights(ctl), now)



def factors_reply(ctl: Controller, req) -> api_pb2.PriorityFactorsResponse:
    """sprio: the factors of every eligible pending job that is not held, as Slurm's
    sprio lists them (a job whose priority an operator set: that priority, no factors)."""
    c = ctl.config.priority
    reply = api_pb2.PriorityFactorsResponse(priority_type=c.type, weights={
        "age": c.weight_age, "assoc": c.weight_assoc, "fairshare": c.weight_fairshare,
        "jobsize": c.weight_job_size, "partition": c.weight_partition, "qos": c.weight_qos})
    if not c.multifactor:
        return reply
    now = ctl.clock()
    ids, users, parts = set(req.job_ids), set(req.users), set(req.partitions)
    live = ctl.store.live
    clu, w = cluster(ctl), weights(ctl)
    for job_id in sorted(live.by_state.get(slurm.PENDING, ())):
        job = live.jobs.get(job_id)
        if job is None or job.held or job.completing:
            continue
        if not job.eligible_time or job.eligible_time > now:
            continue
        if ids and job.job_id not in ids and job.array_job_id not in ids:
            continue
        if (users and job.user not in users) or (parts and job.partition not in parts):
            continue
        req_ = request(ctl, job)
        if job.priority_set:            # an operator's priority: no factors (Slurm zeroes them)
            f = multifactor.Factors(job_id=job.job_id)
            prio = job.priority
        else:
            f = multifactor.factors(req_, partition_view(ctl, job.partition), clu, w, now)
            prio = multifactor.combine(f, w)
        reply.jobs.add(job_id=job.job_id, partition=job.partition, user=job.user,
                       account=req_.account, qos=req_.qos, priority=prio,
                       site=f.site, age=f.age, assoc=f.assoc, fairshare=f.fairshare,
                       job_size=f.job_size, partition_factor=f.partition, qos_factor=f.qos,
                       nice=f.nice)
    return reply


def config_settings(ctl: Controller) -> dict[str, str]:
    """scontrol show config's Priority* lines, as Slurm prints them (the weights only
    under priority/multifactor)."""
    c = ctl.config.priority
    out = {"PriorityType": c.type}
    if c.multifactor:
        out.update({
            "PriorityFavorSmall": "Yes" if c.favor_small else "No",
            "PriorityFlags": "",
            "PriorityMaxAge": slurm.format_duration(c.max_age_min * 60),
            "PriorityWeightAge": str(c.weight_age),
            "PriorityWeightAssoc": str(c.weight_assoc),
            "PriorityWeightFairShare": str(c.weight_fairshare),
            "PriorityWeightJobSize": str(c.weight_job_size),
            "PriorityWeightPartition": str(c.weight_partition),
            "PriorityWeightQOS": str(c.weight_qos),
            "PriorityWeightTRES": "(null)",
        })
    return out

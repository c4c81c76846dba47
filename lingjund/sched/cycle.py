"""One scheduling pass: which pending jobs start now, where, and why the rest wait.

``schedule(snapshot, now)`` walks the pending queue once, highest priority
first (Slurm 22.05's main scheduler; the profile's queue sort says what the
priority is: priority/basic's stored one, or priority/multifactor's weighted
factors at ``now``, whose new values the plan carries), and returns a
``Plan``: the jobs to start with their per-node shares, and a Slurm
pending-reason word for every other pending job. With backfill in the
profile (Slurm's sched/backfill, ``backfill.py``) a job that does not fit
gets a reservation instead of blocking its partition; see "Backfill" below.

Example. node[1-4], 4 CPUs each, one partition ``debug`` with all four;
node4 is busy with a running job using all its CPUs. Queue:

    job  prio  asks                   decision
    10   200   2 nodes x 2 CPUs       starts on node[1-2], 2 CPUs each
    11   100   3 nodes x 4 CPUs       Resources: only node3 still has 4 free;
                                      debug is now blocked behind job 11
    12    90   1 node  x 1 CPU        Priority: node1 has room, but job 11 is
                                      ahead and the main scheduler is strict
    13    80   held                   JobHeldUser: holds never block
    14    70   5 nodes                PartitionNodeLimit: debug has 4 nodes;
                                      waiting will not help, so never blocks

Per job, in queue order:

1. Filters (``plugins/eligibility.py``, ``plugins/partition.py``) refuse
   what waiting for resources cannot cure: held, a begin time in the
   future, a partition that is down or inactive, or over its limits. These
   never block the jobs behind.
2. A job whose partition is already blocked gets ``Priority``. Blocking
   per partition is what keeps a big gang from starving behind a stream of
   small jobs: without backfill, the only safe choice is to let nothing
   lower in the partition start.
3. Otherwise the select (``plugins/gang.py``) stages the whole job on the
   partition's schedulable nodes, minus every node of a blocked partition
   (those are kept for the higher job, as Slurm drops them from its
   available set). A staged gang is committed whole, so later jobs in the
   pass see what earlier ones took; a failed stage leaves nothing behind.
4. If the job does not fit, the same select is asked again against the
   partition's nodes as if idle. Never fitting (more CPUs per task than any
   node has, ...) gets ``Resources`` without blocking: Slurm refuses these
   at submission and the controller should too; this is defence in depth.
   Fitting some day blocks the partition: ``Resources``, or ``Priority`` if
   it was the reserved nodes of an earlier blocked partition that it lacked
   (it waits behind that job, not for its own turn).

Node filters (``plugins/nodes.py``) narrow step 3's and 4's nodes to those
the job may use at all (-x, -C, GPU type), and give a -w job whose
required node is down or drained ``ReqNodeNotAvail, UnavailableNodes:...``
before any placement; like the filters of step 1 it never blocks.

Topology (``snapshot.topology``, ``lingjun/topology.py``): the select places a gang
under the lowest switch that holds it (``plugins/gang.py``). A job with
``--switches=N`` whose wait (``switches_until``) has run out is placed as if
it asked none: before that, a placement over more than N leaves is no
placement and the job waits with ``Resources`` (or ``Priority``) as any job
that does not fit.

Limits (``snapshot.limits``, ``limits.py``): after the filters, a job that
would take its QOS or association past a limit (GrpTRES, MaxTRESPerUser,
MaxJobsPerUser, MaxJobs, GrpJobs), counting running jobs and every start
earlier in the pass, gets the limit's reason (``QOSGrpGRES``...) and blocks
nothing; the placement found is checked again with what it really holds
before it is committed and charged.

Lending (``limits.lend``, ``lending.py``): a job held back only by a
GrpTRES is a borrower; after the whole queue, borrowers in queue order may
start on what is left (not on blocked partitions' or reserved nodes), as
``Start.borrowed``. A job within its limits that does not fit asks
``lending.victims`` first: borrowed jobs of other accounts, preempted like
any victim (arrays too, one task's room per pass), before the profile's
preemption plugin is asked.

A job naming a partition the snapshot does not have gets
``PartitionConfig`` and does not block.

Backfill. With ``profile.backfill`` set, step 4 does not block the
partition of a job that will fit some day: it asks ``backfill.Future`` for
the earliest time its whole gang fits (running jobs, and the jobs started
earlier in this pass, end at start + time limit) on nodes no earlier
reservation holds then, and reserves those nodes from that time until the
time plus its limit. The plan's ``expected`` carries that (time, nodes).
Every later job's step 3 then leaves out the nodes some reservation holds
before the job would end (now + its limit; a job without a limit, all
reserved nodes), so starting it delays no reserved start. Its reason is
still Slurm's: ``Resources`` for the first job of a partition that waits,
``Priority`` behind it or when only reserved nodes are lacking. In the
example above, job 12 (1 CPU; say its limit ends before job 11's reserved
time) starts on node1 instead of waiting ``Priority``. Only the first
``max_job_test`` jobs that wait are asked (bf_max_job_test); one past that,
or whose earliest time is past the window (bf_window), or that is
preempting, blocks its partition as without backfill. Shapes that found a
time, or none, are remembered per limit too: what a pass reserves and starts
only takes, so the same shape and limit never fits earlier later in the pass.
While no earlier candidate time has come in, what a shape found also binds
its longer limits (``backfill.Frontier``: they need the same nodes for
longer): the next job's search begins at that time, or is not made.

Expedited restarts and spares. A job restarting with --requeue=expedite
(``JobRequest.expedite``) goes first of all, before any tier. A partition's
``spares`` (PartitionView; the service names them, sched/spares.py) are
left out of the nodes every other job may use, as if -x named them. Example:
node[1-5], spares (node5,): a 4-node job starts on node[1-4]; after node3
fails it, its expedited restart takes node[1-2,4-5] at once, ahead of the
queue; a normal 1-node job waits meanwhile (Resources) rather than take node5.

Partition tiers and preemption. The queue is walked highest partition
PriorityTier first (Slurm orders by tier before priority), the plugin's
order kept within a tier. With a preemption plugin in the profile
(``plugins/preempt.py``), a job that does not fit in step 3 asks it for
victims before step 4: whole running jobs of lower tiers
(preempt/partition_prio), or of a QOS its QOS may preempt (preempt/qos,
``snapshot.qos``), whose resources give it a placement. They go into the
plan's ``preemptions``; the job itself
does not start in this pass (the victims still hold their nodes) and goes
through step 4 as usual, which blocks its partition so that nothing lower
takes the nodes the victims give back. Victims chosen for one job are not
offered to another in the same pass.

Job arrays. The pending remainder of an array is one request for up to K
identical tasks (K = its pending tasks, capped by the %N throttle minus the
tasks running). Step 3 repeats for it: each task is staged as a gang of its
own and committed before the next, in task order, until K are placed or one
does not fit. Each start names its task. Tasks left over because the throttle
is used up get ``JobArrayTaskLimit`` and block nothing; tasks left over for
lack of room go through step 4 like any job that does not fit. So an array of
10,000 tasks on 8 free CPUs costs 9 placement attempts per pass, not 10,000.

What a pass costs. Free capacity is indexed per partition
(``capacity.py``): a rank looks only at nodes with the CPUs and GPUs it
asks, best first, and a start moves its nodes between buckets instead of
copying the pool. A blocked partition costs one set lookup per job behind
it. Work is shared between jobs that cannot differ in the answer: the nodes
a job may use are worked out once per partition and node-filter key (same
-x, -C, GPU type), and a job shape (``GangPlacement.shape``) that found no
room in a partition, or would never fit it, is not searched again in the
pass: capacity only shrinks during a pass, so the answer cannot change.

Example: on 10,000 8-GPU nodes, 1,000 jobs asking 9 GPUs on one node (which
never fits) cost one search and one as-if-idle check together, not 2,000;
an array of 1,000 tasks behind a blocked 256-node gang costs none; each of
the 5,000 one-GPU jobs that start looks at a handful of nodes.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Hashable

from lingjun.slurm import (REASON_ARRAY_TASK_LIMIT, REASON_PARTITION_CONFIG, REASON_PRIORITY,
                           REASON_RESOURCES, natural_key)
from lingjund.sched import lending
from lingjund.sched.backfill import NEVER, Frontier, Future, allowed, job_end
from lingjund.sched.capacity import FreeCapacity
from lingjund.sched.limits import PassLimits, least
from lingjund.sched.plugins import DEFAULT_PROFILE, PluginError, Profile
from lingjund.sched.plugins.partition import node_cap
from lingjund.sched.pool import Placement, Share
from lingjund.sched.snapshot import (UNLIMITED, JobRequest, PartitionView, Plan, Preemption,
                                     Snapshot, Start)


# the usable-node key's part for a partition's spares: (SPARES, held back from this job)
SPARES = "spares"


def schedule(snapshot: Snapshot, now: float, profile: Profile = DEFAULT_PROFILE) -> Plan:
    """Decide one pass over ``snapshot`` at time ``now``; pure and deterministic."""
    partitions = {p.name: p for p in snapshot.partitions}
    free = FreeCapacity(snapshot.nodes, snapshot.partitions, snapshot.topology)
    views = {v.name: v for v in free.views}
    select, filters = profile.select, profile.filters
    indexed = (callable(getattr(select, "place_in", None))
               and callable(getattr(select, "shape", None)))
    blocked_parts: set[str] = set()
    starts: list[Start] = []
    reasons: dict[int, str] = {}
    preemptions: list[Preemption] = []
    claimed: set[int] = set()
    usable_sets: dict[tuple[str, Hashable], tuple[tuple[int, ...], frozenset[int] | None]] = {}
    no_room: set[tuple] = set()            # (partition, usable key, shape) that found no room
    ever_fits: dict[tuple, bool] = {}      # same key -> fits the partition as if idle
    # Backfill (profile.backfill; see backfill.py): reservations instead of blocking.
    bf = profile.backfill
    future: Future | None = None           # built when the first job waits
    begun: list[tuple[tuple[Share, ...], float]] = []   # starts before it: (shares, end)
    expected: dict[int, tuple[float, tuple[str, ...]]] = {}
    waiting: set[str] = set()              # partitions where a higher job holds a reservation
    tested = 0                             # reservation queries so far (bf_max_job_test)
    # What a shape and limit found, each with the Future's count of candidate
    # times added before all others when it was found (see Frontier): trusted
    # only while that count is unchanged.
    not_before: dict[tuple, tuple[float, int]] = {}   # key -> its last reserved time: later ones start there
    no_resv: dict[tuple, int] = {}         # key that found no time within the window
    # key without its limit -> what its reservation queries learned (backfill.Frontier):
    # a job of the shape starts its search where one of no longer a limit found its time
    frontier: dict[tuple, Frontier] = {}
    limits = PassLimits(snapshot.limits) if snapshot.limits is not None else None
    # Lending (lending.py): jobs held only by a GrpTRES, tried after all others
    # with the tasks they had placed; the borrowed running jobs, made once per pass
    # (with lending turned off since they started, they still give way).
    lend = limits is not None and limits.limits.lend
    borrowers: list[tuple[JobRequest, int]] = []
    borrowed = [r for r in snapshot.running if r.borrowed]
    no_lend: set[tuple] = set()            # (key, account) that no borrowed job makes room for

    def usable_of(job: JobRequest, part: PartitionView):
        """(usable key, node ids, the same as a set or None) of ``job`` in ``part``:
        computed once per partition and node-filter key (jobs with the same
        -x/-C/GPU type share it), else once per job."""
        ukey = _node_key(profile, job)
        if ukey is not None and part.spares:
            ukey = (*ukey, (SPARES, not job.expedite))   # held back from all but expedited jobs
        usable = usable_sets.get((part.name, ukey)) if ukey is not None else None
        if usable is None:
            usable = _usable(profile, job, free, part.name, ukey,
                             part.spares if not job.expedite else ())
            if ukey is not None:
                usable_sets[(part.name, ukey)] = usable
        return (ukey, *usable)

    def shape_key(job: JobRequest, part: PartitionView, ukey) -> tuple | None:
        """The key of what the select answers for ``job`` (None: not shared)."""
        if not (indexed and ukey is not None):
            return None
        with _blame(select):
            key = (part.name, ukey, select.shape(job))
        return (*key, job.time_limit_min) if bf is not None else key

    queue, priorities = _queue(profile, snapshot, partitions, now)
    for job in queue:
        part = partitions.get(job.partition)
        if part is None:
            reasons[job.job_id] = REASON_PARTITION_CONFIG
            continue
        refusal = None
        for f in filters:                  # _blame, inlined: asked for every pending job
            try:
                refusal = f.check(job, part, now)
            except Exception as e:
                raise (e if isinstance(e, PluginError) else PluginError(f"{f.name}: {e}")) from e
            if refusal is not None:
                break
        if refusal is not None:
            reasons[job.job_id] = refusal
            continue
        if job.req_nodes:
            unavailable = _required_refusal(profile, job, views)
            if unavailable is not None:
                reasons[job.job_id] = unavailable
                continue
        if limits is not None:
            refusal = limits.refusal(job, *least(job))
            if refusal is not None:            # QOS/association limit: waits, blocks nobody
                reasons[job.job_id] = refusal
                if lend and limits.borrower(job, *least(job)):
                    borrowers.append((job, 0))
                continue
        if part.name in blocked_parts:
            reasons[job.job_id] = REASON_PRIORITY
            continue
        if job.switches and now >= job.switches_until:
            job = replace(job, switches=0)     # waited max-wait for its switches: anywhere now

        # The nodes this job may use at all.
        ukey, ids, only = usable_of(job, part)
        most = node_cap(part)
        key = shape_key(job, part, ukey)       # with backfill, by limit: may fit before reservations
        where, excl = only, ()
        if bf is not None:
            end = job_end(job, now)
            if future is not None and future.resv:
                # Nodes reserved for a higher job before this one would end: not now.
                excl = future.excluded(now, end)
                where = allowed(only, excl)

        placed = 0
        held = None                        # the limit that stopped it (or its array) here
        if key is None or key not in no_room:
            while placed < job.wanted:
                if placed and limits is not None:
                    held = limits.refusal(job, *least(job))
                    if held is not None:
                        break
                with _blame(select):
                    if indexed:
                        placement = select.place_in(job, free.free(part.name, where), most)
                    elif excl:
                        placement = select.place_gang(
                            job, free.candidates(i for i in ids if i not in excl), most)
                    else:
                        placement = select.place_gang(job, free.candidates(ids), most)
                if placement is None:
                    if key is not None:
                        no_room.add(key)   # capacity only shrinks in a pass: stays so
                    break
                if limits is not None:
                    took = _took(placement)
                    held = limits.refusal(job, *took)
                    if held is not None:   # more than its least (whole nodes, -N range)
                        break
                    limits.charge(job, *took)
                free.commit(placement.shares)
                if bf is not None:
                    if future is not None:
                        future.started(placement.shares, end)
                    else:
                        begun.append((placement.shares, end))
                task = job.array_tasks[placed] if job.array_tasks else -1
                starts.append(_start(job, placement, task))
                placed += 1
        if held is not None:
            reasons[job.job_id] = held
            if lend and limits.borrower(job, *least(job)):
                borrowers.append((job, placed))
            continue
        if placed == job.wanted:
            if placed < len(job.array_tasks):    # the throttle, not resources, holds the rest
                reasons[job.job_id] = REASON_ARRAY_TASK_LIMIT
            continue
        victims = None
        if borrowed and (key, job.account) not in no_lend:
            # Within its limits and no room: borrowed jobs of other accounts give way first.
            victims = lending.victims(job, free.candidates(ids, schedulable=False), borrowed,
                                      select, most, now, snapshot.preempt_exempt_s,
                                      frozenset(claimed))
            if victims is None and key is not None:
                no_lend.add((key, job.account))   # fewer free and unclaimed later: still none
        if victims is None and profile.preempt is not None and placed == 0 \
                and not job.array_tasks:
            candidates = free.candidates(ids, schedulable=False)
            with _blame(profile.preempt):
                victims = profile.preempt.victims(
                    job, part, candidates, snapshot.running, partitions, select, most,
                    now, snapshot.preempt_exempt_s, frozenset(claimed), snapshot.qos)
        for v in victims or ():
            preemptions.append(Preemption(victim=v, by=job.job_id))
            claimed.add(v)

        ever = ever_fits.get(key) if key is not None else None
        if ever is None:
            with _blame(select):
                if indexed:
                    ever = select.place_in(job, free.idle(part.name, only), most) is not None
                else:
                    ever = select.place_gang(job, free.idle_nodes(ids), most) is not None
            if key is not None:
                ever_fits[key] = ever
        if not ever:
            reasons[job.job_id] = REASON_RESOURCES   # never fits: does not block
            continue
        behind = free.any_blocked(part)
        if bf is not None and not behind:
            # Slurm's words: Resources for the first job of a partition that waits,
            # Priority behind it, or when only higher jobs' reserved nodes are lacking.
            behind = part.name in waiting or (bool(excl) and _fits(select, indexed, job, free,
                                                                   part.name, ids, only, most))
        reasons[job.job_id] = REASON_PRIORITY if behind else REASON_RESOURCES
        if bf is not None and victims is None and tested < bf.max_job_test:
            tested += 1
            if future is None:
                future = Future(free, snapshot.running, begun, now, bf.resolution_s,
                                bf.window_min * 60)
            found = None
            limit_s = job_end(job, 0.0)
            seen = not_before.get(key) if key is not None else None
            start_at = seen[0] if seen is not None and seen[1] == future.lowered else 0.0
            learned = None
            if key is not None and not future.lowered:   # see Frontier
                learned = frontier.setdefault(key[:-1], Frontier())
                start_at = max(start_at, learned.not_before(limit_s))
            # NEVER: one of no longer a limit found no time
            if (key is None or no_resv.get(key) != future.lowered) and start_at != NEVER:
                with _blame(select):
                    found = future.earliest(job, part.name, ids, only, select, most, start_at)
            if learned is not None:
                learned.learn(limit_s, found[0] if found is not None else NEVER)
            if found is not None:
                when, placement = found
                nodes = tuple(sorted((s.node for s in placement.shares), key=natural_key))
                future.reserve(when, job_end(job, when), nodes)
                expected[job.job_id] = (when, nodes)
                waiting.add(part.name)
                if key is not None:     # the pass only takes: never earlier for it
                    not_before[key] = (when, future.lowered)
                continue
            if key is not None:
                no_resv[key] = future.lowered
        # No reservation (no backfill, past bf_max_job_test or the window, or
        # preempting): nothing lower in the partition may start, as Slurm's main scheduler.
        blocked_parts.add(part.name)
        free.block(part)

    # Lending: the borrowers, in queue order, on what every other job left (lending.py).
    for job, done in borrowers:
        part = partitions[job.partition]
        if part.name in blocked_parts:
            continue                           # kept for a higher job
        if done:                               # an array's tasks not placed as its own
            slots = job.array_slots if job.array_slots == UNLIMITED else job.array_slots - done
            job = replace(job, array_tasks=job.array_tasks[done:], array_slots=slots)
        if job.switches and now >= job.switches_until:
            job = replace(job, switches=0)
        ukey, ids, only = usable_of(job, part)
        key = shape_key(job, part, ukey)
        if key is not None and key in no_room:
            continue
        most = node_cap(part)
        where, excl = only, ()
        end = job_end(job, now)
        if future is not None and future.resv:   # delays no reserved start
            excl = future.excluded(now, end)
            where = allowed(only, excl)
        placed = 0
        while placed < job.wanted:
            if limits.refusal(job, *least(job), borrowing=True) is not None:
                break
            with _blame(select):
                if indexed:
                    placement = select.place_in(job, free.free(part.name, where), most)
                else:
                    placement = select.place_gang(
                        job, free.candidates(i for i in ids if i not in excl), most)
            if placement is None:
                if key is not None:
                    no_room.add(key)
                break
            took = _took(placement)
            if limits.refusal(job, *took, borrowing=True) is not None:
                break
            limits.charge(job, *took, borrowed=True)
            free.commit(placement.shares)
            if future is not None:
                future.started(placement.shares, end)
            elif bf is not None:
                begun.append((placement.shares, end))
            task = job.array_tasks[placed] if job.array_tasks else -1
            starts.append(replace(_start(job, placement, task), borrowed=True))
            placed += 1
        if placed and placed == job.wanted:
            if placed < len(job.array_tasks):
                reasons[job.job_id] = REASON_ARRAY_TASK_LIMIT
            else:
                reasons.pop(job.job_id, None)

    return Plan(starts=tuple(starts), reasons=reasons, preemptions=tuple(preemptions),
                expected=expected, priorities=priorities)


def _fits(select, indexed: bool, job: JobRequest, free: FreeCapacity, part: str,
          ids: tuple[int, ...], only: frozenset[int] | None, most: int) -> bool:
    """Would ``job`` fit now if no reservation held nodes (it then waits behind one)?"""
    with _blame(select):
        if indexed:
            return select.place_in(job, free.free(part, only), most) is not None
        return select.place_gang(job, free.candidates(ids), most) is not None


def _queue(profile: Profile, snapshot: Snapshot, partitions: dict[str, PartitionView],
           now: float) -> tuple[list[JobRequest], dict[int, int]]:
    """The queue the pass walks, and the priorities the sort computed (if it does)."""
    sort, pending = profile.queue_sort, snapshot.pending
    priorities: dict[int, int] = {}
    with _blame(sort):
        rank = getattr(sort, "rank", None)
        if rank is not None:
            queue, priorities = rank(pending, now, snapshot)
        else:
            queue = sort.order(pending, now, snapshot)
    tiers = {p.priority_tier for p in partitions.values()}
    if len(tiers) > 1:
        # Higher PriorityTier first; sorted() is stable, so the plugin's order holds within
        # a tier. With one tier only jobs of unknown partitions (tier 0) would move, and
        # they start nothing and block nothing, so the sort is skipped.
        tier = {name: p.priority_tier for name, p in partitions.items()}
        queue = sorted(queue, key=lambda j: -tier.get(j.partition, 0))
    if any(j.expedite for j in queue):
        # Expedited restarts are the highest priority jobs there are (Slurm 25.11)
        queue = sorted(queue, key=lambda j: not j.expedite)
    return queue, priorities


def _required_refusal(profile: Profile, job: JobRequest, views) -> str | None:
    for f in profile.node_filters:
        with _blame(f):
            reason = f.check_required(job, views)
        if reason is not None:
            return reason
    return None


def _node_key(profile: Profile, job: JobRequest) -> Hashable | None:
    """Jobs with equal keys may use the same nodes; None when a filter cannot say."""
    keys = []
    for f in profile.node_filters:
        node_key = getattr(f, "node_key", None)
        if node_key is None:
            return None
        with _blame(f):
            keys.append(node_key(job))
    return tuple(keys)


def _usable(profile: Profile, job: JobRequest, free: FreeCapacity, part: str,
            key: Hashable | None, spares: tuple[str, ...] = ()
            ) -> tuple[tuple[int, ...], frozenset[int] | None]:
    """Ids of the partition's nodes ``job`` may use (partition order), and the same as a
    set, or None when that is all of them. ``spares``: nodes held back from it."""
    members = free.members(part)
    if not spares and key is not None and all(k == () or k[0] == SPARES for k in key):
        return members, None               # no filter refuses any node to this job
    ids = list(members)
    if spares:
        held = frozenset(spares)
        ids = [i for i in ids if free.views[i].name not in held]
    for f in profile.node_filters:
        with _blame(f):
            ids = [i for i in ids if f.check_node(job, free.views[i]) is None]
    return tuple(ids), None if len(ids) == len(members) else frozenset(ids)


def _took(placement: Placement) -> tuple[int, int, int]:
    """(cpus, nodes, gpus) a placement holds, as limits count them."""
    shares = placement.shares
    return sum(s.cpus for s in shares), len(shares), sum(s.gpus for s in shares)


def _start(job: JobRequest, placement: Placement, array_task_id: int = -1) -> Start:
    shares = placement.shares
    if len(shares) > 1:
        shares = sorted(shares, key=lambda s: natural_key(s.node))
    return Start(job_id=job.job_id,
                 nodes=tuple(s.node for s in shares),
                 cpus_per_node=tuple(s.cpus for s in shares),
                 mem_per_node_mb=tuple(s.mem_mb for s in shares),
                 gpus_per_node=tuple(s.gpus for s in shares),
                 tasks_per_node=tuple(s.tasks for s in shares),
                 exclusive=job.exclusive, array_task_id=array_task_id,
                 gpu_ids_per_node=tuple(s.gpu_ids for s in shares))


class _blame:
    """Put the plugin's name on anything it raises (a class: cheaper than a generator
    context manager, and the pass enters one per job)."""

    __slots__ = ("plugin",)

    def __init__(self, plugin) -> None:
        self.plugin = plugin

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is None or isinstance(exc, PluginError) or not isinstance(exc, Exception):
            return False
        raise PluginError(f"{self.plugin.name}: {exc}") from exc

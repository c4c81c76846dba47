"""Lending idle quota: a job held back only by a GrpTRES may run on what nobody else can use.

Beyond Slurm (Kueue calls it borrowing from a cohort), told in Slurm's words.
A site turns it on with one setting, ``[scheduler] lend_idle_quota = true``
(with ``[accounting] enforce`` holding "limits"; ``Limits.lend``). It is a
cluster setting, not a QOS flag, because it changes how the pass reads every
GrpTRES alike, the associations' (an account's quota, the usual case) as
much as the QOS's, and a QOS flag of our own would be refused by real
sacctmgr (Slurm's Flags are a closed list) and could not reach an account.

What it changes in a pass (``cycle.schedule``):

1. A job whose only refusal is a GrpTRES cap (QOSGrpGRES, AssocGrpGRES,
   ...; every other limit, GrpJobs and the per-user ones included, still
   holds: ``PassLimits.borrower``) waits with that reason as before, and is
   remembered as a borrower.
2. After every other pending job had its turn, the borrowers, in queue
   order, may start on what is still free: not on nodes of a partition a
   higher job blocked, nor on nodes a backfill reservation holds before the
   borrower would end. What is left then is what no one else's pending job
   can use now. Such a start is ``Start.borrowed``: the job runs with
   Reason=Borrowed, is charged as a job but not for its TRES to its group
   scopes (``limits.charged``), so its own account's quota stays its own:
   borrowed jobs never stop the account's later jobs within its quota.
3. A job within its own limits that does not fit (``victims``) may preempt
   borrowed jobs of another account, whatever their partitions' tiers or
   PreemptMode: the fewest that make room (the same search as preemption,
   ``plugins/preempt.search``), not before PreemptExemptTime. The service
   requeues them (signal, GraceTime, requeue; a job that may not be
   requeued ends PREEMPTED), and they wait as borrowers again. A job that
   started borrowed stays so until it ends, and gives way even after the
   setting is turned off.

Example: accounts A and B, GrpTRES=gres/gpu=4 each, 8 GPUs. A submits ten
1-GPU jobs, B nothing: four start as A's own; the others wait AssocGrpGRES,
and four of them then start borrowed (Reason=Borrowed), using all 8 GPUs;
two wait. B submits a 1-GPU job: it is within B's quota and does not fit,
so one of A's borrowed jobs is preempted and requeued; B's job starts once
that one has left its node. A's own four are never touched.

Cost: the borrowers cost one more placement each, after the queue (shapes
that found no room are not searched again, as in the main loop); the
preemption search looks only at the pass's borrowed running jobs, a list
made once per pass, and only for jobs that do not fit.
"""
from __future__ import annotations

from typing import Sequence

from lingjund.sched.plugins.preempt import search
from lingjund.sched.pool import NodeFree
from lingjund.sched.snapshot import JobRequest, RunningJob


def victims(job: JobRequest, candidates: Sequence[NodeFree], borrowed: Sequence[RunningJob],
            select, most_nodes: int, now: float, exempt_s: float,
            claimed: frozenset[int]) -> tuple[int, ...] | None:
    """Borrowed jobs (``borrowed``: the pass's borrowed running jobs, stopping
    ones too) of accounts other than ``job``'s to preempt so that ``job`` fits;
    ``WAIT`` (empty) when it only waits for some already stopping; None when
    taking them all would not make it fit. Pure."""
    return search(job, candidates, borrowed, select, most_nodes, claimed,
                  lambda r: r.account != job.account and now >= r.start_time + exempt_s)

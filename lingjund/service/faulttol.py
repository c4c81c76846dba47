"""Fault tolerance: what becomes of running jobs when a node is lost or a job hangs.

Node loss. ``nodes.check_heartbeats`` sets a silent node DOWN ("Not
responding"); each pass, ``handle_lost_nodes`` then stops every running job
holding a DOWN node, as a whole gang (no half-gang keeps running):

    RUNNING, node2 of node[1-2] DOWN
      batch host (node1) alive:  kill_reason NODE_FAIL, node1 told to stop the
                                 job; its BatchFinished ends the run NODE_FAIL
                                 (lifecycle.batch_ended, batch.commit_run_end)
      batch host lost:           the run ends here and now, NODE_FAIL; the
                                 survivors are told to stop and clean up
    then: restartable (restarts.py) -> PENDING, same id and priority,
          Restarts+1, BeginTime = now + backoff (none with --requeue=expedite),
          on any nodes but the lost ones (its spec's failed_nodes)
          otherwise                 -> NODE_FAIL, reason NodeDown

The failed node is excluded for as long as it is DOWN, because the scheduler
never places work on a DOWN node; a node that was only silent comes back by
registering, and its agent then kills what it still runs of jobs that are no
longer expected there (nodes.register).

Fencing: nothing runs twice. The silent node's agent held a lease on its
jobs that ended no later than the DOWN (each heartbeat we answer renews it
from the heartbeat's send; lingjun_agent/launcher/lease.py), and when it
ends the node's supervisors stop the jobs there, frozen or dead agent or
not, within the fence grace. So a new attempt of a job of a node DOWN for
silence waits until DOWN + ``fence_margin`` (``restarts.fence_wait_s``;
grace + 2 s by default), and a NODE_FAIL'd job counts as completing for its
dependents that long (``dependencies``).

    t_send  last heartbeat answered      agent: lease ends t_send + timeout
    t_recv  >= t_send                    controller: DOWN at t_recv + timeout
    fence   lease end .. + grace         SIGTERM, grace, SIGKILL on the node
    restart >= DOWN + grace + slack      elsewhere

The check is by state, not by event, so it also catches what happened while
the controller was down: a node whose agent died meanwhile never reconnects,
goes DOWN one heartbeat timeout after the controller is back (timed from the
controller's start, not from the last sighting before it), and its jobs are
handled on the next pass.

Hangs. A job may ask for ``--hang-timeout``: each agent reports, per running
job, the last sign of life it saw (output written, task output relayed, the
mtime of ``LINGJUN_HEARTBEAT_FILE``; ``lingjun_agent/launcher/watch.py``) in
its heartbeats. ``check_hangs`` stops a job silent on every node for longer
than its timeout (kill_reason HANG); the run then ends FAILED and restarts
per the restart policy.

Stragglers. Each heartbeat also carries, per job, the few srun tasks on
that node silent the longest (each rank's relayed output, its output
files, and ``$LINGJUN_HEARTBEAT_DIR/rank.N``, which ``lingjun.heartbeat`` or
the trainer touches), counted from the task's start: a few entries per job
and node, whatever the job's size. ``note_activity`` keeps each node's
latest report. A rank silent past the timeout while the job as a whole
lives is a straggler (``lifecycle.hangs``): the job is stopped as hung, its
history says "rank 37 on node12 silent for 300 s; others active", and the
rank's node is quarantined (``quarantine.py``) and avoided by the restart.

Worked example: job 7, 4 nodes, --hang-timeout 5 s, one task each. At
t=1007 node3 reports rank 2 last seen at 1001, the others report ranks seen
at 1007: rank 2 is past 1001 + 5, the job lives (1007), so job 7 stops with
"rank 2 on node3 silent for 6 s; others active (--hang-timeout 5 s)",
node3 drains "suspect: job 7 rank 2 silent for 6 s", and the next run
avoids node3.

Checkpoints. Every batch job sees ``LINGJUN_CHECKPOINT_DIR``, the same
directory for every run of the job (``[faulttol] checkpoint_root``/<job id>,
by default under the controller's state dir, which the local cluster
shares), made by the agent and owned by the job's user; and
``LINGJUN_HEARTBEAT_FILE`` inside it, a file the job may touch to say it lives.
"""
from __future__ import annotations

import dataclasses
import logging

from lingjun import slurm
from lingjun.v1 import agent_pb2, api_pb2
from lingjund import lifecycle
from lingjund.lifecycle import NODE_LOST
from lingjund.service import batch, errors, quarantine, restarts, timers
from lingjund.service.context import Controller
from lingjund.store.store import JobRecord

log = logging.getLogger("lingjund.faulttol")

# -- node loss ---------------------------------------------------------------------
def handle_lost_nodes(ctl: Controller) -> None:
    """Stop (and requeue or fail) every running job that holds a DOWN node."""
    now = ctl.clock()
    v = timers.view(ctl, now, deadlines=False, nodes=True)
    for c in lifecycle.node_loss(v, now):
        if isinstance(c, lifecycle.NodeLost):
            _node_lost(ctl, c.job_id, c.lost, c.why, now)
        else:
            # A DOWN node will not say JobCleaned (if it returns, its agent kills
            # what it still runs of the job at registration): stop waiting for it.
            batch.job_cleaned(ctl, c.node, agent_pb2.JobCleaned(job_id=c.job_id))


def _node_lost(ctl: Controller, job_id: int, lost: tuple[str, ...], why: str, now: float) -> None:
    """Carry out ``lifecycle.node_loss``'s NodeLost for one job: load, ask
    ``lifecycle.node_lost``, commit, send."""
    lost_txt = slurm.compress_hostlist(lost)
    with ctl.store.transaction() as st:
        cur = st.job(job_id)
        if cur is None or cur.state != slurm.RUNNING or cur.kill_reason == NODE_LOST:
            return
        restarts.record_job_event(
            st, cur.job_id, restarts.EV_NODE_LOST,
            f"node {lost_txt} lost ({why}) while running on "
            f"{slurm.compress_hostlist(list(cur.nodes))}", now)
        restarts.avoid(st, cur.job_id, lost)
        cur = st.job(job_id)
        connected = batch.alive(ctl, cur)
        alive = tuple(n for n in cur.nodes if n not in lost and n in connected)
        grace = ctl.config.controller.kill_wait_s
        change = lifecycle.node_lost(cur, lost, alive, now, grace_s=grace,
                                     policy=restarts.policy(ctl, st, cur, now),
                                     connected=connected)
        if change is None:
            return      # already being stopped (cancel, time limit...): its result ends it
        if isinstance(change, lifecycle.RunEnd):
            # its script is gone with the node: the run ends here and now
            batch.commit_run_end(st, cur, change,
                                 agent_pb2.BatchFinished(job_id=cur.job_id, signal=9), now)
            change = lifecycle.Transition(cur.job_id, {},
                                          lifecycle.reachable(cur, alive, connected),
                                          min(2.0, grace), "node failure", ended=True)
        else:
            batch.commit(st, cur, change, now)
    log.warning("job=%d node=%s: node lost (%s), stopping the job on %s", job_id, lost_txt,
                why, slurm.compress_hostlist(list(alive)) or "no node")
    batch.send(ctl, [change])


# -- hangs ---------------------------------------------------------------------------
def note_activity(ctl: Controller, node: str, hb: agent_pb2.Heartbeat) -> None:
    """Keep the newest sign of life per job over all of its nodes, and each
    node's latest report of the job's quietest ranks (not persisted: after a
    controller restart every job counts as alive at its first pass)."""
    with_ranks = set()
    for a in hb.activity:
        if a.last_activity > ctl.activity.get(a.job_id, 0.0):
            ctl.activity[a.job_id] = a.last_activity
        if a.quiet_ranks:
            with_ranks.add(a.job_id)
            ctl.ranks.setdefault(a.job_id, {})[node] = tuple(
                lifecycle.RankSeen(node, r.step_id, r.rank, r.last_activity)
                for r in a.quiet_ranks)
    # the node's earlier report named ranks of jobs it no longer does: they ended here
    for jid in ctl.rank_reports.get(node, set()) - with_ranks:
        ctl.ranks.get(jid, {}).pop(node, None)
    if with_ranks:
        ctl.rank_reports[node] = with_ranks
    else:
        ctl.rank_reports.pop(node, None)


def check_hangs(ctl: Controller) -> None:
    """Stop the jobs silent past their --hang-timeout (lifecycle.hangs)."""
    now = ctl.clock()
    v = timers.view(ctl, now, deadlines=False)
    live = {j.job_id for j in v.running}
    for jid in [j for j in ctl.activity if j not in live]:
        del ctl.activity[jid]
    for jid in [j for j in ctl.ranks if j not in live]:
        del ctl.ranks[jid]
    # a job with no report since this controller started counts as alive now
    for job in v.running:
        if lifecycle.hang_after(job, ctl.activity) is not None:
            ctl.activity.setdefault(job.job_id, now)
    timers.apply(ctl, lifecycle.hangs(dataclasses.replace(v, activity=dict(ctl.activity)), now),
                 now)


# -- starts and history ----------------------------------------------------------------
def after_starts(ctl: Controller, started: list[JobRecord]) -> None:
    """Record where restarted jobs run again, and forget the old run's activity."""
    again = [j for j in started if j.restarts]
    for j in started:
        ctl.activity.pop(j.job_id, None)
        ctl.ranks.pop(j.job_id, None)
        quarantine.forget_run(ctl, j.job_id)
    if not again:
        return
    now = ctl.clock()
    with ctl.store.transaction() as st:
        for job in again:
            restarts.note_started(st, job, now)


def attempt_msgs(attempts) -> list[api_pb2.JobAttempt]:
    return [api_pb2.JobAttempt(
        attempt=a.attempt, nodes=slurm.compress_hostlist(list(a.nodes)),
        start_time=int(a.start_time), end_time=int(a.end_time), state=a.state,
        exit_code=a.exit_code, exit_signal=a.exit_signal) for a in attempts]


def get_events(ctl: Controller, req: api_pb2.GetJobEventsRequest) -> api_pb2.GetJobEventsResponse:
    job = ctl.store.job(req.job_id)
    if job is None:
        raise errors.InvalidJobId()
    events = [api_pb2.JobEvent(time=int(e.time), kind=e.kind, text=e.text)
              for e in ctl.store.job_events(job.job_id)]
    return api_pb2.GetJobEventsResponse(
        events=events, attempts=attempt_msgs(ctl.store.attempts([job.job_id]).get(job.job_id, [])),
        state=job.state)

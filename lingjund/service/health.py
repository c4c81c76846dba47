"""Node health from the agents' probes: drain, return to service, job prologs.

State machine of a node's DRAIN flag as probes drive it (a person's
``scontrol update State=DRAIN`` sits above it: probes never lift, nor
re-word, a drain a person set; NHC's etiquette):

                 drain probe fails
      in service ─────────────────► DRAIN (by probe)   Reason="<probe>: <why>"
          ▲                            │   Slurm shows DRAINING while jobs run,
          │  every drain probe passes  │   DRAINED once they end
          └────────────────────────────┤
                                       │ passes, but it is the flap_count-th
                                       ▼ recovery within flap_window_s
                                DRAIN (held)  Reason="flapping: ..."; only a person resumes

Every transition is a row of ``node_events``; each probe's last result is a
row of ``probe_results`` (``lingjun health``, ``scontrol show node``).

Prolog. When the scheduler starts a batch job and [sanity] prolog is on, the
job is RUNNING but its script is not sent: each of its nodes first runs its
prolog probes (SanityPrologRequest → SanityReport). All pass → the script is
sent to the batch host. One fails → that node is drained with the probe's
reason, and the job goes back to PENDING at once with its priority, submit
time and restart count unchanged (it was never started, so nothing is
"re"-queued: its place in the queue is kept), and the scheduler is woken so
it lands on healthy nodes in the same breath, or pends with Slurm's reason.
A node that does not answer within prolog_timeout_s counts as failed.

TCP all-to-all ([sanity] reachability, multi-node jobs): the request names
every node's reachability listener; each node reports the peers it could
not reach. Once every node has answered, a node that most of its peers
(at least half, and at least one) could not reach is the one to blame: it
is drained "tcp: unreachable from node1,node4" and the job goes back as
above. A node that merely could not reach others is not drained for it.

Worked example: a 4-node job is placed on node[1-4]; node3's drop-in
``gpu_burn`` fails in the prolog. node3 becomes DRAIN
"dropin:gpu_burn: ..."; the job is PENDING again; the next pass places it
on node[1-2,4-5].
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

from lingjun import slurm
from lingjun.v1 import agent_pb2, api_pb2
from lingjund import lifecycle
from lingjund.service import batch, errors, quarantine, timers
from lingjund.service.context import Controller
from lingjund.store.records import NodeEvent, ProbeResult

log = logging.getLogger("lingjund.health")

PROBE_USER = "root"             # who a probe's drain is shown as (NHC runs as root)
DRAIN, RESUME, FLAPPING, PROLOG_FAIL = "drain", "resume", "flapping", "prolog_fail"


def probe_record(node: str, r: api_pb2.SanityResult) -> ProbeResult:
    return ProbeResult(node=node, name=r.name, severity=r.severity, ok=r.ok, reason=r.reason,
                       duration_s=r.duration_s, time=r.time, phase=r.phase)


def probe_msg(r: ProbeResult) -> api_pb2.SanityResult:
    return api_pb2.SanityResult(name=r.name, severity=r.severity, ok=r.ok, reason=r.reason,
                                duration_s=r.duration_s, time=r.time, phase=r.phase)


def event_msg(e: NodeEvent) -> api_pb2.SanityEvent:
    return api_pb2.SanityEvent(time=e.time, node=e.node, event=e.event, reason=e.reason,
                               job_id=e.job_id, by=e.by)


def failing(results) -> list[api_pb2.SanityResult]:
    return sorted((r for r in results if not r.ok and r.severity == "drain"), key=lambda r: r.name)


def drain_reason(bad: list[api_pb2.SanityResult]) -> str:
    first = f"{bad[0].name}: {bad[0].reason}"
    return first + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else "")


def record(ctl: Controller, node: str, phase: str, results, job_id: int = 0) -> bool:
    """Store a pass's results and move the node's drain state; True if the node
    has a failing drain probe in this pass."""
    results = list(results)
    if not results:
        return False
    cfg = ctl.config.sanity
    now = ctl.clock()
    bad = failing(results)
    with ctl.store.transaction() as st:
        st.put_probe_results(node, [probe_record(node, r) for r in results])
        if phase in ("register", "periodic"):
            st.forget_probe_results(node, "dropin:", [r.name for r in results])
        rec = st.node(node)
        if rec is None or rec.down:
            return bool(bad)
        if rec.drain and rec.drain_by_probe and rec.reason.startswith(lifecycle.SUSPECT):
            return bool(bad)     # a suspect: only its extended check lifts it (quarantine.py)
        implicating = [r for r in bad if r.name in quarantine.SUSPECT_PROBES]
        if implicating and not (rec.drain and not rec.drain_by_probe):
            # a one-off sign (an XID) passes at the next look: a suspect, checked before it returns
            quarantine.suspect(ctl, st, node, drain_reason(implicating), job_id, now)
            return True
        if bad:
            reason = drain_reason(bad)
            if not rec.drain:
                st.put_node(node, drain=True, drain_by_probe=True, reason=reason,
                            reason_user=PROBE_USER, reason_time=now)
                st.add_node_event(node, now, PROLOG_FAIL if phase == "prolog" else DRAIN,
                                  reason, job_id)
                log.warning("node=%s: drained by probe (%s): %s", node, phase, reason)
            elif rec.drain_by_probe and rec.reason != reason:
                st.put_node(node, reason=reason)    # still failing, now for this
            return True
        if rec.drain and rec.drain_by_probe:
            # a person's resume starts the count afresh
            since = max(now - cfg.flap_window_s, st.last_person_event_time(node))
            recoveries = st.node_events(node, since=since, event=RESUME, by_probe=True)
            if len(recoveries) + 1 >= cfg.flap_count:
                why = (f"flapping: {len(recoveries) + 1} recoveries in {cfg.flap_window_s:g} s, "
                       f"last {rec.reason}")
                st.put_node(node, drain_by_probe=False, reason=why, reason_time=now)
                st.add_node_event(node, now, FLAPPING, why)
                log.warning("node=%s: kept drained: %s", node, why)
            else:
                st.put_node(node, drain=False, drain_by_probe=False, reason="", reason_user="",
                            reason_time=0)
                st.add_node_event(node, now, RESUME, rec.reason)
                log.info("node=%s: probes pass again, returned to service (was: %s)",
                         node, rec.reason)
                ctl.wake_scheduler()
    return False


def clock_reply(hb: agent_pb2.Heartbeat) -> agent_pb2.ControllerMessage:
    """The answer to a heartbeat, our time: the agent's clock probe takes its
    offset, and its lease is renewed from the heartbeat's send (echo_seq)."""
    return agent_pb2.ControllerMessage(sanity_clock=agent_pb2.SanityClock(
        echo_sent_at=hb.sent_at, controller_time=time.time(), echo_seq=hb.seq))


# -- prolog -----------------------------------------------------------------------
@dataclass
class Prolog:
    job_id: int
    started: float
    waiting: set[str] = field(default_factory=set)
    unreached: dict[str, set[str]] = field(default_factory=dict)   # node -> who could not reach it
    size: int = 1


def wants_prolog(ctl: Controller, job) -> bool:
    cfg = ctl.config.sanity
    return cfg.enabled and cfg.prolog and job.spec.batch


def start_prolog(ctl: Controller, job) -> None:
    """Ask each node of a just-started batch job to run its prolog probes."""
    p = Prolog(job_id=job.job_id, started=ctl.clock(), waiting=set(job.nodes), size=len(job.nodes))
    ctl.prologs[job.job_id] = p
    req = agent_pb2.SanityPrologRequest(job_id=job.job_id)
    if len(job.nodes) > 1 and ctl.config.sanity.reachability:
        records = ctl.store.nodes()
        peers = [agent_pb2.SanityPeer(node=n, address=records[n].inventory.address or "127.0.0.1",
                                      port=records[n].inventory.sanity_port)
                 for n in job.nodes if n in records]
        if len(peers) == len(job.nodes) and all(x.port for x in peers):
            req.peers.extend(peers)
    msg = agent_pb2.ControllerMessage(sanity_prolog=req)
    for node in job.nodes:
        if not ctl.agents.send(node, msg):
            log.warning("job=%d node=%s: no agent stream for the prolog", job.job_id, node)
    log.info("job=%d: prolog on %s", job.job_id, slurm.compress_hostlist(list(job.nodes)))


def prolog_report(ctl: Controller, node: str, report: agent_pb2.SanityReport) -> None:
    bad = record(ctl, node, "prolog", report.results, report.job_id)
    p = ctl.prologs.get(report.job_id)
    if p is None or node not in p.waiting:
        return          # the job already went back to the queue, or was cancelled
    p.waiting.discard(node)
    for peer in report.unreachable:
        p.unreached.setdefault(peer, set()).add(node)
    if bad:
        _prolog_failed(ctl, p, [node], drain_failed=False)
    elif not p.waiting:
        blamed = unreachable_nodes(p.unreached, p.size)
        if blamed:
            _prolog_failed(ctl, p, sorted(blamed), drain_failed=True, reasons={
                n: "tcp: unreachable from " + slurm.compress_hostlist(sorted(p.unreached[n]))
                for n in blamed})
            return
        del ctl.prologs[p.job_id]
        _launch(ctl, p.job_id)


def unreachable_nodes(unreached: dict[str, set[str]], size: int) -> set[str]:
    """Nodes that at least half of their peers (and at least one) could not reach."""
    need = max(1, math.ceil((size - 1) / 2))
    return {n for n, who in unreached.items() if len(who) >= need}


def check_prologs(ctl: Controller) -> None:
    """Prologs past prolog_timeout_s: the silent nodes failed theirs."""
    now = ctl.clock()
    for c in lifecycle.prologs(timers.view(ctl, now, jobs=False, prologs=True), now):
        p = ctl.prologs.get(c.job_id)
        if p is not None:
            _prolog_failed(ctl, p, list(c.nodes), drain_failed=True)


def _launch(ctl: Controller, job_id: int) -> None:
    job = ctl.store.job(job_id)
    if job is None or job.state != slurm.RUNNING or job.kill_reason or job.launched:
        return
    log.info("job=%d: prolog passed on every node, starting its script", job_id)
    ctl.agents.send(job.batch_host, batch.launch_message(ctl, job))


def _prolog_failed(ctl: Controller, p: Prolog, nodes: list[str], drain_failed: bool,
                   reasons: dict[str, str] | None = None) -> None:
    """The job goes back to PENDING as it was: same priority, submit time and
    restart count (it never ran); the failed nodes are drained."""
    ctl.prologs.pop(p.job_id, None)
    now = ctl.clock()
    timeout = ctl.config.sanity.prolog_timeout_s
    with ctl.store.transaction() as st:
        if drain_failed:
            for node in nodes:
                rec = st.node(node)
                if rec is not None and not rec.drain:
                    why = (reasons or {}).get(node) or f"prolog: no answer in {timeout:g} s"
                    st.put_node(node, drain=True, drain_by_probe=True, reason=why,
                                reason_user=PROBE_USER, reason_time=now)
                    st.add_node_event(node, now, PROLOG_FAIL, why, p.job_id)
        job = st.job(p.job_id)
        if job is None or job.state != slurm.RUNNING or job.kill_reason or job.launched:
            return
        batch.commit(st, job, lifecycle.prolog_failed(job), now)
    log.warning("job=%d: prolog failed on %s; back to PENDING, queue place kept",
                p.job_id, slurm.compress_hostlist(nodes))
    ctl.jobs_changed()
    ctl.wake_scheduler()


# -- visibility -------------------------------------------------------------------
def sanity_results(ctl: Controller, req: api_pb2.GetSanityResultsRequest) -> api_pb2.GetSanityResultsResponse:
    names = ctl.known_nodes()
    if req.names:
        if not set(req.names) & set(names):
            raise errors.InvalidNodeName()
        names = [n for n in names if n in req.names]
    results = ctl.store.probe_results(names)
    records = ctl.store.nodes()
    out = []
    for n in names:
        rec = records.get(n)
        out.append(api_pb2.SanityNode(
            name=n, drain_by_probe=bool(rec and rec.drain and rec.drain_by_probe),
            results=[probe_msg(r) for r in results.get(n, [])],
            events=[event_msg(e) for e in ctl.store.node_events(n, limit=req.events)]
            if req.events else []))
    return api_pb2.GetSanityResultsResponse(nodes=out)

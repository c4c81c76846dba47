"""Quarantine: a node implicated in a failed or hung run leaves the pool until
an extended check clears it.

Who is implicated: the node of a straggler (a rank silent past --hang-timeout
while the others wrote; ``lifecycle.hangs``), and the node whose task died
first, by a signal a sick machine sends (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
SIGABRT; not SIGTERM, SIGINT or SIGKILL, which people and the OOM killer
send), in a run that then failed (``note_task_exit``, ``run_failed``). A bug
in the program is implicated too; its node passes the check and returns.
And a node whose ``kernel_xid`` probe saw the NVIDIA driver's fatal "NVRM:
Xid" line in its kernel log (``SUSPECT_PROBES``; health.record).

    implicated ──► DRAIN "suspect: job 7 rank 2 silent for 6 s"  (by probe)
                     │  once no job holds the node: the extended check
                     │  (SanityPrologRequest extended=true): the periodic
                     │  probes, and TCP bandwidth both ways with
                     │  [faulttol] suspect_check_peers healthy nodes at once
                     ├── every drain probe passes ──► back in service (RESUME)
                     └── one fails ──► stays drained "suspect: failed the
                                        extended check: tcp_bandwidth: ..."
    implicated again within [faulttol] suspect_window_s
                   ──► DRAIN "suspect again in 86400 s, for a person: ..." (a
                       person's drain: nothing but scontrol update State=RESUME
                       lifts it)

The drain is Slurm's: ``sinfo -R`` and ``scontrol show node`` show the
reason, and a person's RESUME ends the quarantine as it ends any drain. The
state lives in the node row (a probe's drain whose reason starts "suspect:"),
so a controller restart loses nothing: the next pass sends the check again.
Periodic and prolog probes never lift a suspect drain (``health.record``):
only the extended check does.

NCCL/InfiniBand bandwidth would join the TCP test where GPUs and RDMA exist
(lingjun_agent/sanity/reach.py); they do not on the machines this runs on.
"""
from __future__ import annotations

import logging
import signal as signals

from lingjun import slurm
from lingjun.v1 import agent_pb2
from lingjund.lifecycle import SUSPECT
from lingjund.service.context import Controller
from lingjund.store.records import NodeRecord, ProbeResult

log = logging.getLogger("lingjund.quarantine")

HELD = "suspect again"           # ... once a person must look
EV_SUSPECT = "suspect"           # node_events
EV_CHECK_PASSED = "resume"       # health.RESUME: a probe's return to service
EV_CHECK_FAILED = "suspect_check_failed"
PROBE_USER = "root"
CHECK_RESEND_S = 60.0            # a check unanswered this long is sent again


# probes whose failure makes a node a suspect rather than a plain probe drain:
# what they saw happened once (an XID in the kernel log) and passes at the next look
SUSPECT_PROBES = frozenset({"kernel_xid"})

# what a task dying of a sick machine's fault (bad memory, a failing GPU) gets
SICK_SIGNALS = frozenset(int(s) for s in (signals.SIGSEGV, signals.SIGBUS, signals.SIGILL,
                                          signals.SIGFPE, signals.SIGABRT))


def note_task_exit(ctl: Controller, node: str, msg: agent_pb2.AgentTaskExit) -> None:
    """Keep the first task of a running job (nothing stopping it) that died by
    a sick machine's signal: its node is implicated if the run then fails."""
    if msg.signal not in SICK_SIGNALS or msg.job_id in ctl.first_deaths:
        return
    job = ctl.store.job(msg.job_id)
    if job is None or job.state != slurm.RUNNING or job.kill_reason or node not in job.nodes:
        return
    ctl.first_deaths[msg.job_id] = (node, msg.rank, msg.signal)


def run_failed(ctl: Controller, st, job_id: int, now: float) -> tuple[str, ...]:
    """The job's run failed (in the caller's transaction): the node of its first
    task to die by a sick machine's signal, if any, is suspect; returns it."""
    death = ctl.first_deaths.pop(job_id, None)
    if death is None:
        return ()
    node, rank, sig = death
    try:
        name = signals.Signals(sig).name
    except ValueError:
        name = str(sig)
    suspect(ctl, st, node, f"job {job_id} rank {rank} died first, by {name}", job_id, now)
    return (node,)


def forget_run(ctl: Controller, job_id: int) -> None:
    ctl.first_deaths.pop(job_id, None)


def is_suspect(rec: NodeRecord | None) -> bool:
    """Drained as a suspect, awaiting (or having failed) its extended check."""
    return rec is not None and rec.drain and rec.drain_by_probe and rec.reason.startswith(SUSPECT)


def suspect(ctl: Controller, st, node: str, why: str, job_id: int, now: float) -> None:
    """Drain ``node`` as a suspect (in the caller's transaction ``st``), or hold
    it for a person when it was suspect before within the window. A node a
    person drained, or DOWN, is left as it is (the event is still kept)."""
    rec = st.node(node)
    if rec is None:
        return
    window = ctl.config.faulttol.suspect_window_s
    before = st.node_events(node, since=now - window, event=EV_SUSPECT)
    st.add_node_event(node, now, EV_SUSPECT, why, job_id)
    if rec.drain and not rec.drain_by_probe:
        log.warning("node=%s job=%d: suspect (%s); already drained by a person", node, job_id, why)
        return
    if before:
        reason = f"{HELD} in {window:g} s, for a person: {why}"
        st.put_node(node, drain=True, drain_by_probe=False, reason=reason,
                    reason_user=PROBE_USER, reason_time=now)
        log.warning("node=%s job=%d: suspect twice within %g s, drained for a person: %s",
                    node, job_id, window, why)
        return
    st.put_node(node, drain=True, drain_by_probe=True, reason=SUSPECT + why,
                reason_user=PROBE_USER, reason_time=now)
    ctl.checks.pop(node, None)
    log.warning("node=%s job=%d: drained as suspect: %s", node, job_id, why)


def check_suspects(ctl: Controller) -> None:
    """Each pass: send the extended check to each suspect node no job holds
    any more, whose agent is connected (again after CHECK_RESEND_S unanswered)."""
    now = ctl.clock()
    nodes = ctl.store.nodes()
    for name in [n for n in ctl.checks if not is_suspect(nodes.get(n))]:
        del ctl.checks[name]
    suspects = [r for r in nodes.values() if is_suspect(r) and not r.down]
    if not suspects:
        return
    healthy = [r for r in nodes.values()
               if not r.drain and not r.down and r.registered and r.inventory.sanity_port
               and ctl.agents.get(r.name) is not None]
    cfg = ctl.config.faulttol
    for rec in suspects:
        sent = ctl.checks.get(rec.name)
        if sent is not None and now - sent < CHECK_RESEND_S:
            continue
        if rec.reason.startswith(SUSPECT + "failed the extended check"):
            continue         # failed: it waits for a person (or another report)
        if ctl.store.jobs_on_node(rec.name) or ctl.agents.get(rec.name) is None:
            continue
        peers = _peers(rec, healthy, cfg.suspect_check_peers)
        req = agent_pb2.SanityPrologRequest(
            extended=True, bandwidth_bytes=cfg.suspect_check_bytes,
            min_bandwidth_mbps=cfg.suspect_check_min_mbps,
            peers=[_peer(r) for r in [rec, *peers]])
        if ctl.agents.send(rec.name, agent_pb2.ControllerMessage(sanity_prolog=req)):
            ctl.checks[rec.name] = now
            log.info("node=%s: extended check with %s", rec.name,
                     slurm.compress_hostlist([p.name for p in peers]) or "no peer")


def _peers(rec: NodeRecord, healthy: list[NodeRecord], count: int) -> list[NodeRecord]:
    """Healthy peers to test with: the idle ones first, then by name."""
    return sorted((r for r in healthy if r.name != rec.name),
                  key=lambda r: (r.last_busy_time, r.name))[:count]


def _peer(rec: NodeRecord) -> agent_pb2.SanityPeer:
    return agent_pb2.SanityPeer(node=rec.name, address=rec.inventory.address or "127.0.0.1",
                                port=rec.inventory.sanity_port)


def check_report(ctl: Controller, node: str, report: agent_pb2.SanityReport) -> None:
    """The extended check's results: every drain probe passed, the node returns
    to service; else it stays drained with the failure in its reason."""
    ctl.checks.pop(node, None)
    now = ctl.clock()
    bad = sorted((r for r in report.results if not r.ok and r.severity == "drain"),
                 key=lambda r: r.name)
    with ctl.store.transaction() as st:
        st.put_probe_results(node, [ProbeResult(
            node=node, name=r.name, severity=r.severity, ok=r.ok, reason=r.reason,
            duration_s=r.duration_s, time=r.time, phase=r.phase) for r in report.results])
        rec = st.node(node)
        if not is_suspect(rec):
            return       # a person resumed or re-drained it meanwhile
        was = rec.reason[len(SUSPECT):]
        if bad:
            why = "; ".join(f"{r.name}: {r.reason}" for r in bad)
            reason = f"{SUSPECT}failed the extended check: {why}"[:500]
            st.put_node(node, reason=reason, reason_time=now)
            st.add_node_event(node, now, EV_CHECK_FAILED, why)
            log.warning("node=%s: failed the extended check, stays drained: %s", node, why)
            return
        st.put_node(node, drain=False, drain_by_probe=False, reason="", reason_user="",
                    reason_time=0)
        st.add_node_event(node, now, EV_CHECK_PASSED, f"passed the extended check (was: {was})")
    log.info("node=%s: passed the extended check, returned to service (was suspect: %s)",
             node, was)
    ctl.wake_scheduler()

"""Quarantine in the service layer over a real SQLite store: a straggler's node
is drained as a suspect, checked once free, returned only when the check
passes, and held for a person when it is suspect twice in the window."""
from __future__ import annotations

import pytest

from lingjun.v1 import agent_pb2, api_pb2
from lingjund.service import batch, faulttol, health, nodes, quarantine
from tests.lingjund import handclock
from tests.lingjund.test_faulttol import connect, finished, run_job

CONF = """
[controller]
heartbeat_timeout_s = 3
[faulttol]
restart_backoff_s = 10
suspect_window_s = 600
suspect_check_min_mbps = 500
[[nodes]]
names = "node[1-4]"
cpus = 2
memory_mb = 2000
[[partitions]]
name = "debug"
nodes = "ALL"
"""


@pytest.fixture
def ctl(tmp_path):
    inv = agent_pb2.Inventory(address="127.0.0.1", sanity_port=7000)
    with handclock.controller(tmp_path, CONF, [f"node{i}" for i in range(1, 5)],
                              last_seen=1000.0, inventory=inv) as c:
        yield c


def messages(conn) -> list:
    out = []
    while not conn.outbox.empty():
        out.append(conn.outbox.get_nowait())
    return out


def beat(ctl, conn, jid: int, last: float, quiet: list[tuple[int, float]]) -> None:
    nodes.heartbeat(ctl, conn, agent_pb2.Heartbeat(activity=[agent_pb2.JobActivity(
        job_id=jid, last_activity=last,
        quiet_ranks=[agent_pb2.RankActivity(step_id=0, rank=r, last_activity=t)
                     for r, t in quiet])]))


def straggle(ctl, conns, jid: int, start: float) -> None:
    """Rank 2 on node3 stops at ``start`` + 1 while the others write on."""
    ctl.clock.now = start + 7.0
    for i, n in enumerate(("node1", "node2", "node3", "node4")):
        last = start + 1.0 if n == "node3" else start + 7.0
        beat(ctl, conns[n], jid, last, [(i, last)])
    faulttol.check_hangs(ctl)


def report(ctl, node: str, ok: bool) -> None:
    quarantine.check_report(ctl, node, agent_pb2.SanityReport(phase="suspect", results=[
        api_pb2.SanityResult(name="cpu", severity="drain", ok=True),
        api_pb2.SanityResult(name="tcp_bandwidth", severity="drain", ok=ok,
                             reason="" if ok else "node1: 80 Mbit/s, want 500")]))


def test_a_stragglers_node_is_drained_checked_once_free_and_returned_when_the_check_passes(ctl):
    conns = connect(ctl, "node1", "node2", "node3", "node4")
    jid = run_job(ctl, nodes=("node1", "node2", "node3", "node4"), hang_timeout_s=5,
                  max_restarts=2)
    straggle(ctl, conns, jid, 1000.0)
    job = ctl.store.job(jid)
    assert job.kill_reason == "HANG"
    (ev,) = ctl.store.job_events(jid)
    assert ev.text == "rank 2 on node3 silent for 6 s; others active (--hang-timeout 5 s)"
    rec = ctl.store.node("node3")
    assert rec.drain and rec.reason == f"suspect: job {jid} rank 2 silent for 6 s", rec.reason
    assert not ctl.store.node("node1").drain

    quarantine.check_suspects(ctl)
    assert "sanity_prolog" not in kinds(messages(conns["node3"])), \
        "no check while the job still holds the node"
    release(ctl, jid)
    quarantine.check_suspects(ctl)
    (req,) = [m.sanity_prolog for m in messages(conns["node3"]) if m.WhichOneof("msg") == "sanity_prolog"]
    assert req.extended and req.min_bandwidth_mbps == 500 and req.bandwidth_bytes == 16 << 20
    assert [p.node for p in req.peers] == ["node3", "node1", "node2"], "itself and 2 healthy peers"
    quarantine.check_suspects(ctl)
    assert "sanity_prolog" not in kinds(messages(conns["node3"])), "sent once, not every pass"

    # a periodic probe pass that passes does not lift a suspect's drain
    health.record(ctl, "node3", "periodic", [api_pb2.SanityResult(name="cpu", severity="drain", ok=True)])
    assert ctl.store.node("node3").drain

    report(ctl, "node3", ok=False)
    rec = ctl.store.node("node3")
    assert rec.drain and rec.reason == ("suspect: failed the extended check: "
                                        "tcp_bandwidth: node1: 80 Mbit/s, want 500"), rec.reason
    quarantine.check_suspects(ctl)
    assert "sanity_prolog" not in kinds(messages(conns["node3"])), "a failed check is not retried"


def test_a_node_that_passes_its_check_returns_and_one_suspect_twice_in_the_window_is_held(ctl):
    conns = connect(ctl, "node1", "node2", "node3", "node4")
    four = ("node1", "node2", "node3", "node4")
    jid = run_job(ctl, nodes=four, hang_timeout_s=5, max_restarts=2)
    straggle(ctl, conns, jid, 1000.0)
    release(ctl, jid)
    quarantine.check_suspects(ctl)
    assert "sanity_prolog" in kinds(messages(conns["node3"]))
    report(ctl, "node3", ok=True)
    rec = ctl.store.node("node3")
    assert not rec.drain and rec.reason == "", rec
    events = [(e.event, e.reason) for e in ctl.store.node_events("node3")]
    assert ("resume", f"passed the extended check (was: job {jid} rank 2 silent for 6 s)") in events

    again = run_job(ctl, nodes=four, hang_timeout_s=5, max_restarts=2)
    straggle(ctl, conns, again, 1100.0)      # within suspect_window_s = 600
    rec = ctl.store.node("node3")
    assert rec.drain and rec.reason == (f"suspect again in 600 s, for a person: job {again} "
                                        "rank 2 silent for 6 s"), rec.reason
    release(ctl, again)
    quarantine.check_suspects(ctl)
    assert "sanity_prolog" not in kinds(messages(conns["node3"])), "held: no check lifts it"
    health.record(ctl, "node3", "periodic", [api_pb2.SanityResult(name="cpu", severity="drain", ok=True)])
    assert ctl.store.node("node3").drain, "held for a person: probes do not lift it"


def kinds(msgs) -> list[str]:
    return [m.WhichOneof("msg") for m in msgs]


def release(ctl, jid: int) -> None:
    """The run ends (its script killed) and every node has cleaned up."""
    job = ctl.store.job(jid)
    finished(ctl, job.batch_host, jid, sig=15)
    for n in job.nodes:
        batch.job_cleaned(ctl, n, agent_pb2.JobCleaned(job_id=jid))


def test_the_node_whose_task_died_first_by_a_sick_machines_signal_is_suspect_when_the_run_fails(ctl):
    connect(ctl, "node1", "node2", "node3")
    three = ("node1", "node2", "node3")
    jid = run_job(ctl, nodes=three, max_restarts=1)
    exit_ = lambda node, rank, sig: quarantine.note_task_exit(ctl, node, agent_pb2.AgentTaskExit(
        job_id=jid, step_id=0, rank=rank, signal=sig))
    exit_("node3", 2, 15)       # SIGTERM: a person's or the program's own doing
    exit_("node2", 1, 7)        # SIGBUS, first
    exit_("node1", 0, 11)       # SIGSEGV, later
    finished(ctl, "node1", jid, exit_code=1)
    rec = ctl.store.node("node2")
    assert rec.drain and rec.reason == f"suspect: job {jid} rank 1 died first, by SIGBUS", rec.reason
    assert not ctl.store.node("node1").drain and not ctl.store.node("node3").drain
    job = ctl.store.job(jid)
    assert (job.state, job.spec.failed_nodes) == ("PENDING", "node2"), "its restart avoids node2"

    ok = run_job(ctl, nodes=("node1", "node3"))
    quarantine.note_task_exit(ctl, "node3", agent_pb2.AgentTaskExit(job_id=ok, rank=1, signal=11))
    finished(ctl, "node1", ok, exit_code=0)
    assert not ctl.store.node("node3").drain, "a run that completed implicates nobody"


def test_a_fatal_xid_in_the_kernel_log_makes_the_node_a_suspect_not_a_plain_probe_drain(ctl):
    bad = api_pb2.SanityResult(name="kernel_xid", severity="drain", ok=False,
                               reason="NVRM: Xid 79 (PCI:0000:3b:00)")
    assert health.record(ctl, "node2", "periodic", [bad])
    rec = ctl.store.node("node2")
    assert rec.drain and rec.reason == "suspect: kernel_xid: NVRM: Xid 79 (PCI:0000:3b:00)"
    # the next pass sees no new XID: the node stays drained until its extended check
    health.record(ctl, "node2", "periodic", [api_pb2.SanityResult(
        name="kernel_xid", severity="drain", ok=True)])
    assert ctl.store.node("node2").drain


def test_a_rank_its_node_no_longer_reports_is_not_judged(ctl):
    conns = connect(ctl, "node1", "node2")
    jid = run_job(ctl, nodes=("node1", "node2"), hang_timeout_s=5, max_restarts=1)
    ctl.clock.now = 1002.0
    beat(ctl, conns["node2"], jid, 1001.0, [(1, 1001.0)])
    ctl.clock.now = 1003.0
    nodes.heartbeat(ctl, conns["node2"], agent_pb2.Heartbeat())   # rank 1 exited: nothing to say
    ctl.clock.now = 1010.0
    beat(ctl, conns["node1"], jid, 1010.0, [(0, 1010.0)])
    faulttol.check_hangs(ctl)
    assert ctl.store.job(jid).kill_reason == "", "rank 1 ended; rank 0 writes on"

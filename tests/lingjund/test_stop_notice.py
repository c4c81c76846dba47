"""Which stops the batch node is told to announce in the job's output, and with what cause.

slurmstepd writes "*** JOB N ON node CANCELLED AT <time> [DUE TO <cause>] ***"
into a stopped batch job's stderr; the controller's TerminateJob says
whether to and why (the agent writes it: tests/agent/test_stop_notice.py)."""
from __future__ import annotations

import pytest

from lingjun import slurm
from lingjund import lifecycle
from lingjund.service import batch


class _Agents:
    def __init__(self):
        self.sent = []

    def send(self, node, msg):
        self.sent.append((node, msg.terminate_job))


class _Ctl:
    def __init__(self):
        self.agents = _Agents()


@pytest.mark.parametrize("kill_reason,announce,cause", [
    (slurm.CANCELLED, True, ""),
    (slurm.TIMEOUT, True, "TIME LIMIT"),
    (slurm.PREEMPTED, True, "PREEMPTION"),
    (lifecycle.REQUEUE, True, "JOB REQUEUE"),
    (lifecycle.REQUEUE_HOLD, True, "JOB REQUEUE"),
    (lifecycle.NODE_LOST, True, "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS"),
    (slurm.DEADLINE, False, ""),        # Slurm has no such line: none rather than a guess
    (lifecycle.HANG, False, ""),
])
def test_each_stop_carries_slurmstepds_cause(kill_reason, announce, cause):
    ctl = _Ctl()
    t = lifecycle.Transition(7, {"kill_reason": kill_reason}, ("node1", "node2"), 2.0, "why")
    batch.send(ctl, [t])
    assert [(n, m.job_id, m.announce, m.cause) for n, m in ctl.agents.sent] == \
        [("node1", 7, announce, cause), ("node2", 7, announce, cause)]


def test_the_cleanup_after_a_scripts_own_end_is_not_announced():
    ctl = _Ctl()
    batch.send(ctl, [lifecycle.Transition(8, {}, ("node1",), 2.0, "job ended")])
    [(_, m)] = ctl.agents.sent
    assert not m.announce

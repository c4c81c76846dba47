"""Which heartbeats the controller answers, and what that does to the agent's lease.

The answer (SanityClock) renews the agent's lease on its jobs from the
heartbeat's send (lingjun_agent/launcher/lease.py). The controller answers
a node's heartbeats only as often as the lease needs (nodes.echo_after_s):
here the service's own decisions drive the agent's real lease holder, on
two clocks that do not agree, with heartbeats sent late and delayed in
transit, over ten simulated minutes.
"""
from __future__ import annotations

import random

import pytest

from lingjun.v1 import agent_pb2
from lingjun_agent.launcher import lease
from lingjund.service import health, nodes
from lingjund.service.agents import Connection
from tests.lingjund import handclock


def conf(interval: float, timeout: float, size: int) -> str:
    return f"""
[controller]
heartbeat_interval_s = {interval:g}
heartbeat_timeout_s = {timeout:g}
[[nodes]]
names = "node[1-{size}]"
cpus = 2
memory_mb = 2000
"""


BIG = 5_000     # 1,000 heartbeats a second at 5 s: answers are thinned (THIN_FROM_PER_S)


class AgentClock:
    """The agent's CLOCK_BOOTTIME: counts the same seconds as the controller's
    clock from another origin."""

    def __init__(self, ctl_clock: handclock.Clock, offset: float):
        self.ctl_clock, self.offset = ctl_clock, offset
        self.now = ctl_clock.now + offset

    def __call__(self) -> float:
        return self.now


def beat(tmp_path, interval: float, timeout: float, minutes: float = 10, seed: int = 1,
         size: int = BIG):
    """Run one node's heartbeats; returns (answered seqs, sent count, the
    lease's time left at each renewal, and per heartbeat received: the
    lease's end and the controller's DOWN moment, both on the controller's clock)."""
    rng = random.Random(seed)
    with handclock.controller(tmp_path, conf(interval, timeout, size), ["node1"]) as ctl:
        agent_clock = AgentClock(ctl.clock, offset=-873.25)
        holder = lease.Holder(tmp_path / "lease.json", clock=agent_clock)
        conn = Connection("node1")
        reg_sent = agent_clock()
        ctl.clock.now += 0.01
        reply, _ = nodes.register(ctl, conn, agent_pb2.Register(
            node_name="node1", inventory=agent_pb2.Inventory(hostname="node1", cpus=2,
                                                             real_memory_mb=2000)))
        assert reply.accepted and reply.heartbeat_timeout_s == timeout
        holder.configure(reply.heartbeat_timeout_s, reply.fence_grace_s)
        holder.renew(reg_sent)
        answered, left_at_renewal, ends = [], [], []
        t = ctl.clock.now
        for seq in range(1, int(minutes * 60 / interval) + 1):
            t += interval + rng.uniform(-0.1, 0.6) * interval / 5      # the agent's ticker runs late
            ctl.clock.now = t
            agent_clock.now = t + agent_clock.offset
            holder.sent(seq)
            hb = agent_pb2.Heartbeat(seq=seq, sent_at=t)
            ctl.clock.now = t + rng.uniform(0.0, 0.3)                  # in flight
            if nodes.heartbeat(ctl, conn, hb):
                answered.append(seq)
                back = ctl.clock.now + rng.uniform(0.0, 0.3)
                agent_clock.now = back + agent_clock.offset
                assert not holder.lapsed(), f"heartbeat {seq}: the lease lapsed before its renewal"
                left_at_renewal.append(holder.left())
                holder.acked(health.clock_reply(hb).sanity_clock.echo_seq)
            ends.append((holder.expires_at - agent_clock.offset, conn.last_heartbeat + timeout))
    return answered, seq, left_at_renewal, ends


def test_on_a_big_cluster_every_third_heartbeat_renews_the_lease_with_most_of_it_left(tmp_path):
    answered, sent, left, ends = beat(tmp_path, interval=5, timeout=60)
    # about one answer in three (every 15 s), never two in a row
    assert sent / 4 < len(answered) < sent / 2, (len(answered), sent)
    assert all(b - a >= 2 for a, b in zip(answered, answered[1:])), answered
    # renewed while more than 3/4 of the timeout less half an interval (and
    # the ticker's lateness) is left: 42.5 s of 60, never near the lapse
    assert min(left) > 60 * 3 / 4 - 5 / 2 - 2.5, min(left)
    # and never past the controller's DOWN: the lease ends no later than one
    # timeout after the newest heartbeat the controller received
    assert all(end <= down + 1e-6 for end, down in ends), \
        [(e, d) for e, d in ends if e > d][:3]


@pytest.mark.parametrize("interval,timeout,size", [(5, 60, 4), (5, 60, 2_000), (1, 3, BIG),
                                                   (2, 8, BIG)])
def test_small_clusters_and_short_timeouts_answer_every_heartbeat(tmp_path, interval, timeout,
                                                                  size):
    """Under 500 heartbeats a second (a cluster of up to 2,500 nodes at 5 s),
    or where the timeout holds fewer than four intervals (``lingjun up
    --heartbeat-timeout T`` beats every min(2, T/3) s), each heartbeat renews
    the lease, as before answers were thinned: a controller restart of up to
    the timeout less one interval disturbs no job."""
    answered, sent, left, ends = beat(tmp_path, interval=interval, timeout=timeout, minutes=2,
                                      size=size)
    assert answered == list(range(1, sent + 1))
    assert all(end <= down + 1e-6 for end, down in ends)
    assert min(left) > timeout - interval - 1.0, min(left)


def test_a_silent_node_is_down_no_earlier_than_its_lease_lapsed(tmp_path):
    """The agent freezes after a heartbeat that was not answered: the controller
    sets the node DOWN one timeout after that heartbeat, and the lease, renewed
    from an older one, lapsed before."""
    answered, sent, left, ends = beat(tmp_path, interval=5, timeout=60, minutes=125 / 60)
    assert answered[-1] != sent, "the last heartbeat went unanswered (seed)"
    lease_end, down_at = ends[-1]
    assert lease_end < down_at - 4, (lease_end, down_at)


@pytest.mark.parametrize("size,interval,want", [
    (4, None, 5.0), (5_000, None, 5.0), (10_000, None, 10.0), (100_000, None, 15.0),
    (10_000, 2, 2.0)])
def test_agents_beat_less_often_on_big_clusters_and_are_down_after_the_same_timeout(
        tmp_path, size, interval, want):
    """Unset, the interval is 5 s up to 5,000 configured nodes, then grows so
    that the controller hears about 1,000 heartbeats a second, up to a quarter
    of the timeout; the timeout, how soon a silent node is DOWN, is 60 s at
    every size. A set interval is what it says."""
    text = f"""
[controller]
{f"heartbeat_interval_s = {interval}" if interval else ""}
[[nodes]]
names = "node[1-{size}]"
cpus = 2
memory_mb = 2000
"""
    with handclock.controller(tmp_path, text, ["node1"]) as ctl:
        reply, _ = nodes.register(ctl, Connection("node1"), agent_pb2.Register(
            node_name="node1", inventory=agent_pb2.Inventory(hostname="node1", cpus=2,
                                                             real_memory_mb=2000)))
    assert (reply.heartbeat_interval_s, reply.heartbeat_timeout_s) == (want, 60.0)

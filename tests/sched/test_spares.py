"""Spare nodes and expedited restarts in the scheduling core: a partition's
spares are out of every job's reach but an expedited restart's, which goes
first of all (Slurm 25.11's --requeue=expedite)."""
from __future__ import annotations

import pytest

from lingjun.slurm import REASON_RESOURCES
from lingjund.sched.cycle import schedule
from lingjund.sched.spares import spares
from tests.sched.builders import busy, cluster, job, node, outcomes, partition

NOW = 1000.0
FIVE = [node(f"node{i}") for i in range(1, 6)]


def with_spares(*names: str):
    return (partition("debug", tuple(n.name for n in FIVE), default=True, spares=names),)


CASES = [
    pytest.param(FIVE, [job(1, nodes=4, cpus=4), job(2, cpus=4)], with_spares("node5"),
                 {1: "node[1-4]", 2: REASON_RESOURCES},
                 id="a normal job waits rather than take the spare"),
    pytest.param(FIVE, [job(1, nodes=5, cpus=4)], with_spares("node5"),
                 {1: REASON_RESOURCES},
                 id="a gang that needs the spare does not get it"),
    pytest.param([busy("node1"), busy("node2"), *FIVE[2:]],
                 [job(1, prio=900, nodes=2, cpus=4), job(2, prio=1, nodes=3, cpus=4, expedite=True)],
                 with_spares("node5"),
                 {1: REASON_RESOURCES, 2: "node[3-5]"},
                 id="an expedited restart goes first of all and takes the spare"),
    pytest.param(FIVE, [job(1, nodes=2, cpus=4, exc_nodes=("node1",), expedite=True), job(2, nodes=2, cpus=4)],
                 with_spares("node4", "node5"),
                 {1: "node[2-3]", 2: REASON_RESOURCES},
                 id="the expedited job may use spares, and still avoids its failed node"),
    pytest.param(FIVE, [job(1, nodes=3, max_nodes=4, cpus=4, expedite=True)], with_spares("node5"),
                 {1: "node[1-4]"},
                 id="an elastic job takes the most nodes its range allows"),
    pytest.param([busy("node1"), busy("node2"), *FIVE[2:]],
                 [job(1, nodes=3, max_nodes=4, cpus=4, expedite=True), job(2, cpus=4)],
                 with_spares("node5"),
                 {1: "node[3-5]", 2: REASON_RESOURCES},
                 id="one node short: the elastic restart runs on fewer, down to its minimum"),
    pytest.param(FIVE, [job(1, nodes=4, cpus=4), job(2, cpus=4)], None,
                 {1: "node[1-4]", 2: "node5"},
                 id="no spares: nothing is held back"),
]


@pytest.mark.parametrize("nodes, jobs, partitions, want", CASES)
def test_spares_and_expedited_restarts(nodes, jobs, partitions, want):
    got = outcomes(schedule(cluster(nodes, jobs, partitions), NOW))
    assert got == want, f"want {want}\n got {got}"


def test_the_spares_are_the_last_healthy_nodes_and_a_sick_one_is_replaced():
    names = tuple(f"node{i}" for i in range(1, 6))
    assert spares(names, set(names), 1) == ("node5",)
    assert spares(names, {"node1", "node2", "node3", "node4"}, 2) == ("node3", "node4")
    assert spares(names, {"node2"}, 3) == ("node2",), "fewer healthy nodes than asked: all"
    assert spares(names, set(names), 0) == ()

"""Which of the node's CPUs a job gets, and the host CPUs they stand for."""
from __future__ import annotations

import pytest

from lingjun_agent.launcher.cpus import choose, on_host


@pytest.mark.parametrize("node_cpus,want,held,got", [
    (4, 1, [], (0,)),
    (4, 2, [(0,)], (1, 2)),
    (4, 2, [(0, 2)], (1, 3)),
    (4, 4, [], (0, 1, 2, 3)),
    (4, 0, [], ()),
    (2, 1, [(0,), (1,)], (0,)),          # counts out of step: the least shared, lowest first
    (2, 3, [], (0, 1)),                  # never more than the node has
    (4, 2, [(0, 1), (1,)], (2, 3)),
])
def test_the_lowest_cpus_no_running_job_holds(node_cpus, want, held, got):
    assert choose(node_cpus, want, held) == got


@pytest.mark.parametrize("ids,host,got", [
    ((0, 1), (0, 1), (0, 1)),
    ((2, 3), (0, 1), (0, 1)),            # a node of 4 CPUs on a host of 2
    ((1,), (4, 7), (7,)),                # the agent's own affinity, in order
    ((0, 2), (0, 1), (0,)),
    ((0,), (), ()),
])
def test_node_cpus_map_onto_the_hosts_modulo_its_count(ids, host, got):
    assert on_host(ids, host) == got

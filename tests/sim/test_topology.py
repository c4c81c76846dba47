"""Gangs by switch on a simulated cluster (a real lingjund, simulated agents).

96 nodes under a 3-level tree (leaves of 8, spines of 4 leaves, a core);
gangs of 16 nodes x 8 GPUs (a third with --switches=2@10:00) among smaller
jobs, arriving over time. The same workload runs with topology/tree and
without: with it, no --switches gang that started within its wait spans more
than 2 leaves, and gangs span fewer leaves on average than without (the
figures at scale are bench/topology_placement.py's, in bench/README.md).
"""
from __future__ import annotations

import statistics

import pytest

from bench import topology_placement as tp

pytestmark = pytest.mark.long     # a minute or more: started first (tests/conftest.py)


@pytest.mark.timeout(600)
def test_gangs_keep_to_their_switches_and_span_fewer_leaves_than_without(tmp_path):
    toml, topo = tp.tree(96, 8, 4)
    jobs = tp.trace(gangs=9, small=30, gang_nodes=16, seed=3)
    means = {}
    for label, extra in (("tree", toml), ("default", "")):
        records, done = tp.run(tmp_path / label, 96, extra, jobs, timeout=240)
        assert done, f"{label}: not every job finished"
        got, broken = tp.spans(records, topo, 16)
        assert len(got) == 9, (label, got)
        if label == "tree":
            assert not broken, broken
            assert max(got) <= 3, got
        means[label] = statistics.mean(got)
    assert means["tree"] < means["default"], means

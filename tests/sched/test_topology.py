"""Gang placement by switch (topology/tree, topology/block): examples and properties."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lingjun.slurm import expand_hostlist
from lingjund.sched.backfill import Backfill
from lingjund.sched.cycle import schedule
from lingjund.sched.plugins import DEFAULT_PROFILE
from lingjun.topology import Topology, TopologyError
from tests.sched.builders import busy, cluster, job, node, outcomes


def tree(leaves: dict[str, str], upper: dict[str, tuple[str, ...]] = {}) -> Topology:
    return Topology.tree([(name, tuple(expand_hostlist(nodes)), (), 1)
                          for name, nodes in leaves.items()]
                         + [(name, (), kids, 1) for name, kids in upper.items()])


TWO = tree({"s0": "node[1-4]", "s1": "node[5-8]"}, {"s2": ("s0", "s1")})


def with_topology(snap, topo):
    return replace(snap, topology=topo)


def test_a_gang_goes_to_the_leaf_it_fits_best_leaving_a_whole_leaf():
    # node1 busy: s0 has 3 free, s1 4. A 3-node gang takes s0's three. Without a
    # topology weight decides (s0's nodes weigh more) and the 4-node gang after it
    # straddles both leaves.
    nodes = [busy("node1")] + [node(f"node{i}", weight=5) for i in range(2, 5)] + \
            [node(f"node{i}") for i in range(5, 9)]
    snap = cluster(nodes, [job(1, nodes=3, cpus=4), job(2, nodes=4, cpus=4)])
    assert outcomes(schedule(snap, 0)) == {1: "node[5-7]", 2: "node[2-4,8]"}
    assert outcomes(schedule(with_topology(snap, TWO), 0)) == {1: "node[2-4]",
                                                                 2: "node[5-8]"}


def test_a_gang_spans_the_fewest_leaves():
    # s0 has 2 free, s1 3 free, a 4-node gang: one leaf cannot, two must.
    nodes = [busy("node1"), busy("node2"), node("node3"), node("node4"),
             busy("node5"), node("node6"), node("node7"), node("node8")]
    plan = schedule(with_topology(cluster(nodes, [job(1, nodes=4)]), TWO), 0)
    assert TWO.leaves_spanned(plan.starts[0].nodes) == 2


def test_switches_waits_for_one_leaf_until_max_wait_then_starts_anywhere():
    nodes = [busy("node1"), busy("node2"), node("node3"), node("node4"),
             busy("node5"), busy("node6"), node("node7"), node("node8")]
    snap = with_topology(cluster(nodes, [job(1, nodes=4, switches=1, switches_until=300.0)]),
                         TWO)
    assert outcomes(schedule(snap, 0)) == {1: "Resources"}
    assert outcomes(schedule(snap, 299.0)) == {1: "Resources"}
    assert outcomes(schedule(snap, 300.0)) == {1: "node[3-4,7-8]"}


def test_switches_one_lands_under_one_leaf_when_there_is_room():
    nodes = [busy("node1"), node("node2"), node("node3"), node("node4"),
             node("node5"), node("node6"), busy("node7"), busy("node8")]
    plan = schedule(with_topology(cluster(nodes, [job(1, nodes=3, switches=1)]), TWO), 0)
    assert outcomes(plan) == {1: "node[2-4]"}


def test_no_switch_holds_all_nodes_then_a_gang_cannot_span_them():
    topo = tree({"s0": "node[1-2]", "s1": "node[3-4]"})
    nodes = [node(f"node{i}") for i in range(1, 5)]
    plan = schedule(with_topology(cluster(nodes, [job(1, nodes=3), job(2, nodes=2)]), topo), 0)
    assert outcomes(plan) == {1: "Resources", 2: "node[1-2]"}


def test_segments_stay_within_a_block():
    topo = Topology.block([("b1", tuple(expand_hostlist("node[1-4]"))),
                           ("b2", tuple(expand_hostlist("node[5-8]")))], (4, 8))
    # b1 has 3 free, b2 has 3 free: a 4-node job in segments of 2 takes 2 + 2.
    nodes = [busy("node1"), node("node2"), node("node3"), node("node4"),
             busy("node5"), node("node6"), node("node7"), node("node8")]
    plan = schedule(with_topology(cluster(nodes, [job(1, nodes=4, segment=2)]), topo), 0)
    got = plan.starts[0].nodes
    assert len(got) == 4
    assert sum(n in expand_hostlist("node[1-4]") for n in got) == 2
    # segments of 4: neither block has 4 free
    plan = schedule(with_topology(cluster(nodes, [job(1, nodes=4, segment=4)]), topo), 0)
    assert outcomes(plan) == {1: "Resources"}


def test_address_names_the_switches_from_the_top():
    assert TWO.address("node6") == ("s2.s1.node6", "switch.switch.node")
    assert TWO.address("other") == ("other", "node")


@pytest.mark.parametrize("entries, words", [
    ([("s0", ("n1",), (), 1), ("s1", ("n1",), (), 1)], "Node (n1) is in more than one leaf"),
    ([("s0", (), ("s1",), 1), ("s1", (), ("s0",), 1)], "loop: s0 -> s1 -> s0"),
    ([("s0", ("n1",), (), 1), ("a", (), ("s0",), 1), ("b", (), ("s0",), 1)],
     "Switch (s0) has multiple parents (a, b)"),
    ([("s0", ("n9",), (), 1)], "Invalid node name (n9) in switch config (s0)"),
    ([("s0", (), ("s7",), 1)], "undefined child switch (s7)"),
    ([("s0", (), (), 1)], "Switch configuration (s0) lacks children"),
])
def test_a_faulty_tree_is_refused_in_slurms_words(entries, words):
    with pytest.raises(TopologyError, match=None) as e:
        Topology.tree(entries, known_nodes={"n1", "n2"})
    assert words in str(e.value)


# Properties --------------------------------------------------------------------------

LEAF = 4


@st.composite
def clusters(draw):
    leaves = draw(st.integers(2, 5))
    names = [f"node{i}" for i in range(1, leaves * LEAF + 1)]
    nodes = []
    for n in names:
        used = draw(st.integers(0, 4))
        nodes.append(node(n, alloc_cpus=used) if used else node(n))
    jobs = []
    for k in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 2 * LEAF))
        sw = draw(st.sampled_from([0, 0, 1, 2]))
        jobs.append(job(k + 1, nodes=size, cpus=draw(st.integers(1, 4)), switches=sw,
                        switches_until=draw(st.sampled_from([100.0, math.inf]))))
    topo = tree({f"s{k}": f"node[{k * LEAF + 1}-{(k + 1) * LEAF}]" for k in range(leaves)},
                {"top": tuple(f"s{k}" for k in range(leaves))})
    return cluster(nodes, jobs), topo


BACKFILL = replace(DEFAULT_PROFILE, backfill=Backfill())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from([0.0, 100.0]), st.sampled_from([DEFAULT_PROFILE, BACKFILL]))
def test_never_more_leaves_than_switches_within_the_wait_and_never_a_partial_gang(c, now, prof):
    snap, topo = c
    snap = replace(snap, pending=tuple(replace(j, time_limit_min=j.job_id * 7) for j in snap.pending))
    plan = schedule(replace(snap, topology=topo), now, prof)
    want = {j.job_id: j for j in snap.pending}
    for s in plan.starts:
        j = want[s.job_id]
        assert len(s.nodes) == j.min_nodes == len(set(s.nodes))
        if j.switches and now < j.switches_until:
            assert topo.leaves_spanned(s.nodes) <= j.switches


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_without_a_topology_placement_is_todays(c):
    snap, _ = c
    plain = replace(snap, pending=tuple(replace(j, switches=0) for j in snap.pending))
    assert schedule(snap, 0) == schedule(plain, 0)

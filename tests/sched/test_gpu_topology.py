"""GPU device choice by topology: NVLink-connected first, then NUMA node and
NIC rail, packed into the smallest free NVLink groups, then the lowest indices.

The node most cases use: 8 GPUs in NVLink islands 0-3 and 4-7, NUMA nodes 0
and 1 (one island each), one NIC per pair (0-1, 2-3, 4-5, 6-7).
"""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lingjund.sched.cycle import schedule
from lingjund.sched.gpu_topology import GpuTopology, choose
from lingjund.sched.pool import choose_gpus
from tests.sched.builders import cluster, job, node

NOW = 1_000_000.0


def islands(*groups: tuple[int, ...]) -> list[list[int]]:
    peers: dict[int, list[int]] = {}
    for g in groups:
        for i in g:
            peers[i] = [j for j in g if j != i]
    return [peers.get(i, []) for i in range(max(max(g) for g in groups) + 1)]


def eight() -> GpuTopology:
    return GpuTopology.build(8, islands((0, 1, 2, 3), (4, 5, 6, 7)), [0] * 4 + [1] * 4,
                             [f"mlx5_{i // 2}" for i in range(8)])


ALL = tuple(range(8))


@pytest.mark.parametrize("free, n, want", [
    (ALL, 2, (0, 1)),
    (ALL, 4, (0, 1, 2, 3)),
    (ALL, 1, (0,)),
    # 0-3 free, and 6-7 the rest of a half-used island: a pair packs into 6-7
    ((0, 1, 2, 3, 6, 7), 2, (6, 7)),
    # a single GPU goes where it breaks up the least
    ((0, 1, 2, 3, 7), 1, (7,)),
    # (0, 2), (0, 3) and (2, 3) are linked; only (2, 3) sits beside one NIC
    ((0, 2, 3, 5), 2, (2, 3)),
    # 4 on an island with one GPU held elsewhere: the whole free island
    ((1, 2, 3, 4, 5, 6, 7), 4, (4, 5, 6, 7)),
    # no linked set of 5 exists: four linked on one NUMA node, and one more
    (ALL, 5, (0, 1, 2, 3, 4)),
    # every free GPU asked for: all of them
    ((0, 5, 6), 3, (0, 5, 6)),
    # a linked pair beside one NIC beats a lower linked pair across two
    ((0, 2, 4, 5), 2, (4, 5)),
], ids=[
    "a pair on an idle node is the lowest pair beside one NIC",
    "four on an idle node is a whole island",
    "one on an idle node is the lowest",
    "a pair packs into the free remainder of a used island",
    "one GPU goes to the smallest free group",
    "among linked pairs one NIC wins",
    "four take the island with none held",
    "five cannot be linked: an island and the next lowest",
    "all the free ones when all are asked",
    "one NIC before the lowest indices",
])
def test_choice_on_two_islands(free, n, want):
    assert choose(free, n, eight()) == want


def test_numa_before_rail_when_nvlink_connects_everything():
    # NVSwitch: all 8 linked. Free 1, 2, 4, 5: (4, 5) shares NUMA node 1 and one
    # NIC; (1, 2) shares NUMA node 0 but spans two NICs
    t = GpuTopology.build(8, [[j for j in range(8) if j != i] for i in range(8)],
                          [0] * 4 + [1] * 4, [f"mlx5_{i // 2}" for i in range(8)])
    assert choose((1, 2, 4, 5), 2, t) == (4, 5)
    assert choose((1, 2, 4, 6), 2, t) == (1, 2)     # one NUMA node, two NICs, lowest


def test_without_topology_the_lowest():
    assert choose_gpus((1, 3, 5), 2) == (1, 3)
    assert GpuTopology.build(4, [[], [], [], []], [-1] * 4, [""] * 4) is None


def test_schedule_gives_two_jobs_nvlink_pairs_and_a_four_gpu_job_a_whole_island():
    n = node("node1", cpus=64, gpus=8, gpu_topology=eight(),
             alloc_cpus=1, alloc_gpus=1, alloc_gpu_ids=(0,))
    plan = schedule(cluster([n], [job(1, gpus=2), job(2, gpus=4), job(3, gpus=1)]), NOW)
    got = {s.job_id: s.gpu_ids_per_node[0] for s in plan.starts}
    # 1-3 is the free remainder of island 0-3: the pair packs there (one NIC: 2, 3),
    # the four take island 4-7 whole, the single GPU the last of 1-3
    assert got == {1: (2, 3), 2: (4, 5, 6, 7), 3: (1,)}


# -- properties ---------------------------------------------------------------------
@st.composite
def layouts(draw):
    count = draw(st.integers(1, 10))
    pairs = list(itertools.combinations(range(count), 2))
    links = draw(st.lists(st.sampled_from(pairs), unique=True) if pairs else st.just([]))
    peers = [[] for _ in range(count)]
    for a, b in links:
        peers[a].append(b)
    numa = draw(st.lists(st.integers(-1, 1), min_size=count, max_size=count))
    rails = draw(st.lists(st.sampled_from(["", "mlx5_0", "mlx5_1", "mlx5_2"]),
                          min_size=count, max_size=count))
    topo = GpuTopology.build(count, peers, numa, rails)
    free = tuple(sorted(draw(st.sets(st.integers(0, count - 1), min_size=1))))
    n = draw(st.integers(1, len(free)))
    return count, peers, topo, free, n


def _connected(s, peers) -> bool:
    linked = {(a, b) for a, ps in enumerate(peers) for b in ps}
    return all((a, b) in linked or (b, a) in linked for a, b in itertools.combinations(s, 2))


@settings(max_examples=400, deadline=None)
@given(layouts())
def test_never_a_held_index_and_exactly_n_ascending(layout):
    _, _, topo, free, n = layout
    got = choose_gpus(free, n, topo)
    assert len(got) == n and len(set(got)) == n, (free, n, got)
    assert set(got) <= set(free), (free, n, got)
    assert list(got) == sorted(got)


@settings(max_examples=400, deadline=None)
@given(layouts())
def test_connected_whenever_a_connected_free_set_of_that_size_exists(layout):
    _, peers, topo, free, n = layout
    got = choose_gpus(free, n, topo)
    exists = any(_connected(s, peers) for s in itertools.combinations(free, n))
    if exists:
        assert _connected(got, peers), (free, n, peers, got)

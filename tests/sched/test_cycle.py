"""The scheduling pass as a table: nodes, jobs and now in; starts and reasons out."""
from __future__ import annotations

import pytest

from lingjun.slurm import (REASON_BEGIN_TIME, REASON_HELD_USER, REASON_PARTITION_CONFIG,
                           REASON_PARTITION_DOWN, REASON_PARTITION_INACTIVE,
                           REASON_PARTITION_NODE_LIMIT, REASON_PARTITION_TIME_LIMIT,
                           REASON_PRIORITY, REASON_RESOURCES)
from lingjund.sched.cycle import schedule
from lingjund.sched.plugins import (DEFAULT_PROFILE, PluginError, Profile, REGISTRY,
                                    build_profile)
from tests.sched.builders import busy, cluster, job, node, outcomes, partition

NOW = 1_000_000.0
FOUR = [node(f"node{i}") for i in range(1, 5)]

PRIORITY, RESOURCES = REASON_PRIORITY, REASON_RESOURCES

# (nodes, jobs, partitions or None for one "debug" with every node, want)
# want: job id -> hostlist it starts on, or its pending reason.
CASES = [
    # --- queue order -------------------------------------------------------
    pytest.param([node("node1", cpus=2)],
                 [job(1, submit=20, cpus=2), job(2, submit=10, cpus=2)], None,
                 {2: "node1", 1: RESOURCES},
                 id="equal priority starts the earlier submission first"),
    pytest.param([node("node1", cpus=2)],
                 [job(1, cpus=2, prio=10), job(2, cpus=2, prio=20)], None,
                 {2: "node1", 1: RESOURCES},
                 id="higher priority starts first though submitted later"),
    pytest.param([node("node1", cpus=2)],
                 [job(7, submit=5, cpus=2), job(3, submit=5, cpus=2)], None,
                 {3: "node1", 7: RESOURCES},
                 id="equal priority and submit time fall back to the lower job id"),
    # --- strict priority -----------------------------------------------------
    pytest.param(FOUR[:3] + [busy("node4")],
                 [job(11, nodes=4, prio=300), job(12, prio=200), job(13, prio=200)], None,
                 {11: RESOURCES, 12: PRIORITY, 13: PRIORITY},
                 id="one-node jobs pend with Priority behind a blocked 4-node job"),
    pytest.param(FOUR[:3] + [busy("node4")],
                 [job(12, prio=400), job(11, nodes=4, prio=300), job(13, prio=200)], None,
                 {12: "node1", 11: RESOURCES, 13: PRIORITY},
                 id="a small job ahead of a blocked gang still starts"),
    pytest.param(FOUR[:1],
                 [job(1, cpus=8), job(2)], None,
                 {1: RESOURCES, 2: "node1"},
                 id="a job that can never fit any node does not block the queue"),
    # --- gangs ---------------------------------------------------------------
    pytest.param(FOUR[:3] + [busy("node4")],
                 [job(1, nodes=4)], None,
                 {1: RESOURCES},
                 id="gang of 4 waits while only 3 nodes are idle"),
    pytest.param(FOUR[:3] + [busy("node4")],
                 [job(1, nodes=3)], None,
                 {1: "node[1-3]"},
                 id="gang of 3 starts on the 3 idle nodes of 4"),
    pytest.param([node("node1"), node("node2", alloc_cpus=2), node("node3", alloc_cpus=2)],
                 [job(1, nodes=3, cpus=3), job(2, nodes=1, cpus=2, prio=50)], None,
                 {1: RESOURCES, 2: PRIORITY},
                 id="a gang that fits on one node of three takes none of them"),
    pytest.param(FOUR,
                 [job(1, nodes=2, cpus=3), job(2, nodes=2, cpus=3), job(3, nodes=1, cpus=3)],
                 None,
                 {1: "node[1-2]", 2: "node[3-4]", 3: RESOURCES},
                 id="resources taken by a gang are gone for the next job in the pass"),
    pytest.param([node("node1")],
                 [job(1, cpus=3), job(2, cpus=3)], None,
                 {1: "node1", 2: RESOURCES},
                 id="the second job sees the CPUs the first took in the same pass"),
    pytest.param([node("node1")],
                 [job(1, cpus=2), job(2, cpus=2)], None,
                 {1: "node1", 2: "node1"},
                 id="two jobs share a node when both fit"),
    # --- exclusive -----------------------------------------------------------
    pytest.param([node("node1", alloc_cpus=1), node("node2")],
                 [job(1, exclusive=True)], None,
                 {1: "node2"},
                 id="an exclusive job skips a node with anything running"),
    pytest.param([node("node1", alloc_cpus=1), node("node2", alloc_mem=100)],
                 [job(1, exclusive=True)], None,
                 {1: RESOURCES},
                 id="an exclusive job waits while every node holds a job"),
    pytest.param([node("node1", exclusive=True)],
                 [job(1)], None,
                 {1: RESOURCES},
                 id="nothing starts beside a running exclusive job"),
    pytest.param([node("node1")],
                 [job(1, exclusive=True), job(2, prio=50)], None,
                 {1: "node1", 2: RESOURCES},
                 id="nothing starts beside an exclusive job started in the same pass"),
    pytest.param([node("node1", jobs=1)],
                 [job(1, exclusive=True)], None,
                 {1: RESOURCES},
                 id="an exclusive job waits for a node whose job holds no resources"),
    # --- node health ---------------------------------------------------------
    pytest.param([node("node1", schedulable=False), node("node2")],
                 [job(1)], None,
                 {1: "node2"},
                 id="a drained or down node gets no new work"),
    pytest.param([node("node1", schedulable=False)],
                 [job(1), job(2, prio=50)], None,
                 {1: RESOURCES, 2: PRIORITY},
                 id="a job waiting for a down node blocks its partition"),
    # --- memory --------------------------------------------------------------
    pytest.param([node("node1", mem=8000, alloc_mem=6000, alloc_cpus=1)],
                 [job(1, mem=4000)], None,
                 {1: RESOURCES},
                 id="a job asking more memory than is free waits"),
    pytest.param([node("node1", mem=8000, alloc_mem=8000, alloc_cpus=1)],
                 [job(1)], None,
                 {1: "node1"},
                 id="a job that asks no memory reserves none"),
    pytest.param([node("node1", mem=8000, alloc_mem=1, alloc_cpus=1), node("node2", mem=8000)],
                 [job(1, mem=0)], None,
                 {1: "node2"},
                 id="mem 0 asks the whole node's memory"),
    pytest.param([node("node1", mem=8000)],
                 [job(1, mem=9000)], None,
                 {1: RESOURCES},
                 id="more memory than any node has never fits"),
    # --- GPUs ----------------------------------------------------------------
    pytest.param([node("node1"), node("node2", gpus=4), node("node3", gpus=4)],
                 [job(1, nodes=2, gpus=2)], None,
                 {1: "node[2-3]"},
                 id="a GPU gang lands on the GPU nodes"),
    pytest.param([node("node1", gpus=4, alloc_gpus=3)],
                 [job(1, gpus=2)], None,
                 {1: RESOURCES},
                 id="a job asking more GPUs than are free waits"),
    pytest.param([node("node1", gpus=4)],
                 [job(1, gpus=2), job(2, gpus=2), job(3, gpus=1)], None,
                 {1: "node1", 2: "node1", 3: RESOURCES},
                 id="GPUs taken in the pass are gone for the next job"),
    # --- held, begin time ----------------------------------------------------
    pytest.param([node("node1")],
                 [job(1, held=True, cpus=4), job(2, prio=50, cpus=4)], None,
                 {1: REASON_HELD_USER, 2: "node1"},
                 id="a held job does not block the job behind it"),
    pytest.param([node("node1")],
                 [job(1, begin_time=NOW + 60, cpus=4), job(2, prio=50, cpus=4)], None,
                 {1: REASON_BEGIN_TIME, 2: "node1"},
                 id="a job whose begin time is ahead waits without blocking"),
    pytest.param([node("node1")],
                 [job(1, begin_time=NOW)], None,
                 {1: "node1"},
                 id="a job whose begin time has come starts"),
    pytest.param([node("node1")],
                 [job(1, held=True, begin_time=NOW + 60)], None,
                 {1: REASON_HELD_USER},
                 id="a held job with a begin time ahead shows JobHeldUser"),
    # --- partitions ----------------------------------------------------------
    pytest.param(FOUR,
                 [job(1, part="down"), job(2, part="debug")],
                 [partition("down", "node[1-2]", state="DOWN"), partition("debug", "node[3-4]")],
                 {1: REASON_PARTITION_DOWN, 2: "node3"},
                 id="a job in a DOWN partition pends with PartitionDown"),
    pytest.param(FOUR,
                 [job(1)], [partition("debug", "node[1-4]", state="INACTIVE")],
                 {1: REASON_PARTITION_INACTIVE},
                 id="a job in an INACTIVE partition pends with PartitionInactive"),
    pytest.param(FOUR,
                 [job(1)], [partition("debug", "node[1-4]", state="DRAIN")],
                 {1: "node1"},
                 id="a DRAIN partition still runs what is queued"),
    pytest.param(FOUR,
                 [job(1, nodes=5), job(2, prio=50)], None,
                 {1: REASON_PARTITION_NODE_LIMIT, 2: "node1"},
                 id="more nodes than the partition has does not block"),
    pytest.param([node(f"node{i}", cpus=2) for i in range(1, 5)],
                 [job(1, num_tasks=9, max_nodes=9), job(2, prio=50)],
                 [partition("debug", "node[1-4]", total_cpus=8)],
                 {1: REASON_PARTITION_CONFIG, 2: "node1"},
                 id="more tasks than the partition has CPUs pends with PartitionConfig as -n 9 does"),
    pytest.param([node(f"node{i}", cpus=2) for i in range(1, 5)],
                 [job(1, nodes=5, num_tasks=9)],
                 [partition("debug", "node[1-4]", total_cpus=8)],
                 {1: REASON_PARTITION_CONFIG},
                 id="too many CPUs is named before too many nodes"),
    pytest.param(FOUR,
                 [job(1, nodes=3), job(2, prio=50)], [partition("debug", "node[1-4]", max_nodes=2)],
                 {1: REASON_PARTITION_NODE_LIMIT, 2: "node1"},
                 id="more nodes than the partition's MaxNodes does not block"),
    pytest.param(FOUR,
                 [job(1, nodes=1)], [partition("debug", "node[1-4]", min_nodes=2)],
                 {1: REASON_PARTITION_NODE_LIMIT},
                 id="fewer nodes than the partition's MinNodes pends"),
    pytest.param(FOUR,
                 [job(1, time_limit_min=120), job(2, prio=50, time_limit_min=60)],
                 [partition("debug", "node[1-4]", max_time_min=60)],
                 {1: REASON_PARTITION_TIME_LIMIT, 2: "node1"},
                 id="a time limit over the partition's MaxTime does not block"),
    pytest.param(FOUR,
                 [job(1, part="nosuch"), job(2)], None,
                 {1: REASON_PARTITION_CONFIG, 2: "node1"},
                 id="a job in an unknown partition pends with PartitionConfig"),
    pytest.param([node("node1", alloc_cpus=4), node("node2"), node("node3")],
                 [job(1, part="a", nodes=2, prio=300), job(2, part="b", prio=200),
                  job(3, part="b", nodes=2, prio=100)],
                 [partition("a", "node[1-2]"), partition("b", "node[2-3]")],
                 {1: RESOURCES, 2: "node3", 3: PRIORITY},
                 id="nodes of a blocked partition are kept for its job"),
    pytest.param([node("node1", alloc_cpus=4), node("node2"), node("node3")],
                 [job(1, part="a", nodes=2, prio=300), job(2, part="b", prio=200)],
                 [partition("a", "node1"), partition("b", "node[2-3]")],
                 {1: REASON_PARTITION_NODE_LIMIT, 2: "node2"},
                 id="a partition-limit refusal reserves no nodes"),
    pytest.param([node("node1"), node("node2")],
                 [job(1, part="a", nodes=2, prio=300), job(2, part="b", prio=200)],
                 [partition("a", "node[1-2]"), partition("b", "node[1-2]")],
                 {1: "node[1-2]", 2: "node1"},
                 id="a job in an overlapping partition shares what is left"),
    # --- node choice ---------------------------------------------------------
    pytest.param([node("node10"), node("node2"), node("node9")],
                 [job(1)], None,
                 {1: "node2"},
                 id="natural name order: node2 before node9 before node10"),
    pytest.param([node("node1", weight=10), node("node2", weight=5)],
                 [job(1)], None,
                 {1: "node2"},
                 id="a lower weight wins over name order"),
    pytest.param([node("node1", cpus=8), node("node2", cpus=4), node("node3", cpus=8, alloc_cpus=5)],
                 [job(1, cpus=3)], None,
                 {1: "node3"},
                 id="best fit: the node with the fewest CPUs left over"),
    # --- the worked example at the top of cycle.py ---------------------------
    pytest.param(FOUR[:3] + [busy("node4")],
                 [job(10, prio=200, nodes=2, cpus=2), job(11, prio=100, nodes=3, cpus=4),
                  job(12, prio=90), job(13, prio=80, held=True), job(14, prio=70, nodes=5)],
                 None,
                 {10: "node[1-2]", 11: RESOURCES, 12: PRIORITY, 13: REASON_HELD_USER,
                  14: REASON_PARTITION_NODE_LIMIT},
                 id="the worked example in cycle.py's docstring"),
]


@pytest.mark.parametrize("nodes, jobs, partitions, want", CASES)
def test_schedule(nodes, jobs, partitions, want):
    got = outcomes(schedule(cluster(nodes, jobs, partitions), NOW))
    assert got == want, f"want {want}\n got {got}"


# (nodes, job, want (nodes, cpus, mem, gpus, tasks) per node in rank order)
LAYOUTS = [
    pytest.param(FOUR[:2], job(1, nodes=2, num_tasks=5),
                 (("node1", "node2"), (3, 2), (0, 0), (0, 0), (3, 2)),
                 id="5 tasks on 2 nodes split 3 then 2"),
    pytest.param(FOUR[:3], job(1, nodes=3, ntasks_per_node=2, cpus=2, mem=1000),
                 (("node1", "node2", "node3"), (4, 4, 4), (1000,) * 3, (0, 0, 0), (2, 2, 2)),
                 id="ntasks_per_node 2 with 2 CPUs per task on 3 nodes"),
    pytest.param(FOUR[:2], job(1, nodes=2),
                 (("node1", "node2"), (1, 1), (0, 0), (0, 0), (1, 1)),
                 id="no task count: one task per node"),
    pytest.param(FOUR, job(1, num_tasks=6, max_nodes=4),
                 (("node1", "node2"), (3, 3), (0, 0), (0, 0), (3, 3)),
                 id="num_tasks spreads over the fewest nodes up to max_nodes"),
    pytest.param(FOUR, job(1, nodes=2, num_tasks=8, ntasks_per_node=2, max_nodes=4),
                 (("node1", "node2", "node3", "node4"), (2, 2, 2, 2), (0,) * 4, (0,) * 4, (2, 2, 2, 2)),
                 id="ntasks_per_node caps tasks per node so 8 tasks need 4 nodes"),
    pytest.param([node("node1", cpus=8, gpus=2)], job(1, exclusive=True),
                 (("node1",), (8,), (0,), (2,), (1,)),
                 id="exclusive takes all CPUs and GPUs and no memory unless asked"),
    pytest.param([node("node1", mem=8000)], job(1, mem=0),
                 (("node1",), (1,), (8000,), (0,), (1,)),
                 id="mem 0 takes all the node's memory"),
    pytest.param([node("node10"), node("node9")], job(1, nodes=2, num_tasks=3),
                 (("node9", "node10"), (2, 1), (0, 0), (0, 0), (2, 1)),
                 id="rank order is natural name order"),
    pytest.param([node("node1", alloc_cpus=2), node("node2", alloc_cpus=1)],
                 job(1, nodes=2, num_tasks=5),
                 (("node1", "node2"), (2, 3), (0, 0), (0, 0), (2, 3)),
                 id="the larger share goes to the node it fits on"),
]


@pytest.mark.parametrize("nodes, one, want", LAYOUTS)
def test_layout(nodes, one, want):
    plan = schedule(cluster(nodes, [one]), NOW)
    assert plan.reasons == {}, f"want a start, got reasons {dict(plan.reasons)}"
    (s,) = plan.starts
    got = (s.nodes, s.cpus_per_node, s.mem_per_node_mb, s.gpus_per_node, s.tasks_per_node)
    assert got == want, f"want {want}\n got {got}"
    assert s.exclusive == one.exclusive


def test_snapshot_is_left_as_it_was():
    snap = cluster(FOUR, [job(1, nodes=2), job(2, cpus=3)])
    before = repr(snap)
    schedule(snap, NOW)
    assert repr(snap) == before


def test_every_default_plugin_is_registered_under_its_name():
    for plugin in (DEFAULT_PROFILE.queue_sort, *DEFAULT_PROFILE.filters, DEFAULT_PROFILE.select):
        assert REGISTRY[plugin.name] is plugin


@pytest.mark.parametrize("args, message", [
    (("priority/nosuch", (), "select/gang"), "unknown scheduler plugin 'priority/nosuch'"),
    (("priority/basic", ("select/gang",), "select/gang"), "'select/gang' is not a JobFilter"),
], ids=["an unknown plugin name is refused with its name",
        "a plugin in the wrong slot is refused with its name"])
def test_build_profile_refuses(args, message):
    with pytest.raises(ValueError, match=message):
        build_profile(*args)


def test_a_failing_plugin_is_named_in_the_error():
    class Broken:
        name = "filter/broken"

        def check(self, job, partition, now):
            raise KeyError("boom")

    profile = Profile(DEFAULT_PROFILE.queue_sort, (Broken(),), DEFAULT_PROFILE.select)
    with pytest.raises(PluginError, match="^filter/broken: 'boom'"):
        schedule(cluster(FOUR, [job(1)]), NOW, profile)

"""-w / -x / -C / GPU type in the scheduling core: node filters, required
nodes, memory per CPU, and the --test-only estimate. Plain function calls
over hand-built snapshots."""
from __future__ import annotations

import pytest

from lingjun.slurm import REASON_PRIORITY, REASON_RESOURCES
from lingjund.sched.cycle import schedule
from lingjund.sched.estimate import estimate_start
from lingjund.sched.plugins import REGISTRY, NodeFilter
from lingjund.sched.snapshot import RunningJob, Snapshot
from tests.sched.builders import busy, cluster, job, node, outcomes

NOW = 1_000_000.0
RESOURCES, PRIORITY = REASON_RESOURCES, REASON_PRIORITY


def featured(name, *features, **kw):
    return node(name, features=tuple(features), **kw)


FOUR = [featured("node1", "fast", "ib"), featured("node2", "fast"), featured("node3"),
        featured("node4", "slow")]

CASES = [
    pytest.param(FOUR, [job(1, req_nodes=("node3",))], {1: "node3"},
                 id="-w node3 starts on node3 though node1 sorts first"),
    pytest.param(FOUR, [job(1, req_nodes=("node2", "node4"))], {1: "node[2,4]"},
                 id="-w nodes count toward -N"),
    pytest.param(FOUR, [job(1, nodes=2, req_nodes=("node4",))], {1: "node[1,4]"},
                 id="-w node4 -N2 takes node4 and the best other node"),
    pytest.param([busy("node1")] + FOUR[1:], [job(1, req_nodes=("node1",)), job(2)],
                 {1: RESOURCES, 2: PRIORITY},
                 id="a busy required node is waited for and holds the partition"),
    pytest.param([featured("node1", schedulable=False)] + FOUR[1:],
                 [job(1, req_nodes=("node1",)), job(2)],
                 {1: "ReqNodeNotAvail, UnavailableNodes:node1", 2: "node2"},
                 id="a drained required node gives ReqNodeNotAvail and blocks nothing"),
    pytest.param(FOUR, [job(1, nodes=3, exc_nodes=("node1",))], {1: "node[2-4]"},
                 id="-x keeps the job off node1"),
    pytest.param(FOUR, [job(1, nodes=4, exc_nodes=("node1",))], {1: RESOURCES},
                 id="excluding a node leaves too few for the gang"),
    pytest.param(FOUR, [job(1, nodes=2, constraint="fast")], {1: "node[1-2]"},
                 id="-C fast takes the fast nodes"),
    pytest.param(FOUR, [job(1, constraint="fast&ib")], {1: "node1"},
                 id="-C a&b needs both features on one node"),
    pytest.param(FOUR, [job(1, constraint="fast,ib")], {1: "node1"},
                 id="-C a,b is the old spelling of AND"),
    pytest.param(FOUR, [job(1, nodes=3, constraint="fast|slow")], {1: "node[1-2,4]"},
                 id="-C a|b takes nodes with either"),
    pytest.param(FOUR, [job(1, constraint="(slow|ib)&fast")], {1: "node1"},
                 id="-C parentheses group"),
    pytest.param(FOUR, [job(1, nodes=3, constraint="fast")], {1: RESOURCES},
                 id="-C with too few matching nodes never starts"),
    pytest.param([node("node1", gpus=2, gpu_type="v100"), node("node2", gpus=2, gpu_type="a100")],
                 [job(1, gpus=1, gpu_type="a100")], {1: "node2"},
                 id="--gres=gpu:a100 takes the a100 node"),
    pytest.param([node("node1", cpus=4, mem=1000), node("node2", cpus=4, mem=4000)],
                 [job(1, cpus=4, mem_per_cpu_mb=500)], {1: "node2"},
                 id="--mem-per-cpu asks CPUs times memory per CPU"),
]


@pytest.mark.parametrize("nodes,jobs,want", CASES)
def test_node_requests(nodes, jobs, want):
    got = outcomes(schedule(cluster(nodes, jobs), NOW))
    assert got == want, f"want {want}, got {got}"


def test_mem_per_cpu_share_is_per_rank_cpus():
    plan = schedule(cluster([node("node1"), node("node2")],
                            [job(1, nodes=2, cpus=2, mem_per_cpu_mb=100)]), NOW)
    assert plan.starts[0].mem_per_node_mb == (200, 200)


def test_node_request_plugin_fits_its_protocol():
    assert isinstance(REGISTRY["node_features/request"], NodeFilter)


# --- --test-only estimate ------------------------------------------------------------

TWO = [node("node1", cpus=2), node("node2", cpus=2)]


def _snap(nodes, running=()):
    s = cluster(nodes, [])
    return Snapshot(nodes=s.nodes, partitions=s.partitions, pending=(), running=tuple(running))


@pytest.mark.parametrize("nodes,running,ask,want", [
    pytest.param(TWO, (), job(9, nodes=2), (NOW, "node[1-2]", 2),
                 id="an idle cluster starts the job now"),
    pytest.param([busy("node1", cpus=2), node("node2", cpus=2)],
                 (RunningJob(7, ("node1",), end_time=NOW + 600, cpus_per_node=(2,)),),
                 job(9, nodes=2), (NOW + 600, "node[1-2]", 2),
                 id="a gang starts when the running job on its node ends"),
    pytest.param([busy("node1", cpus=2), busy("node2", cpus=2)],
                 (RunningJob(7, ("node1",), end_time=NOW + 900, cpus_per_node=(2,)),
                  RunningJob(8, ("node2",), end_time=NOW + 300, cpus_per_node=(2,))),
                 job(9, req_nodes=("node1",)), (NOW + 900, "node1", 1),
                 id="-w waits for the job on the required node, not the first to end"),
    pytest.param(TWO, (), job(9, nodes=3), None,
                 id="more nodes than exist never start"),
    pytest.param(TWO, (), job(9, constraint="gpu"), None,
                 id="a constraint no node satisfies never starts"),
])
def test_estimate_start(nodes, running, ask, want):
    got = estimate_start(_snap(nodes, running), ask, NOW)
    if want is None:
        assert got is None, got
        return
    when, start = got
    from lingjun.slurm import compress_hostlist
    assert (when, compress_hostlist(start.nodes), sum(start.cpus_per_node)) == want

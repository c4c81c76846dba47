"""A local cluster of two leaf switches (Slurm's topology.conf, taken unchanged):
a gang goes under one switch, its tasks see where they hang, scontrol shows the tree.
The agents ask a stand-in lldpctl (a recorded `lldpctl -f json`: leaf07) for the
switch they hear; the configuration wins and the controller says they disagree."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, wait_for

RECORDED = Path(__file__).resolve().parents[1] / "agent" / "data" / "lldpctl.json"

TOPOLOGY_CONF = """# two leaves under one spine, as the Slurm anchor's
SwitchName=s0 Nodes=node[1-2]
SwitchName=s1 Nodes=node[3-4]
SwitchName=s2 Switches=s[0-1]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("topology")
    (root / "topology.conf").write_text(TOPOLOGY_CONF)
    extra = root / "extra.toml"
    extra.write_text(f'[topology]\ntopology_conf = "{root / "topology.conf"}"\n')
    fake = root / "lldpctl"
    fake.write_text(f"#!/bin/sh\ncat {RECORDED}\n")
    fake.chmod(0o755)
    c = Cluster(root, nodes=4, cpus=2, up_args=("--extra-config", str(extra),
                                                "--lldpctl", str(fake)))
    c.up()
    try:
        yield c
    finally:
        c.down()


def test_scontrol_shows_the_switches_as_slurm_does(cluster):
    out = cluster.run(["scontrol", "show", "topology"], check=True).stdout
    assert out == ("SwitchName=s0 Level=0 LinkSpeed=1 Nodes=node[1-2]\n"
                   "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=node[3-4]\n"
                   "SwitchName=s2 Level=1 LinkSpeed=1 Nodes=node[1-4] Switches=s[0-1]\n")
    out = cluster.run(["scontrol", "show", "topology", "node3"], check=True).stdout
    assert out.splitlines() == ["SwitchName=s1 Level=0 LinkSpeed=1 Nodes=node[3-4]",
                                "SwitchName=s2 Level=1 LinkSpeed=1 Nodes=node[1-4] Switches=s[0-1]"]
    p = cluster.run(["scontrol", "show", "topology", "nodeX"])
    assert (p.returncode, p.stderr) == (
        0, "scontrol: error: Topology information contains no switch or node named nodeX\n")
    assert "TopologyPlugin          = topology/tree" in cluster.run(
        ["scontrol", "show", "config"], check=True).stdout


def test_a_two_node_job_with_switches_1_lands_under_one_switch(cluster):
    c = cluster
    gate = c.work / "hold-node1"
    # node1 busy: without the tree the next 2-node job would take node[2-3] (two leaves)
    holder = c.sbatch("-N", "1", "-w", "node1", "--exclusive", "-o", "/dev/null", "--wrap",
                      f"while [ ! -e {gate} ]; do sleep 0.1; done")
    try:
        c.wait_state(holder, "RUNNING")
        jid = c.sbatch("-N", "2", "--switches=1@1:00", "-o", "topo-%j.out", "--wrap",
                       "echo batch=$SLURM_TOPOLOGY_ADDR pattern=$SLURM_TOPOLOGY_ADDR_PATTERN; "
                       "srun bash -c 'echo task=$SLURM_TOPOLOGY_ADDR'")
        c.wait_state(jid, "COMPLETED", timeout=60)
        assert c.squeue(jid, "%N") == "node[3-4]"
    finally:
        gate.touch()
    out = (c.work / f"topo-{jid}.out").read_text()
    assert "batch=s2.s1.node3 pattern=switch.switch.node" in out, out
    assert sorted(re.findall(r"^task=(.*)$", out, re.M)) == ["s2.s1.node3", "s2.s1.node4"], out


def test_lldp_is_reported_and_the_configuration_wins(cluster):
    log = cluster.state / "logs" / "lingjund.log"
    wait_for("the disagreement logged", lambda: "node=node3: LLDP hears leaf switch leaf07; "
             "[topology] places the node under s1 (the configuration wins)" in log.read_text(),
             timeout=10)


def test_segments_that_do_not_divide_the_node_count_are_refused(cluster):
    p = cluster.run(["sbatch", "-N", "3", "--segment=2", "--wrap", "true"])
    assert (p.returncode, p.stderr.strip()) == (
        1, "sbatch: error: Batch job submission failed: Requested node configuration is not "
           "available"), p

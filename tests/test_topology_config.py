"""[topology] in the TOML, or a Slurm topology.conf named by it: read, checked, refused
in Slurm's words (the controller will not start on a faulty tree)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from lingjun import config

NODES = '[[nodes]]\nnames = "node[1-4]"\n'
TREE = NODES + """[topology]
plugin = "topology/tree"
[[topology.switch]]
name = "s0"
nodes = "node[1-2]"
[[topology.switch]]
name = "s1"
nodes = "node[3-4]"
[[topology.switch]]
name = "s2"
switches = "s[0-1]"
"""


def test_a_tree_is_read_with_its_levels_and_each_nodes_address():
    topo = config.parse(TREE).topology
    assert topo.plugin == "topology/tree" and topo.max_switch_wait_s == 300.0
    assert [(s.name, s.level, s.nodes) for s in topo.index.switches] == [
        ("s0", 0, ("node1", "node2")), ("s1", 0, ("node3", "node4")),
        ("s2", 1, ("node1", "node2", "node3", "node4"))]
    assert topo.index.address("node2") == ("s2.s0.node2", "switch.switch.node")


def test_no_topology_is_the_default_and_slurms_none_reads_as_it():
    assert config.parse("").topology.index is None
    assert config.parse('[topology]\nplugin = "topology/none"\n').topology.plugin == \
        "topology/default"


def test_a_slurm_topology_conf_is_taken_unchanged(tmp_path):
    conf = tmp_path / "topology.conf"
    conf.write_text("# the anchor's\nSwitchName=s0 Nodes=node[1-2]\nSwitchName=s1 Nodes=node[3-4]"
                    " LinkSpeed=10\n\nswitchname=s2 switches=s[0-1]  # spine\n")
    topo = config.parse(NODES + f'[topology]\ntopology_conf = "{conf}"\n').topology
    assert topo.plugin == "topology/tree"
    assert [(s.name, s.level, s.link_speed) for s in topo.index.switches] == [
        ("s0", 0, 1), ("s1", 0, 10), ("s2", 1, 1)]
    assert topo.index.address("node3") == ("s2.s1.node3", "switch.switch.node")


def test_blocks_are_read_with_their_sizes():
    text = NODES + """[topology]
plugin = "topology/block"
block_sizes = [2, 4]
[[topology.block]]
name = "b1"
nodes = "node[1-2]"
[[topology.block]]
name = "b2"
nodes = "node[3-4]"
"""
    index = config.parse(text).topology.index
    assert [(s.name, s.level) for s in index.switches] == [("b1", 0), ("b2", 0), ("b1-b2", 1)]


SWITCH = '[[topology.switch]]\nname = "{}"\n{} = "{}"\n'
CASES = [
    ('[topology]\nplugin = "topology/torus"', "[topology] plugin: 'topology/torus' is not one of"),
    (NODES + '[topology]\nplugin = "tree"\n' + SWITCH.format("s0", "nodes", "node[1-5]"),
     "[topology] Invalid node name (node5) in switch config (s0)"),
    (NODES + '[topology]\nplugin = "tree"\n' + SWITCH.format("s0", "switches", "s1")
     + SWITCH.format("s1", "switches", "s0"),
     "[topology] Switch configuration has a loop: s0 -> s1 -> s0"),
    (NODES + '[topology]\nplugin = "tree"\n' + SWITCH.format("s0", "nodes", "node1")
     + SWITCH.format("a", "switches", "s0") + SWITCH.format("b", "switches", "s0"),
     "[topology] Switch (s0) has multiple parents (a, b)"),
    (NODES + '[topology]\nplugin = "tree"\n' + SWITCH.format("s0", "nodes", "node1")
     + SWITCH.format("s1", "nodes", "node1"),
     "[topology] Node (node1) is in more than one leaf switch (s0, s1)"),
    ('[topology]\nplugin = "tree"\n', "[topology] topology/tree: no switches"),
    ('[topology]\nplugin = "tree"\n[[topology.switch]]\nname = "s0"\nnodez = "n1"',
     "[[topology.switch]] #1: unknown key(s) nodez (did you mean nodes?)"),
    ('[topology]\nmax_switch_wait_s = -1', "[topology] max_switch_wait_s = -1: expected `float` >= 0.0"),
    ('[topology]\ntopology_conf = "/nonexistent/topology.conf"',
     "[topology] topology_conf: cannot read /nonexistent/topology.conf"),
    (NODES + '[topology]\nplugin = "block"\nblock_sizes = [2]\n[[topology.block]]\nname = "b1"\n'
     'nodes = "node[1-3]"', "[topology] Block configuration (b1) has 3 nodes, more than the block size 2"),
]


@pytest.mark.parametrize("text, words", CASES, ids=[c[1][:60] for c in CASES])
def test_a_faulty_topology_is_refused_naming_the_fault(text, words):
    with pytest.raises(config.ConfigError) as e:
        config.parse(text + "\n", "/etc/lingjun/lingjun.toml")
    assert words in str(e.value), f"want {words!r} in {str(e.value)!r}"


def test_the_controller_will_not_start_on_a_faulty_topology_conf(tmp_path):
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s0 Nodes=node[1-9]\n")
    toml = tmp_path / "lingjun.toml"
    toml.write_text(NODES + f'[topology]\ntopology_conf = "{conf}"\n')
    r = subprocess.run([sys.executable, "-m", "lingjund.daemon", "--check-config", "-c", str(toml)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r
    assert r.stderr.strip() == ("lingjund: error: [topology] Invalid node name (node5) in "
                                "switch config (s0)"), r.stderr

"""The leaf switch a node hears over LLDP: read from a recorded `lldpctl -f json`
(lldpd 1.0's format, two data ports on one leaf and a management port), through a
stand-in lldpctl on the command path: the only fake, at the lowest layer."""
from __future__ import annotations

import json
from pathlib import Path

from lingjun_agent import lldp
from lingjund.service.topology import discovered_note, leaf_of
from lingjun.topology import Topology

RECORDED = Path(__file__).parent / "data" / "lldpctl.json"


def test_the_recorded_neighbours_are_read_per_interface():
    got = lldp.parse(RECORDED.read_text())
    assert got == [lldp.Neighbour("ens1f0", "leaf07", "swp12"),
                   lldp.Neighbour("ens1f1", "leaf07", "swp44"),
                   lldp.Neighbour("eno1", "mgmt-sw3", "Ethernet9")]
    assert lldp.leaf_switch(got) == "leaf07"      # heard on two interfaces, the other on one


def test_one_interface_is_an_object_not_a_list_and_garbage_is_nothing():
    one = {"lldp": {"interface": {"eth0": {"chassis": {"sw1": {"id": {}}}}}}}
    assert lldp.leaf_switch(lldp.parse(json.dumps(one))) == "sw1"
    assert lldp.parse("lldpd is not running") == []
    assert lldp.parse('{"lldp": {}}') == []
    assert lldp.leaf_switch([]) == ""


def test_discover_asks_lldpctl_and_says_nothing_without_it(tmp_path):
    fake = tmp_path / "lldpctl"
    fake.write_text(f'#!/bin/sh\n[ "$1 $2" = "-f json" ] || exit 2\ncat {RECORDED}\n')
    fake.chmod(0o755)
    assert lldp.discover(str(fake)) == "leaf07"
    assert lldp.discover(str(tmp_path / "missing")) == ""
    assert lldp.discover("") == ""
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho 'unable to connect to socket' >&2\nexit 1\n")
    broken.chmod(0o755)
    assert lldp.discover(str(broken)) == ""


def test_the_configuration_wins_and_a_disagreement_is_said():
    topo = Topology.tree([("s0", ("node1",), (), 1)])
    assert leaf_of(topo, "node1", "leaf07") == "s0"
    assert leaf_of(topo, "node2", "leaf07") == "leaf07"
    assert leaf_of(None, "node2", "") == ""
    assert discovered_note(topo, "node1", "s0") == ""
    assert discovered_note(topo, "node1", "leaf07") == (
        "LLDP hears leaf switch leaf07; [topology] places the node under s0 "
        "(the configuration wins)")
    assert "under no switch" in discovered_note(topo, "node2", "leaf07")
    assert discovered_note(topo, "node1", "") == ""

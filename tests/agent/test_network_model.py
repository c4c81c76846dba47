"""The network's pure parts: profile checks, per-node addresses, failover steps, RDMA inventory."""
from __future__ import annotations

import pytest

from lingjun_agent.network import failover, rdma
from lingjun_agent.network.failover import BACKUP, PRIMARY, FailoverState
from lingjun.netprofile import (Interface, LinkFacts, Profile, ProfileError, Uplink,
                                           check_live, check_static, for_node, from_table, to_table)

RAIL0 = Interface(name="rail0", address="10.0.0.2/24", mtu=4200, table=100, gateway="10.0.0.1")
RAIL1 = Interface(name="rail1", address="10.1.0.2/24", mtu=4200, table=101, gateway="10.1.0.1")


@pytest.mark.parametrize("state, primary_up, backup_up, now, want, wake", [
    pytest.param(FailoverState(), True, True, 0, FailoverState(PRIMARY, 0), None,
                 id="both up: traffic stays on the primary"),
    pytest.param(FailoverState(PRIMARY, 0), False, True, 5, FailoverState(BACKUP, None), None,
                 id="primary down: the backup takes over at once"),
    pytest.param(FailoverState(PRIMARY, 0), False, False, 5, FailoverState(PRIMARY, None), None,
                 id="both down: nothing to move to, the primary stays active"),
    pytest.param(FailoverState(BACKUP, None), True, True, 10, FailoverState(BACKUP, 10), 13,
                 id="primary back: the backup keeps traffic during the hold-down"),
    pytest.param(FailoverState(BACKUP, 10), True, True, 12.9, FailoverState(BACKUP, 10), 13,
                 id="primary back but not yet for the hold-down: still on the backup"),
    pytest.param(FailoverState(BACKUP, 10), True, True, 13, FailoverState(PRIMARY, 10), None,
                 id="primary up for the whole hold-down: traffic returns"),
    pytest.param(FailoverState(BACKUP, 10), False, True, 12, FailoverState(BACKUP, None), None,
                 id="primary flaps during the hold-down: the hold-down starts over"),
    pytest.param(FailoverState(BACKUP, 10), True, False, 11, FailoverState(PRIMARY, 10), None,
                 id="backup fails while the primary is up: back to the primary at once"),
])
def test_failover_step(state, primary_up, backup_up, now, want, wake):
    got = failover.step(state, primary_up, backup_up, now, hold_down_s=3)
    assert got == (want, wake), f"want {(want, wake)}, got {got}"


@pytest.mark.parametrize("profile, message", [
    pytest.param(Profile("p", (RAIL0, Interface(name="rail1", address="10.0.0.9/16"))),
                 "overlapping subnets: rail0 has 10.0.0.0/24 and rail1 has 10.0.0.0/16",
                 id="overlapping subnets"),
    pytest.param(Profile("p", (RAIL0, Interface(name="rail1", address="10.1.0.2/24", table=100))),
                 "table 100 is used by both rail0 and rail1", id="a table used twice"),
    pytest.param(Profile("p", (RAIL0, Interface(name="rail1", address="10.1.0.2/24", table=101,
                                                rule_priority=1100))),
                 "rule priority 1100 is used by both rail0 and rail1", id="a rule priority used twice"),
    pytest.param(Profile("p", (Interface(name="rail0", mtu=65536),)), "MTU 65536 is out of range (68-65535)",
                 id="an MTU too large"),
    pytest.param(Profile("p", (Interface(name="rail0", address="10.0.0.2"),)), "not an IPv4 address/prefix",
                 id="an address without its prefix length"),
    pytest.param(Profile("p", (Interface(name="rail0", address="10.0.0.2/24", table=100,
                                         gateway="10.9.0.1"),)),
                 "gateway 10.9.0.1 is not in its subnet", id="a gateway outside the rail's subnet"),
    pytest.param(Profile("p", (Interface(name="rail0", table=100),)), "needs an address",
                 id="a table without an address to route from"),
    pytest.param(Profile("p", (Interface(name="rail0", sysctl=(("forwarding", 1),)),)),
                 "sysctl forwarding is not one of", id="a sysctl outside the allowed set"),
    pytest.param(Profile("p", (RAIL0, RAIL0)), "interface rail0 is listed twice", id="an interface twice"),
    pytest.param(Profile("p", (RAIL0,), (Uplink("u", "rail0", "rail0", "192.0.2.0/24"),)),
                 "primary and backup are the same", id="an uplink pair of one NIC"),
    pytest.param(Profile("p", (RAIL0, RAIL1), (Uplink("u", "rail0", "rail1", "192.0.2.0/33"),)),
                 "target '192.0.2.0/33' is not an IPv4 prefix", id="an uplink target that is no prefix"),
    pytest.param(Profile("p", (RAIL0, RAIL1), (Uplink("u", "rail0", "rail1", "192.0.2.0/24",
                                                      probe="192.0.2.1", probe_interval_s=2,
                                                      probe_timeout_s=1),)),
                 "want 0 < probe_interval_s < probe_timeout_s", id="a probe timeout shorter than its interval"),
])
def test_bad_profile_is_refused_statically(profile, message):
    with pytest.raises(ProfileError) as e:
        check_static(profile)
    assert message in str(e.value), f"want {message!r} in {str(e.value)!r}"


def test_live_check_finds_interfaces_by_mac_and_refuses_the_unknown():
    links = [LinkFacts("eth7", "AA:bb:cc:00:00:01", 68, 9000), LinkFacts("rail1", "aa:bb:cc:00:00:02", 68, 9000)]
    by_mac = Profile("p", (Interface(mac="aa:bb:cc:00:00:01", address="10.0.0.2/24", mtu=9000),))
    assert check_live(by_mac, links).interfaces[0].name == "eth7"
    with pytest.raises(ProfileError, match="unknown interface rail0"):
        check_live(Profile("p", (RAIL0,)), links)
    with pytest.raises(ProfileError, match="MTU 9200 is out of range for this link"):
        check_live(Profile("p", (Interface(name="rail1", mtu=9200),)), links)


def test_each_node_of_a_group_gets_its_own_addresses():
    group = Profile("g", (RAIL0,), (Uplink("u", "rail0", "rail0x", "192.0.2.0/24", source="10.99.0.1"),))
    third = for_node(group, 2)
    assert (third.interfaces[0].address, third.interfaces[0].gateway, third.uplinks[0].source) == \
        ("10.0.0.4/24", "10.0.0.1", "10.99.0.3")
    with pytest.raises(ProfileError, match="leaves its subnet"):
        for_node(group, 300)


def test_profile_round_trips_through_a_table():
    p = Profile("p", (Interface(name="rail0", address="10.0.0.2/24", sysctl=(("rp_filter", 1),)),),
                (Uplink("u", "a", "b", "192.0.2.0/24"),))
    assert from_table(to_table(p)) == p
    with pytest.raises(ProfileError, match="unknown key"):
        from_table({"name": "p", "interface": [{"name": "x", "speed": 100}]})


def _port(root, dev, port, state, link_layer="Ethernet", netdev=""):
    d = root / dev / "ports" / str(port)
    d.mkdir(parents=True)
    (d / "state").write_text(state + "\n")
    (d / "phys_state").write_text("5: LinkUp\n")
    (d / "link_layer").write_text(link_layer + "\n")
    (d / "rate").write_text("400 Gb/sec (4X NDR)\n")
    if netdev:
        (root / dev / "device" / "net" / netdev).mkdir(parents=True, exist_ok=True)


def test_rdma_inventory_and_mismatches_from_a_sysfs_tree(tmp_path):
    _port(tmp_path, "mlx5_0", 1, "4: ACTIVE", netdev="rail0")
    _port(tmp_path, "mlx5_1", 1, "1: DOWN", netdev="rail1")
    ports = rdma.inventory(str(tmp_path))
    assert ports == [rdma.RdmaPort("mlx5_0", 1, "ACTIVE", "LinkUp", "Ethernet", "400 Gb/sec (4X NDR)", "rail0"),
                     rdma.RdmaPort("mlx5_1", 1, "DOWN", "LinkUp", "Ethernet", "400 Gb/sec (4X NDR)", "rail1")]
    prof = Profile("p", (Interface(name="rail0", rdma_device="mlx5_0"),
                         Interface(name="rail1", rdma_device="mlx5_1"),
                         Interface(name="rail2", rdma_device="mlx5_2"),
                         Interface(name="rail3", rdma_device="mlx5_0")))
    assert rdma.mismatches(prof, ports) == [
        "rail1: RDMA device mlx5_1 port 1 is DOWN, not ACTIVE",
        "rail2: RDMA device mlx5_2 not found",
        "rail3: RDMA device mlx5_0 is bound to rail0, not rail3",
    ]
    assert rdma.inventory(str(tmp_path / "absent")) == []

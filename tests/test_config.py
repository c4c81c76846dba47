"""Typed configuration: EnforcePartLimits as Slurm spells it."""
from __future__ import annotations

import pytest

from lingjun import config


@pytest.mark.parametrize("text,want", [
    ("", "NO"),
    ('[controller]\nenforce_part_limits = "ALL"\n', "ALL"),
    ('[controller]\nenforce_part_limits = "any"\n', "ANY"),
    ('[controller]\nenforce_part_limits = "YES"\n', "ANY"),
], ids=["Slurm's default is NO", "ALL is kept", "case does not matter",
        "YES is Slurm's older word for ANY"])
def test_enforce_part_limits_takes_slurms_words(text, want):
    got = config.parse(text).controller.enforce_part_limits
    assert got == want, f"want {want}, got {got}"


def test_an_unknown_enforce_part_limits_word_is_refused():
    with pytest.raises(config.ConfigError) as e:
        config.parse('[controller]\nenforce_part_limits = "SOMETIMES"\n')
    assert "enforce_part_limits: 'SOMETIMES' is not one of NO, ANY, ALL" in str(e.value)


NET = '''
[network]
rdma_sysfs_root = "/tmp/ib"
[[network.profile]]
name = "rails"
nodes = "node[1-3]"
[[network.profile.interface]]
name = "rail0"
address = "10.0.0.11/24"
mtu = 4200
table = 100
gateway = "10.0.0.1"
sysctl = { rp_filter = 1 }
'''


def test_a_network_profile_gives_each_node_of_its_hostlist_its_own_address():
    net = config.parse(NET).network
    got = [(n, p.interfaces[0].address if p else None)
           for n in ("node1", "node3", "node4") for p in [net.profile_for(n)]]
    assert got == [("node1", "10.0.0.11/24"), ("node3", "10.0.0.13/24"), ("node4", None)], got
    assert net.rdma_sysfs_root == "/tmp/ib"
    assert net.profile_for("node2").interfaces[0].sysctl == (("rp_filter", 1),)
    assert config.parse("").network.profile_for("node1") is None


@pytest.mark.parametrize("change, message", [
    (("mtu = 4200", "mtu = 99999"), "interface rail0: MTU 99999 is out of range (68-65535)"),
    (('nodes = "node[1-3]"', 'nodes = "node[1-300]"'), "leaves its subnet"),
    (('nodes = "node[1-3]"', ""), "nodes (a hostlist) is required"),
    (("table = 100", "table = 100\nspeed = 400"), "unknown key(s) speed"),
    (('rdma_sysfs_root = "/tmp/ib"', 'rdma_root = "/tmp/ib"'), "[network]: unknown key(s) rdma_root"),
], ids=["an MTU out of range", "more nodes than the subnet holds", "a profile without nodes",
        "an unknown interface key", "an unknown [network] key"])
def test_a_bad_network_table_is_refused(change, message):
    with pytest.raises(config.ConfigError) as e:
        config.parse(NET.replace(*change))
    assert message in str(e.value), f"want {message!r} in {str(e.value)!r}"


def test_a_node_in_two_profiles_is_refused():
    text = NET + NET.split("[network]\nrdma_sysfs_root = \"/tmp/ib\"\n")[1].replace("node[1-3]", "node3")
    with pytest.raises(config.ConfigError, match="node node3 already has profile 'rails'"):
        config.parse(text)


# -- [authz] -------------------------------------------------------------
def test_authz_defaults_and_keys():
    a = config.parse("").authz
    assert (a.operators, a.max_submit_jobs_per_user) == ((), 0)
    a = config.parse('[authz]\noperators = ["ops", "1005"]\nmax_submit_jobs_per_user = 10\n'
                     'max_script_bytes = 2048\n').authz
    assert (a.operators, a.max_submit_jobs_per_user, a.max_script_bytes) == (("ops", "1005"), 10, 2048)


@pytest.mark.parametrize("text,words", [
    ('[authz]\noperators = "ops"\n', "[authz] operators = 'ops': expected `array`, got `str`"),
    ('[authz]\nmax_message_bytes = 10\n', "[authz] max_message_bytes = 10: expected `int` >= 1024"),
    ('[authz]\nmax_submit_jobs_per_user = -1\n',
     "[authz] max_submit_jobs_per_user = -1: expected `int` >= 0"),
    ('[authz]\nadmins = ["x"]\n', "unknown key(s) admins"),
], ids=["operators must be a list", "a message limit too small to be useful",
        "a negative submit limit", "an unknown key"])
def test_bad_authz_tables_are_refused(text, words):
    with pytest.raises(config.ConfigError) as e:
        config.parse(text)
    assert words in str(e.value)


@pytest.mark.parametrize("text,want", [
    ("", None),
    ('[accounting]\npurge_job_after = "12months"\n', 12 * 30 * 86400),
    ('[accounting]\npurge_job_after = "30days"\n', 30 * 86400),
    ('[accounting]\npurge_job_after = "720hours"\n', 720 * 3600),
    ('[accounting]\npurge_job_after = "1month"\n', 30 * 86400),
], ids=["default: kept forever", "months", "days", "hours", "one month, singular"])
def test_purge_job_after_takes_slurmdbd_syntax(text, want):
    assert config.parse(text).accounting.purge_after_s == want


@pytest.mark.parametrize("value,message", [
    ('"soon"', "[accounting] purge_job_after: invalid value 'soon'"),
    ('"3weeks"', "[accounting] purge_job_after: invalid value '3weeks'"),
    ('"0days"', "[accounting] purge_job_after: invalid value '0days'"),
    ('"-5days"', "[accounting] purge_job_after: invalid value '-5days'"),
    ("12", "[accounting] purge_job_after = 12: expected `str`, got `int`"),
], ids=["a word", "weeks are not slurmdbd's unit", "zero", "negative", "not a string"])
def test_a_bad_purge_job_after_is_refused_with_the_key_named(value, message):
    with pytest.raises(config.ConfigError) as e:
        config.parse(f"[accounting]\npurge_job_after = {value}\n")
    assert message in str(e.value)


def test_an_unknown_accounting_key_is_refused():
    with pytest.raises(config.ConfigError) as e:
        config.parse('[accounting]\npurge_after = "30days"\n')
    assert "[accounting]: unknown key(s) purge_after" in str(e.value)


def test_gpu_tables_declare_devices_of_every_node_of_the_hostlist():
    text = '''
[[nodes]]
names = "gpu[1-2]"
gpus = 4
gpu_type = "a100"
[[nodes.gpu]]
index = 1
nvlink = [0]
numa_node = 0
nic = "mlx5_0"
[[nodes.gpu]]
index = 0
nvlink = [1]
'''
    c = config.parse(text)
    for name in ("gpu1", "gpu2"):
        n = c.node(name)
        assert (n.gpus, n.gpu_type, [g.index for g in n.gpu]) == (4, "a100", [0, 1])
        assert (n.gpu[1].nvlink, n.gpu[1].numa_node, n.gpu[1].nic) == ((0,), 0, "mlx5_0")
        # keys not given stay unset: the agent's discovery fills them
        assert (n.gpu[0].numa_node, n.gpu[0].nic) == (None, None)


def test_gpu_tables_without_a_count_declare_that_many_gpus():
    c = config.parse('[[nodes]]\nnames = "n1"\n[[nodes.gpu]]\nindex = 0\n[[nodes.gpu]]\nindex = 1\n')
    assert c.node("n1").gpus == 2

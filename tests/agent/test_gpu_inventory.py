"""The agent's GPU devices: fake NVML (the lowest layer) over a fake sysfs tree."""
from __future__ import annotations

import sys

import pytest

from lingjun_agent import gpus, inventory
from tests.agent import fake_nvml
from tests.agent.fake_sysfs import EIGHT_GPUS, eight_gpu_host, gpu_bus, nvml_bus

MODULE = "fake_nvml_for_inventory"


@pytest.fixture
def nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, MODULE, fake_nvml)
    fake_nvml.reset([])
    yield fake_nvml
    fake_nvml.reset([])


@pytest.fixture
def sysfs(tmp_path):
    return eight_gpu_host(tmp_path / "sys")


def test_eight_gpus_in_two_nvlink_islands_two_numa_nodes_one_nic_per_pair(nvml, sysfs):
    nvml.reset([dict(g) for g in EIGHT_GPUS])
    found = gpus.discover(MODULE, str(sysfs))
    assert found.nvml and found.error == ""
    got = [(d.index, d.type, d.pci_bus_id, list(d.nvlink_peers), d.numa_node, d.nic)
           for d in found.devices]
    assert got == [
        (0, "a100", gpu_bus(0), [1, 2, 3], 0, "mlx5_0"),
        (1, "a100", gpu_bus(1), [0, 2, 3], 0, "mlx5_0"),
        (2, "a100", gpu_bus(2), [0, 1, 3], 0, "mlx5_1"),
        (3, "a100", gpu_bus(3), [0, 1, 2], 0, "mlx5_1"),
        (4, "a100", gpu_bus(4), [5, 6, 7], 1, "mlx5_2"),
        (5, "a100", gpu_bus(5), [4, 6, 7], 1, "mlx5_2"),
        (6, "a100", gpu_bus(6), [4, 5, 7], 1, "mlx5_3"),
        (7, "a100", gpu_bus(7), [4, 5, 6], 1, "mlx5_3"),
    ]
    d0 = found.devices[0]
    assert (d0.name, d0.uuid, d0.memory_mb) == ("NVIDIA A100-SXM4-80GB", EIGHT_GPUS[0]["uuid"], 81920)
    # the switch both GPUs of a pair and their NIC hang under (its upstream port)
    assert {d.pcie_switch for d in found.devices[:2]} == {"0000:10:00.0"}
    assert found.devices[2].pcie_switch == "0000:20:00.0"


def test_nvlink_peers_from_active_links_when_p2p_status_is_not_supported(nvml, sysfs):
    # GPU 0 has two links to GPU 1 and one to an NVSwitch (not a GPU: not a peer)
    described = [dict(EIGHT_GPUS[0], links=[nvml_bus(1), nvml_bus(1), "00000000:FF:00.0"]),
                 dict(EIGHT_GPUS[1], links=[nvml_bus(0)]), dict(EIGHT_GPUS[2], links=[])]
    nvml.reset(described, p2p=False)
    found = gpus.discover(MODULE, str(sysfs))
    assert [list(d.nvlink_peers) for d in found.devices] == [[1], [0], []]


def test_no_nic_under_the_switch_means_none_and_the_switch_still_known(nvml, tmp_path):
    root = eight_gpu_host(tmp_path / "sys", nics=False)
    nvml.reset([dict(g) for g in EIGHT_GPUS[:2]])
    found = gpus.discover(MODULE, str(root))
    assert [(d.nic, d.pcie_switch, d.numa_node) for d in found.devices] == [
        ("", "0000:10:00.0", 0), ("", "0000:10:00.0", 0)]


def test_a_gpu_sysfs_does_not_show_has_unknown_numa_and_no_nic(nvml, tmp_path):
    nvml.reset([dict(EIGHT_GPUS[0])])
    found = gpus.discover(MODULE, str(tmp_path / "empty"))
    d = found.devices[0]
    assert (d.numa_node, d.nic, d.pcie_switch, d.pci_bus_id) == (-1, "", "", gpu_bus(0))


def test_no_driver_means_no_devices_and_says_why(nvml, sysfs):
    nvml.reset([dict(g) for g in EIGHT_GPUS], missing=True)
    found = gpus.discover(MODULE, str(sysfs))
    assert (found.nvml, found.devices) == (False, ())
    assert found.error == "NVMLError_LibraryNotFound: NVML Shared Library Not Found"
    inv = inventory.collect(cpus=4, memory_mb=1000, gpus=0, found=found)
    assert (inv.gpus, inv.gpus_discovered, list(inv.gpu_devices)) == (0, False, [])


def test_no_binding_installed_means_no_devices(sysfs):
    found = gpus.discover("no_such_nvml_binding", str(sysfs))
    assert not found.nvml
    assert found.error.startswith("ModuleNotFoundError: No module named 'no_such_nvml_binding'")


def test_inventory_carries_the_devices_count_and_type(nvml, sysfs):
    nvml.reset([dict(g) for g in EIGHT_GPUS])
    inv = inventory.collect(cpus=4, memory_mb=1000, found=gpus.discover(MODULE, str(sysfs)))
    assert (inv.gpus, inv.gpu_type, inv.gpus_discovered) == (8, "a100", True)
    assert [d.index for d in inv.gpu_devices] == list(range(8))


def test_nvml_answering_zero_gpus_is_a_discovered_zero(nvml, sysfs):
    inv = inventory.collect(cpus=4, memory_mb=1000, gpus=0, found=gpus.discover(MODULE, str(sysfs)))
    assert (inv.gpus, inv.gpus_discovered) == (0, True)


@pytest.mark.parametrize("name, want", [
    ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA A100 80GB PCIe", "a100"),
    ("NVIDIA H100 80GB HBM3", "h100"),
    ("NVIDIA H200", "h200"),
    ("Tesla V100-SXM2-16GB", "v100"),
    ("NVIDIA GeForce RTX 4090", "rtx_4090"),
    ("NVIDIA RTX A6000", "rtx_a6000"),
    ("NVIDIA L40S", "l40s"),
    ("", ""),
])
def test_gpu_type_word(name, want):
    assert gpus.gpu_type(name) == want


@pytest.mark.parametrize("raw, want", [
    (b"00000000:07:00.0", "0000:07:00.0"), ("00000001:8A:00.0", "0001:8a:00.0"),
    ("0000:07:00.0", "0000:07:00.0")])
def test_bus_id_in_sysfs_spelling(raw, want):
    assert gpus.bus_id(raw) == want

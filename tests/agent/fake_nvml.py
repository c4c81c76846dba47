"""A tiny stand-in for ``pynvml`` (nvidia-ml-py): the calls the GPU probe makes.

Loaded in pynvml's place by module name ([sanity] nvml_module, or
``sys.modules``); ``GPUS`` is the hardware the test describes. Setting
``MISSING_LIBRARY`` makes nvmlInit fail as it does on a host without the driver.

A GPU is a dict: ``name``, ``uuid``, ``memory_mb``, ``bus`` (NVML's
"00000000:07:00.0"), ``nvlink`` (peer indices, answered through the P2P
status) or ``links`` (remote bus ids of its active NVLinks, for a fake
without the P2P call: ``P2P = False``), and the probe's health fields.

A process of its own (an agent of the local cluster) reads its GPUs from the
JSON file named by ``LINGJUN_FAKE_NVML_GPUS`` at import and at each nvmlInit: a list of GPUs, or
an object of such lists by host name (each local agent's host name is its
node's: ``--own-hostname``).
"""
from __future__ import annotations

import json
import os
import socket
from types import SimpleNamespace

NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
NVML_TEMPERATURE_GPU = 0
NVML_FEATURE_ENABLED = 1
NVML_FEATURE_DISABLED = 0
nvmlEventTypeXidCriticalError = 8
NVML_P2P_CAPS_INDEX_NVLINK = 2
NVML_P2P_STATUS_OK = 0
NVML_P2P_STATUS_NOT_SUPPORTED = 5

GPUS: list[dict] = []
MISSING_LIBRARY = False
P2P = True                      # nvmlDeviceGetP2PStatus answers (else NOT_SUPPORTED raised)
PENDING_XIDS: list[tuple[int, int]] = []     # (gpu index, xid) not yet read


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_Timeout(NVMLError):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


def reset(gpus: list[dict], missing: bool = False, p2p: bool = True) -> None:
    global MISSING_LIBRARY, P2P
    GPUS[:] = gpus
    MISSING_LIBRARY = missing
    P2P = p2p
    PENDING_XIDS.clear()


def _load_described() -> None:
    """GPUS from the file ``$LINGJUN_FAKE_NVML_GPUS`` names (a test may rewrite
    it while the agent runs: read again at each nvmlInit)."""
    if os.environ.get("LINGJUN_FAKE_NVML_GPUS"):
        with open(os.environ["LINGJUN_FAKE_NVML_GPUS"]) as f:
            described = json.load(f)
        if isinstance(described, dict):
            described = described.get(socket.gethostname(), [])
        GPUS[:] = described


if os.environ.get("LINGJUN_FAKE_NVML_GPUS"):
    _load_described()


def nvmlShutdown():
    pass


def nvmlDeviceGetUUID(h):
    return GPUS[h].get("uuid", f"GPU-00000000-0000-0000-0000-{h:012d}")


def nvmlDeviceGetMemoryInfo(h):
    total = GPUS[h].get("mem_total", GPUS[h].get("memory_mb", 81559) << 20)
    used = GPUS[h].get("mem_used", 0)
    return SimpleNamespace(total=total, used=used, free=total - used)


def nvmlDeviceGetUtilizationRates(h):
    return SimpleNamespace(gpu=GPUS[h].get("util", 0), memory=GPUS[h].get("mem_util", 0))


def nvmlDeviceGetPciInfo(h):
    return SimpleNamespace(busId=GPUS[h].get("bus", f"00000000:{h + 1:02X}:00.0").encode())


def nvmlDeviceGetP2PStatus(h1, h2, index):
    if not P2P:
        raise NVMLError_NotSupported("Not Supported")
    if index != NVML_P2P_CAPS_INDEX_NVLINK:
        return NVML_P2P_STATUS_OK
    linked = h2 in GPUS[h1].get("nvlink", ())
    return NVML_P2P_STATUS_OK if linked else NVML_P2P_STATUS_NOT_SUPPORTED


def nvmlDeviceGetNvLinkState(h, link):
    links = GPUS[h].get("links", ())
    if link >= len(links):
        raise NVMLError_NotSupported("Not Supported")
    return NVML_FEATURE_ENABLED


def nvmlDeviceGetNvLinkRemotePciInfo_v2(h, link):
    return SimpleNamespace(busId=GPUS[h]["links"][link])


def nvmlInit():
    if MISSING_LIBRARY:
        raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
    _load_described()


def nvmlDeviceGetCount():
    return len(GPUS)


def nvmlDeviceGetHandleByIndex(i):
    return i


def nvmlDeviceGetName(h):
    return GPUS[h].get("name", "NVIDIA H100 80GB HBM3")


def nvmlDeviceGetTotalEccErrors(h, kind, counter):
    return GPUS[h].get("ecc", 0)


def nvmlDeviceGetRetiredPagesPendingStatus(h):
    return int(GPUS[h].get("retired_pending", False))


def nvmlDeviceGetRetiredPages(h, cause):
    return [0x1000] * GPUS[h].get("retired", 0)


def nvmlDeviceGetRemappedRows(h):
    return (0, 0, 0, int(GPUS[h].get("remap_failed", False)))


def nvmlDeviceGetTemperature(h, sensor):
    return GPUS[h].get("temp", 40)


def nvmlDeviceGetPersistenceMode(h):
    return NVML_FEATURE_ENABLED if GPUS[h].get("persistence", True) else NVML_FEATURE_DISABLED


def nvmlEventSetCreate():
    return "events"


def nvmlDeviceRegisterEvents(h, kinds, events):
    pass


def nvmlEventSetWait(events, timeout_ms):
    if not PENDING_XIDS:
        raise NVMLError_Timeout("Timeout")
    i, xid = PENDING_XIDS.pop(0)
    return SimpleNamespace(device=i, eventType=nvmlEventTypeXidCriticalError, eventData=xid)

"""A tiny stand-in for ``pynvml`` (nvidia-ml-py): the calls the GPU probe makes.

Loaded in pynvml's place by module name ([sanity] nvml_module, or
``sys.modules``); ``GPUS`` is the hardware the test describes. Setting
``MISSING_LIBRARY`` makes nvmlInit fail as it does on a host without the driver.
In another process (an agent of a local cluster) ``GPUS`` comes from the JSON
file that ``$LINGJUN_FAKE_NVML_GPUS`` names, read at nvmlInit.
"""
from __future__ import annotations

import json
import os
from types import SimpleNamespace

NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
NVML_TEMPERATURE_GPU = 0
NVML_FEATURE_ENABLED = 1
NVML_FEATURE_DISABLED = 0
nvmlEventTypeXidCriticalError = 8

GPUS: list[dict] = []
MISSING_LIBRARY = False
PENDING_XIDS: list[tuple[int, int]] = []     # (gpu index, xid) not yet read


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_Timeout(NVMLError):
    pass


def reset(gpus: list[dict], missing: bool = False) -> None:
    global MISSING_LIBRARY
    GPUS[:] = gpus
    MISSING_LIBRARY = missing
    PENDING_XIDS.clear()


def nvmlInit():
    if MISSING_LIBRARY:
        raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
    if os.environ.get("LINGJUN_FAKE_NVML_GPUS"):
        with open(os.environ["LINGJUN_FAKE_NVML_GPUS"]) as f:
            GPUS[:] = json.load(f)


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


def nvmlDeviceGetUtilizationRates(h):
    return SimpleNamespace(gpu=GPUS[h].get("util", 0), memory=GPUS[h].get("mem_util", 0))


def nvmlDeviceGetMemoryInfo(h):
    total = GPUS[h].get("mem_total", 80 << 30)
    used = GPUS[h].get("mem_used", 0)
    return SimpleNamespace(total=total, used=used, free=total - used)

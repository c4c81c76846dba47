"""Gathering what the probes decide on: one reader per source, no decisions.

Each reader returns a frozen record; a reader that cannot read says so in the
record (``error``) instead of raising, so the decision stays with the probe.

- host: CPUs, memory, load (psutil)
- disks: ``os.statvfs`` and a real write of a temporary file
- GPUs: NVML through ``pynvml`` (nvidia-ml-py), imported when first needed
  by module name, so a test puts a small fake module in its place
  (``sys.modules``) and the probe logic stays real
- RDMA: the sysfs tree (``lingjun_agent.network.rdma``), root configurable
- NICs: netlink through pyroute2 (``IPRoute``), in the caller's namespace
- processes: ``/proc`` (psutil), through the launcher's job marks
"""
from __future__ import annotations

import importlib
import os
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from lingjun_agent.network import rdma


# -- host ------------------------------------------------------------------------
@dataclass(frozen=True)
class HostFacts:
    cpus: int
    memory_mb: int
    free_memory_mb: int
    load1: float


def host(cpus: int = 0, memory_mb: int = 0) -> HostFacts:
    """This host; non-zero arguments stand in for what it has (the local
    cluster's agents declare their size, as their inventory does)."""
    vm = psutil.virtual_memory()
    return HostFacts(cpus=cpus or psutil.cpu_count(logical=True) or 1,
                     memory_mb=memory_mb or vm.total // (1 << 20),
                     free_memory_mb=vm.available // (1 << 20), load1=os.getloadavg()[0])


# -- disks -----------------------------------------------------------------------
@dataclass(frozen=True)
class DiskFacts:
    path: str
    total_mb: float = 0.0
    free_mb: float = 0.0              # available to unprivileged users (f_bavail)
    inodes_total: int = 0
    inodes_free: int = 0
    writable: bool = False
    error: str = ""                   # "" = read; else why not ("No such file or directory")


def disk(path: str) -> DiskFacts:
    try:
        st = os.statvfs(path)
    except OSError as e:
        return DiskFacts(path=path, error=e.strerror or str(e))
    writable, error = True, ""
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".lingjun-sanity-"):
            pass
    except OSError as e:
        writable, error = False, e.strerror or str(e)
    mb = st.f_frsize / (1 << 20)
    return DiskFacts(path=path, total_mb=st.f_blocks * mb, free_mb=st.f_bavail * mb,
                     inodes_total=st.f_files, inodes_free=st.f_favail, writable=writable,
                     error=error)


# -- GPUs (NVML) -------------------------------------------------------------------
@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str = ""
    ecc_uncorrected: int = 0          # volatile uncorrected ECC errors (since driver load)
    retired_pending: bool = False     # a page retirement waits for a reset
    retired_pages: int = 0            # double-bit-error retired pages
    remap_failed: bool = False        # row remapping failed (A100+)
    temperature_c: int = 0
    persistence: bool = True
    xids: tuple[int, ...] = ()        # XID events seen since the last read


@dataclass(frozen=True)
class GpuFacts:
    nvml: bool                        # NVML loaded and initialised
    error: str = ""                   # why not
    gpus: tuple[GpuInfo, ...] = ()


class Nvml:
    """NVML for the agent's lifetime: loaded once it works, with an XID event
    set that keeps collecting between passes (an XID between two passes is
    not lost)."""

    def __init__(self, module: str = "pynvml"):
        self.module_name = module
        self.lib = None
        self.events = None
        self._lock = threading.Lock()

    def _load(self):
        if self.lib is not None:
            return self.lib
        lib = importlib.import_module(self.module_name)
        lib.nvmlInit()
        self.lib = lib
        try:
            self.events = lib.nvmlEventSetCreate()
            for i in range(lib.nvmlDeviceGetCount()):
                lib.nvmlDeviceRegisterEvents(lib.nvmlDeviceGetHandleByIndex(i),
                                             lib.nvmlEventTypeXidCriticalError, self.events)
        except Exception:       # noqa: BLE001 - XID events are optional (not on every GPU)
            self.events = None
        return lib

    def read(self) -> GpuFacts:
        with self._lock:
            try:
                lib = self._load()
            except Exception as e:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, ...
                return GpuFacts(nvml=False, error=f"{type(e).__name__}: {e}".rstrip(": "))
            try:
                xids = self._drain_xids(lib)
                out = []
                for i in range(lib.nvmlDeviceGetCount()):
                    out.append(self._gpu(lib, i, tuple(xids.get(i, ()))))
                return GpuFacts(nvml=True, gpus=tuple(out))
            except Exception as e:  # noqa: BLE001 - a GPU that fell off the bus raises here
                return GpuFacts(nvml=True, error=f"{type(e).__name__}: {e}")

    def _drain_xids(self, lib) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        if self.events is None:
            return out
        index = {}
        for i in range(lib.nvmlDeviceGetCount()):
            index[_handle_key(lib.nvmlDeviceGetHandleByIndex(i))] = i
        while True:
            try:
                ev = lib.nvmlEventSetWait(self.events, 0)
            except Exception:   # noqa: BLE001 - NVML_ERROR_TIMEOUT: no more events
                return out
            out.setdefault(index.get(_handle_key(ev.device), -1), []).append(int(ev.eventData))

    @staticmethod
    def _gpu(lib, i: int, xids: tuple[int, ...]) -> GpuInfo:
        h = lib.nvmlDeviceGetHandleByIndex(i)

        def opt(fn, default):
            try:
                return fn()
            except Exception:   # noqa: BLE001 - NOT_SUPPORTED on this model
                return default
        name = opt(lambda: lib.nvmlDeviceGetName(h), "")
        if isinstance(name, bytes):
            name = name.decode()
        ecc = opt(lambda: lib.nvmlDeviceGetTotalEccErrors(
            h, lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, lib.NVML_VOLATILE_ECC), 0)
        pending = opt(lambda: lib.nvmlDeviceGetRetiredPagesPendingStatus(h), 0)
        retired = opt(lambda: len(lib.nvmlDeviceGetRetiredPages(
            h, lib.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)), 0)
        remap = opt(lambda: lib.nvmlDeviceGetRemappedRows(h), (0, 0, 0, 0))
        temp = opt(lambda: lib.nvmlDeviceGetTemperature(h, lib.NVML_TEMPERATURE_GPU), 0)
        pers = opt(lambda: lib.nvmlDeviceGetPersistenceMode(h), lib.NVML_FEATURE_ENABLED)
        return GpuInfo(index=i, name=name, ecc_uncorrected=int(ecc), retired_pending=bool(pending),
                       retired_pages=int(retired), remap_failed=bool(remap[3]) if len(remap) > 3 else False,
                       temperature_c=int(temp), persistence=pers == lib.NVML_FEATURE_ENABLED, xids=xids)


def _handle_key(h) -> object:
    # ctypes handles compare by address; a fake's handles are plain values
    try:
        import ctypes
        return ctypes.cast(h, ctypes.c_void_p).value
    except Exception:           # noqa: BLE001
        return h


# -- RDMA ------------------------------------------------------------------------
@dataclass(frozen=True)
class RdmaFacts:
    root_exists: bool
    ports: tuple[rdma.RdmaPort, ...] = ()
    gids: dict = field(default_factory=dict)   # (device, port) -> non-zero GID entries


ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def rdma_ports(root: str) -> RdmaFacts:
    base = Path(root)
    if not base.is_dir():
        return RdmaFacts(root_exists=False)
    ports = tuple(rdma.inventory(root))
    gids = {}
    for p in ports:
        d = base / p.device / "ports" / str(p.port) / "gids"
        n = 0
        if d.is_dir():
            for g in d.iterdir():
                try:
                    v = g.read_text().strip()
                except OSError:
                    continue
                n += bool(v) and v != ZERO_GID
        gids[(p.device, p.port)] = n
    return RdmaFacts(root_exists=True, ports=ports, gids=gids)


# -- NICs ------------------------------------------------------------------------
@dataclass(frozen=True)
class NicFacts:
    links: dict = field(default_factory=dict)   # name -> reconcile.Link
    error: str = ""


def nics(netns: str | None = None) -> NicFacts:
    """Every link in this namespace (or the named one) through netlink."""
    from pyroute2 import IPRoute, NetNS
    from lingjun_agent.network.reconcile import read_links  # here: pyroute2 only when the NIC facts are gathered
    try:
        ipr = NetNS(netns) if netns else IPRoute()
        try:
            return NicFacts(links=read_links(ipr))
        finally:
            ipr.close()
    except Exception as e:      # noqa: BLE001 - netlink refused: say so, the probe decides
        return NicFacts(error=str(e))


# -- processes -------------------------------------------------------------------
@dataclass(frozen=True)
class ProcFacts:
    zombies: tuple[int, ...] = ()         # defunct children of this node's jobs or agent
    job_ids: tuple[int, ...] = ()         # jobs with live processes here
    user_pids: dict = field(default_factory=dict)   # uid -> pids (uid >= min_uid), if asked


def processes(mark: str, min_uid: int = 0) -> ProcFacts:
    from lingjun_agent.launcher import procs  # here: psutil only when process facts are gathered
    from lingjun_agent.launcher.marks import MARK_VAR, STEPD_MARK_VAR  # here: beside procs, where it is needed
    needles = (f"{MARK_VAR}={mark}:".encode(), f"{STEPD_MARK_VAR}={mark}:".encode())
    me = os.getpid()
    zombies, users = [], {}
    for p in psutil.process_iter(["pid", "ppid", "status", "uids"]):
        info = p.info
        if info["status"] == psutil.STATUS_ZOMBIE:
            parent = info["ppid"]
            if parent == me or _environ_has(parent, needles):
                zombies.append(info["pid"])
        elif min_uid and info["uids"] and info["uids"].real >= min_uid:
            users.setdefault(info["uids"].real, []).append(info["pid"])
    return ProcFacts(zombies=tuple(sorted(zombies)), job_ids=tuple(sorted(procs.running_jobs(mark))),
                     user_pids=users)


def _environ_has(pid: int, needles: tuple[bytes, ...]) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = b"\0" + f.read()
    except OSError:
        return False
    return any(b"\0" + n in env for n in needles)


class KernelLog:
    """The kernel's messages from the agent's start on, read a little per pass:
    ``/dev/kmsg`` (one record per read, non-blocking, from its end at the
    first look) or, in tests, a plain file that grows (read from where the
    last look stopped). Unreadable (no permission, no such file): no lines."""

    def __init__(self, path: str):
        self.path = path
        self.fd: int | None = None
        self.offset = 0
        self.failed = False

    def _open(self) -> bool:
        if self.fd is not None:
            return True
        if self.failed:
            return False
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            self.offset = os.lseek(self.fd, 0, os.SEEK_END)
        except OSError:
            self.failed = True
            return False
        return True

    def new_lines(self) -> list[str]:
        if not self._open():
            return []
        out: list[str] = []
        if stat.S_ISREG(os.fstat(self.fd).st_mode):
            os.lseek(self.fd, self.offset, os.SEEK_SET)
            data = b""
            while chunk := os.read(self.fd, 1 << 16):
                data += chunk
            whole = data[:data.rfind(b"\n") + 1]
            self.offset += len(whole)
            return whole.decode(errors="replace").splitlines()
        for _ in range(10_000):           # records since the last look
            try:
                rec = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError:               # EPIPE: records overwritten meanwhile; go on
                continue
            if not rec:
                break
            # "<prio>,<seq>,<usec>,<flags>;<message>"
            out.append(rec.decode(errors="replace").split(";", 1)[-1].rstrip("\n"))
        return out

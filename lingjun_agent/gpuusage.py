"""GPU usage of the jobs on this node, sampled through NVML.

Slurm 24's acct_gather_gpu reports a step's GPUs as two TRES usage figures,
``gres/gpuutil`` (percent) and ``gres/gpumem`` (memory used); sacct shows
them in TRESUsageInAve/TRESUsageInMax. The agent does the same for each
running batch job: every ``INTERVAL_S`` it reads, for the GPU indices the
job holds on this node (and each running srun step for the GPUs it holds
here), ``nvmlDeviceGetUtilizationRates(h).gpu`` and
``nvmlDeviceGetMemoryInfo(h).used``; a sample is the mean utilization of the
job's GPUs and the memory used on them together. The job's mean and peak
go with its script's end (BatchFinished) to the batch step's accounting row,
a step's with its tasks' exits to its row:

    >>> acc = Accumulated()
    >>> acc.add(40, 1 << 20); acc.add(80, 3 << 20)
    >>> acc.usage()
    GpuUsage(util_ave=60, util_max=80, mem_ave_kb=2097152, mem_max_kb=3145728)

The figures are per device, not per process: a GPU shared by two jobs
(shards, MPS) reads the same for both. An agent restart forgets the samples
taken so far (the job's row then has those of the new agent only). Without
NVML (no driver, no ``nvidia-ml-py``) nothing is sampled, said once.
"""
from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

log = logging.getLogger(__name__)

INTERVAL_S = 2.0


@dataclass(frozen=True)
class GpuUsage:
    util_ave: int = 0        # percent
    util_max: int = 0
    mem_ave_kb: int = 0
    mem_max_kb: int = 0


@dataclass
class Accumulated:
    """Sums and peaks only: a job may run for weeks."""
    util_sum: int = 0
    mem_sum_kb: int = 0
    util_max: int = 0
    mem_max_kb: int = 0
    count: int = 0

    def add(self, util: int, mem_kb: int) -> None:
        self.util_sum += util
        self.mem_sum_kb += mem_kb
        self.util_max = max(self.util_max, util)
        self.mem_max_kb = max(self.mem_max_kb, mem_kb)
        self.count += 1

    def usage(self) -> GpuUsage:
        if not self.count:
            return GpuUsage()
        return GpuUsage(self.util_sum // self.count, self.util_max,
                        self.mem_sum_kb // self.count, self.mem_max_kb)


class GpuSampler:
    """Samples of each job's (or step's) GPUs, kept until its end takes them;
    keyed by whatever the caller names them by (job id, (job, step))."""

    def __init__(self, module: str = "pynvml"):
        self.module = module
        self.lib = None
        self.broken = ""
        self.jobs: dict[Hashable, Accumulated] = {}
        # the last sample of each key's GPUs, one by one: ((index, util %, memory
        # used in bytes), ...), for the agent's /metrics (lingjun_agent/metrics.py)
        self.latest: dict[Hashable, tuple[tuple[int, int, int], ...]] = {}

    def _load(self):
        if self.lib is None and not self.broken:
            try:
                lib = importlib.import_module(self.module)
                lib.nvmlInit()
                self.lib = lib
            except Exception as e:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound...
                self.broken = f"{type(e).__name__}: {e}".rstrip(": ")
                log.warning("GPU usage not sampled here (NVML: %s): sacct shows "
                            "gres/gpuutil and gres/gpumem as 0", self.broken)
        return self.lib

    def sample(self, jobs: Mapping[Hashable, Sequence[int]]) -> None:
        """One sample of each job's GPUs (its key -> its GPU indices here)."""
        jobs = {j: tuple(ids) for j, ids in jobs.items() if ids}
        for gone in [k for k in self.latest if k not in jobs]:   # ended while a sample ran
            self.latest.pop(gone, None)
        if not jobs:
            return
        lib = self._load()
        if lib is None:
            return
        for job_id, ids in jobs.items():
            try:
                per_gpu = []
                for i in ids:
                    h = lib.nvmlDeviceGetHandleByIndex(i)
                    per_gpu.append((i, int(lib.nvmlDeviceGetUtilizationRates(h).gpu),
                                    int(lib.nvmlDeviceGetMemoryInfo(h).used)))
            except Exception as e:  # noqa: BLE001 - a GPU that fell off the bus raises here
                log.warning("job=%s: GPU sample failed: %s: %s", job_id, type(e).__name__, e)
                continue
            self.latest[job_id] = tuple(per_gpu)
            utils = [u for _, u, _ in per_gpu]
            mem = sum(m for _, _, m in per_gpu)
            self.jobs.setdefault(job_id, Accumulated()).add(sum(utils) // len(utils),
                                                            mem // 1024)

    def take(self, job_id: Hashable) -> GpuUsage:
        """The job's mean and peak so far, forgotten here."""
        acc = self.jobs.pop(job_id, None)
        self.latest.pop(job_id, None)
        return acc.usage() if acc is not None else GpuUsage()

    def peek(self, key: Hashable) -> GpuUsage:
        """The mean and peak so far, kept (a step whose other tasks run on)."""
        acc = self.jobs.get(key)
        return acc.usage() if acc is not None else GpuUsage()

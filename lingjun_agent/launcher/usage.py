"""What a step's processes used: peak resident memory of the whole process
tree, sampled while it runs, and the CPU time its reaped processes consumed.

Why sample instead of ``wait4``'s ``ru_maxrss``: that is the high-water mark
of one process, counted from before its ``exec`` -- the forked copy of the
(large) Python supervisor or agent -- so a ``true`` job reported the forking
process's tens of megabytes, while the children a script waits for were not
summed at all. Slurm's jobacct_gather/linux samples the tree instead (every
JobAcctGatherFrequency seconds, 30 by default) and keeps the peak of the sum;
we do the same, sooner and more often, because short jobs are common here:

    >>> s = RssSampler()
    >>> s.add(1200); s.add(5200); s.add(800)
    >>> s.peak_kb, s.average_kb
    (5200, 2400)

The first sample is taken as soon as the process has been started, so a
script that runs only for a moment usually still has one; one that is gone
before it (a millisecond's ``true``) reads 0, as an unsampled step does in
Slurm.
"""
from __future__ import annotations

import resource
from dataclasses import dataclass

import psutil

# Sampling period in seconds: quick at first, so that a job of a few seconds
# is seen at its peak, then once a second (the brief's and Slurm's cadence is
# "periodic"; a finer one costs a /proc scan each time).
FIRST_INTERVALS = (0.05, 0.1, 0.2, 0.3, 0.5)
INTERVAL_S = 1.0


def intervals():
    """0.05, 0.1, 0.2, 0.3, 0.5, then 1.0 forever."""
    yield from FIRST_INTERVALS
    while True:
        yield INTERVAL_S


def tree_rss_kb(pid: int, include_root: bool = True) -> int:
    """Sum of the resident set sizes of ``pid`` and all its descendants, in KiB.

    Processes that vanish between listing and reading are skipped; a gone
    ``pid`` reads 0.
    """
    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True)
        if include_root:
            procs.append(root)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return total // 1024


@dataclass
class RssSampler:
    """Peak and mean of the samples taken (KiB); samples of 0 (tree gone) are
    skipped. Keeps only a sum and a count: a job may run for weeks."""
    peak_kb: int = 0
    total_kb: int = 0
    count: int = 0

    def add(self, kb: int) -> None:
        if kb <= 0:
            return
        self.total_kb += kb
        self.count += 1
        self.peak_kb = max(self.peak_kb, kb)

    @property
    def average_kb(self) -> int:
        return self.total_kb // self.count if self.count else 0


def cpu_ms(ru: resource.struct_rusage | None) -> tuple[int, int]:
    """(user, system) CPU milliseconds of a rusage; (0, 0) for None."""
    if ru is None:
        return 0, 0
    return int(ru.ru_utime * 1000), int(ru.ru_stime * 1000)


def children_cpu_ms() -> tuple[int, int]:
    """CPU time of every process this one has reaped (the supervisor's whole job)."""
    return cpu_ms(resource.getrusage(resource.RUSAGE_CHILDREN))


"""Utilization over time for the dashboard's plots: a small ring of samples
kept in memory (``SAMPLES`` of them, one every ``INTERVAL_S``: an hour), not
in the store; a restarted controller starts a new ring. Prometheus keeps the
long history (lingjund/metrics.py)."""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass

from lingjun import slurm
from lingjund.service.context import Controller
from lingjund.metrics import NodeScan

log = logging.getLogger(__name__)

INTERVAL_S = 5.0
SAMPLES = 720


@dataclass(frozen=True)
class Sample:
    time: float
    cpus_allocated: int
    cpus_total: int
    gpus_allocated: int
    gpus_total: int
    running: int
    pending: int


def take(ctl: Controller, scan: NodeScan | None = None) -> Sample:
    """One sample: each node's capacity and allocation once (a node in two
    partitions counts once), and the job counts by state (index sizes)."""
    s = (scan or NodeScan(ctl)).summarize()
    by_state = ctl.store.live.by_state
    return Sample(ctl.clock(), s.cpus_allocated, s.cpus_total, s.gpus_allocated, s.gpus_total,
                  len(by_state.get(slurm.RUNNING, ())), len(by_state.get(slurm.PENDING, ())))


class Ring:
    def __init__(self, size: int = SAMPLES):
        self.samples: deque[Sample] = deque(maxlen=size)

    def add(self, s: Sample) -> None:
        self.samples.append(s)

    async def keep(self, ctl: Controller, interval_s: float = INTERVAL_S) -> None:
        """Sample every ``interval_s`` until cancelled."""
        scan = NodeScan(ctl)
        while True:
            try:
                self.add(take(ctl, scan))
            except Exception:       # noqa: BLE001 - a failed sample is a gap in a plot
                log.exception("utilization sample failed")
            await asyncio.sleep(interval_s)

"""What every service operation works with: config, store, live agents, clock.

Composed, not inherited: the servicers hold one ``Controller`` and call the
operation functions of ``lingjund.service`` with it.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable

from lingjun.config import Config, PartitionConfig
from lingjund.service import catalog as catalogmod
from lingjund.service.agents import AgentRegistry
from lingjund.store.store import Store


@dataclass(eq=False)
class Controller:
    config: Config
    store: Store
    agents: AgentRegistry = field(default_factory=AgentRegistry)
    clock: Callable[[], float] = time.time
    # (job_id, step_id) -> live srun step (lingjund.service.steps.StepRun)
    steps: dict = field(default_factory=dict)
    # node name -> the last heartbeat's numbers (memory, load), not persisted
    live: dict = field(default_factory=dict)
    # job_id -> the live lease of an srun/salloc allocation (service/allocations.py)
    allocations: dict = field(default_factory=dict)
    # job_id -> newest sign of life any agent reported (hang detection)
    activity: dict = field(default_factory=dict)
    # when this controller started (the daemon sets it): silence is
    # timed from here at the latest, so agents get a full timeout to reconnect
    started_at: float = 0.0
    # job_id -> its prolog in progress (service/health.py)
    prologs: dict = field(default_factory=dict)
    # set while the daemon stops: streams then break without their clients' fault
    stopping: bool = False
    _wake: asyncio.Event | None = None
    _catalog: catalogmod.Catalog | None = None
    _jobs_changed: asyncio.Event | None = None

    @property
    def cluster(self) -> str:
        return self.config.cluster_name

    @property
    def address(self) -> str:
        return self.config.controller.connect_address

    def wake_scheduler(self) -> None:
        """Ask for a scheduling pass soon; many calls coalesce into one pass."""
        if self._wake is not None:
            self._wake.set()

    def wake_event(self) -> asyncio.Event:
        if self._wake is None:
            self._wake = asyncio.Event()
        return self._wake

    def jobs_changed(self) -> None:
        """Tell whoever waits on a job (an allocation, a step waiting for CPUs)
        that job states changed; each waiter re-reads what it waits for."""
        if self._jobs_changed is not None:
            self._jobs_changed.set()
            self._jobs_changed = None

    async def wait_jobs_changed(self, timeout: float) -> None:
        """Until the next ``jobs_changed`` or ``timeout`` seconds (a safety net:
        waiters re-check on their own then, so a missed call only delays)."""
        if self._jobs_changed is None:
            self._jobs_changed = asyncio.Event()
        try:
            await asyncio.wait_for(self._jobs_changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    # -- partitions and nodes as configured ------------------------------------
    def partitions(self) -> tuple[PartitionConfig, ...]:
        return self.config.effective_partitions()

    def partition(self, name: str) -> PartitionConfig | None:
        for p in self.partitions():
            if p.name == name:
                return p
        return None

    def default_partition(self) -> PartitionConfig:
        parts = self.partitions()
        return next((p for p in parts if p.default), parts[0])

    def catalog(self) -> catalogmod.Catalog:
        """The nodes as configured and registered, summarised (service/catalog.py)."""
        c = self._catalog
        if c is None or c.config is not self.config:
            c = self._catalog = catalogmod.build(self.config, self.store.nodes())
        return c

    def nodes_changed(self) -> None:
        """A node appeared or reported a new inventory: rebuild the catalog on next use."""
        self._catalog = None

    def known_nodes(self) -> list[str]:
        """Configured nodes, plus any that registered without being configured."""
        return list(self.catalog().names)

    def partition_nodes(self, part: PartitionConfig) -> list[str]:
        if part.nodes is None:
            return self.known_nodes()
        return list(part.nodes)

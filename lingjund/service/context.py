"""What every service operation works with: config, store, live agents, clock.

Composed, not inherited: the servicers hold one ``Controller`` and call the
operation functions of ``lingjund.service`` with it.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable

from lingjun import slurm
from lingjun.config import Config, PartitionConfig
from lingjund.service import catalog as catalogmod
from lingjund.service.agents import AgentRegistry
from lingjund.service.views import Views
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
    # job_id -> node -> that node's latest report of the job's quietest ranks
    # (lifecycle.RankSeen tuples; straggler detection)
    ranks: dict = field(default_factory=dict)
    # node -> the jobs its last heartbeat named quiet ranks of (so a report costs
    # what it carries, not the number of jobs)
    rank_reports: dict = field(default_factory=dict)
    # suspect node -> when its extended check was sent (service/quarantine.py)
    checks: dict = field(default_factory=dict)
    # job_id -> (node, rank, signal) of its run's first task to die by a sick
    # machine's signal (service/quarantine.py)
    first_deaths: dict = field(default_factory=dict)
    # when this controller started (the daemon sets it): silence is
    # timed from here at the latest, so agents get a full timeout to reconnect
    started_at: float = 0.0
    # job_id -> its prolog in progress (service/health.py)
    prologs: dict = field(default_factory=dict)
    # set while the daemon stops: streams then break without their clients' fault
    stopping: bool = False
    # the scheduling core's views of live records, kept between passes
    views: Views = field(default_factory=Views)
    _layout: "NodeLayout | None" = None
    # held by a scheduling pass while its core runs off the event loop
    pass_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # job_id -> (record, config, catalog, its JobInfo encoded): kept while the
    # record is unchanged (jobs._fill_infos)
    job_infos: dict = field(default_factory=dict)
    # squeue's cut-down JobInfo: field names -> job_id -> (record, config,
    # catalog, squeue order key, its reply element encoded) (jobs.encoded_jobs)
    job_views: dict = field(default_factory=dict)
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
        """What the nodes can give, summarised for submissions (service/catalog.py)."""
        c = self._catalog
        if c is None or c.config is not self.config or c.registered != len(self.store.live.nodes):
            c = self._catalog = catalogmod.build(self)
        return c

    def nodes_changed(self) -> None:
        """A node appeared or reported a new inventory: rebuild the catalog on next use."""
        self._catalog = None

    def known_nodes(self) -> list[str]:
        """Configured nodes, plus any that registered without being configured."""
        return list(self.node_layout().names)

    def partition_nodes(self, part: PartitionConfig) -> list[str]:
        if part.nodes is None:
            return self.known_nodes()
        return list(part.nodes)

    def node_layout(self) -> "NodeLayout":
        """Every known node in natural order and which partitions hold it; kept
        until the configuration or the set of nodes changes (sorting 10,000
        names and testing each against each partition's node list cost a
        pass more than its scheduling)."""
        lay = self._layout
        nodes = self.store.live.nodes
        if lay is None or lay.config is not self.config or lay.registered != len(nodes):
            lay = self._layout = NodeLayout.of(self.config, nodes)
        return lay


@dataclass(frozen=True)
class NodeLayout:
    config: Config
    registered: int                          # how many node records it was built with
    names: tuple[str, ...]                   # configured and registered, natural order
    nodes_of: dict[str, tuple[str, ...]]     # partition -> its nodes
    partitions_of: dict[str, tuple[str, ...]]   # node -> the partitions holding it

    @classmethod
    def of(cls, config: Config, records: dict) -> "NodeLayout":
        names = {n.name for n in config.nodes}
        names.update(records)
        ordered = tuple(sorted(names, key=slurm.natural_key))
        nodes_of = {p.name: ordered if p.nodes is None else tuple(p.nodes)
                    for p in config.effective_partitions()}
        members = {p: set(ns) for p, ns in nodes_of.items()}
        partitions_of = {n: tuple(p for p in nodes_of if n in members[p]) for n in ordered}
        return cls(config, len(records), ordered, nodes_of, partitions_of)

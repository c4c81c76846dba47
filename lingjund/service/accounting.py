"""sacct's path: the job history, read off the event loop; and its purge rule.

``pages`` answers GetAccounting. The filters go to SQL (store/history.py);
the query, the decoding of the rows and the building of the replies run in a
worker thread on a read-only connection of their own, a page at a time, so
the event loop only awaits them and keeps serving heartbeats and everyone
else's commands while a million-job ``sacct -a`` is read. A page is at most
``history.PAGE_ROWS`` jobs and ``PAGE_BYTES`` of reply.

``purge_loop`` applies ``[accounting] purge_job_after`` (slurmdbd's
PurgeJobAfter): at start and every ``purge_interval_s``, finished jobs that
ended longer ago than that are deleted, ``purge_batch_jobs`` per transaction,
in the worker thread on a connection of their own.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import AsyncIterator, Callable, TypeVar

from lingjun.v1 import api_pb2
from lingjund.service import errors, faulttol, jobs
from lingjund.service.context import Controller
from lingjund.store import history
from lingjund.store.store import JobRecord

log = logging.getLogger("lingjund.accounting")

PAGE_BYTES = 3 * 1024 * 1024      # under gRPC's default 4 MiB receive limit of any client

# History reads and the purge: two at a time at most, never on the event loop.
_EXECUTOR = ThreadPoolExecutor(max_workers=2, thread_name_prefix="history")

T = TypeVar("T")


async def _off_loop(fn: Callable[..., T], *args) -> T:
    return await asyncio.get_running_loop().run_in_executor(_EXECUTOR, fn, *args)


def history_query(req: api_pb2.GetJobsRequest, now: float) -> history.HistoryQuery:
    window = None
    if req.HasField("window_start") or req.HasField("window_end"):
        window = (float(req.window_start) if req.HasField("window_start") else 0.0,
                  float(req.window_end) if req.HasField("window_end") else now)
    return history.HistoryQuery(
        job_ids=tuple(req.job_ids), users=tuple(req.users), partitions=tuple(req.partitions),
        names=tuple(req.names), states=tuple(req.states), window=window)


class _Pager:
    """One answer being built, in the worker thread: the reader, its rows
    still to come, and what a page needs besides them."""

    def __init__(self, ctl: Controller, req: api_pb2.GetJobsRequest, now: float):
        self.ctl, self.now = ctl, now
        self.with_steps = req.with_steps
        self.accounts = frozenset(req.accounts)
        self.reader = history.HistoryReader(ctl.store.path)
        self.rows = self.reader.pages(history_query(req, now))
        self._biggest: dict[str, int] | None = None

    def next_pages(self) -> list[api_pb2.GetJobsResponse] | None:
        """The replies for the next rows; None when there are no more."""
        records = next(self.rows, None)
        if records is None:
            return None
        if self.accounts:
            records = [j for j in records if (j.spec.account or j.user) in self.accounts]
        ids = [j.job_id for j in records]
        steps = self.reader.steps(ids) if self.with_steps else {}
        derived = {} if self.with_steps else self.reader.derived_exits(ids)
        runs = self.reader.attempts([j.job_id for j in records if j.restarts])
        biggest = self.biggest_cpus() if any(_unplaced(j) for j in records) else {}
        out = [api_pb2.GetJobsResponse(now=int(self.now))]
        size = 0
        for j in records:
            info = jobs.job_info(self.ctl, j, steps.get(j.job_id), self.now, biggest)
            if j.job_id in derived:
                info.derived_exit_code, info.derived_exit_signal = derived[j.job_id]
            info.attempts.extend(faulttol.attempt_msgs(runs.get(j.job_id, [])))
            n = info.ByteSize()
            if size and size + n > PAGE_BYTES:
                out.append(api_pb2.GetJobsResponse(now=int(self.now)))
                size = 0
            out[-1].jobs.append(info)
            size += n
        return out

    def biggest_cpus(self) -> dict[str, int]:
        """The CPUs of each partition's largest node (jobs.node_capacity's
        rule: configured, else reported), read on this connection."""
        if self._biggest is None:
            config = self.ctl.config
            reported = self.reader.node_cpus()
            known = {n.name for n in config.nodes} | set(reported)
            self._biggest = {}
            for part in self.ctl.partitions():
                names = known if part.nodes is None else part.nodes
                self._biggest[part.name] = max(
                    ((c.cpus if (c := config.node(n)) and c.cpus else 0) or reported.get(n, 0)
                     for n in names), default=0)
        return self._biggest

    def close(self) -> None:
        self.reader.close()


def _unplaced(j: JobRecord) -> bool:
    return not j.nodes and bool(j.spec.num_tasks) and not j.spec.min_nodes


async def pages(ctl: Controller, req: api_pb2.GetJobsRequest) -> AsyncIterator[api_pb2.GetJobsResponse]:
    """GetAccounting: the jobs sacct's filters select, in job id order, a page
    at a time, each page read and built off the event loop. Ids given and
    none of them known: Slurm's "Invalid job id specified"."""
    pager = await _off_loop(_Pager, ctl, req, ctl.clock())
    try:
        first = True
        while (replies := await _off_loop(pager.next_pages)) is not None:
            for reply in replies:
                if reply.jobs or first:
                    first = False
                    yield reply
        if first and req.job_ids:
            raise errors.InvalidJobId()
    finally:
        await _off_loop(pager.close)


# -- the purge rule -------------------------------------------------------------------

async def purge(ctl: Controller, now: float | None = None) -> int:
    """Delete the finished jobs older than ``purge_job_after`` (by end time),
    a bounded batch per transaction, off the event loop; how many went."""
    cfg = ctl.config.accounting
    after = cfg.purge_after_s
    if after is None:
        return 0
    now = ctl.clock() if now is None else now
    # never a job squeue may still show (MinJobAge): the live state may hold it
    cutoff = min(now - after, now - ctl.config.controller.min_job_age_s)
    conn = await _off_loop(history.connect_writer, ctl.store.path)
    total = 0
    try:
        while True:
            n = await _off_loop(history.purge_batch, conn, cutoff, cfg.purge_batch_jobs)
            total += n
            if n < cfg.purge_batch_jobs:
                break
    finally:
        await _off_loop(conn.close)
    if total:
        log.info("purged %d finished jobs that ended before %s (purge_job_after=%s)",
                 total, _when(cutoff), cfg.purge_job_after)
    return total


async def purge_loop(ctl: Controller) -> None:
    """At start, then every ``purge_interval_s``, while the controller runs."""
    if ctl.config.accounting.purge_after_s is None:
        return
    while True:
        try:
            await purge(ctl)
        except Exception:
            log.exception("purging old jobs failed; trying again in %.0f s",
                          ctl.config.accounting.purge_interval_s)
        await asyncio.sleep(ctl.config.accounting.purge_interval_s)


def _when(t: float) -> str:
    return dt.datetime.fromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%S")

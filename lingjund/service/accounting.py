"""sacct's path: the job history, read in history reader processes; and its purge rule.

``pages`` answers GetAccounting. The filters go to SQL (store/history.py);
the query, the decoding of the rows and the building and encoding of the
replies run in a history reader (service/history_reader.py), a process of
its own on a read-only connection, as slurmdbd answers sacct for slurmctld.
The controller checks the caller, hands the reader the request, its config
and its clock, and forwards the pages it gets back as they are: bytes, never
decoded here (the transport's serializer passes them through). So its event
loop keeps serving pings, heartbeats and everyone else's commands while a
million-job ``sacct -a`` is read. A page is at most ``history.PAGE_ROWS``
jobs and ``history_reader.PAGE_BYTES`` of reply.

``READERS`` readers at most per controller; more sacct calls wait for one.
They are started when first needed and kept for the next sacct; they end
with the controller: ``close_readers`` at shutdown, at exit, and the kernel
kills them if the controller is killed (history_reader.die_with).

``purge_loop`` applies ``[accounting] purge_job_after`` (slurmdbd's
PurgeJobAfter): at start and every ``purge_interval_s``, finished jobs that
ended longer ago than that are deleted, ``purge_batch_jobs`` per transaction,
in a worker thread on a connection of its own.
"""
from __future__ import annotations

import asyncio
import atexit
import contextlib
import datetime as dt
import logging
import os
import pickle
import socket
import subprocess
import sys
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import AsyncIterator, Callable, TypeVar

from lingjun.v1 import api_pb2
from lingjund.service import errors
from lingjund.service import history_reader as hr
from lingjund.service.context import Controller
from lingjund.store import history

log = logging.getLogger("lingjund.accounting")

READERS = 2       # history reader processes per controller, at most

# The purge: one at a time, never on the event loop.
_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="history-purge")

T = TypeVar("T")


async def _off_loop(fn: Callable[..., T], *args) -> T:
    return await asyncio.get_running_loop().run_in_executor(_EXECUTOR, fn, *args)


class HistoryReadError(Exception):
    """A reader failed or went away in the middle of an answer."""


# the folder that holds the lingjund package: the reader imports it from there
_ROOT = str(Path(__file__).resolve().parents[2])
_EVERY_READER: "weakref.WeakSet[_Reader]" = weakref.WeakSet()


class _Reader:
    """One reader process and the controller's end of its socket."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "lingjund.service.history_reader",
                 str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env, cwd="/")
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self.sock = ours
        self.config = None          # the config it was sent last
        self.ready = True           # between answers: it may take the next request
        _EVERY_READER.add(self)

    async def send(self, kind: bytes, payload: bytes = b"") -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, hr.frame(kind, payload))

    async def recv(self) -> tuple[bytes, bytes]:
        kind, n = hr.HEADER.unpack(await self._exactly(hr.HEADER.size))
        return kind, (await self._exactly(n)) if n else b""

    async def _exactly(self, n: int) -> bytes:
        loop = asyncio.get_running_loop()
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = await loop.sock_recv_into(self.sock, view[got:])
            if not k:
                raise HistoryReadError(f"history reader {self.proc.pid} exited "
                                       f"(status {self.proc.poll()})")
            got += k
        return bytes(buf)

    def close(self) -> None:
        """Stop the process now (SIGKILL: it holds nothing to save) and reap it."""
        self.sock.close()
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            log.error("history reader %d did not exit after SIGKILL", self.proc.pid)


class Readers:
    """The readers of one controller: at most ``size`` at once; a sacct that
    finds them all busy waits its turn."""

    def __init__(self, size: int = READERS):
        self.turns = asyncio.Semaphore(size)
        self.idle: list[_Reader] = []
        self.busy: set[_Reader] = set()

    @contextlib.asynccontextmanager
    async def reader(self):
        async with self.turns:
            while self.idle and self.idle[-1].proc.poll() is not None:
                self.idle.pop().close()         # died while idle (killed, out of memory)
            r = self.idle.pop() if self.idle else _Reader()
            self.busy.add(r)
            try:
                yield r
            finally:
                self.busy.discard(r)
                if r.ready and r.proc.poll() is None:
                    self.idle.append(r)
                else:           # stopped in the middle of an answer, or gone
                    r.close()

    def close(self) -> None:
        for r in [*self.idle, *self.busy]:
            r.close()
        self.idle.clear()
        self.busy.clear()

    def pids(self) -> list[int]:
        return [r.proc.pid for r in [*self.idle, *self.busy]]


_READERS: "weakref.WeakKeyDictionary[Controller, Readers]" = weakref.WeakKeyDictionary()


def readers(ctl: Controller) -> Readers:
    r = _READERS.get(ctl)
    if r is None:
        r = _READERS[ctl] = Readers()
    return r


def close_readers(ctl: Controller) -> None:
    """At shutdown: every reader of this controller stops."""
    r = _READERS.pop(ctl, None)
    if r is not None:
        r.close()


@atexit.register
def _close_every_reader() -> None:
    for r in list(_EVERY_READER):
        r.close()


async def pages(ctl: Controller, req: api_pb2.GetJobsRequest) -> AsyncIterator[bytes]:
    """GetAccounting: the jobs sacct's filters select, in job id order, a page
    at a time, each page read and encoded by a reader and passed on as its
    bytes (a GetJobsResponse). Ids given and none of them known: Slurm's
    "Invalid job id specified"."""
    path = os.path.abspath(ctl.store.path)
    sent = 0
    async with readers(ctl).reader() as r:
        r.ready = False
        if r.config is not ctl.config:
            await r.send(hr.CONFIG, pickle.dumps(ctl.config))
            r.config = ctl.config
        await r.send(hr.QUERY, pickle.dumps((path, ctl.clock(), req.SerializeToString())))
        let_go = False      # this batch's M sent: the reader reads the next while we forward
        while True:
            kind, body = await r.recv()
            if kind == hr.PAGE:
                if not let_go:
                    await r.send(hr.MORE)
                    let_go = True
                sent += 1
                yield body
            elif kind == hr.WAIT:
                if not let_go:
                    await r.send(hr.MORE)
                let_go = False
            elif kind == hr.END:
                r.ready = True
                break
            elif kind == hr.FAILED:
                r.ready = True
                log.error("history reader %d: %s", r.proc.pid, body.decode(errors="replace"))
                raise HistoryReadError("reading the job history failed")
            else:
                raise HistoryReadError(f"history reader {r.proc.pid} sent a frame of kind {kind!r}")
    if not sent and req.job_ids:
        raise errors.InvalidJobId()


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

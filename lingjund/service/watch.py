"""WatchJobs and WatchNodes: each committed change, streamed after a cursor.

The store writes a numbered row (``watch_events``) for every job and node
state change and every job event in the same transaction as the change, and
tells ``Hub.publish`` the rows after the commit (``Store.listen_changes``).
The hub appends each to the queue of every watcher that wants it; publishing
never waits and never reads SQL, so a watcher cannot slow the commit path or
the scheduling pass. Each queue is bounded (``QUEUE_LIMIT``): a watcher that
does not read fast enough is dropped, its stream ends RESOURCE_EXHAUSTED
(``WatcherTooSlow``) after what it had queued, and it resumes with its last
cursor.

A watch with a cursor first reads the rows after it from the store, in
pages, then follows the live ones; it subscribes before reading, and skips
anything at or before the last cursor it sent, so nothing is missed between
the two and nothing is sent twice. The rows outlive a controller restart, so
a cursor from before one resumes after it.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import threading
from dataclasses import dataclass, field
from typing import AsyncIterator

from lingjun.v1 import api_pb2
from lingjund.service import errors
from lingjund.service.context import Controller
from lingjund.store.records import WatchEvent

log = logging.getLogger("lingjund.watch")

QUEUE_LIMIT = 10_000        # events a watcher may have unread before it is dropped
BACKLOG_PAGE = 1_000        # store rows read at once when resuming from a cursor


@dataclass(eq=False)
class Watcher:
    jobs: bool                          # WatchJobs (else WatchNodes)
    job_ids: frozenset[int]
    nodes: frozenset[str]
    limit: int = QUEUE_LIMIT
    queue: collections.deque = field(default_factory=collections.deque)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: bool = False

    def wants(self, ev: WatchEvent) -> bool:
        if self.jobs:
            return ev.job_id != 0 and (not self.job_ids or ev.job_id in self.job_ids)
        return ev.node != "" and (not self.nodes or ev.node in self.nodes)


class Hub:
    """The live watchers; ``publish`` is the store's change listener."""

    def __init__(self) -> None:
        self.watchers: set[Watcher] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0

    def subscribe(self, w: Watcher) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
        self.watchers.add(w)

    def unsubscribe(self, w: Watcher) -> None:
        self.watchers.discard(w)

    def publish(self, events: list[WatchEvent]) -> None:
        if not self.watchers:
            return
        if threading.get_ident() != self._loop_thread and self.loop is not None:
            self.loop.call_soon_threadsafe(self.publish, events)
            return
        job_events = [ev for ev in events if ev.job_id != 0]
        node_events = [ev for ev in events if ev.node != ""]
        for w in list(self.watchers):
            if w.jobs:
                batch = [ev for ev in job_events if ev.job_id in w.job_ids] if w.job_ids else job_events
            else:
                batch = [ev for ev in node_events if ev.node in w.nodes] if w.nodes else node_events
            if not batch:
                continue
            room = w.limit - len(w.queue)
            if len(batch) > room:
                w.queue.extend(batch[:max(room, 0)])
                w.dropped = True
                self.watchers.discard(w)
                log.warning("a %s watcher fell %d events behind: dropped",
                            "job" if w.jobs else "node", w.limit)
            else:
                w.queue.extend(batch)
            w.ready.set()


def event_message(ev: WatchEvent) -> api_pb2.WatchEvent:
    return api_pb2.WatchEvent(cursor=ev.seq, time=int(ev.time), job_id=ev.job_id, node=ev.node,
                              kind=ev.kind, state=ev.state, previous_state=ev.previous_state,
                              text=ev.text, exit_code=ev.exit_code)


async def watch(ctl: Controller, hub: Hub, req: api_pb2.WatchRequest, *, jobs: bool,
                limit: int | None = None) -> AsyncIterator[api_pb2.WatchEvent]:
    """The stream of one WatchJobs (``jobs``) or WatchNodes call."""
    w = Watcher(jobs=jobs, job_ids=frozenset(req.job_ids), nodes=frozenset(req.nodes),
                limit=limit or QUEUE_LIMIT)
    hub.subscribe(w)
    try:
        if req.HasField("after"):
            cursor = req.after
            while True:         # the backlog, from the store
                page = ctl.store.watch_events(cursor, jobs=jobs, job_ids=w.job_ids, nodes=w.nodes,
                                              limit=BACKLOG_PAGE)
                for ev in page:
                    yield event_message(ev)
                    cursor = ev.seq
                if len(page) < BACKLOG_PAGE:
                    break
        else:
            cursor = ctl.store.last_watch_seq()
        while True:
            while w.queue:
                ev = w.queue.popleft()
                if ev.seq > cursor:
                    yield event_message(ev)
                    cursor = ev.seq
            if w.dropped:
                raise errors.WatcherTooSlow(
                    f"Watcher fell more than {w.limit} events behind and was dropped: "
                    f"resume with after={cursor}")
            w.ready.clear()
            await w.ready.wait()
    finally:
        hub.unsubscribe(w)

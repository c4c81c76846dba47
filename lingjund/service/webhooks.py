"""Webhooks: job and node events POSTed as JSON to the endpoints of ``[[webhooks]]``.

Events, from committed state changes (the store's watchers, as the mail of
``mail.py``, but for every job: a webhook is the operator's, not a job's
``--mail-type``):

    BEGIN       a run started (PENDING -> RUNNING; an array task too)
    END         a run ended COMPLETED or CANCELLED
    FAIL        a run ended otherwise (FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY...)
    REQUEUE     a running job went back to the queue
    NODE_DOWN   a node went DOWN;  NODE_DRAIN  a node was drained;
    NODE_UP     a DOWN or drained node came back

A delivery is one POST of a JSON object::

    {"id": "5f0c...", "event": "END", "time": 1764820000.5, "cluster": "c1",
     "job": {"job_id": 7, "name": "train", "user": "alice", "account": "ml",
             "partition": "gpu", "job_state": "COMPLETED", "exit_code": 0,
             "signal": 0, "nodes": "node[1-4]", "submit_time": ...,
             "start_time": ..., "end_time": ..., "array_job_id": 0,
             "array_task_id": null, "restarts": 0}}

(``job_state`` as slurmrestd's JSON names it; ``"node": {"name",
"node_state", "reason"}`` instead of ``"job"`` for node
events) with the headers ``X-Lingjun-Event``, ``X-Lingjun-Delivery`` (the
id: the same on every attempt, so a receiver can drop repeats) and
``X-Lingjun-Signature-256: sha256=<hex HMAC-SHA256 of the body>`` keyed
with the contents of ``secret_file`` (read at each delivery, so a rotated
secret takes effect without a restart), the scheme GitHub's webhooks use:
a receiver recomputes it over the raw body and compares in constant time.

Never blocking the controller: the watchers only append to a bounded queue
per endpoint (``queue_max``; when full the oldest undelivered event is
dropped and the log says so); one task per endpoint sends them in order, the
POST itself in a daemon thread (the standard library's HTTP client: one
request at a time per endpoint needs no more; a daemon thread, so that a
receiver that never answers cannot hold up the controller's exit). A failed attempt (a refused
connection, a timeout, any status but 2xx) is retried after ``backoff_s``,
doubling to ``backoff_max_s``, up to ``max_attempts``; then the event is
dropped with an error in the log. Undelivered events are not kept across a
controller restart (what happened is in ``lingjun events`` and sacct).
"""
from __future__ import annotations

import asyncio
import collections
import hashlib
import hmac
import json
import logging
import threading
import urllib.error
import urllib.request
import uuid

from lingjun import config as configmod
from lingjun import slurm
from lingjund.service.context import Controller
from lingjund.store.records import JobRecord, NodeRecord

log = logging.getLogger("lingjund.webhooks")

ENDED_WELL = frozenset({slurm.COMPLETED, slurm.CANCELLED})
SIGNATURE_HEADER = "X-Lingjun-Signature-256"


def job_event(before: JobRecord, after: JobRecord) -> str | None:
    """The event a committed job state change is, if any."""
    if after.state == slurm.RUNNING and before.state != slurm.RUNNING:
        return "BEGIN"
    if after.state == slurm.PENDING and before.state == slurm.RUNNING:
        return "REQUEUE"
    if after.state in slurm.FINISHED_STATES and before.state not in slurm.FINISHED_STATES:
        return "END" if after.state in ENDED_WELL else "FAIL"
    return None


def node_event(before: NodeRecord | None, after: NodeRecord) -> str | None:
    """The event a committed node change is, if any."""
    was_down = before is not None and before.down
    was_drained = before is not None and before.drain
    if after.down and not was_down:
        return "NODE_DOWN"
    if after.drain and not was_drained and not after.down:
        return "NODE_DRAIN"
    if (was_down or was_drained) and not after.down and not after.drain:
        return "NODE_UP"
    return None


def job_payload(job: JobRecord) -> dict:
    return {
        "job_id": job.job_id, "name": job.name, "user": job.user,
        "account": job.spec.account or job.user, "partition": job.partition,
        "job_state": job.state, "exit_code": job.exit_code, "signal": job.exit_signal,
        "nodes": slurm.compress_hostlist(list(job.nodes)) if job.nodes else "",
        "submit_time": job.submit_time, "start_time": job.start_time or None,
        "end_time": job.end_time or None, "array_job_id": job.array_job_id,
        "array_task_id": job.array_task_id if job.array_task_id >= 0 else None,
        "restarts": job.restarts,
    }


def node_payload(node: NodeRecord) -> dict:
    state = "DOWN" if node.down else "DRAIN" if node.drain else "UP"
    return {"name": node.name, "node_state": state, "reason": node.reason}


def sign(secret: bytes, body: bytes) -> str:
    """The signature header's value for ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class Delivery:
    __slots__ = ("id", "event", "body")

    def __init__(self, event: str, body: bytes, delivery_id: str):
        self.id, self.event, self.body = delivery_id, event, body


class Endpoint:
    """One URL's queue and its sender task."""

    def __init__(self, conf: configmod.WebhookConfig):
        self.conf = conf
        self.queue: collections.deque[Delivery] = collections.deque()
        self.ready = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.dropped = 0

    def put(self, d: Delivery) -> None:
        if len(self.queue) >= self.conf.queue_max:
            old = self.queue.popleft()
            self.dropped += 1
            log.error("webhook %s: queue full (%d): event %s %s dropped undelivered",
                      self.conf.url, self.conf.queue_max, old.event, old.id)
        self.queue.append(d)
        self.ready.set()

    async def run(self) -> None:
        while True:
            while not self.queue:
                self.ready.clear()
                await self.ready.wait()
            d = self.queue[0]
            await self._deliver(d)
            if self.queue and self.queue[0] is d:
                self.queue.popleft()

    async def _deliver(self, d: Delivery) -> None:
        c = self.conf
        wait = c.backoff_s
        for attempt in range(1, c.max_attempts + 1):
            try:
                status = await _in_daemon_thread(self._post, d)
            except OSError as e:
                why = str(getattr(e, "reason", None) or e)
            else:
                if 200 <= status < 300:
                    return
                why = f"HTTP {status}"
            if attempt == c.max_attempts:
                log.error("webhook %s: event %s %s dropped after %d attempts (%s)",
                          c.url, d.event, d.id, attempt, why)
                return
            log.warning("webhook %s: event %s %s attempt %d failed (%s); again in %.1f s",
                        c.url, d.event, d.id, attempt, why, wait)
            await asyncio.sleep(wait)
            wait = min(wait * 2, c.backoff_max_s)

    def _post(self, d: Delivery) -> int:
        """One POST (in a worker thread); its HTTP status."""
        c = self.conf
        headers = {"Content-Type": "application/json", "User-Agent": "lingjund-webhook",
                   "X-Lingjun-Event": d.event, "X-Lingjun-Delivery": d.id}
        if c.secret_file:
            with open(c.secret_file, "rb") as f:        # OSError: this attempt fails
                headers[SIGNATURE_HEADER] = sign(f.read().strip(), d.body)
        req = urllib.request.Request(c.url, data=d.body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=c.timeout_s) as r:
                r.read(65536)
                return r.status
        except urllib.error.HTTPError as e:
            return e.code


async def _in_daemon_thread(fn, *args):
    """``fn(*args)`` in a daemon thread: a receiver that never answers (up to
    its timeout) must not hold up the controller's exit, which the default
    executor's threads would (asyncio.run joins them)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def run() -> None:
        try:
            result = fn(*args)
        except BaseException as e:        # handed to the awaiting task
            loop.call_soon_threadsafe(lambda e=e: fut.done() or fut.set_exception(e))
        else:
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(result))
    threading.Thread(target=run, name="webhook-post", daemon=True).start()
    return await fut


class Webhooks:
    """The store's watchers for webhooks; ``start`` on the controller's loop."""

    def __init__(self, ctl: Controller):
        self.ctl = ctl
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self.endpoints: dict[configmod.WebhookConfig, Endpoint] = {}

    def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    async def close(self) -> None:
        for ep in self.endpoints.values():
            if ep.task is not None:
                ep.task.cancel()
        tasks = [ep.task for ep in self.endpoints.values() if ep.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- watchers (on the writer's thread; quick) -------------------------------
    def job_changed(self, before: JobRecord, after: JobRecord) -> None:
        if not self.ctl.config.webhooks:
            return
        event = job_event(before, after)
        if event is not None:
            self._emit(event, "job", job_payload(after))

    def node_changed(self, before: NodeRecord | None, after: NodeRecord) -> None:
        if not self.ctl.config.webhooks:
            return
        event = node_event(before, after)
        if event is not None:
            self._emit(event, "node", node_payload(after))

    def _emit(self, event: str, what: str, payload: dict) -> None:
        if self.loop is None:
            return
        if threading.get_ident() != self._loop_thread:
            self.loop.call_soon_threadsafe(self._emit, event, what, payload)
            return
        delivery_id = str(uuid.uuid4())
        body = json.dumps({"id": delivery_id, "event": event, "time": self.ctl.clock(),
                           "cluster": self.ctl.cluster, what: payload},
                          separators=(",", ":")).encode()
        for conf in self.ctl.config.webhooks:       # read each time: a reconfigure may change them
            if event not in conf.events:
                continue
            ep = self.endpoints.get(conf)
            if ep is None:
                ep = self.endpoints[conf] = Endpoint(conf)
                ep.task = asyncio.create_task(ep.run(), name=f"webhook {conf.url}")
            ep.put(Delivery(event, body, delivery_id))

"""Replaying a trace through the real API: submissions, dependencies, cancels.

Each job becomes the SubmitJobRequest that ``sbatch`` would send for its
arguments (``lingjun.sbatch_options.build_request``), sent by one of ``clients``
concurrent clients (each its own channel and token) at its ``submit``
offset; a job with ``after`` waits until its parents have ids. A job with
``cancel`` is cancelled (``CancelJobs``, as ``scancel``) that many seconds
after its submission was acknowledged. Bounded: nothing is sent after
``deadline_s``.
"""
from __future__ import annotations

import collections
import getpass
import heapq
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import grpc

from cli import sacct
from lingjun.sbatch_options import build_request
from lingjun import slurm
from lingjun.client import Api, ControllerUnreachable
from lingjun.v1 import api_pb2
from bench.sim.workload import TraceJob


@dataclass
class Submission:
    name: str
    job_id: int = 0
    sent_at: float = 0.0            # wall clock, when the request went out
    acked_at: float = 0.0           # wall clock, when the reply came
    error: str = ""
    cancelled_at: float = 0.0

    @property
    def latency_s(self) -> float:
        return self.acked_at - self.sent_at


class Replay:
    def __init__(self, api_factory: Callable[[], Api], jobs: list[TraceJob], *, clients: int = 4,
                 workdir: str | Path = "/tmp", deadline_s: float = 600.0):
        self.api_factory = api_factory
        self.jobs = jobs
        self.clients = max(1, clients)
        self.workdir = str(workdir)
        self.deadline_s = deadline_s
        self.env = {"PATH": "/usr/bin:/bin", "HOME": self.workdir, "USER": getpass.getuser()}
        self.subs: dict[str, Submission] = {j.name: Submission(j.name) for j in jobs}
        self._ready = {j.name: threading.Event() for j in jobs}
        self._local = threading.local()
        self._cancels: list[tuple[float, str]] = []
        self._cancel_cv = threading.Condition()
        self._done = threading.Event()

    def _api(self) -> Api:
        api = getattr(self._local, "api", None)
        if api is None:
            api = self._local.api = self.api_factory()
        return api

    def run(self) -> dict[str, Submission]:
        t0 = time.monotonic()
        end = self._end = t0 + self.deadline_s
        canceller = threading.Thread(target=self._cancel_loop, args=(end,), daemon=True)
        canceller.start()
        with ThreadPoolExecutor(self.clients, thread_name_prefix="sim-submit") as pool:
            for job in self.jobs:
                wait = t0 + job.submit - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if time.monotonic() > end:
                    self.subs[job.name].error = "not sent: past the deadline"
                    self._ready[job.name].set()
                    continue
                for parent in job.after:
                    self._ready[parent].wait(max(0.0, end - time.monotonic()))
                pool.submit(self._submit, job)
        with self._cancel_cv:
            self._done.set()
            self._cancel_cv.notify()
        canceller.join(max(0.0, end - time.monotonic()) + 1)
        return self.subs

    def _submit(self, job: TraceJob) -> None:
        sub = self.subs[job.name]
        try:
            if time.monotonic() > self._end:      # queued behind slow submissions
                raise RuntimeError("not sent: past the deadline")
            ids = {}
            for parent in job.after:
                if not self.subs[parent].job_id:
                    raise RuntimeError(f"parent {parent} was not submitted")
                ids[parent] = self.subs[parent].job_id
            req = build_request(job.sbatch_args(ids), job.script(), self.env, self.workdir)
            sub.sent_at = time.time()
            reply = self._api().call("SubmitJob", req)
            sub.acked_at = time.time()
            sub.job_id = reply.job_id
        except (grpc.RpcError, ControllerUnreachable, RuntimeError) as e:
            sub.error = e.details() if isinstance(e, grpc.RpcError) else str(e)
        finally:
            self._ready[job.name].set()
        if job.cancel is not None and sub.job_id:
            with self._cancel_cv:
                heapq.heappush(self._cancels, (time.monotonic() + job.cancel, job.name))
                self._cancel_cv.notify()

    def _cancel_loop(self, end: float) -> None:
        while True:
            with self._cancel_cv:
                while True:
                    now = time.monotonic()
                    if now > end or (self._done.is_set() and not self._cancels):
                        return
                    if self._cancels and self._cancels[0][0] <= now:
                        _, name = heapq.heappop(self._cancels)
                        break
                    timeout = (self._cancels[0][0] - now) if self._cancels else 0.5
                    self._cancel_cv.wait(min(timeout, 0.5))
            sub = self.subs[name]
            try:
                self._api().call("CancelJobs", api_pb2.CancelJobsRequest(job_ids=[sub.job_id]))
                sub.cancelled_at = time.time()
            except (grpc.RpcError, ControllerUnreachable) as e:
                sub.error = f"cancel: {e}"


def job_ids(subs: dict[str, Submission]) -> list[int]:
    return [s.job_id for s in subs.values() if s.job_id]


def accounting(api: Api, ids: list[int]) -> list[api_pb2.JobInfo]:
    """The controller's records (sacct's) of these jobs, array tasks included."""
    out: list[api_pb2.JobInfo] = []
    for i in range(0, len(ids), 500):
        out.extend(sacct.fetch(api, api_pb2.GetJobsRequest(job_ids=ids[i:i + 500])))
    return out


def wait_finished(api: Api, ids: list[int], timeout: float, poll_s: float = 1.0) -> bool:
    """True once none of these jobs (or their tasks) is pending, running or completing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = accounting(api, ids)
        if jobs and all(j.state in slurm.FINISHED_STATES for j in jobs):
            return True
        time.sleep(poll_s)
    return False


def outcomes(api: Api, subs: dict[str, Submission]) -> dict[str, str]:
    """name -> how it ended, in the controller's words: "COMPLETED", "FAILED 3",
    "CANCELLED"; an array lists its tasks' ends ("COMPLETED x9, CANCELLED x1");
    "restarts N" is added when the job ran more than once."""
    by_id = {s.job_id: name for name, s in subs.items() if s.job_id}
    groups: dict[str, list[api_pb2.JobInfo]] = collections.defaultdict(list)
    for j in accounting(api, list(by_id)):
        name = by_id.get(j.array_job_id or j.job_id) or by_id.get(j.job_id)
        if name is not None:
            groups[name].append(j)
    out = {}
    for name, s in subs.items():
        if not s.job_id:
            out[name] = f"NOT SUBMITTED ({s.error})"
            continue
        words = []
        for j in groups.get(name, []):
            w = j.state + (f" {j.exit_code}" if j.state == slurm.FAILED else "")
            if j.restarts:
                w += f" restarts {j.restarts}"
            words.append(w)
        counts = collections.Counter(words)
        if len(words) == 1:
            out[name] = words[0]
        else:
            out[name] = ", ".join(f"{w} x{n}" for w, n in sorted(counts.items()))
    return out

"""Lingjun from Python: submit, wait, read output and follow events.

    from lingjun.sdk import Client

    client = Client()                                   # finds the cluster as sbatch does
    job = client.submit("echo hello from $SLURM_JOB_ID", name="hello", time=5)
    job.wait()                                          # told by WatchJobs, no polling
    print(job.state, job.exit_code)                     # COMPLETED 0
    print(job.logs())                                   # hello from 42
    for ev in client.events(job_ids=[job.id], after=0, until_idle=True):
        print(ev.cursor, ev.kind, ev.state, ev.text)

``Client`` finds the controller and the caller's token exactly as the
commands do (``LINGJUN_CONTROLLER``, the config file, the local cluster's
pointer; the credential socket), so a program runs as the user who starts
it. ``submit`` takes a script (text starting ``#!``) or a shell command,
and sbatch's long options as keyword arguments (``nodes=2``, ``gpus=8``,
``time="1:00:00"``, ``partition="gpu"``, ``output="%x-%j.out"``,
``exclusive=True``; ``name`` for ``--job-name``...): they go through sbatch's own option table, so they
are checked and refused in sbatch's words (``SubmitError``).

Knowing a job ended needs no polling: ``Job.wait`` and ``Client.events``
read the controller's WatchJobs stream, a log of committed changes each
with a cursor. A stream that breaks (the controller restarted, or this
program read too slowly and was dropped) is resumed from the last cursor,
so no change is missed or seen twice.

``Job.logs`` reads the job's batch output (its ``StdOut`` file, with
everything its steps printed) through the controller, which relays it from
the agent of the node that runs (or ran) the batch script: it works from any
machine that reaches the controller, whether or not it mounts the job's
output directory. ``follow=True`` yields lines as they are written until the
batch script has ended and its file is read to the end. The caller must own
the job (or be an operator), as for sattach.
"""
from __future__ import annotations

import codecs
import os
import threading
import time
from dataclasses import dataclass
from typing import Iterator

import grpc

from lingjun import slurm
from lingjun.client import Api, ControllerUnreachable, error_reason
from lingjun.v1 import api_pb2

__all__ = ["Client", "Job", "Event", "SubmitError", "ControllerUnreachable"]

RECONNECT_S = 1.0          # wait before resuming a broken watch
ALIASES = {"name": "job_name"}   # keyword -> sbatch's long option, where Python reads better


class SubmitError(Exception):
    """The submission was refused (Slurm's words: ``str(err)``); nothing was submitted."""


@dataclass(frozen=True)
class Event:
    """One committed change: a job's new state (``kind`` "state") or a job event
    (``kind`` "requeued", "node_lost", "restarted"...). ``cursor`` resumes after it."""
    cursor: int
    time: int
    job_id: int
    kind: str
    state: str
    previous_state: str
    text: str
    exit_code: int
    node: str = ""

    @classmethod
    def of(cls, m: api_pb2.WatchEvent) -> "Event":
        return cls(cursor=m.cursor, time=m.time, job_id=m.job_id, kind=m.kind, state=m.state,
                   previous_state=m.previous_state, text=m.text, exit_code=m.exit_code, node=m.node)

    @property
    def finished(self) -> bool:
        """The job ended with this change (COMPLETED, FAILED, CANCELLED, TIMEOUT...)."""
        return self.kind == "state" and self.state in slurm.FINISHED_STATES


class Client:
    """A connection to the controller, as the calling user."""

    def __init__(self, address: str | None = None, *, auth_socket: str | None = None,
                 tls_ca: str | None = None):
        self.api = Api(address, auth_socket, tls_ca)

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- jobs -----------------------------------------------------------------------
    def submit(self, script_or_command: str, *args: str, **options: object) -> "Job":
        """Submit a batch job: a script (``#!...``) or a shell command (as
        ``sbatch --wrap``), with sbatch's long options as keywords (``-`` written
        ``_``; ``True`` for a flag). ``args`` are the script's arguments."""
        from lingjun import sbatch_options  # here: a program that submits nothing loads no option table
        argv = []
        for key, value in options.items():
            flag = "--" + ALIASES.get(key, key).replace("_", "-")
            if value is True:
                argv.append(flag)
            elif value is not False and value is not None:
                argv.append(f"{flag}={value}")
        stdin = None
        if script_or_command.startswith("#!"):
            stdin = script_or_command
        else:
            argv.append(f"--wrap={script_or_command}")
            if args:
                raise SubmitError("Script arguments not permitted with --wrap option")
        try:
            parsed = sbatch_options.parse_args(argv, stdin, dict(os.environ), os.getcwd())
        except sbatch_options.CommandError as e:
            raise SubmitError(_words(str(e))) from None
        req = parsed.request
        req.spec.argv.extend(args)
        try:
            reply = self.api.call("SubmitJob", req)
        except grpc.RpcError as e:
            raise SubmitError(e.details()) from None
        return Job(self, reply.job_id)

    def job(self, job_id: int) -> "Job":
        return Job(self, int(job_id))

    def jobs(self, states: tuple[str, ...] = (), users: tuple[str, ...] = ()) -> list["Job"]:
        """The jobs the controller holds (pending, running, and recently ended),
        optionally only in ``states`` or of ``users``."""
        reply = self.api.call("GetJobs", api_pb2.GetJobsRequest(
            all_states=not states, states=list(states), users=list(users)))
        return [Job(self, j.job_id, j) for j in sorted(reply.jobs, key=lambda j: j.job_id)]

    # -- watching -------------------------------------------------------------------
    def events(self, job_ids: list[int] | tuple[int, ...] = (), after: int | None = None,
               *, until_idle: bool = False, idle_s: float = 0.5) -> Iterator[Event]:
        """Job changes as they commit (WatchJobs): those after cursor ``after``
        first (``after=0``: every one still on record; None: only new ones),
        then each new one, resuming from the last cursor when the stream
        breaks. ``until_idle``: stop once nothing new came for ``idle_s``
        seconds (for reading the history so far)."""
        cursor = after
        while True:
            req = api_pb2.WatchRequest(job_ids=list(job_ids))
            if cursor is not None:
                req.after = cursor
            stream = self.api.stream("WatchJobs", req)
            timer = _IdleCancel(stream, idle_s) if until_idle else None
            try:
                for m in stream:
                    if timer:
                        timer.touch()
                    cursor = m.cursor
                    yield Event.of(m)
                return
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.CANCELLED and timer is not None and timer.fired:
                    return
                if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
                    raise
                time.sleep(RECONNECT_S)      # then resume after the last cursor seen
            finally:
                if timer:
                    timer.stop()
                stream.cancel()


class _IdleCancel:
    """Cancels a stream once nothing came for ``idle_s`` seconds."""

    def __init__(self, stream, idle_s: float):
        self.stream, self.idle_s = stream, idle_s
        self.fired = False
        self._touched = threading.Event()
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def touch(self) -> None:
        self._touched.set()

    def stop(self) -> None:
        self._stop.set()
        self._touched.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._touched.wait(self.idle_s):
                self.fired = True
                self.stream.cancel()
                return
            self._touched.clear()


class Job:
    """A submitted job. Its properties read the controller each time."""

    def __init__(self, client: Client, job_id: int, info: api_pb2.JobInfo | None = None):
        self.client = client
        self.id = job_id
        self._info = info

    def __repr__(self) -> str:
        return f"Job({self.id})"

    def info(self) -> api_pb2.JobInfo:
        """The job as squeue/scontrol see it (api_pb2.JobInfo); from accounting
        once the controller no longer holds it."""
        reply = self.client.api.call("GetJobs", api_pb2.GetJobsRequest(job_ids=[self.id], all_states=True))
        for j in reply.jobs:
            if j.job_id == self.id:
                self._info = j
                return j
        for page in self.client.api.stream("GetAccounting", api_pb2.GetJobsRequest(job_ids=[self.id])):
            for j in page.jobs:
                if j.job_id == self.id:
                    self._info = j
                    return j
        raise LookupError(f"Invalid job id specified: {self.id}")

    @property
    def state(self) -> str:
        """Slurm's state name: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED..."""
        return self.info().state

    @property
    def exit_code(self) -> int:
        return self.info().exit_code

    @property
    def name(self) -> str:
        return (self._info or self.info()).name

    @property
    def done(self) -> bool:
        return self.state in slurm.FINISHED_STATES

    def cancel(self) -> None:
        """scancel: the job is cancelled (a refusal raises grpc.RpcError with Slurm's words)."""
        reply = self.client.api.call("CancelJobs", api_pb2.CancelJobsRequest(job_ids=[self.id]))
        for r in reply.results:
            if not r.ok:
                raise RuntimeError(r.error)

    def wait(self, timeout: float | None = None) -> str:
        """Block until the job ends; its final state. Told by WatchJobs (the
        job's own changes from its first), never by asking again and again.
        TimeoutError after ``timeout`` seconds."""
        result: list[str] = []
        stop = threading.Event()

        def watch() -> None:
            for ev in self.client.events(job_ids=[self.id], after=0):
                if ev.finished or stop.is_set():
                    result.append(ev.state)
                    return

        t = threading.Thread(target=watch, daemon=True)
        t.start()
        t.join(timeout)
        if t.is_alive():
            stop.set()
            raise TimeoutError(f"job {self.id} still {self.state} after {timeout} s")
        return result[0] if result else self.state

    def logs(self, follow: bool = False) -> str | Iterator[str]:
        """The job's batch output (StdOut) as text; ``follow=True``: an iterator
        of its lines as they are written, ending when the job's batch script
        has ended and every line is read. Relayed by the controller from the
        batch node's agent (ReadJobOutput), so the file need not be mounted
        here. A pending job has no output yet: "" without ``follow``; with it,
        the lines come once it starts."""
        return self._follow() if follow else self._read()

    def output(self, follow: bool = False, offset: int = 0) -> Iterator[bytes]:
        """The batch output's bytes from ``offset`` as the controller relays
        them, chunk by chunk; a pending job is waited for (WatchJobs) when
        following. Refusals raise grpc.RpcError with Slurm's
        words in ``details()``; ControllerUnreachable when there is no
        controller to ask."""
        while True:
            stream = self.client.api.stream("ReadJobOutput", api_pb2.ReadJobOutputRequest(
                job_id=self.id, offset=offset, follow=follow))
            try:
                for chunk in stream:
                    offset = chunk.offset + len(chunk.data)
                    yield chunk.data
                return
            except grpc.RpcError as e:
                if follow and error_reason(e) == "ESLURM_JOB_PENDING":
                    self._wait_started()
                    continue
                if e.code() == grpc.StatusCode.UNAVAILABLE:
                    raise ControllerUnreachable(e.details() or "connect failure") from None
                e.reason = error_reason(e)
                raise
            finally:
                stream.cancel()

    def _wait_started(self) -> None:
        """Until the job has left PENDING (told by WatchJobs)."""
        for ev in self.client.events(job_ids=[self.id], after=0):
            if ev.kind == "state" and ev.state != slurm.PENDING:
                return

    def _read(self) -> str:
        return b"".join(self.output()).decode(errors="replace")

    def _follow(self) -> Iterator[str]:
        text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        partial = ""
        for data in self.output(follow=True):
            partial += text.decode(data)
            *lines, partial = partial.split("\n")
            for line in lines:
                yield line + "\n"
        partial += text.decode(b"", final=True)
        if partial:
            yield partial


def _words(text: str) -> str:
    """sbatch's message without its "sbatch: error: " prefix."""
    first = text.strip().split("\n")[0]
    for prefix in ("sbatch: error: Batch job submission failed: ", "sbatch: error: "):
        if first.startswith(prefix):
            return first[len(prefix):]
    return first

"""The client's end of an srun/salloc allocation: holding its lease.

``Allocate`` is one bidirectional stream that lives as long as the
allocation (lingjund/service/allocations.py says why the stream is the
lease): the first message asks for the job, the controller answers
queued / granted, and the command's last message releases the job with its
exit code, which sacct then shows. A stream that closes without a release
(the command was interrupted or died) ends the job as CANCELLED; so does a
stream that breaks because this process is killed, even with SIGKILL.

After the grant a watcher thread keeps reading the stream, so that a job
ended by someone else (scancel, its time limit) is noticed at once and the
command can say "revoked" and stop. If the stream breaks because the
controller went away (a restart), the watcher takes the lease again
(``attach_job_id``) for up to REATTACH_S: the controller keeps an
allocation that long for its client to come back.
"""
from __future__ import annotations

import os
import queue
import sys
import threading
import time
from typing import Callable

import grpc

from lingjun import client
from lingjun.v1 import api_pb2, api_pb2_grpc

REATTACH_S = 60.0


class AllocationEnded(Exception):
    """The job ended before it was granted (cancelled while pending)."""

    def __init__(self, state: str):
        super().__init__(state)
        self.state = state


def exit_program(rc: int) -> None:
    """End srun/salloc run as programs without Python's shutdown.

    An allocation's gRPC calls run on daemon threads; at interpreter shutdown a
    call's __del__ can wait forever on a lock such a frozen thread holds (seen:
    a salloc that had taken its lease back after a controller restart, all its
    work done and released, hung at exit). Everything the command owes is
    written and released by now: flush and leave."""
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    os._exit(rc)


class Allocation:
    def __init__(self, api: client.Api,
                 on_revoked: Callable[[api_pb2.AllocationEnded], None] | None = None):
        self._stub = api.stub
        self._address = api.address
        self._requests: queue.Queue = queue.Queue()
        self._call = None
        self._releasing = False
        self._release_msg = None        # the release, sent again on a re-attached stream
        self._on_revoked = on_revoked
        self.job_id = 0
        self.ended = threading.Event()
        self.end: api_pb2.AllocationEnded | None = None
        self._watcher: threading.Thread | None = None
        self._channels: list = []   # the ones _reattach opened, closed by close()

    @staticmethod
    def _request_stream(requests: queue.Queue):
        while True:
            msg = requests.get()
            if msg is None:
                return      # half-close: without a release first, the controller ends the job
            yield msg

    def open(self, spec: api_pb2.JobSpec, on_queued: Callable[[api_pb2.AllocationQueued], None]
             ) -> api_pb2.AllocationGranted:
        """Ask for the allocation and wait for it; grpc.RpcError on refusal."""
        self._requests.put(api_pb2.AllocationRequest(spec=spec))
        self._call = self._stub.Allocate(self._request_stream(self._requests))
        if self._releasing:     # abandoned (interrupted) before the call existed
            self._call.cancel()
        for ev in self._call:
            kind = ev.WhichOneof("event")
            if kind == "queued":
                self.job_id = ev.queued.job_id
                on_queued(ev.queued)
            elif kind == "granted":
                self.job_id = ev.granted.job.job_id
                self._watcher = threading.Thread(target=self._watch, name="allocation-lease", daemon=True)
                self._watcher.start()
                return ev.granted
            elif kind == "ended":
                self.end = ev.ended
                self.job_id = ev.ended.job_id
                raise AllocationEnded(ev.ended.state)
        raise AllocationEnded("")

    def _watch(self) -> None:
        while True:
            try:
                for ev in self._call:
                    if ev.WhichOneof("event") == "ended":
                        self.end = ev.ended
                        break
                break
            except grpc.RpcError as e:
                # A release sent while the controller was away would be lost with
                # the old stream: re-attach and send it again (_reattach does).
                if e.code() != grpc.StatusCode.UNAVAILABLE or not self._reattach():
                    break
        self.ended.set()
        if not self._releasing and self.end is not None and self._on_revoked is not None:
            self._on_revoked(self.end)

    def _reattach(self) -> bool:
        """Take the lease again after the controller came back; False when it cannot."""
        deadline = time.monotonic() + REATTACH_S
        while time.monotonic() < deadline:
            time.sleep(1.0)
            requests: queue.Queue = queue.Queue()
            requests.put(api_pb2.AllocationRequest(attach_job_id=self.job_id,
                                                   requester_uid=os.getuid()))
            # A fresh channel each try: an old one waits out its reconnect backoff
            # (up to minutes) before it even tries the restarted controller.
            ch = client.channel(self._address)
            self._channels.append(ch)
            call = api_pb2_grpc.SlurmApiStub(ch).Allocate(self._request_stream(requests))
            try:
                first = next(iter(call))
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNAVAILABLE:
                    continue
                return False
            except StopIteration:
                return False
            self._requests, self._call = requests, call
            if self._release_msg is not None:    # released while it was away
                requests.put(self._release_msg)
            if first.WhichOneof("event") == "ended":
                self.end = first.ended
                return False
            return True
        return False

    def release(self, exit_code: int, signal: int = 0, timeout: float = 30.0) -> None:
        """End the job with the command's status and wait until the controller has it."""
        self._release_msg = api_pb2.AllocationRequest(
            release=api_pb2.AllocationRelease(exit_code=exit_code, signal=signal))
        self._releasing = True
        self._requests.put(self._release_msg)
        self.ended.wait(timeout)
        self.close()

    def abandon(self) -> None:
        """Give the allocation up at once (interrupted): the controller cancels the job."""
        self._releasing = True
        if self._call is not None:
            self._call.cancel()

    def close(self) -> None:
        """Let the watcher leave gRPC's code before the process exits. A daemon
        thread stopped at exit while holding a call's lock makes the call's
        __del__ wait forever (seen: 1 exit in ~50 hung). The request stream is
        left blocked on its queue on purpose: waking it would send it into
        gRPC's locks just as the process ends."""
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(5.0)
        self._call = None   # its __del__ now, while every thread still runs
        # Channels opened to take the lease back after a controller restart: closed
        # here too, not by gRPC's __del__ at interpreter shutdown (a salloc that
        # had reattached hung at exit now and then).
        for ch in self._channels:
            ch.close()
        self._channels.clear()

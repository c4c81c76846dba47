"""WatchJobs/WatchNodes over a real socket: committed changes after a cursor,
live, resumed after a controller restart, and a watcher that falls behind
dropped with RESOURCE_EXHAUSTED and resumed from its cursor."""
from __future__ import annotations

import queue
import threading

import grpc
import pytest

from lingjun.v1 import api_pb2
from lingjund.service import watch
from tests.lingjund import inproc

CONF = """
[[nodes]]
names = "node[1-2]"
cpus = 2
memory_mb = 2000
[[partitions]]
name = "debug"
nodes = "ALL"
"""


def spec(**kw) -> api_pb2.JobSpec:
    base = dict(name="w", script="#!/bin/sh\ntrue\n", work_dir="/tmp", user="root", uid=0, batch=True)
    base.update(kw)
    return api_pb2.JobSpec(**base)


def _events(stream, n: int) -> list[api_pb2.WatchEvent]:
    out = []
    for ev in stream:
        out.append(ev)
        if len(out) == n:
            break
    return out


def test_a_watch_from_a_cursor_tells_each_job_change_in_commit_order(tmp_path):
    with inproc.serve(tmp_path, CONF) as s:
        a = s.stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(name="a"))).job_id
        s.stub.CancelJobs(api_pb2.CancelJobsRequest(job_ids=[a]))
        stream = s.stub.WatchJobs(api_pb2.WatchRequest(after=0), timeout=10)
        got = _events(stream, 2)
        stream.cancel()
    assert [(e.job_id, e.kind, e.previous_state, e.state) for e in got] == [
        (a, "state", "", "PENDING"), (a, "state", "PENDING", "CANCELLED")]
    assert got[0].cursor < got[1].cursor


def test_a_live_watch_sees_a_submission_and_its_cancel_as_they_commit(tmp_path):
    with inproc.serve(tmp_path, CONF) as s:
        early = s.stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(name="before"))).job_id
        stream = s.stub.WatchJobs(api_pb2.WatchRequest(), timeout=10)
        got: queue.Queue = queue.Queue()
        reader = threading.Thread(target=lambda: [got.put(e) for e in _events(stream, 2)], daemon=True)
        reader.start()
        s.stub.Ping(api_pb2.PingRequest())          # the watch is open before the submission
        job = s.stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(name="after"))).job_id
        s.stub.CancelJobs(api_pb2.CancelJobsRequest(job_ids=[job]))
        first, second = got.get(timeout=10), got.get(timeout=10)
        stream.cancel()
    # nothing of the job submitted before the watch opened without a cursor
    assert (first.job_id, first.state, second.job_id, second.state) == (job, "PENDING", job, "CANCELLED")
    assert early != job


def test_a_cursor_from_before_a_controller_restart_resumes_after_it(tmp_path):
    with inproc.serve(tmp_path, CONF) as s:
        a = s.stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(name="a"))).job_id
        stream = s.stub.WatchJobs(api_pb2.WatchRequest(after=0), timeout=10)
        (seen,) = _events(stream, 1)
        stream.cancel()
    with inproc.serve(tmp_path, CONF) as s:     # the same state file, a new controller
        s.stub.CancelJobs(api_pb2.CancelJobsRequest(job_ids=[a]))
        stream = s.stub.WatchJobs(api_pb2.WatchRequest(after=seen.cursor, job_ids=[a]), timeout=10)
        (nxt,) = _events(stream, 1)
        stream.cancel()
    assert (seen.state, nxt.previous_state, nxt.state) == ("PENDING", "PENDING", "CANCELLED")
    assert nxt.cursor > seen.cursor


def test_a_watcher_that_falls_behind_is_dropped_and_resumes_from_its_cursor(tmp_path, monkeypatch):
    monkeypatch.setattr(watch, "QUEUE_LIMIT", 2)
    with inproc.serve(tmp_path, CONF) as s:
        stream = s.stub.WatchJobs(api_pb2.WatchRequest(after=0), timeout=10)
        s.stub.Ping(api_pb2.PingRequest())
        # five jobs in one commit: five events at once into a queue of two
        batch = s.stub.SubmitJobs(api_pb2.SubmitJobsRequest(jobs=[
            api_pb2.SubmitJobRequest(spec=spec(name=f"j{i}")) for i in range(5)]))
        ids = [r.job.job_id for r in batch.results]
        got = []
        with pytest.raises(grpc.RpcError) as err:
            for ev in stream:
                got.append(ev)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"after={got[-1].cursor}" in err.value.details()
        rest = _events(s.stub.WatchJobs(api_pb2.WatchRequest(after=got[-1].cursor), timeout=10),
                       5 - len(got))
    assert len(got) < 5
    assert [e.job_id for e in got + rest] == ids


def test_watch_nodes_tells_a_drain_and_its_reason(tmp_path):
    with inproc.serve(tmp_path, CONF) as s:
        stream = s.stub.WatchNodes(api_pb2.WatchRequest(nodes=["node1"]), timeout=10)
        s.stub.Ping(api_pb2.PingRequest())
        s.stub.UpdateNode(api_pb2.UpdateNodeRequest(names=["node1"], state="DRAIN", reason="bad fan"))
        (ev,) = _events(stream, 1)
        stream.cancel()
    assert (ev.node, ev.state, ev.text) == ("node1", "DRAIN", "bad fan")

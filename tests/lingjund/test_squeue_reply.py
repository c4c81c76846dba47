"""squeue against a real controller over real gRPC: the cut-down, presorted
reply prints what the whole JobInfo reply prints, and filters are applied
by the controller (what comes over the wire is only the jobs asked for)."""
from __future__ import annotations

import io

import pytest

from cli import squeue
from cli.formats import squeue as squeue_format
from lingjun import slurm
from lingjun import messages
from lingjun.v1 import api_pb2
from tests.lingjund import inproc

CONF = """
[[nodes]]
names = "node[1-4]"
cpus = 2
memory_mb = 2000
[[partitions]]
name = "debug"
nodes = "ALL"
default = true
[[partitions]]
name = "long"
nodes = "node[3-4]"
"""


class Recording:
    """The Api a command gets, over the test's stub; keeps each reply. With
    ``whole`` the request goes out as an older squeue sent it: no field list,
    no order asked for, no -A/-w (the command then cuts, filters and sorts)."""

    def __init__(self, stub, whole: bool = False):
        self.stub, self.whole, self.replies = stub, whole, []

    def call(self, method, request, timeout=None, wait_ready=0.0):
        if isinstance(request, messages.Message):    # the commands build lingjun.messages
            request = messages.to_protobuf(request)
        if self.whole and method == "GetJobs":
            sent, request = request, api_pb2.GetJobsRequest()
            request.CopyFrom(sent)
            for name in ("job_fields", "squeue_order", "accounts", "nodes"):
                request.ClearField(name)
        reply = getattr(self.stub, method)(request, timeout=10)
        self.replies.append(reply)
        return reply


def _spec(**kw) -> api_pb2.JobSpec:
    base = dict(name="t", script="#!/bin/sh\ntrue\n", work_dir="/tmp", user="root", uid=0,
                batch=True, command="/tmp/run.sh")
    base.update(kw)
    return api_pb2.JobSpec(**base)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A queue of every kind of row: pending, held, an array's remainder and a
    task of it running, two running jobs (one on two nodes), in two partitions
    and two accounts, and a cancelled one (squeue -t all)."""
    with inproc.serve(tmp_path_factory.mktemp("squeue"), CONF) as s:
        submit = s.stub.SubmitJob
        ids = {}
        ids["pend"] = submit(api_pb2.SubmitJobRequest(spec=_spec(
            name="pend", account="phys", begin_time=4_000_000_000))).job_id
        ids["held"] = submit(api_pb2.SubmitJobRequest(spec=_spec(
            name="held", hold=True, account="chem", partition="long", min_nodes=2))).job_id
        ids["arr"] = submit(api_pb2.SubmitJobRequest(spec=_spec(
            name="arr", array="1-5%2", hold=True, account="phys"))).job_id
        ids["run"] = submit(api_pb2.SubmitJobRequest(spec=_spec(
            name="run", hold=True, account="chem", time_limit_min=30))).job_id
        ids["wide"] = submit(api_pb2.SubmitJobRequest(spec=_spec(
            name="wide", hold=True, account="phys", partition="long", min_nodes=2,
            gpus_per_node=0, comment="two nodes"))).job_id
        ids["gone"] = submit(api_pb2.SubmitJobRequest(spec=_spec(name="gone", hold=True))).job_id
        now = s.ctl.clock()
        with s.store.transaction() as st:
            for key, nodes in (("run", ("node1",)), ("wide", ("node3", "node4"))):
                st.update_job(ids[key], state=slurm.RUNNING, held=False, nodes=nodes,
                              cpus_per_node=(2,) * len(nodes), batch_host=nodes[0],
                              start_time=now - 75, reason=slurm.REASON_NONE)
            meta = st.job(ids["arr"])
            from lingjund.service.jobs import split_task
            split_task(st, meta, 3, state=slurm.RUNNING, held=False, nodes=("node2",),
                       cpus_per_node=(1,), batch_host="node2", start_time=now - 5)
            st.update_job(ids["gone"], state=slurm.CANCELLED, held=False, end_time=now - 1,
                          start_time=now - 1)
        yield s, ids


def _squeue(api, *argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert squeue.main(list(argv), api, out, err) == 0, err.getvalue()
    return out.getvalue()


FORMATS = ([["-o", f"%.15{letter}|%{letter}"] for letter in sorted(squeue_format.SQUEUE_HEADERS)]
           + [[], ["-l"], ["-o", "%i %T %R"], ["-t", "all"], ["-r"], ["-p", "long"],
              ["-O", ",".join(sorted(squeue_format.SQUEUE_O_FIELDS))],
              ["-O", "JobID,Partition,Name,UserName,State,TimeUsed,NumNodes,ReasonList"]])


@pytest.mark.parametrize("argv", FORMATS, ids=[" ".join(a) or "default" for a in FORMATS])
def test_the_cut_down_reply_prints_what_the_whole_one_prints(served, argv):
    s, _ = served
    cut, whole = Recording(s.stub), Recording(s.stub, whole=True)
    text = _squeue(cut, *argv)
    assert text == _squeue(whole, *argv)
    assert cut.replies[0].squeue_order and not whole.replies[0].squeue_order
    assert cut.replies[0].ByteSize() < whole.replies[0].ByteSize()
    assert text.count("\n") > 2


@pytest.mark.parametrize("argv,names", [
    (["-A", "chem"], {"held", "run"}),
    (["-w", "node[2-3]"], {"arr", "wide"}),
    (["-A", "phys", "-p", "long"], {"wide"}),
    (["-t", "CA", "-A", "root"], {"gone"}),
])
def test_filters_are_applied_by_the_controller(served, argv, names):
    s, _ = served
    api = Recording(s.stub)
    text = _squeue(api, *argv, "-h", "-o", "%j")
    assert set(text.split()) == names
    # only what was asked for came over the wire
    assert {j.name for j in api.replies[0].jobs} == names


def test_an_unknown_field_name_is_refused(served):
    s, _ = served
    import grpc
    with pytest.raises(grpc.RpcError) as e:
        s.stub.GetJobs(api_pb2.GetJobsRequest(job_fields=["job_id", "no_such_field"]))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "no_such_field" in e.value.details()

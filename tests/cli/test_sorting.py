"""squeue -S / SQUEUE_SORT and sinfo -S / SINFO_SORT: each order below is what
Slurm 22.05's squeue printed for the same five jobs, side by side (three
pending with a begin time, two running; priorities, names and time limits
as given)."""
from __future__ import annotations

import io

import pytest

from cli import sinfo, squeue
from lingjun.v1 import api_pb2
from tests.cli.test_commands import FakeApi

NOW = 1_800_000_000
_PENDING_START = NOW + 3600          # the begin time, Slurm's expected start
#        id  name  state      priority  limit  start
_JOBS = [(42, "c", "PENDING", 2910, 92, _PENDING_START),
         (43, "a", "PENDING", 3143, 69, _PENDING_START),
         (44, "b", "PENDING", 2724, 57, _PENDING_START),
         (45, "r1", "RUNNING", 3282, -1, NOW - 3),
         (46, "r0", "RUNNING", 3259, 5, NOW - 3)]


def _jobs():
    return [api_pb2.JobInfo(job_id=i, name=n, state=st, priority=p, time_limit_min=lim,
                            start_time=start, submit_time=NOW - 5, partition="debug",
                            user="root", num_nodes=1, array_task_id=-1,
                            nodes="node1" if st == "RUNNING" else "", now=NOW)
            for i, n, st, p, lim, start in reversed(_JOBS)]


def _squeue(argv, env=None, monkeypatch=None):
    api = FakeApi(GetJobs=api_pb2.GetJobsResponse(jobs=_jobs(), now=NOW))
    out, err = io.StringIO(), io.StringIO()
    rc = squeue.main(argv, api=api, out=out, err=err)
    return rc, out.getvalue().split(), err.getvalue()


@pytest.mark.parametrize("sort,want", [
    (None, [43, 42, 44, 45, 46]),
    ("i", [42, 43, 44, 45, 46]),
    ("-i", [46, 45, 44, 43, 42]),
    ("j", [43, 44, 42, 46, 45]),
    ("+j", [43, 44, 42, 46, 45]),
    ("-j,i", [45, 46, 42, 44, 43]),
    ("t", [42, 43, 44, 45, 46]),
    ("T", [42, 43, 44, 45, 46]),
    ("P", [42, 43, 44, 45, 46]),
    ("p", [44, 42, 43, 46, 45]),
    ("-p", [45, 46, 43, 42, 44]),
    ("l", [46, 44, 43, 42, 45]),
    ("-l", [45, 42, 43, 44, 46]),
    ("L", [46, 44, 43, 42, 45]),
    ("M", [42, 43, 44, 45, 46]),
    ("S", [45, 46, 42, 43, 44]),
    ("V", [42, 43, 44, 45, 46]),
    ("c", [42, 43, 44, 45, 46]),
    ("cluster", [42, 43, 44, 45, 46]),
    ("-,j", [43, 44, 42, 46, 45]),
    ("P,t,-p", [43, 42, 44, 45, 46]),
], ids=lambda v: repr(v) if not isinstance(v, list) else "")
def test_squeue_sorts_as_slurm_does(sort, want):
    rc, ids, err = _squeue(["-h", "-o", "%i"] + (["-S", sort] if sort is not None else []))
    assert (rc, err) == (0, "")
    assert [int(i) for i in ids] == want


def test_squeue_sort_from_the_environment_and_the_command_line_over_it(monkeypatch):
    monkeypatch.setenv("SQUEUE_SORT", "-i")
    assert [int(i) for i in _squeue(["-h", "-o", "%i"])[1]] == [46, 45, 44, 43, 42]
    assert [int(i) for i in _squeue(["-h", "-o", "%i", "-S", "j"])[1]] == [43, 44, 42, 46, 45]


@pytest.mark.parametrize("sort,want_err", [
    ("X", "squeue: error: Invalid sort specification: X\n"),
    ("i,X", "squeue: error: Invalid sort specification: X\n"),
    ("jx", "squeue: error: Invalid sort specification: x\n"),
], ids=["an unknown letter", "after a good one", "two letters run together"])
def test_squeue_refuses_an_unknown_sort_letter(sort, want_err):
    assert _squeue(["-S", sort]) == (1, [], want_err)


def test_squeue_b_is_reported_and_ignored():
    rc, ids, err = _squeue(["-h", "-o", "%i", "-S", "b"])
    assert (rc, [int(i) for i in ids], err) == (0, [42, 43, 44, 45, 46],
                                                "squeue: Invalid sort specification: b\n")


@pytest.mark.parametrize("var,value,argv,want", [
    ("SQUEUE_STATES", "R", [], [45, 46]),
    ("SQUEUE_STATES", "R", ["-t", "PD"], [43, 42, 44]),
    ("SQUEUE_NAMES", "a,b", [], [43, 44]),
    ("SQUEUE_USERS", "nobody", [], []),
    ("SQUEUE_USERS", "nobody", ["-u", "root"], [43, 42, 44, 45, 46]),
    ("SQUEUE_FORMAT", "%j", [], ["a", "c", "b", "r1", "r0"]),
    ("SQUEUE_FORMAT", "%j", ["-o", "%i"], [43, 42, 44, 45, 46]),
    ("SQUEUE_FORMAT2", "name", [], ["a", "c", "b", "r1", "r0"]),
    ("SQUEUE_FORMAT2", "name", ["-o", "%i"], [43, 42, 44, 45, 46]),
    ("SQUEUE_FORMAT", "%i", ["-O", "name"], ["a", "c", "b", "r1", "r0"]),
    ("SQUEUE_FORMAT", "%i", ["SQUEUE_FORMAT2=name"], [43, 42, 44, 45, 46]),
], ids=["SQUEUE_STATES", "-t over SQUEUE_STATES", "SQUEUE_NAMES", "SQUEUE_USERS",
        "-u over SQUEUE_USERS", "SQUEUE_FORMAT", "-o over SQUEUE_FORMAT", "SQUEUE_FORMAT2",
        "-o over SQUEUE_FORMAT2", "-O over SQUEUE_FORMAT", "SQUEUE_FORMAT over SQUEUE_FORMAT2"])
def test_squeue_input_variables(monkeypatch, var, value, argv, want):
    """Each as Slurm 22.05's squeue reads it beside the same options."""
    monkeypatch.setenv(var, value)
    for extra in [a for a in argv if "=" in a and not a.startswith("-")]:
        monkeypatch.setenv(*extra.split("=", 1))
        argv = [a for a in argv if a != extra]
    rc, words, err = _squeue(["-h", *argv] + ([] if "FORMAT" in var else ["-o", "%i"]))
    assert (rc, err) == (0, "")
    assert words == [str(w) for w in want]


def test_squeue_long_over_squeue_format(monkeypatch):
    monkeypatch.setenv("SQUEUE_FORMAT", "%i")
    rc, words, err = _squeue(["-l"])
    assert rc == 0 and "TIME_LIMI" in words, words


def _node(name, state, cpus, mem, parts=("debug",)):
    return api_pb2.NodeInfo(name=name, state=state, cpus=cpus, real_memory_mb=mem,
                            partitions=list(parts))


def _sinfo(argv):
    api = FakeApi(
        GetPartitions=api_pb2.GetPartitionsResponse(partitions=[
            api_pb2.PartitionInfo(name="zeta", state="UP", max_time_min=-1),
            api_pb2.PartitionInfo(name="debug", state="UP", max_time_min=-1, default=True)]),
        GetNodes=api_pb2.GetNodesResponse(nodes=[
            _node("n1", "IDLE", 4, 1000), _node("n2", "ALLOCATED", 8, 4000),
            _node("n10", "MIXED", 2, 2000, ("debug", "zeta"))]))
    out, err = io.StringIO(), io.StringIO()
    rc = sinfo.main(argv, api=api, out=out, err=err)
    return rc, out.getvalue().splitlines(), err.getvalue()


@pytest.mark.parametrize("argv,want", [
    (["-N", "-o", "%N %R"], ["n1 debug", "n2 debug", "n10 zeta", "n10 debug"]),
    (["-N", "-o", "%N %R", "-S", "-N"], ["n10 zeta", "n10 debug", "n2 debug", "n1 debug"]),
    (["-N", "-o", "%N %R", "-S", "c"], ["n10 zeta", "n10 debug", "n1 debug", "n2 debug"]),
    (["-N", "-o", "%N %R", "-S", "-m"], ["n2 debug", "n10 zeta", "n10 debug", "n1 debug"]),
    (["-N", "-o", "%N %R", "-S", "t"], ["n1 debug", "n2 debug", "n10 zeta", "n10 debug"]),
    (["-N", "-o", "%N %R", "-S", "-t"], ["n10 zeta", "n10 debug", "n2 debug", "n1 debug"]),
    (["-o", "%R %t %N"], ["zeta mix n10", "debug mix n10", "debug alloc n2", "debug idle n1"]),
    (["-o", "%R %t %N", "-S", "P,N"],
     ["debug idle n1", "debug alloc n2", "debug mix n10", "zeta mix n10"]),
    (["-o", "%R %t %N", "-S", "#P,N"],
     ["zeta mix n10", "debug idle n1", "debug alloc n2", "debug mix n10"]),
    (["-o", "%R %t %N", "-S", "-P,-N"],
     ["zeta mix n10", "debug mix n10", "debug alloc n2", "debug idle n1"]),
    (["-o", "%R %t %N", "-S", "Q,c"],
     ["zeta mix n10", "debug mix n10", "debug idle n1", "debug alloc n2"]),
], ids=["-N: by node name (a node in two partitions twice)", "descending names", "by CPUs",
        "by memory, descending", "by state (Slurm's numbers: IDLE, ALLOCATED, MIXED)",
        "by state, descending", "default: partitions as configured, busier states first",
        "partition names, then nodes", "#P: partitions as configured", "descending both",
        "a letter sinfo does not know is ignored"])
def test_sinfo_sorts_as_slurm_does(argv, want):
    rc, lines, err = _sinfo(["-h", *argv])
    assert (rc, err) == (0, "")
    assert [" ".join(line.split()) for line in lines] == want


def test_sinfo_sort_from_the_environment(monkeypatch):
    monkeypatch.setenv("SINFO_SORT", "-c")
    assert _sinfo(["-h", "-N", "-o", "%N"])[1] == ["n2", "n1", "n10", "n10"]
    assert _sinfo(["-h", "-N", "-o", "%N", "-S", "-N"])[1] == ["n10", "n10", "n2", "n1"]

"""The simulator's workloads and trace format (no cluster needed)."""
from __future__ import annotations

import pytest

from bench.sim import workload
from bench.sim.agents import run_spec
from lingjun.sbatch_options import build_request


def test_same_seed_gives_the_same_workload():
    a = workload.generate(200, seed=7, nodes=300, rate=10)
    assert a == workload.generate(200, seed=7, nodes=300, rate=10)
    assert a != workload.generate(200, seed=8, nodes=300, rate=10)


def test_generated_gangs_never_exceed_the_cluster():
    jobs = workload.generate(300, seed=1, nodes=50, mix=workload.MIXES["gangs"])
    assert max(j.nodes for j in jobs) == 50
    assert {j.gpus for j in jobs} == {8}


def test_trace_round_trips_through_a_file(tmp_path):
    jobs = workload.generate(100, seed=3, nodes=1000, rate=5)
    workload.save(jobs, tmp_path / "t.jsonl", header="seed 3")
    assert workload.load(tmp_path / "t.jsonl") == jobs


@pytest.mark.parametrize("line, why", [
    ('{"name": "a", "after": ["b"]}', "not submitted before it"),
    ('{"name": "a", "walltime": 3}', "unknown trace keys"),
], ids=["a dependency on a later job is refused", "an unknown key is refused"])
def test_bad_traces_are_refused_with_the_line(tmp_path, line, why):
    (tmp_path / "t.jsonl").write_text(line + "\n")
    with pytest.raises(ValueError, match=why):
        workload.load(tmp_path / "t.jsonl")


def test_a_trace_job_is_what_sbatch_would_submit():
    job = workload.TraceJob(name="g", nodes=64, gpus=8, run=90, array="0-3%2", after=("p",),
                            requeue=True)
    req = build_request(job.sbatch_args({"p": 41}), job.script(), {"PATH": "/bin"}, "/tmp")
    spec = req.spec
    assert (spec.name, spec.min_nodes, spec.time_limit_min) == ("g", 64, 4)
    assert "afterok:41" in spec.dependency and spec.requeue
    assert run_spec(spec.script) == (90.0, 0)


def test_run_spec_reads_the_directive_or_falls_back():
    assert run_spec("#!/bin/sh\n# lingjun-sim: run=2.5 exit=3\n") == (2.5, 3)
    assert run_spec("#!/bin/sh\nsleep 1\n") == (1.0, 0)

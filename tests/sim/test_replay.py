"""A recorded trace replayed on a simulated cluster: the outcomes it must have.

Flux-sched style: ``scenarios/NAME.jsonl`` is a trace (bench/sim/workload.py
documents the format) and ``scenarios/NAME.expected`` the outcome of each
job in the controller's words (sacct's state; an array's tasks counted).
The trace is replayed twice, each time on a fresh cluster: both replays
must give the expected outcomes, so a replay is repeatable. With
``kill_invalid_depend`` a job whose dependency failed is cancelled rather
than pending for ever, so every job ends.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from bench.sim import workload
from bench.sim.cluster import SimCluster
from bench.sim.controller import ClusterShape
from bench.sim.replay import Replay, accounting, job_ids, outcomes, wait_finished
from lingjun import slurm

HERE = Path(__file__).parent / "scenarios"
SHAPE = ClusterShape(nodes=16, heartbeat_interval_s=1.0, scheduler_interval_s=0.5,
                     controller=(("kill_invalid_depend", "true"),))


def expected(name: str) -> dict[str, str]:
    out = {}
    for line in (HERE / f"{name}.expected").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            job, outcome = line.split(None, 1)
            out[job] = outcome.strip()
    return out


def replay(root: Path, trace: list[workload.TraceJob]) -> dict[str, str]:
    with SimCluster(root, SHAPE) as cl:
        api = cl.api()
        subs = Replay(cl.api, trace, workdir=root, deadline_s=30).run()
        if not wait_finished(api, job_ids(subs), timeout=60):
            active = [f"{j.job_id} {j.name} {j.state} {j.reason} on {j.nodes!r}"
                      for j in accounting(api, job_ids(subs))
                      if j.state not in slurm.FINISHED_STATES]
            raise AssertionError(f"jobs still active after 60 s (logs in {root}): {active}")
        return outcomes(api, subs)


@pytest.mark.timeout(170)
@pytest.mark.parametrize("scenario", ["mixed"])
def test_trace_replayed_twice_gives_the_expected_outcomes(tmp_path, scenario):
    trace = workload.load(HERE / f"{scenario}.jsonl")
    want = expected(scenario)
    assert sorted(want) == sorted(j.name for j in trace), "the expected file names every job"
    first = replay(tmp_path / "first", trace)
    assert first == want, "\n".join(f"{n}: want {want[n]!r}, got {first.get(n)!r}"
                                    for n in want if first.get(n) != want[n])
    second = replay(tmp_path / "second", trace)
    assert second == first, "\n".join(f"{n}: first {first[n]!r}, second {second.get(n)!r}"
                                      for n in first if second.get(n) != first[n])

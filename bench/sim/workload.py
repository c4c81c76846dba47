"""Workloads for the simulator, and the trace format that records them.

A trace is a text file with one job per line, as a JSON object (JSON lines;
blank lines and lines starting with ``#`` are skipped)::

    {"name": "j1", "submit": 0.0, "nodes": 1, "gpus": 1, "run": 30}
    {"name": "j2", "submit": 0.5, "nodes": 64, "gpus": 8, "run": 120, "requeue": true}
    {"name": "j3", "submit": 1.0, "nodes": 1, "gpus": 1, "run": 5, "array": "0-9%4"}
    {"name": "j4", "submit": 1.5, "nodes": 8, "gpus": 8, "run": 60, "after": ["j2"]}
    {"name": "j5", "submit": 2.0, "nodes": 1, "gpus": 1, "run": 600, "cancel": 10}

Keys (only ``name`` is required):

    name      unique label; the job's name (-J) and how "after" refers to it
    submit    seconds after the replay starts when it is submitted (default 0)
    nodes     -N (default 1)
    gpus      GPUs per node, --gres=gpu:N (default 0)
    run       simulated run time in seconds (default 1)
    exit      the script's exit code (default 0)
    array     --array indices, e.g. "0-99%10" (default none)
    after     names of earlier jobs this one waits for (--dependency=afterok)
    cancel    seconds after its own submission when it is cancelled (default never)
    requeue   --requeue (default: the cluster's JobRequeue)
    time      -t in minutes (default: twice the run time, rounded up, plus one)
    switches  --switches as given, "N" or "N@max-time" (default none)

Lines are replayed in order of ``submit`` (ties in file order), so a job
named in ``after`` must come earlier. ``generate`` draws a workload with
seeded randomness: the same seed and arguments give the same trace.
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

SCRIPT = "#!/bin/sh\n# lingjun-sim: run={run:g} exit={exit}\nsleep {run:g}\nexit {exit}\n"


@dataclass(frozen=True)
class TraceJob:
    name: str
    submit: float = 0.0
    nodes: int = 1
    gpus: int = 0
    run: float = 1.0
    exit: int = 0
    array: str = ""
    after: tuple[str, ...] = ()
    cancel: float | None = None
    requeue: bool | None = None
    time: int = 0
    switches: str = ""

    def script(self) -> str:
        return SCRIPT.format(run=self.run, exit=self.exit)

    def time_limit_min(self) -> int:
        return self.time or math.ceil(self.run * 2 / 60) + 1

    def sbatch_args(self, ids: dict[str, int]) -> list[str]:
        """sbatch's arguments for this job; ``ids`` maps earlier names to job ids."""
        argv = ["-J", self.name, "-N", str(self.nodes), "-t", str(self.time_limit_min()),
                "-o", "/dev/null"]
        if self.gpus:
            argv += ["--gres", f"gpu:{self.gpus}"]
        if self.array:
            argv += ["--array", self.array]
        if self.after:
            argv += ["--dependency", "afterok:" + ":".join(str(ids[a]) for a in self.after)]
        if self.requeue is True:
            argv.append("--requeue")
        elif self.requeue is False:
            argv.append("--no-requeue")
        if self.switches:
            argv.append(f"--switches={self.switches}")
        return argv

    def to_json(self) -> str:
        d = {k: v for k, v in asdict(self).items() if v != getattr(DEFAULT, k) or k == "name"}
        if "after" in d:
            d["after"] = list(d["after"])
        return json.dumps(d, separators=(", ", ": "))

    @classmethod
    def from_dict(cls, d: dict) -> "TraceJob":
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown trace keys {sorted(unknown)}")
        d = dict(d)
        if "after" in d:
            d["after"] = tuple(d["after"])
        return cls(**d)


DEFAULT = TraceJob(name="")


def load(path: str | Path) -> list[TraceJob]:
    jobs: list[TraceJob] = []
    for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            jobs.append(TraceJob.from_dict(json.loads(line)))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}:{lineno}: {e}") from None
    check(jobs)
    return sorted(jobs, key=lambda j: j.submit)      # stable: ties keep file order


def check(jobs: list[TraceJob]) -> None:
    seen: set[str] = set()
    for j in sorted(jobs, key=lambda j: j.submit):
        if j.name in seen:
            raise ValueError(f"job name {j.name!r} appears twice")
        missing = [a for a in j.after if a not in seen]
        if missing:
            raise ValueError(f"{j.name}: 'after' names {missing} that are not submitted before it")
        seen.add(j.name)


def save(jobs: list[TraceJob], path: str | Path, header: str = "") -> None:
    lines = [f"# {h}" for h in header.splitlines()] + [j.to_json() for j in jobs]
    Path(path).write_text("\n".join(lines) + "\n")


@dataclass(frozen=True)
class Mix:
    """Shares of each kind of job (normalised), and their knobs."""
    gpu1: float = 0.60          # one node, one GPU
    gang8: float = 0.15         # 8 nodes x 8 GPUs
    gang64: float = 0.06
    gang256: float = 0.02
    array: float = 0.07         # an array of one-GPU tasks
    whole1: float = 0.10        # one node, 8 GPUs
    array_size: int = 10
    depend: float = 0.10        # chance a job waits for an earlier one (afterok)
    cancel: float = 0.05        # chance a job is cancelled some time after submission
    run: tuple[float, float] = (5.0, 60.0)     # run time, uniform in this range (s)


MIXES = {
    "mixed": Mix(),
    "gpu1": Mix(gpu1=1, gang8=0, gang64=0, gang256=0, array=0, whole1=0, depend=0, cancel=0),
    "gangs": Mix(gpu1=0, gang8=0.6, gang64=0.3, gang256=0.1, array=0, whole1=0, depend=0,
                 cancel=0),
}


def generate(n: int, seed: int, nodes: int, *, mix: Mix = Mix(), rate: float = 0.0,
             prefix: str = "j") -> list[TraceJob]:
    """``n`` jobs for a cluster of ``nodes`` nodes; ``rate`` jobs/s arrive as a
    Poisson stream (0: all at once). Gangs larger than the cluster shrink to it."""
    rng = random.Random(seed)
    kinds = ["gpu1", "gang8", "gang64", "gang256", "array", "whole1"]
    weights = [getattr(mix, k) for k in kinds]
    jobs: list[TraceJob] = []
    t = 0.0
    for i in range(1, n + 1):
        if rate > 0:
            t += rng.expovariate(rate)
        kind = rng.choices(kinds, weights)[0]
        run = round(rng.uniform(*mix.run), 1)
        size, gpus, array = {"gpu1": (1, 1, ""), "gang8": (8, 8, ""), "gang64": (64, 8, ""),
                             "gang256": (256, 8, ""), "whole1": (1, 8, ""),
                             "array": (1, 1, f"0-{mix.array_size - 1}")}[kind]
        size = min(size, nodes)
        after: tuple[str, ...] = ()
        if jobs and rng.random() < mix.depend:
            after = (rng.choice(jobs[-50:]).name,)
        cancel = round(rng.uniform(0, run), 1) if rng.random() < mix.cancel else None
        jobs.append(TraceJob(name=f"{prefix}{i}", submit=round(t, 3), nodes=size, gpus=gpus,
                             run=run, array=array, after=after, cancel=cancel))
    return jobs

"""Load golden outputs of real Slurm 22.05 (../shared/anchors/slurm/golden).

Each file is "$ command", stdout, "--- stderr", stderr, "--- rc N". The
directory comes from LINGJUN_GOLDEN when set, else from beside the repository.
"""
from __future__ import annotations


import os
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def golden_dir() -> Path:
    env = os.environ.get("LINGJUN_GOLDEN")
    if env:
        return Path(env)
    for cand in (REPO / ".." / "shared" / "anchors" / "slurm" / "golden",
                 Path("/work/shared/anchors/slurm/golden")):
        if cand.is_dir():
            return cand.resolve()
    return REPO / ".." / "shared" / "anchors" / "slurm" / "golden"


@dataclass(frozen=True)
class Golden:
    command: str
    stdout: str
    stderr: str
    rc: int


def load(name: str) -> Golden:
    path = golden_dir() / f"{name}.txt"
    if not path.exists():
        pytest.skip(f"golden file {path} not available")
    text = path.read_text()
    first, _, rest = text.partition("\n")
    out, _, rest = rest.partition("--- stderr\n")
    err, _, rc = rest.rpartition("--- rc ")
    return Golden(first[2:], out, err, int(rc.strip()))


ARRAY_JOBS = ("12", "13")   # the array jobs of capture.sh


def without_arrays(text: str) -> str:
    """Drop the rows of the capture's array jobs (12, 12_[1-3], 13_2...), for captures
    whose array rows other tests cover (tests/cli/test_array_display.py)."""
    def is_array(line: str) -> bool:
        first = line.split()[0] if line.split() else ""
        return first.split("_")[0] in ARRAY_JOBS
    return "".join(l for l in text.splitlines(keepends=True) if not is_array(l))


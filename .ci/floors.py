"""Print the lowest versions pyproject.toml allows, as pip pins (NAME==FLOOR).

    python3 .ci/floors.py [EXTRA...] > floors.txt

Every dependency of [project] (and of the extras named) must state a floor
(``>=X`` or ``==X``); each becomes ``NAME==X``. Installing that file and
running tests under it proves the floors true: a floor that does not exist
on the index (``pyroute2>=0.9``: the first 0.9 is 0.9.1), that conflicts
with another (grpcio-tools 1.60 wants protobuf < 5), or that the code
outgrew (protobuf 5.26 cannot load stubs made by protoc 7.35) fails there.
"""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def floors(extras: list[str]) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    pins, missing = [], []
    for text in reqs:
        req = Requirement(text)
        low = [s.version for s in req.specifier if s.operator in (">=", "==", "~=")]
        if not low:
            missing.append(text)
            continue
        pins.append(f"{req.name}=={low[0]}")
    if missing:
        raise SystemExit(f"pyproject.toml: no floor (>=) for {', '.join(missing)}")
    return pins


if __name__ == "__main__":
    print("\n".join(floors(sys.argv[1:])))

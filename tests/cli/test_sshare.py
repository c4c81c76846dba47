"""sshare side by side with real Slurm's (tests/cli/golden/sshare/).

The same tree as capture.sh made in real Slurm (ljphys with 10 shares, its
users ljalice and ljdan, its sub-account ljchem with ljdan) is made here with
our sacctmgr, root's usage set to what the real cluster had charged (959),
and every sshare line compared cell by cell: headers, widths, the tree's
indentation and order, shares and usage. FairShare, LevelFS and NormUsage
are left out: slurmctld recomputes them only every PriorityCalcPeriod (its
new associations still show 0), so its numbers at capture time were stale.
"""
from __future__ import annotations

import io
import shlex
from pathlib import Path

import pytest

from cli import sacctmgr, sshare
from lingjun import config
from lingjund.service.context import Controller
from lingjund.store.store import Store
from tests.cli.test_sacctmgr import ServiceApi

GOLDEN = Path(__file__).parent / "golden" / "sshare"
STEPS = sorted(GOLDEN.glob("[0-9]*.txt"))
STALE = {"FairShare", "LevelFS", "NormUsage"}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    store = Store(str(tmp_path_factory.mktemp("sshare") / "db.sqlite"))
    ctl = Controller(config=config.parse('cluster_name = "anchor"\n'), store=store)
    api = ServiceApi(ctl)
    for cmd in ("add account ljphys fairshare=10", "add account ljchem parent=ljphys",
                "add user ljalice account=ljphys", "add user ljdan account=ljphys",
                "add user ljdan account=ljchem"):
        assert sacctmgr.main(["-i", *cmd.split()], api=api, out=io.StringIO(), err=io.StringIO()) == 0
    with store.transaction():
        store.save_usage({("root", "root", ""): (959.0, 1.0)})
    store.assoc.usage_tick = 1.0
    yield api
    store.close()


def _cells(lines: list[str], parsable: bool) -> list[list[str]]:
    if parsable:
        return [line.split("|") for line in lines]
    dashes = next((line for line in lines if line.startswith("---")), None)
    if dashes is None:
        return [[line] for line in lines]
    spans, pos = [], 0
    for group in dashes.split(" ")[:-1]:
        spans.append((pos, pos + len(group)))
        pos += len(group) + 1
    return [[line[a:b] for a, b in spans] + [line[pos:]] for line in lines]


@pytest.mark.parametrize("path", STEPS, ids=[p.stem for p in STEPS])
def test_each_sshare_prints_as_slurm(api, path):
    text = path.read_text()
    first, rest = text.split("\n", 1)
    want, rest = rest.split("--- stderr\n", 1)
    argv = shlex.split(first[2:])
    out, err = io.StringIO(), io.StringIO()
    rc = sshare.main(argv[1:], api=api, out=out, err=err)
    assert rc == int(rest.rsplit("--- rc ", 1)[1]) and err.getvalue() == ""
    ours, theirs = out.getvalue().splitlines(), want.splitlines()
    assert len(ours) == len(theirs)
    if "-n" in argv:       # no header: borrow -a's to find the columns
        head = (GOLDEN / "01_all.txt").read_text().split("\n")[1:3]
        ours, theirs = head + ours, head + theirs
    parsable = "-P" in argv or "-p" in argv
    header = theirs[0].replace("|", " ").split()
    for a, b in zip(_cells(ours, parsable), _cells(theirs, parsable)):
        assert len(a) == len(b)
        for name, x, y in zip(header + [""], a, b):
            if name not in STALE:
                assert x == y, (name, a, b)
            else:
                assert len(x) == len(y), (name, a, b)

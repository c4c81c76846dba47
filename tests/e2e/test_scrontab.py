"""scrontab on a real local cluster: entries become jobs queued for their next
time, run once a minute and never over themselves, and survive a controller
restart; -l, -r and bad files as scrontab.1 says.

The cadence test takes three real minutes (cron's resolution is a minute); it
runs beside the rest of the suite, which does not wait for it.
"""
from __future__ import annotations

import os
import re
import signal

import pytest

from tests.e2e.conftest import Cluster, wait_for

pytestmark = pytest.mark.long     # a minute or more: started first (tests/conftest.py)


@pytest.fixture(scope="module")
def cron(tmp_path_factory):
    root = tmp_path_factory.mktemp("scrontab")
    c = Cluster(root, nodes=2)
    yield from c.serving()


def scrontab(c: Cluster, *args: str, stdin: str | None = None):
    return c.run(["scrontab", *args], input=stdin)


def marks(path) -> list[tuple[str, float]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        kind, t = line.split()
        out.append((kind, float(t)))
    return out


@pytest.mark.timeout(330)
def test_every_minute_for_three_minutes_and_never_over_itself(cron, tmp_path):
    """Entry A (`*/1`, quick) runs in three distinct minutes. Entry B (every
    minute, but each run takes 70 s) never overlaps itself: the slot that
    falls inside a run is skipped, so its next run starts after the last one ended."""
    c = cron
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    tab = (f"#SCRON -o /dev/null -J quick\n*/1 * * * * echo start $(date +%s.%N) >> {a}\n"
           f"#SCRON -o /dev/null -J slow -t 5\n"
           f"* * * * * echo start $(date +%s.%N) >> {b}; sleep 70; echo end $(date +%s.%N) >> {b}\n")
    p = scrontab(c, "-", stdin=tab)
    assert p.returncode == 0, p.stderr
    assert scrontab(c, "-l").stdout == tab
    q = c.run(["squeue", "-h", "-o", "%j %T %r"], check=True).stdout.split("\n")
    assert sorted(q[:2]) == ["quick PENDING BeginTime", "slow PENDING BeginTime"], q
    wait_for("three runs of the quick entry",
             lambda: len([m for m in marks(a) if m[0] == "start"]) >= 3, 250)
    starts = [t for _, t in marks(a)]
    minutes = [int(t // 60) for t in starts]
    assert len(set(minutes)) == len(minutes), f"twice in a minute: {starts}"
    assert all(0 <= t % 60 < 30 for t in starts), f"not at the minute: {starts}"
    runs = marks(b)
    spans, open_start = [], None
    for kind, t in runs:
        if kind == "start":
            assert open_start is None, f"a run began while one was going: {runs}"
            open_start = t
        else:
            spans.append((open_start, t))
            open_start = None
    assert spans, f"the slow entry ran and ended at least once: {runs}"
    if open_start is not None and spans:
        assert open_start > spans[-1][1], "the next run started after the last one ended"
        assert open_start - spans[-1][0] >= 110, "the slot inside the run was skipped"
    # each run is an attempt of the same job: sacct -D lists them
    (job,) = [int(l.split()[0]) for l in c.run(["squeue", "-h", "-o", "%i %j"], check=True)
              .stdout.splitlines() if l.split()[1] == "quick"]
    rows = c.run(["sacct", "-D", "-X", "-n", "-P", "-j", str(job), "-o", "JobID,State"],
                 check=True).stdout.split()
    assert len([r for r in rows if r.endswith("|COMPLETED")]) >= 3, rows
    assert scrontab(c, "-r").returncode == 0
    wait_for("quick and slow gone or ending", lambda: "quick" not in c.run(
        ["squeue", "-h", "-o", "%j %T"], check=True).stdout, 20)


def test_a_bad_line_installs_nothing(cron):
    c = cron
    good = "#SCRON -o /dev/null\n@hourly true\n"
    assert scrontab(c, "-", stdin=good).returncode == 0
    jobs_before = c.run(["squeue", "-h", "-o", "%i"], check=True).stdout
    bad = "@hourly true\n61 * * * * true\nnonsense here\n#SCRON --bogus\n@daily true\n"
    p = scrontab(c, "-", stdin=bad)
    assert p.returncode == 1
    assert p.stderr.startswith("There are errors in your crontab.\n"), p.stderr
    assert re.findall(r"^scrontab: line (\d+): ", p.stderr, re.M) == ["2", "3", "5"], p.stderr
    assert "line 5: unrecognized option '--bogus'" in p.stderr, p.stderr
    assert "line 2: invalid time specification '61 * * * *'" in p.stderr, p.stderr
    assert scrontab(c, "-l").stdout == good, "nothing changed"
    assert c.run(["squeue", "-h", "-o", "%i"], check=True).stdout == jobs_before
    p = scrontab(c, "-", stdin="61 * * * * true\n")
    assert p.returncode == 1 and "invalid time specification" in p.stderr, p.stderr
    assert scrontab(c, "-r").returncode == 0
    p = scrontab(c, "-l")
    assert p.returncode == 1 and p.stderr.strip() == f"scrontab: no crontab for {os.environ.get('USER', 'root')}"


def test_a_restarted_controller_keeps_the_schedule(cron):
    c = cron
    assert scrontab(c, "-", stdin="#SCRON -o /dev/null -J daily\n@daily true\n").returncode == 0
    before = c.run(["squeue", "-h", "-o", "%i %j %T %r %S"], check=True).stdout
    assert " daily PENDING BeginTime " in before, before
    pid = c.pid_of("lingjund")
    os.kill(pid, signal.SIGTERM)
    wait_for("the controller gone", lambda: not _alive(pid), 30)
    c.restart("lingjund")
    wait_for("the controller back", lambda: c.run(["scontrol", "ping"]).returncode == 0, 30)
    assert c.run(["squeue", "-h", "-o", "%i %j %T %r %S"], check=True).stdout == before
    assert "@daily true" in scrontab(c, "-l").stdout
    assert scrontab(c, "-r").returncode == 0
    job = before.split()[0]
    assert c.state_of(int(job)) == "CANCELLED", "-r ends the pending entry"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True

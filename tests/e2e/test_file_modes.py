"""Nothing of the cluster's state is readable by users who should not read it.

The database holds every batch script and its environment; logs quote
requests and errors; agents' job dirs hold scripts and environments. On a
local cluster: the controller's directory 0700 with its database, WAL and
shared-memory files 0600, logs 0600 in a 0700 dir, agents' dirs traversable
but not listable with the job's spec root's alone; a job's own output keeps
the mode its submitter's umask asks for. Files left with looser modes by an
earlier run are tightened when the cluster starts again.
"""
from __future__ import annotations

import stat
from pathlib import Path

from tests.e2e.conftest import Cluster


def _mode(p: Path) -> str:
    return f"{stat.S_IMODE(p.stat().st_mode):04o}"


def test_state_database_logs_and_job_dirs_are_root_only(tmp_path):
    c = Cluster(tmp_path, nodes=1)
    c.up()
    try:
        out = c.work / "out.txt"
        job = c.sbatch("-o", str(out), "--export=ALL,WANDB_API_KEY=sekrit", "--wrap", "echo done; sleep 30")
        c.wait_state(job, "RUNNING")
        c.wait_file(out, contains="done")
        ctl = c.state / "controller"
        got = {str(p.relative_to(c.state)): _mode(p) for p in [
            ctl, ctl / "lingjund.db", ctl / "lingjund.db-wal", ctl / "lingjund.db-shm",
            c.state / "logs", *sorted((c.state / "logs").iterdir())]}
        want = {k: ("0700" if k in ("controller", "logs") else "0600") for k in got}
        assert got == want
        assert _mode(c.state) == "0711"
        node = Path(c.info()["agent_state_dirs"]["node1"])
        assert _mode(node) == "0711"
        jobdir = node / "jobs" / str(job)
        assert _mode(jobdir / "spec.json") == "0600" and "sekrit" in (jobdir / "spec.json").read_text()
        assert _mode(jobdir / "stepd.log") == "0600"
        assert _mode(out) == "0644"          # the job's own file: as its submitter's umask says
        c.run(["scancel", str(job)], check=True)
        c.wait_state(job, ("CANCELLED", "COMPLETED"))
    finally:
        c.down()
    # an earlier run's loose modes are tightened by the next start
    (c.state / "controller").chmod(0o755)
    (c.state / "controller" / "lingjund.db").chmod(0o644)
    (c.state / "logs" / "lingjund.log").chmod(0o644)
    c.up()
    try:
        assert _mode(c.state / "controller") == "0700"
        assert _mode(c.state / "controller" / "lingjund.db") == "0600"
        assert _mode(c.state / "logs" / "lingjund.log") == "0600"
    finally:
        c.down()

"""--time: a job over its limit is killed (SIGTERM, grace, SIGKILL) and ends TIMEOUT."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.long     # a minute or more: started first (tests/conftest.py)


def test_job_over_its_time_limit_ends_timeout(cluster):
    out = cluster.work / "tl.out"
    jid = cluster.sbatch("-t", "1", "-o", str(out), "--wrap",
                         "trap 'echo got TERM; exit 143' TERM; echo started; "
                         "while true; do sleep 1; done")
    cluster.wait_state(jid, "RUNNING")
    assert cluster.squeue(jid, "%l") == "1:00"
    cluster.wait_state(jid, "TIMEOUT", timeout=100)
    assert "got TERM" in out.read_text()
    acct = cluster.run(["sacct", "-j", str(jid), "--parsable2", "-n", "-o", "JobID,State"]).stdout
    assert f"{jid}|TIMEOUT" in acct.splitlines(), acct
    assert cluster.job_processes(jid) == []

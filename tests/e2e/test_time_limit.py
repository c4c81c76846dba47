"""--time: a job over its limit is killed (SIGTERM, grace, SIGKILL) and ends TIMEOUT."""
from __future__ import annotations

import re

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
    lines = out.read_text().splitlines()
    assert "got TERM" in lines, lines
    # slurmstepd's line, written before the script is signalled (tools grep for it)
    stop = [l for l in lines if l.startswith("slurmstepd-")]
    assert len(stop) == 1, lines
    assert re.fullmatch(rf"slurmstepd-(node\d): error: \*\*\* JOB {jid} ON \1 CANCELLED AT "
                        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d DUE TO TIME LIMIT \*\*\*", stop[0]), stop
    assert lines.index(stop[0]) < lines.index("got TERM"), lines
    acct = cluster.run(["sacct", "-j", str(jid), "--parsable2", "-n", "-o", "JobID,State"]).stdout
    assert f"{jid}|TIMEOUT" in acct.splitlines(), acct
    assert cluster.job_processes(jid) == []

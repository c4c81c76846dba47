"""sacct's time fields for jobs that never started, were cancelled while
pending, or were requeued, as Slurm 22.05 shows them (each case run against
real Slurm side by side):

    held, then cancelled      Eligible=Unknown  Start=None  End=<cancel>  Elapsed=00:00:00
    pending, then cancelled   Eligible=<submit> Start=None  End=<cancel>  Elapsed=00:00:00
    on a dependency, cancelled Eligible=Unknown Start=None  End=<cancel>  Elapsed=00:00:00
    pending                   Start=Unknown End=Unknown Elapsed=00:00:00
    requeued                  the new run: Submit=<requeue time>; with -D the first run's
                              row keeps the first Submit and its own Start/End.
"""
from __future__ import annotations

import time

TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
FIELDS = "JobID,State,Submit,Eligible,Start,End,Elapsed"


def _row(cluster, jid: int, *extra: str) -> list[dict[str, str]]:
    p = cluster.run(["sacct", "-X", "-n", "-P", "-j", str(jid), "-o", FIELDS, *extra], check=True)
    return [dict(zip(FIELDS.split(","), line.split("|"))) for line in p.stdout.splitlines()]


def _epoch(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def test_cancelled_before_it_ever_started(cluster):
    held = cluster.sbatch("-H", "--wrap", "true")
    blocker = cluster.sbatch("-N", str(cluster.nodes), "--exclusive", "--wrap", "sleep 60")
    cluster.wait_state(blocker, "RUNNING")
    waiting = cluster.sbatch("-N", "1", "--wrap", "true")
    dependent = cluster.sbatch(f"--dependency=afterok:{blocker}", "--wrap", "true")
    time.sleep(1)
    pending = _row(cluster, waiting)[0]
    assert (pending["State"], pending["Start"], pending["End"], pending["Elapsed"]) == (
        "PENDING", "Unknown", "Unknown", "00:00:00")
    cluster.run(["scancel", str(held), str(waiting), str(dependent)], check=True)
    for jid in (held, waiting, dependent):
        cluster.wait_state(jid, "CANCELLED")
    cluster.run(["scancel", str(blocker)], check=True)

    rows = {jid: _row(cluster, jid)[0] for jid in (held, waiting, dependent)}
    for jid, row in rows.items():
        assert row["State"].startswith("CANCELLED"), row
        assert (row["Start"], row["Elapsed"]) == ("None", "00:00:00"), row
        assert _epoch(row["End"]) >= _epoch(row["Submit"]), row
    assert rows[held]["Eligible"] == "Unknown"
    assert rows[dependent]["Eligible"] == "Unknown"
    assert rows[waiting]["Eligible"] == rows[waiting]["Submit"]


def test_a_requeued_job_is_submitted_again(cluster):
    jid = cluster.sbatch("--wrap", "sleep 300")
    cluster.wait_state(jid, "RUNNING")
    first = _row(cluster, jid)[0]
    time.sleep(1.5)
    cluster.run(["scontrol", "requeue", str(jid)], check=True)
    cluster.wait_state(jid, ("PENDING", "RUNNING"))
    now = _row(cluster, jid)[0]
    assert _epoch(now["Submit"]) > _epoch(first["Submit"]), (first, now)
    runs = _row(cluster, jid, "-D")
    assert [r["State"] for r in runs][0] == "REQUEUED", runs
    assert runs[0]["Submit"] == first["Submit"] and runs[0]["Start"] == first["Start"], runs
    assert runs[0]["End"] != "Unknown" and runs[-1]["Submit"] == now["Submit"], runs
    cluster.run(["scancel", str(jid)], check=True)

"""A 4-node local cluster runs gang jobs exactly as Slurm would (issue #2, 1-3)."""
from __future__ import annotations

import re
import time

import psutil


def test_four_node_job_runs_srun_on_every_node(cluster):
    gate = cluster.work / "four-gate"
    script = cluster.work / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH -J fournode\n#SBATCH -o four-%j.out\n"
                      f"srun hostname\nsrun env\nwhile [ ! -e {gate} ]; do sleep 0.1; done\n")
    jid = cluster.sbatch("-N", "4", str(script))
    try:
        cluster.wait_state(jid, "RUNNING")
        assert cluster.run(["squeue", "-h", "-j", str(jid), "-o", "%T %N"]).stdout.strip() \
            == "RUNNING node[1-4]"
    finally:
        gate.touch()
    cluster.wait_state(jid, "COMPLETED", timeout=60)
    out = (cluster.work / f"four-{jid}.out").read_text()
    hostnames = out.splitlines()[:4]
    assert sorted(hostnames) == ["node1", "node2", "node3", "node4"], out
    procids = sorted(int(m) for m in re.findall(r"^SLURM_PROCID=(\d+)$", out, re.M))
    assert procids == [0, 1, 2, 3], out
    assert set(re.findall(r"^SLURM_JOB_NODELIST=(.*)$", out, re.M)) == {"node[1-4]"}
    assert set(re.findall(r"^SLURM_NTASKS=(.*)$", out, re.M)) == {"4"}
    acct = cluster.run(["sacct", "-j", str(jid), "--parsable2", "-o", "JobID,State,ExitCode"]).stdout
    assert f"{jid}|COMPLETED|0:0" in acct.splitlines(), acct


def test_squeue_shows_running_gang_on_all_nodes(cluster):
    flag = cluster.work / "release-running"
    jid = cluster.sbatch("-N", "4", "-o", "/dev/null", "--wrap",
                         f"while [ ! -e {flag} ]; do sleep 0.1; done")
    try:
        cluster.wait_state(jid, "RUNNING")
        line = cluster.run(["squeue", "-h", "-j", str(jid), "-o", "%T %D %N"]).stdout.strip()
        assert line == "RUNNING 4 node[1-4]"
    finally:
        flag.touch()
    cluster.wait_state(jid, "COMPLETED")


def test_gang_waits_for_all_its_nodes_then_starts_whole(cluster):
    hold = cluster.work / "release-gang"
    # --exclusive: the 3 nodes are whole (without it, a 1-CPU task per node leaves room
    # on each, and Slurm, like us, would share them).
    big = cluster.sbatch("-N", "3", "--exclusive", "-o", "/dev/null", "--wrap",
                         f"while [ ! -e {hold} ]; do sleep 0.1; done")
    cluster.wait_state(big, "RUNNING")
    out = cluster.work / "small-%j.out"
    small = cluster.sbatch("-N", "2", "-o", str(out), "--wrap", "srun hostname")
    try:
        for _ in range(10):  # a few scheduling passes: it never starts, even partly
            assert cluster.squeue(small, "%T %r") == "PENDING Resources"
            assert cluster.job_processes(small) == []
            time.sleep(0.3)
        free = cluster.run(["sinfo", "-h", "-N", "-o", "%N %t"]).stdout.split()
        assert free.count("idle") == 1, free
    finally:
        hold.touch()
    cluster.wait_state(small, "COMPLETED", timeout=60)
    text = (cluster.work / f"small-{small}.out").read_text().split()
    assert len(text) == 2 and len(set(text)) == 2, text


def test_scancel_kills_every_task_on_every_node(cluster):
    started = cluster.work / "cancel-started"
    jid = cluster.sbatch("-N", "3", "-o", str(cluster.work / "cancel.out"), "--wrap",
                         f"srun bash -c 'touch {started}.$SLURM_PROCID; sleep 300'")
    cluster.wait_state(jid, "RUNNING")
    deadline = time.time() + 30
    while not all((cluster.work / f"cancel-started.{r}").exists() for r in range(3)):
        assert time.time() < deadline, "tasks did not start"
        time.sleep(0.1)
    procs = cluster.job_processes(jid)
    assert len(procs) >= 4  # the batch shell, srun and three task shells
    cluster.run(["scancel", str(jid)], check=True)
    cluster.wait_state(jid, "CANCELLED", timeout=30)
    gone, alive = psutil.wait_procs(procs, timeout=10)
    assert alive == [], alive
    assert cluster.job_processes(jid) == []
    acct = cluster.run(["sacct", "-j", str(jid), "-X", "--parsable2", "-n", "-o", "State"]).stdout
    assert acct.startswith("CANCELLED"), acct


def test_failing_job_shows_failed_and_exit_code(cluster):
    jid = cluster.sbatch("-o", "/dev/null", "--wrap", "exit 3")
    cluster.wait_state(jid, "FAILED")
    acct = cluster.run(["sacct", "-j", str(jid), "--parsable2", "-o", "JobID,State,ExitCode"]).stdout
    assert f"{jid}|FAILED|3:0" in acct.splitlines(), acct

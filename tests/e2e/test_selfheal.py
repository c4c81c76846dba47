"""Training that heals itself, end to end: one rank of a 4-node job stops
(SIGSTOP, as a wedged machine stops it); the hang names that rank and node,
the node is drained as a suspect, the job restarts on the other nodes plus
a free one and resumes from its checkpoint directory. The suspect's extended
check (probes and TCP bandwidth with healthy peers) runs once its processes
are gone; here the bandwidth floor is set above what loopback gives, so it
fails and the node stays drained for all to see (the passing case:
tests/lingjund/test_quarantine.py, tests/agent/test_sanity_reach.py)."""
from __future__ import annotations

import signal
import sys
import time

import psutil
import pytest

from lingjun import slurm
from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.test_faulttol import checkpoint_dir, running_on

HANG_TIMEOUT = 4

TRAIN = """\
import os, sys, time
import lingjun.heartbeat
rank = int(os.environ["SLURM_PROCID"])
ck = os.environ["LINGJUN_CHECKPOINT_DIR"]
step_file = os.path.join(ck, "step")
lingjun.heartbeat.start(0.5)         # waiting ranks keep beating; a stopped one does not
start = int(open(step_file).read()) if os.path.exists(step_file) else 0
print(f"rank {rank} on {os.environ['SLURMD_NODENAME']} world {os.environ['SLURM_NTASKS']} "
      f"from {start}", flush=True)
for i in range(start, int(sys.argv[1])):
    time.sleep(0.2)
    if rank == 0:
        with open(step_file + ".tmp", "w") as f:
            f.write(str(i + 1))
        os.replace(step_file + ".tmp", step_file)
print(f"rank {rank} done", flush=True)
"""


@pytest.fixture(scope="module")
def shc(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("selfheal"), nodes=5, heartbeat_timeout=3.0,
                up_args=("--restart-backoff", "0.5", "--faulttol", "suspect_check_min_mbps=1e9",
                         "--sanity", "interval_s=0"))
    c.up()
    (c.work / "train.py").write_text(TRAIN)
    try:
        yield c
    finally:
        c.down()


def task_of(c: Cluster, job_id: int, rank: int) -> tuple[psutil.Process, str] | None:
    """The process of srun task ``rank`` of the job, and its node."""
    for p in psutil.process_iter():
        try:
            env = p.environ()
            if (env.get("SLURM_JOB_ID") == str(job_id) and env.get("SLURM_PROCID") == str(rank)
                    and "train.py" in " ".join(p.cmdline())):
                return p, env["SLURMD_NODENAME"]
        except psutil.Error:
            continue
    return None


def node_reason(c: Cluster, node: str) -> str:
    out = c.run(["scontrol", "show", "node", node]).stdout
    return out.split("Reason=", 1)[1].split(" [")[0].strip() if "Reason=" in out else ""


def test_a_stopped_rank_is_named_its_node_quarantined_and_the_job_resumes_elsewhere(shc):
    c = shc
    jid = c.sbatch("-N", "4", f"--hang-timeout=0:0{HANG_TIMEOUT}", "--max-restarts=2",
                   "-o", "train-%j.out", "--open-mode=append", input=(
                       "#!/bin/sh\n"
                       'echo "run ${SLURM_RESTART_COUNT:-0} on $SLURM_JOB_NODELIST" '
                       ">> $LINGJUN_CHECKPOINT_DIR/log\n"
                       f"srun -N4 -n4 {sys.executable} train.py 60\n"))
    first = wait_for("job running on 4 nodes", lambda: running_on(c, jid), 30)
    step = checkpoint_dir(c, jid) / "step"
    wait_for("training past step 5",
             lambda: step.exists() and int(step.read_text() or 0) >= 5, 30)
    proc, victim = wait_for("rank 2's process", lambda: task_of(c, jid, 2), 15)
    assert victim in first

    t0 = time.time()
    proc.send_signal(signal.SIGSTOP)
    ev = wait_for("the hang names rank 2", lambda: (lambda out: out if "rank 2 on" in out else "")(
        c.run(["lingjun", "events", str(jid)]).stdout), HANG_TIMEOUT + 8)
    named = time.time() - t0
    assert named < HANG_TIMEOUT + 4, f"named after {named:.1f} s"
    assert f"rank 2 on {victim} silent for " in ev and "; others active" in ev, ev
    second = wait_for("job running again without the suspect",
                      lambda: (lambda n: n if n and victim not in n else [])(running_on(c, jid)), 30)
    assert len(second) == 4 and set(second) - set(first), second
    c.wait_state(jid, "COMPLETED", timeout=60)
    log = (checkpoint_dir(c, jid) / "log").read_text().splitlines()
    assert log == [f"run 0 on {slurm.compress_hostlist(first)}",
                   f"run 1 on {slurm.compress_hostlist(second)}"], log
    out = (c.work / f"train-{jid}.out").read_text()
    resumed = [int(l.split(" from ")[1]) for l in out.splitlines()
               if l.startswith("rank 0 on") and " from " in l]
    assert resumed[0] == 0 and resumed[1] >= 5, f"want a resumed step, got {resumed}\n{out}"
    assert out.count("done") == 4, out

    # its processes gone, the suspect got its extended check, failed it and stays drained
    reason = wait_for("the check's verdict", lambda: (lambda r: r if "extended" in r else "")(
        node_reason(c, victim)), 30)
    assert reason.startswith("suspect: failed the extended check: tcp_bandwidth: node"), reason
    assert "Mbit/s, want 1e+09" in reason, reason
    sinfo_r = c.run(["sinfo", "-R", "-h", "-o", "%n|%E"]).stdout.splitlines()
    assert [l for l in sinfo_r if l.startswith(victim + "|")] == [f"{victim}|{reason}"], sinfo_r
    health = c.run(["lingjun", "health", victim], check=True).stdout
    assert f"suspect: job {jid} rank 2 silent for" in health or f"job {jid} rank 2 silent" in health, health
    c.run(["scontrol", "update", f"NodeName={victim}", "State=RESUME"], check=True)
    assert node_reason(c, victim) in ("", "none")

"""Training that heals itself, end to end: one rank of a 4-node job stops
(SIGSTOP, as a wedged machine stops it); the hang names that rank and node,
the node is drained as a suspect, the job (--requeue=expedite) restarts at
once on the other nodes plus the partition's spare and resumes from its
checkpoint directory. The suspect's extended
check (probes and TCP bandwidth with healthy peers) runs once its processes
are gone; here the bandwidth floor is set above what loopback gives, so it
fails and the node stays drained for all to see (the passing case:
tests/lingjund/test_quarantine.py, tests/agent/test_sanity_reach.py)."""
from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from lingjun import slurm
from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.test_faulttol import checkpoint_dir, running_on

pytestmark = pytest.mark.long     # a minute or more: started first (tests/conftest.py)

HANG_TIMEOUT = 4
ELASTIC_HANG_TIMEOUT = 6
# Each srun task beats from its start, in the shell (the heartbeat contract needs no
# Lingjun import: torchrun's python has only torch), so torch's slow start here is
# not silence; a stopped task stops beating.
BEATING = ("sh -c 'beat() { while :; do touch \"$LINGJUN_HEARTBEAT_DIR/rank.$SLURM_PROCID\"; "
           "sleep 0.5; done; }; beat & b=$!; \"$@\"; rc=$?; kill $b; exit $rc' beat")

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
                up_args=("--restart-backoff", "30", "--spare-nodes", "1",
                         "--faulttol", "suspect_check_min_mbps=1e9",
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
    jid = c.sbatch("-N", "4", f"--hang-timeout=0:0{HANG_TIMEOUT}", "--requeue=expedite",
                   "-o", "train-%j.out", "--open-mode=append", input=(
                       "#!/bin/sh\n"
                       'echo "run ${SLURM_RESTART_COUNT:-0} on $SLURM_JOB_NODELIST" '
                       ">> $LINGJUN_CHECKPOINT_DIR/log\n"
                       f"srun -N4 -n4 {sys.executable} train.py 60\n"))
    first = wait_for("job running on 4 nodes", lambda: running_on(c, jid), 30)
    assert first == ["node1", "node2", "node3", "node4"], "node5 is the spare"
    quiet = c.sbatch("--exclusive", "-o", "/dev/null", "--wrap", "sleep 60")  # only node5 is whole
    time.sleep(1.0)
    assert c.squeue(quiet, "%T %r") == "PENDING Resources", "a normal job does not take the spare"
    c.run(["scancel", str(quiet)], check=True)
    step = checkpoint_dir(c, jid) / "step"
    wait_for("training past step 5",
             lambda: step.exists() and int(step.read_text() or 0) >= 5, 30)
    proc, victim = wait_for("rank 2's process", lambda: task_of(c, jid, 2), 15)
    assert victim in first

    t0 = time.time()
    proc.send_signal(signal.SIGSTOP)
    ev = wait_for("the hang names rank 2", lambda: (lambda out: out if "rank 2 on" in out else "")(
        c.run(["lingjun", "events", str(jid)]).stdout), HANG_TIMEOUT + 15)
    named = time.time() - t0
    assert f"rank 2 on {victim} silent for " in ev and "; others active" in ev, ev
    # judged one heartbeat after the timeout (the wall time here adds a loaded machine's delays)
    silent = int(ev.split(f"rank 2 on {victim} silent for ")[1].split()[0])
    assert silent <= HANG_TIMEOUT + 2, f"judged after {silent} s of silence ({named:.1f} s wall)"
    second = wait_for("job running again without the suspect",
                      lambda: (lambda n: n if n and victim not in n else [])(running_on(c, jid)), 30)
    took = time.time() - t0
    assert second == sorted(set(first) - {victim} | {"node5"}, key=lambda n: int(n[4:])), second
    assert took < HANG_TIMEOUT + 8, f"running again after {took:.1f} s (backoff is 30 s: not used)"
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


ELASTIC = """\
import os, sys, time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")       # torchrun's world: WORLD_SIZE, RANK, MASTER_*
rank, world = dist.get_rank(), dist.get_world_size()
ck = os.environ["LINGJUN_CHECKPOINT_DIR"]
step_file = os.path.join(ck, "step")
start = int(open(step_file).read()) if os.path.exists(step_file) else 0
print(f"rank {rank} world {world} WORLD_SIZE={os.environ['WORLD_SIZE']} "
      f"SLURM_NNODES={os.environ['SLURM_NNODES']} from {start} "
      f"rdzv {os.environ['TORCHELASTIC_RUN_ID']}", flush=True)
for i in range(start, int(sys.argv[1])):
    t = torch.ones(1)
    dist.all_reduce(t)
    assert int(t.item()) == world
    time.sleep(0.1)
    if rank == 0:
        with open(step_file + ".tmp", "w") as f:
            f.write(str(i + 1))
        os.replace(step_file + ".tmp", step_file)
dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
"""


@pytest.fixture(scope="module")
def elastic(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("elastic"), nodes=4, heartbeat_timeout=3.0,
                up_args=("--faulttol", "suspect_check_min_mbps=1e9", "--sanity", "interval_s=0"))
    c.up()
    (c.work / "elastic.py").write_text(ELASTIC)
    try:
        yield c
    finally:
        c.down()


def stop_task(c: Cluster, job_id: int, rank: int) -> str:
    """SIGSTOP every process of srun task ``rank`` of the job (its shell, torchrun,
    torchrun's worker), as a wedged machine would stop them; its node."""
    node = ""
    for p in psutil.process_iter():
        try:
            env = p.environ()
            if (env.get("SLURM_JOB_ID") == str(job_id) and env.get("SLURM_PROCID") == str(rank)
                    and env.get("SLURM_STEP_ID") not in (None, "batch")
                    and p.name() != "lingjun-taskd"):
                p.send_signal(signal.SIGSTOP)
                node = env["SLURMD_NODENAME"]
        except psutil.Error:
            continue
    return node


def test_an_elastic_job_restarts_on_fewer_nodes_with_the_world_for_them(elastic):
    """-N 3-4 on 4 nodes, no spare: a stopped rank's node is quarantined and the
    job, expedited, restarts on the 3 nodes left; torchrun (c10d rendezvous at
    the endpoint the first node's agent hosts) forms a world of 3."""
    c = elastic
    torchrun = Path(sys.executable).parent / "torchrun"
    # a rank is timed from its task's start: torchrun and torch take seconds to start here
    jid = c.sbatch("-N", "3-4", "--ntasks-per-node=1", "--launcher=torchrun",
                   f"--hang-timeout=0:{ELASTIC_HANG_TIMEOUT}", "--requeue=expedite",
                   "-o", "elastic-%j.out", "--open-mode=append", input=(
                       "#!/bin/sh\n"
                       'echo "run ${SLURM_RESTART_COUNT:-0} nodes=$SLURM_NNODES '
                       'job_nodes=$SLURM_JOB_NUM_NODES" >> $LINGJUN_CHECKPOINT_DIR/log\n'
                       f"srun {BEATING} {torchrun} elastic.py 24\n"))
    first = wait_for("job running on 4 nodes", lambda: running_on(c, jid), 30)
    assert len(first) == 4, first
    step = checkpoint_dir(c, jid) / "step"
    wait_for("training past step 3", lambda: step.exists() and int(step.read_text() or 0) >= 3, 60)
    victim = stop_task(c, jid, 2)
    assert victim, "rank 2's processes"
    second = wait_for("job running again on 3 nodes",
                      lambda: (lambda n: n if n and victim not in n else [])(running_on(c, jid)),
                      ELASTIC_HANG_TIMEOUT + 20)
    assert second == [n for n in first if n != victim], second
    c.wait_state(jid, "COMPLETED", timeout=90)
    log = (checkpoint_dir(c, jid) / "log").read_text().splitlines()
    assert log == ["run 0 nodes=4 job_nodes=4", "run 1 nodes=3 job_nodes=3"], log
    out = (c.work / f"elastic-{jid}.out").read_text()
    starts = sorted(l for l in out.splitlines() if " world " in l)
    assert [l.split(" from ")[0] for l in starts if "world 3" in l] == [
        f"rank {r} world 3 WORLD_SIZE=3 SLURM_NNODES=3" for r in range(3)], out
    # torchrun's c10d rendezvous at the agent-hosted endpoint, one per run and step
    runs = {l.split(" rdzv ")[1].rsplit(".", 1)[0] for l in starts}
    assert runs == {f"{jid}.0", f"{jid}.1"}, runs
    resumed = [int(l.split(" from ")[1].split()[0]) for l in starts if "world 3" in l]
    assert min(resumed) >= 3, f"want a resumed step, got {resumed}"
    assert sum("done" in l for l in out.splitlines()) == 3, out
    ev = c.run(["lingjun", "events", str(jid)], check=True).stdout
    assert f"rank 2 on {victim} silent for " in ev, ev

"""Fault tolerance end to end: a node lost mid-run, a hung job, a node that died
while the controller was down. Real agents are killed with SIGKILL, with the
job processes they ran, as a machine that loses power would lose them."""
from __future__ import annotations

import signal
import time
from pathlib import Path

import psutil
import pytest

from lingjun import slurm
from lingjun_agent.launcher.procs import node_identity
from tests.e2e.conftest import Cluster, wait_for

pytestmark = pytest.mark.long     # a minute or more: started first (tests/conftest.py)

HEARTBEAT_TIMEOUT = 3.0
BACKOFF = 1.0

RESUMING = """#!/bin/bash
#SBATCH -N 2 --requeue -o /dev/null
ck=$LINGJUN_CHECKPOINT_DIR
n=$(cat $ck/counter 2>/dev/null || echo 0)
echo "run restart=${SLURM_RESTART_COUNT:-0} from=$n nodes=$SLURM_JOB_NODELIST" >> $ck/log
srun -N2 -n2 sleep 300 &
while [ $n -lt %(target)d ]; do n=$((n+1)); echo $n > $ck/counter; sleep 0.25; done
echo done >> $ck/log
"""


@pytest.fixture(scope="module")
def ftc(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("faulttol"), heartbeat_timeout=HEARTBEAT_TIMEOUT,
                up_args=("--restart-backoff", str(BACKOFF)))
    c.up()
    try:
        yield c
    finally:
        c.down()


def checkpoint_dir(c: Cluster, job_id: int) -> Path:
    return c.state / "checkpoints" / str(job_id)     # lingjun up: beside the private controller dir


def node_processes(c: Cluster, node: str, job_id: int) -> list[psutil.Process]:
    mark = f"{node_identity(node, c.info()['agent_state_dirs'][node])}:{job_id}"
    out = []
    for p in psutil.process_iter():
        try:
            env = p.environ()
        except psutil.Error:
            continue
        if mark in (env.get("LINGJUN_JOB_MARK"), env.get("LINGJUN_STEPD_MARK")):
            out.append(p)
    return out


def lose_node(c: Cluster, node: str, job_id: int) -> None:
    """kill -9 the node's agent and every process of the job it ran."""
    c.kill9(node)
    for p in node_processes(c, node, job_id):
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass


def counter(c: Cluster, job_id: int) -> int:
    try:
        return int((checkpoint_dir(c, job_id) / "counter").read_text() or 0)
    except (OSError, ValueError):
        return 0


def running_on(c: Cluster, job_id: int) -> list[str]:
    state, _, nodes = c.squeue(job_id, "%T %N").partition(" ")
    return slurm.expand_hostlist(nodes) if state == "RUNNING" and nodes else []


def moved(c: Cluster, job_id: int, lost: str) -> list[str]:
    """The job's nodes once it runs again without the lost node, else []."""
    nodes = running_on(c, job_id)
    return nodes if lost not in nodes else []


def test_a_lost_node_requeues_the_whole_gang_which_resumes_elsewhere(ftc):
    c = ftc
    jid = c.sbatch(input=RESUMING % {"target": 32})
    first = wait_for("job running on 2 nodes", lambda: running_on(c, jid), 30)
    victim = first[1]          # not the batch host: the script itself must be stopped too
    wait_for("counter past 6", lambda: counter(c, jid) >= 6, 30)
    wait_for("srun task on the victim", lambda: node_processes(c, victim, jid), 15)
    old = c.job_processes(jid)
    assert old, "attempt 1 has processes"

    t0 = time.time()
    lose_node(c, victim, jid)
    second = wait_for("job running again without the lost node",
                      lambda: moved(c, jid, victim), 30)
    took = time.time() - t0
    assert took < HEARTBEAT_TIMEOUT + 2 * 2.0 + BACKOFF + 4, f"restart took {took:.1f} s"
    assert c.squeue(jid, "%r") == "None"
    restarts = c.run(["scontrol", "show", "job", str(jid)]).stdout
    assert "Restarts=1" in restarts, restarts

    c.wait_state(jid, "COMPLETED", timeout=60)
    log = (checkpoint_dir(c, jid) / "log").read_text().splitlines()
    assert log[0].startswith("run restart=0 from=0 "), log
    resumed = int(log[1].split("from=")[1].split()[0])
    assert log[1].startswith("run restart=1 ") and resumed >= 6, f"want a resumed counter, got {log}"
    assert log[2:] == ["done"], log
    assert counter(c, jid) == 32
    alive = [p.pid for p in old if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"processes of attempt 1 still run: {alive}"

    ev = c.run(["lingjun", "events", str(jid)], check=True).stdout
    assert f"node {victim} lost (Not responding)" in ev, ev
    assert "restart 1 of 5" in ev and "attempt 2 started on " + slurm.compress_hostlist(second) in ev, ev
    runs = c.run(["sacct", "-D", "-X", "-n", "-P", "-j", str(jid), "-o", "JobID,State,NodeList"],
                 check=True).stdout.split()
    assert runs == [f"{jid}|NODE_FAIL|{slurm.compress_hostlist(first)}",
                    f"{jid}|COMPLETED|{slurm.compress_hostlist(second)}"], runs
    plain = c.run(["sacct", "-X", "-n", "-P", "-j", str(jid), "-o", "JobID,State"], check=True).stdout
    assert plain.split() == [f"{jid}|COMPLETED"], plain

    # The node comes back by registering; it takes work again.
    c.restart(victim)
    c.wait_nodes_up()


def test_a_job_that_stops_writing_is_restarted_and_one_without_hang_timeout_is_left_alone(ftc):
    c = ftc
    hung = c.sbatch("--hang-timeout=0:04", "--max-restarts=1", "--open-mode=append",
                    "-o", "hung-%j.out", "--wrap", "echo run ${SLURM_RESTART_COUNT:-0}; sleep 300")
    beating = c.sbatch("--hang-timeout=0:04", "-o", "/dev/null", "--wrap",
                       "for i in $(seq 9); do touch $LINGJUN_HEARTBEAT_FILE; sleep 1; done")
    quiet = c.sbatch("-o", "/dev/null", "--wrap", "sleep 9")
    c.wait_state(hung, "FAILED", timeout=45)
    out = (c.work / f"hung-{hung}.out").read_text().split("\n")
    assert out[:2] == ["run 0", "run 1"], out
    ev = c.run(["lingjun", "events", str(hung)], check=True).stdout
    assert ev.count("hang detected: no output or heartbeat") == 2, ev
    assert "limit of 1 reached" in ev, ev
    runs = c.run(["sacct", "-D", "-X", "-n", "-P", "-j", str(hung), "-o", "State"], check=True).stdout
    assert runs.split() == ["FAILED", "FAILED"], runs
    for jid in (beating, quiet):
        c.wait_state(jid, "COMPLETED", timeout=30)
        assert "Restarts=0" in c.run(["scontrol", "show", "job", str(jid)]).stdout
        assert "hang" not in c.run(["lingjun", "events", str(jid)]).stdout


def test_a_node_that_died_while_the_controller_was_down_is_handled_when_it_returns(ftc):
    c = ftc
    jid = c.sbatch(input=RESUMING % {"target": 24})
    first = wait_for("job running on 2 nodes", lambda: running_on(c, jid), 30)
    wait_for("counter past 4", lambda: counter(c, jid) >= 4, 30)
    c.kill9("lingjund")
    victim = first[0]          # the batch host this time
    lose_node(c, victim, jid)
    c.restart("lingjund")
    wait_for("job running again without the lost node",
             lambda: moved(c, jid, victim), 40)
    c.wait_state(jid, "COMPLETED", timeout=60)
    log = (checkpoint_dir(c, jid) / "log").read_text().splitlines()
    assert [l.split()[1] for l in log[:2]] == ["restart=0", "restart=1"], log
    assert "lost (Not responding)" in c.run(["lingjun", "events", str(jid)]).stdout
    c.restart(victim)
    c.wait_nodes_up()


def test_a_lost_nodes_task_is_fenced_before_the_job_moves_and_the_agent_returns_to_service(ftc):
    c = ftc
    jid = c.sbatch("-N", "2", "--requeue", "-o", "/dev/null", "--wrap", "srun -N2 sleep 300")
    first = wait_for("job running on 2 nodes", lambda: running_on(c, jid), 30)
    victim = first[1]
    left = wait_for("srun task on the victim", lambda: node_processes(c, victim, jid), 15)
    c.kill9(victim)            # the agent only: its task runs on, unseen (a cut cable)
    wait_for("job running again without the lost node", lambda: moved(c, jid, victim), 30)
    # the node's lease lapsed before the job could move: its fence keeper stopped the task
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in left), \
        "the lost node's task still runs while the job runs elsewhere"
    c.restart(victim)
    c.wait_nodes_up()
    assert c.state_of(jid) == "RUNNING" and victim not in running_on(c, jid)
    c.run(["scancel", str(jid)], check=True)
    c.wait_state(jid, "CANCELLED", timeout=30)

"""Fencing end to end: nothing of a job runs twice, and nothing of it outlives
its end, with real agents frozen (SIGSTOP) or killed (kill -9) on a local
cluster with a short heartbeat timeout.

An attempt's processes are told apart by ``SLURM_RESTART_COUNT`` in their
environment (the batch script, srun, and the tasks srun starts all carry
it); a sampler thread looks at every process every 0.2 s.
"""
from __future__ import annotations

import os
import random
import signal
import threading
import time

import psutil
import pytest

from lingjun import slurm
from lingjun_agent.launcher.procs import node_identity
from tests.e2e.conftest import Cluster, wait_for

TIMEOUT = 3.0          # heartbeat timeout; the interval is 1 s (lingjun up: timeout / 3)
INTERVAL = 1.0
KILL_WAIT = 2.0        # conftest's --kill-wait: the fence grace
MARGIN = KILL_WAIT + 2.0   # [controller] fence_margin_s derived: grace + 2 s


@pytest.fixture(scope="module")
def fc(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("fencing"), heartbeat_timeout=TIMEOUT,
                up_args=("--restart-backoff", "0.5"))
    c.up()
    try:
        yield c
    finally:
        c.down()


def marks(c: Cluster, job_id: int) -> dict[str, str]:
    """marker value -> node, for every node of the cluster."""
    return {f"{node_identity(n, d)}:{job_id}": n for n, d in c.info()["agent_state_dirs"].items()}


def attempts_alive(c: Cluster, job_id: int, by_mark: dict[str, str]) -> dict[int, set[str]]:
    """restart count -> nodes where a process of that attempt lives."""
    out: dict[int, set[str]] = {}
    for p in psutil.process_iter():
        try:
            env = p.environ()
            node = by_mark.get(env.get("LINGJUN_JOB_MARK", ""))
            if node is None or p.status() == psutil.STATUS_ZOMBIE:
                continue
            out.setdefault(int(env.get("SLURM_RESTART_COUNT", "0") or 0), set()).add(node)
        except (psutil.Error, ValueError):
            continue
    return out


class Sampler(threading.Thread):
    """Every 0.2 s: which attempts of the job have live processes."""

    def __init__(self, c: Cluster, job_id: int):
        super().__init__(daemon=True)
        self.c, self.job_id = c, job_id
        self.by_mark = marks(c, job_id)
        self.samples: list[tuple[float, dict[int, set[str]]]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.samples.append((time.time(), attempts_alive(self.c, self.job_id, self.by_mark)))
            self.done.wait(0.2)

    def stop(self) -> None:
        self.done.set()
        self.join(10)

    def overlaps(self) -> list:
        return [(round(t, 1), a) for t, a in self.samples if len(a) > 1]

    def last_seen(self, attempt: int, node: str) -> float | None:
        seen = [t for t, a in self.samples if node in a.get(attempt, ())]
        return max(seen) if seen else None

    def first_seen(self, attempt: int) -> float | None:
        seen = [t for t, a in self.samples if attempt in a]
        return min(seen) if seen else None


def running_on(c: Cluster, job_id: int) -> list[str]:
    state, _, nodes = c.squeue(job_id, "%T %N").partition(" ")
    return slurm.expand_hostlist(nodes) if state == "RUNNING" and nodes else []


def node_state(c: Cluster, node: str) -> str:
    return c.run(["sinfo", "-h", "-n", node, "-o", "%t"]).stdout.strip()


@pytest.mark.parametrize("how, which", [("SIGSTOP", 1), ("kill -9", 0)],
                         ids=["the other node's agent frozen", "the batch host's agent killed"])
def test_a_silent_agent_never_lets_two_attempts_run_at_once(fc, how, which):
    c = fc
    c.wait_nodes_up()
    jid = c.sbatch("-N", "2", "--requeue", "-o", "/dev/null", "--wrap", "srun -N2 -n2 sleep 300")
    first = wait_for("job running on 2 nodes", lambda: running_on(c, jid), 30)
    victim = first[which]        # node 1: its srun task has no supervisor; node 0: the script's
    by_mark = marks(c, jid)
    wait_for("attempt 0 on both nodes",
             lambda: attempts_alive(c, jid, by_mark).get(0) == set(first), 20)
    sampler = Sampler(c, jid)
    sampler.start()
    pid = c.pid_of(victim)
    t0 = time.time()
    if how == "SIGSTOP":
        os.kill(pid, signal.SIGSTOP)
    else:
        c.kill9(victim)
    try:
        wait_for(f"{victim} DOWN", lambda: node_state(c, victim).startswith("down"), 20)
        down = time.time() - t0
        second = wait_for("attempt 1 running without the silent node",
                          lambda: victim not in running_on(c, jid) and running_on(c, jid), 40)
        wait_for("attempt 1's processes", lambda: 1 in attempts_alive(c, jid, by_mark), 20)
        time.sleep(1.0)
    finally:
        sampler.stop()
        if how == "SIGSTOP":
            os.kill(pid, signal.SIGCONT)
        else:
            c.restart(victim)
    gone = sampler.last_seen(0, victim)
    started = sampler.first_seen(1)
    print(f"\n{how} {victim}: DOWN after {down:.1f} s; attempt 0 last seen there "
          f"{gone - t0:.1f} s and attempt 1 first seen {started - t0:.1f} s after; "
          f"{len(sampler.samples)} samples, {len(sampler.overlaps())} overlapping")
    assert sampler.overlaps() == [], f"two attempts alive at once: {sampler.overlaps()[:5]}"
    assert gone - t0 < TIMEOUT + KILL_WAIT + 1.5, \
        f"the silent node's rank lived {gone - t0:.1f} s after {how}"
    assert victim not in second
    c.wait_nodes_up()
    assert attempts_alive(c, jid, by_mark).keys() == {1}, "the agent back: nothing of attempt 0"
    c.run(["scancel", str(jid)], check=True)
    c.wait_state(jid, "CANCELLED", timeout=30)
    wait_for("no process of the job left", lambda: not attempts_alive(c, jid, by_mark), 15)


def test_a_dead_batch_hosts_rank_dies_with_a_job_that_may_not_be_requeued(fc):
    c = fc
    c.wait_nodes_up()
    jid = c.sbatch("-N", "2", "--no-requeue", "-o", "/dev/null", "--wrap",
                   "srun -N2 -n2 sleep 300")
    nodes = wait_for("job running on 2 nodes", lambda: running_on(c, jid), 30)
    host = nodes[0]
    by_mark = marks(c, jid)
    wait_for("the job on both nodes",
             lambda: attempts_alive(c, jid, by_mark).get(0) == set(nodes), 20)
    t0 = time.time()
    c.kill9(host)                       # the agent only: script, srun and task run on
    try:
        c.wait_state(jid, "NODE_FAIL", timeout=TIMEOUT + 10)
        ended = time.time() - t0
        gone_by = wait_for("every process of the job gone",
                           lambda: not attempts_alive(c, jid, by_mark) and time.time() - t0,
                           TIMEOUT + MARGIN + 5)
        print(f"\nNODE_FAIL after {ended:.1f} s; last process gone {gone_by:.1f} s after kill -9")
        assert gone_by < TIMEOUT + MARGIN, \
            f"processes lived {gone_by:.1f} s, past the timeout + margin {TIMEOUT + MARGIN}"
        result = (c.info()["agent_state_dirs"][host])
        log = open(os.path.join(result, "jobs", str(jid), "result.json")).read()
        assert '"fenced: lease ended' in log, log
    finally:
        c.restart(host)
        c.wait_nodes_up()
    assert c.state_of(jid) == "NODE_FAIL"


def test_a_silent_agent_is_down_after_one_timeout(fc):
    c = fc
    c.wait_nodes_up()
    node = "node4"
    pid = c.pid_of(node)
    time.sleep(random.random() * INTERVAL)      # anywhere between two heartbeats
    t0 = time.time()
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(f"{node} DOWN", lambda: node_state(c, node).startswith("down"), 4 * TIMEOUT)
        took = time.time() - t0
    finally:
        os.kill(pid, signal.SIGCONT)
    print(f"\n{node} DOWN {took:.2f} s after SIGSTOP (timeout {TIMEOUT} s)")
    # silence counts from the last heartbeat, up to one interval before the stop
    assert TIMEOUT - INTERVAL - 0.5 < took < TIMEOUT + INTERVAL + 0.5, \
        f"want DOWN one timeout ({TIMEOUT} s) after the last heartbeat, got {took:.2f} s"
    c.wait_nodes_up()


def test_setsid_and_double_forked_children_die_when_the_job_completes(fc):
    c = fc
    c.wait_nodes_up()
    n = random.randrange(100000, 999999)
    script = (f"#!/bin/bash\nsetsid sleep {n} &\n( ( env -i setsid sleep {n + 1} & ) & )\n"
              f"sleep 0.5\nexit 0\n")
    jid = c.sbatch("-o", "/dev/null", input=script)

    def sleepers() -> list[int]:
        out = []
        for p in psutil.process_iter():
            try:
                if p.cmdline() in (["sleep", str(n)], ["sleep", str(n + 1)]) \
                        and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p.pid)
            except psutil.Error:
                continue
        return out
    wait_for("both children running", lambda: len(sleepers()) == 2, 20)
    c.wait_state(jid, "COMPLETED", timeout=30)
    t0 = time.time()
    wait_for("both children gone", lambda: not sleepers(), 5)
    print(f"\nchildren gone {time.time() - t0:.2f} s after COMPLETED was seen")


@pytest.fixture
def roomy(tmp_path):
    """A cluster whose timeout leaves room for an agent's restart (2-3 s of
    Python start-up on a loaded test host)."""
    c = Cluster(tmp_path, nodes=2, heartbeat_timeout=ROOMY_TIMEOUT)
    c.up()
    try:
        yield c
    finally:
        c.down()


ROOMY_TIMEOUT = 8.0


def test_an_agent_restarted_within_the_timeout_fences_nothing(roomy):
    c = roomy
    c.wait_nodes_up()
    jid = c.sbatch("-N", "2", "-o", "/dev/null", "--wrap", "srun -N2 -n2 sleep 300")
    nodes = wait_for("job running on 2 nodes", lambda: running_on(c, jid), 30)
    by_mark = marks(c, jid)
    wait_for("the job on both nodes",
             lambda: attempts_alive(c, jid, by_mark).get(0) == set(nodes), 20)
    before = {p.pid for p in psutil.process_iter()
              if p.pid and _mark_of(p) in by_mark}
    c.kill9(nodes[0])                 # the batch host's agent
    c.restart(nodes[0])
    c.wait_nodes_up(timeout=ROOMY_TIMEOUT)
    time.sleep(ROOMY_TIMEOUT + 1)     # past the old lease's end
    after = {p.pid for p in psutil.process_iter() if _mark_of(p) in by_mark}
    assert c.state_of(jid) == "RUNNING"
    assert before <= after, f"processes gone: {before - after}"
    c.run(["scancel", str(jid)], check=True)
    c.wait_state(jid, "CANCELLED", timeout=30)


def _mark_of(p: psutil.Process) -> str:
    try:
        if p.status() == psutil.STATUS_ZOMBIE:
            return ""
        return p.environ().get("LINGJUN_JOB_MARK", "")
    except psutil.Error:
        return ""


def test_agents_cut_off_from_the_controller_stop_their_jobs_and_the_job_ends_node_fail(fc):
    """The controller paused past the timeout: no agent can tell that from a
    cut cable, so every lease lapses and the jobs stop; the job then ends
    NODE_FAIL, never COMPLETED."""
    c = fc
    c.wait_nodes_up()
    jid = c.sbatch("-N", "2", "--no-requeue", "-o", "/dev/null", "--wrap",
                   "srun -N2 -n2 sleep 300")
    nodes = wait_for("job running on 2 nodes", lambda: running_on(c, jid), 30)
    by_mark = marks(c, jid)
    wait_for("the job on both nodes",
             lambda: attempts_alive(c, jid, by_mark).get(0) == set(nodes), 20)
    ctl = c.pid_of("lingjund")
    t0 = time.time()
    os.kill(ctl, signal.SIGSTOP)
    try:
        gone = wait_for("every process of the job gone",
                        lambda: not attempts_alive(c, jid, by_mark) and time.time() - t0,
                        TIMEOUT + KILL_WAIT + 5)
    finally:
        os.kill(ctl, signal.SIGCONT)
    print(f"\ncontroller paused: the job's processes gone {gone:.1f} s after")
    assert gone < TIMEOUT + KILL_WAIT + 1.5
    c.wait_state(jid, "NODE_FAIL", timeout=30)
    c.wait_nodes_up(timeout=30)

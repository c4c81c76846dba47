"""srun as its own allocation, salloc, and srun's options, through the real commands.

Against real Slurm's output in ../shared/anchors/slurm/golden/ (srun_*.txt,
salloc_N2_srun.txt, env/srun_step_env.txt). One cluster of 4 nodes x 2 CPUs
for the whole file; every test leaves it idle.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.cli.golden_files import load


def golden(name: str) -> tuple[list[str], list[str], int]:
    """(stdout lines, stderr lines, rc) of a golden file."""
    g = load(name.removesuffix(".txt"))
    return g.stdout.splitlines(), g.stderr.splitlines(), g.rc


def as_nodes(lines: list[str]) -> list[str]:
    """Golden hostname lines name the anchor's one host ("vm") on every node; here
    each node answers with its own name. Rank r of these one-task-per-node runs
    is on node r+1."""
    out = []
    for i, line in enumerate(sorted(lines)):
        label, sep, _ = line.rpartition(": ")
        out.append(f"{label}{sep}node{int(label) + 1 if sep else i + 1}")
    return sorted(out)


def sacct(cluster, job_id: int) -> list[str]:
    return cluster.run(["sacct", "-j", str(job_id), "--parsable2", "-n",
                        "-o", "JobID,JobName,State,ExitCode"], check=True).stdout.splitlines()


def last_job(cluster) -> int:
    lines = cluster.run(["sacct", "--parsable2", "-n", "-X", "-o", "JobID"], check=True).stdout.split()
    return max(int(x) for x in lines)


def wait_idle(cluster, timeout: float = 20) -> None:
    deadline = time.time() + timeout
    out = ""
    while time.time() < deadline:
        out = cluster.run(["squeue", "-h"]).stdout
        if not out.strip():
            return
        time.sleep(0.1)
    raise AssertionError(f"queue not empty after {timeout}s:\n{out}")


@pytest.fixture(autouse=True)
def idle_after(cluster):
    yield
    wait_idle(cluster)


def popen(cluster, cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=cluster.work, env=cluster.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_job_state(cluster, name: str, state: str, timeout: float = 20) -> int:
    """The id of the job called ``name`` once it is in ``state``."""
    deadline = time.time() + timeout
    out = ""
    while time.time() < deadline:
        out = cluster.run(["squeue", "-h", "-n", name, "-o", "%i %T"]).stdout
        for line in out.splitlines():
            jid, st = line.split()
            if st == state:
                return int(jid)
        time.sleep(0.1)
    raise AssertionError(f"no job {name!r} in {state} after {timeout}s; squeue: {out!r}")


# -- srun outside an allocation -------------------------------------------------------


@pytest.mark.parametrize("argv,golden_file", [
    (["srun", "hostname"], "srun_hostname.txt"),
    (["srun", "-N2", "hostname"], "srun_N2_hostname.txt"),
    (["srun", "-N2", "-l", "hostname"], "srun_N2_l_hostname.txt"),
], ids=["srun hostname runs one task", "srun -N2 runs one task on each of 2 nodes",
        "srun -N2 -l labels each line with the task rank"])
def test_srun_outside_a_job_makes_its_own_allocation(cluster, argv, golden_file):
    want_out, _, want_rc = golden(golden_file)
    p = cluster.run(argv)
    assert (p.returncode, sorted(p.stdout.splitlines())) == (want_rc, as_nodes(want_out)), p.stderr
    # the cluster was idle: no waiting, so none of the "queued" lines Slurm printed there
    assert p.stderr == "", f"want no messages when nothing had to wait, got {p.stderr!r}"


def test_srun_N4_n8_places_ranks_block_wise_as_slurm(cluster):
    want_out, _, want_rc = golden("srun_N4_n8_l_nodename.txt")
    p = cluster.run(["srun", "-N4", "-n8", "-l", "bash", "-c",
                     "echo $SLURMD_NODENAME $SLURM_PROCID $SLURM_LOCALID"])
    assert (p.returncode, sorted(p.stdout.splitlines())) == (want_rc, sorted(want_out)), p.stderr


def test_exit_code_3_propagates_and_the_allocation_is_released(cluster):
    _, want_err, want_rc = golden("srun_exit3.txt")
    p = cluster.run(["srun", "bash", "-c", "exit 3"])
    assert p.returncode == want_rc
    assert p.stderr.splitlines() == [want_err[-1]]
    jid = last_job(cluster)
    wait_idle(cluster)
    assert sacct(cluster, jid) == [f"{jid}|bash|FAILED|3:0", f"{jid}.0|bash|FAILED|3:0"]


def test_a_finished_srun_leaves_its_job_completed_in_sacct(cluster):
    p = cluster.run(["srun", "-N2", "true"], check=True)
    jid = last_job(cluster)
    wait_idle(cluster)
    assert p.stdout == ""
    assert sacct(cluster, jid) == [f"{jid}|true|COMPLETED|0:0", f"{jid}.0|true|COMPLETED|0:0"]


STEP_ENV_COMPARED = [
    "SLURMD_NODENAME", "SLURM_CPUS_ON_NODE", "SLURM_GTIDS", "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_JOB_NAME", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_LABELIO",
    "SLURM_LAUNCH_NODE_IPADDR", "SLURM_LOCALID", "SLURM_NNODES", "SLURM_NODEID", "SLURM_NODELIST",
    "SLURM_NPROCS", "SLURM_NTASKS", "SLURM_PRIO_PROCESS", "SLURM_PROCID", "SLURM_SRUN_COMM_HOST",
    "SLURM_STEPID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
    "SLURM_TOPOLOGY_ADDR", "SLURM_TOPOLOGY_ADDR_PATTERN", "SLURM_UMASK", "SLURM_JOB_QOS"]


def test_tasks_of_srun_N2_see_the_environment_slurm_gives(cluster):
    want_out, _, _ = golden("env/srun_step_env.txt")
    p = cluster.run(["srun", "-N", "2", "-l", "bash", "-c", 'env | grep -E "^SLURM" | sort'], check=True)

    def by_rank(lines):
        out: dict[str, dict[str, str]] = {}
        for line in lines:
            rank, _, kv = line.partition(": ")
            k, _, v = kv.partition("=")
            out.setdefault(rank, {})[k] = v
        return {r: {k: env.get(k) for k in STEP_ENV_COMPARED} for r, env in out.items()}
    assert by_rank(p.stdout.splitlines()) == by_rank(want_out)


def test_an_unknown_option_gets_getopts_words(cluster):
    p = cluster.run(["srun", "--bogus-option", "hostname"])
    assert (p.returncode, p.stderr) == (
        255, "srun: unrecognized option '--bogus-option'\nTry \"srun --help\" for more information\n")


# -- salloc ------------------------------------------------------------------------------


def test_salloc_N2_runs_srun_in_its_allocation(cluster):
    want_out, want_err, want_rc = golden("salloc_N2_srun.txt")
    p = cluster.run(["salloc", "-N2", "srun", "-l", "hostname"])
    assert (p.returncode, sorted(p.stdout.splitlines())) == (want_rc, as_nodes(want_out)), p.stderr
    jid = last_job(cluster)
    # idle cluster: Slurm prints only the grant and the release then
    assert p.stderr.splitlines() == [f"salloc: Granted job allocation {jid}",
                                     f"salloc: Relinquishing job allocation {jid}"]
    wait_idle(cluster)
    assert sacct(cluster, jid) == [f"{jid}|srun|COMPLETED|0:0", f"{jid}.0|hostname|COMPLETED|0:0"]


def test_salloc_gives_its_command_the_job_and_exits_with_the_commands_code(cluster):
    p = cluster.run(["salloc", "-N2", "bash", "-c",
                     "echo $SLURM_JOB_ID $SLURM_JOB_NODELIST $SLURM_NNODES $SLURM_JOB_NUM_NODES; exit 7"])
    jid = last_job(cluster)
    assert (p.returncode, p.stdout) == (7, f"{jid} node[1-2] 2 2\n"), p.stderr
    wait_idle(cluster)
    assert sacct(cluster, jid) == [f"{jid}|bash|FAILED|7:0"]


def test_srun_and_salloc_say_they_waited_when_the_cluster_was_full(cluster):
    gate = cluster.work / "gate-full"
    blocker = cluster.sbatch("-N4", "--exclusive", "-J", "blocker", "--wrap",
                             f"while [ ! -e {gate} ]; do sleep 0.1; done")
    try:
        cluster.wait_state(blocker, "RUNNING")
        srun = popen(cluster, ["srun", "-J", "waiter-srun", "hostname"])
        salloc = popen(cluster, ["salloc", "-J", "waiter-salloc", "true"])
        sj = wait_job_state(cluster, "waiter-srun", "PENDING")
        aj = wait_job_state(cluster, "waiter-salloc", "PENDING")
    finally:
        gate.touch()
    _, serr = srun.communicate(timeout=30)
    _, aerr = salloc.communicate(timeout=30)
    assert serr.splitlines() == [f"srun: job {sj} queued and waiting for resources",
                                 f"srun: job {sj} has been allocated resources"]
    assert aerr.splitlines() == [f"salloc: Pending job allocation {aj}",
                                 f"salloc: job {aj} queued and waiting for resources",
                                 f"salloc: job {aj} has been allocated resources",
                                 f"salloc: Granted job allocation {aj}",
                                 f"salloc: Relinquishing job allocation {aj}"]
    assert (srun.returncode, salloc.returncode) == (0, 0)


# -- srun's options ----------------------------------------------------------------------


def test_output_pattern_with_t_writes_one_file_per_task(cluster):
    p = cluster.run(["srun", "-n2", "-o", "task-%j-%t.out", "bash", "-c",
                     "echo out $SLURM_PROCID; echo err $SLURM_PROCID >&2"], check=True)
    jid = last_job(cluster)
    assert p.stdout == ""
    got = {i: (cluster.work / f"task-{jid}-{i}.out").read_text() for i in (0, 1)}
    assert got == {0: "out 0\nerr 0\n", 1: "out 1\nerr 1\n"}


def test_output_pattern_without_t_is_one_file_srun_writes(cluster):
    cluster.run(["srun", "-N2", "-l", "-o", "all-%j.out", "-e", "all-%j.err", "bash", "-c",
                 "echo out; echo err >&2"], check=True)
    jid = last_job(cluster)
    out = sorted((cluster.work / f"all-{jid}.out").read_text().splitlines())
    err = sorted((cluster.work / f"all-{jid}.err").read_text().splitlines())
    assert (out, err) == (["0: out", "1: out"], ["0: err", "1: err"])


def test_export_none_passes_only_slurm_variables(cluster):
    env = dict(cluster.env, LINGJUN_TEST_VAR="visible")
    p = cluster.run(["srun", "--export=NONE", "/bin/bash", "-c",
                     'echo "[$LINGJUN_TEST_VAR] [${SLURM_JOB_ID:+set}]"'], env=env, check=True)
    assert p.stdout == "[] [set]\n"
    p = cluster.run(["srun", "--export=LINGJUN_TEST_VAR", "/bin/bash", "-c",
                     'echo "[$LINGJUN_TEST_VAR] [$HOME]"'], env=env, check=True)
    assert p.stdout == "[visible] []\n"


def test_kill_on_bad_exit_ends_the_other_tasks_when_one_fails(cluster):
    start = time.time()
    p = cluster.run(["srun", "-n2", "-K", "bash", "-c",
                     'if [ "$SLURM_PROCID" = 1 ]; then exit 5; fi; sleep 30; echo survived'], timeout=25)
    took = time.time() - start
    assert "survived" not in p.stdout
    assert "srun: error: node1: task 1: Exited with exit code 5" in p.stderr.splitlines()
    assert p.returncode != 0 and took < 15, (p.returncode, took, p.stderr)


def test_unbuffered_relays_a_partial_line_before_the_task_ends(cluster):
    proc = popen(cluster, ["srun", "-u", "bash", "-c",
                           f"printf partial; while [ ! -e {cluster.work / 'gate-u'} ]; do sleep 0.1; done"])
    try:
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        deadline = time.time() + 20
        got = b""
        while time.time() < deadline and b"partial" not in got:
            try:
                got += os.read(fd, 4096)
            except BlockingIOError:
                time.sleep(0.05)
    finally:
        (cluster.work / "gate-u").touch()
    proc.wait(timeout=20)
    assert got == b"partial", "want the partial line while the task still runs"


# Step a holds the allocation's one CPU for 3 s; step b's srun starts only once a
# runs (a marker file, not a fixed sleep: under load srun's own start-up varies).
STEP_A = ('srun --exclusive -n1 bash -c "echo a-start \\$(date +%s.%N); touch a-runs-$SLURM_JOB_ID; '
          'sleep 3; echo a-end \\$(date +%s.%N)"')
WAIT_A = 'while [ ! -e a-runs-$SLURM_JOB_ID ]; do sleep 0.05; done'


def _stamped_steps(cluster, script: str) -> tuple[dict[str, float], subprocess.CompletedProcess]:
    p = cluster.run(["salloc", "-N1", "bash", "-c", script], timeout=40)
    stamps = {}
    for line in p.stdout.splitlines():
        what, _, t = line.partition(" ")
        stamps[what] = float(t)
    return stamps, p


def test_exclusive_steps_in_a_one_cpu_allocation_run_one_after_the_other(cluster):
    stamps, p = _stamped_steps(cluster, (
        f'{STEP_A} & {WAIT_A}; srun --exclusive -n1 bash -c "echo b-start \\$(date +%s.%N)"; wait'))
    assert p.returncode == 0, p.stderr
    assert stamps["b-start"] >= stamps["a-end"], stamps
    jid = int(p.stderr.splitlines()[0].rsplit(" ", 1)[1])
    assert (f"srun: Job {jid} step creation temporarily disabled, retrying (Requested nodes are busy)"
            in p.stderr.splitlines()), p.stderr
    assert f"srun: Step created for job {jid}" in p.stderr.splitlines()


def test_an_overlap_step_runs_beside_a_running_step(cluster):
    stamps, p = _stamped_steps(cluster, (
        f'{STEP_A} & {WAIT_A}; srun --overlap -n1 bash -c "echo b-start \\$(date +%s.%N)"; wait'))
    assert p.returncode == 0, p.stderr
    assert stamps["a-start"] <= stamps["b-start"] < stamps["a-end"], stamps
    assert "busy" not in p.stderr


def test_nodelist_picks_nodes_inside_the_allocation(cluster):
    p = cluster.run(["salloc", "-N3", "srun", "-w", "node[2-3]", "-l", "printenv", "SLURMD_NODENAME"],
                    check=True)
    assert sorted(p.stdout.splitlines()) == ["0: node2", "1: node3"]


# -- the allocation ends with its srun -----------------------------------------------------


@pytest.mark.parametrize("sig,want_rc", [
    (signal.SIGKILL, -signal.SIGKILL), (signal.SIGINT, 128 + signal.SIGINT),
], ids=["srun killed with SIGKILL: the controller ends its allocation",
        "srun interrupted (Ctrl-C): it cancels its allocation and exits 130"])
def test_the_allocation_ends_when_its_srun_goes(cluster, sig, want_rc):
    name = f"goner-{int(sig)}"
    proc = popen(cluster, ["srun", "-N2", "-J", name, "sleep", "60"])
    jid = wait_job_state(cluster, name, "RUNNING")
    deadline = time.time() + 10
    while not cluster.job_processes(jid) and time.time() < deadline:
        time.sleep(0.1)
    proc.send_signal(sig)
    proc.communicate(timeout=20)
    assert proc.returncode == want_rc
    cluster.wait_state(jid, ("CANCELLED",), timeout=20)
    deadline = time.time() + 10
    while cluster.job_processes(jid) and time.time() < deadline:
        time.sleep(0.1)
    assert cluster.job_processes(jid) == [], "want the step's tasks killed with the allocation"


def test_scancel_of_an_srun_job_ends_srun(cluster):
    proc = popen(cluster, ["srun", "-J", "to-cancel", "sleep", "60"])
    jid = wait_job_state(cluster, "to-cancel", "RUNNING")
    cluster.run(["scancel", str(jid)], check=True)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode != 0
    assert f"srun: Force Terminated job {jid}" in err.splitlines(), err
    assert cluster.state_of(jid) in ("CANCELLED", "")


def test_salloc_keeps_its_allocation_across_a_controller_restart(cluster):
    """Last in the file: it restarts the module's controller."""
    gate = cluster.work / "gate-restart"
    proc = popen(cluster, ["salloc", "-N1", "-J", "survivor", "bash", "-c",
                           f"while [ ! -e {gate} ]; do sleep 0.1; done; srun printenv SLURMD_NODENAME"])
    try:
        jid = wait_job_state(cluster, "survivor", "RUNNING")
        cluster.kill9("lingjund")
        cluster.restart("lingjund")
        cluster.wait_nodes_up(timeout=30)
        assert cluster.state_of(jid) == "RUNNING"
    finally:
        gate.touch()
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (0, "node1\n"), err
    cluster.wait_state(jid, "COMPLETED", timeout=20)


def node_state(cluster, node: str) -> str:
    return cluster.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], check=True).stdout.strip()


def test_an_srun_past_its_deadline_ends_deadline_and_gives_its_node_back(cluster):
    """Slurm ends a running job that reaches its --deadline in state DEADLINE
    (reason DeadLine); an allocation has no script to report that end, so the
    controller ends it, and its srun is told."""
    proc = popen(cluster, ["srun", "-N1", "-J", "past-deadline", "sleep", "60"])
    jid = wait_job_state(cluster, "past-deadline", "RUNNING")
    node = cluster.squeue(jid, "%N")
    cluster.run(["scontrol", "update", f"JobId={jid}", "Deadline=now+2"], check=True)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert f"srun: Force Terminated job {jid}" in err.splitlines(), err
    # srun is told as the job starts COMPLETING; it is DEADLINE once its node says the step is gone
    deadline = time.time() + 20
    while cluster.squeue(jid, "%T %r") == "COMPLETING DeadLine" and time.time() < deadline:
        time.sleep(0.2)
    assert cluster.squeue(jid, "%T %r") == "DEADLINE DeadLine"
    deadline = time.time() + 20
    while node_state(cluster, node) != "idle" and time.time() < deadline:
        time.sleep(0.2)
    assert node_state(cluster, node) == "idle"
    assert cluster.job_processes(jid) == [], "want the step's tasks killed with the allocation"

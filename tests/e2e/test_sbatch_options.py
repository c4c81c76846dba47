"""sbatch's placement and signalling options through the real commands.

One local cluster for the whole file: node[1-4], 2 CPUs each, one a100 GPU
each; node[1-2] have feature "fast", node4 "slow" (``lingjun up --features``).
Every test waits for its own jobs to end, so they never crowd each other.
"""
from __future__ import annotations

import getpass
import re
import time

import pytest

from tests.e2e.conftest import Cluster


class FeatureCluster(Cluster):
    def up(self) -> None:
        self.run(["lingjun", "up", "--nodes", str(self.nodes), "--cpus", str(self.cpus),
                  "--state-dir", str(self.state), "--port", str(self.port), "--kill-wait", "2",
                  "--heartbeat-timeout", str(self.heartbeat_timeout),
                  "--gpus", "1", "--gpu-type", "a100",
                  "--features", "node[1-2]=fast", "--features", "node4=slow",
                  "--mail-prog", "/bin/true"],     # --mail-type needs a MailProg that runs
                 check=True, timeout=90)


@pytest.fixture(scope="module")
def fcluster(tmp_path_factory):
    c = FeatureCluster(tmp_path_factory.mktemp("features"))
    c.up()
    try:
        yield c
    finally:
        c.down()


def _show(c: Cluster, jid: int) -> str:
    return c.run(["scontrol", "-o", "show", "job", str(jid)], check=True).stdout


def _ran_on(c: Cluster, *args: str) -> str:
    """Submit a short job with ``args``; the nodes it ran on once it completed."""
    jid = c.sbatch(*args, "-o", "/dev/null", "--wrap", "true")
    c.wait_state(jid, "COMPLETED", timeout=60)
    return c.squeue(jid, "%N")


@pytest.mark.parametrize("args,want", [
    (["-w", "node3"], "node3"),
    (["-w", "node[2,4]"], "node[2,4]"),
    (["-N3", "-x", "node1"], "node[2-4]"),
    (["-N2", "-C", "fast"], "node[1-2]"),
    (["-N3", "-C", "fast|slow"], "node[1-2,4]"),
    (["-C", "fast", "-x", "node1"], "node2"),
    (["-w", "node4", "-N2", "-x", "node[1-2]"], "node[3-4]"),
], ids=[
    "-w node3 lands on node3",
    "-w counts its nodes toward -N",
    "-x keeps the job off node1",
    "-C fast takes only the fast nodes",
    "-C a|b takes nodes with either feature",
    "-C and -x together leave one node",
    "-w node4 -N2 adds one more node that is not excluded",
])
def test_job_lands_where_it_asked(fcluster, args, want):
    assert _ran_on(fcluster, *args) == want


def test_scontrol_shows_the_request(fcluster):
    jid = fcluster.sbatch("-H", "-w", "node4", "-x", "node[1-2]", "-C", "fast|slow",
                          "--mail-type=END,FAIL", "--comment=hello", "-A", "acct", "-q", "normal",
                          "--no-requeue", "--gres=gpu:a100:1", "--mem-per-cpu=100", "-c", "2",
                          "-o", "/dev/null", "--wrap", "true")
    try:
        show = _show(fcluster, jid)
    finally:
        fcluster.run(["scancel", str(jid)])
    user = getpass.getuser()
    for token in ["ReqNodeList=node4", "ExcNodeList=node[1-2]", "Features=fast|slow",
                  f"MailUser={user}", "MailType=END,FAIL", "Comment=hello", "Account=acct",
                  "QOS=normal", "Requeue=0", "TresPerNode=gres:gpu:a100:1",
                  "MinMemoryCPU=100M", "gres/gpu=1", "mem=200M"]:
        assert token in show, f"want {token!r} in:\n{show}"


def test_squeue_and_sacct_show_comment_account_qos(fcluster):
    jid = fcluster.sbatch("--comment=note", "-A", "proj", "-q", "normal", "-o", "/dev/null",
                          "--wrap", "true")
    fcluster.wait_state(jid, "COMPLETED", timeout=60)
    assert fcluster.squeue(jid, "%k|%a|%q") == "note|proj|normal"
    acct = fcluster.run(["sacct", "-j", str(jid), "-X", "-n", "--parsable2",
                         "-o", "JobID,Account,QOS,Comment"]).stdout
    assert f"{jid}|proj|normal|note" in acct.splitlines(), acct


@pytest.mark.parametrize("args,err", [
    (["-w", "node9"], "Invalid node name specified"),
    (["-x", "nosuch"], "Invalid node name specified"),
    (["-C", "turbo"], "Invalid feature specification"),
    (["-C", "fast&"], "Invalid feature specification"),
    (["--gres=gpu:h100:1"], "Invalid generic resource (gres) specification"),
    (["--gres=gpu:x"], "Invalid generic resource (gres) specification"),
    (["-N2", "-w", "node[1-3]"], "Requested node configuration is not available"),
    (["-w", "node1", "-x", "node1"], "Requested node configuration is not available"),
], ids=[
    "an unknown node in -w", "an unknown node in -x", "a feature no node has",
    "a constraint that does not parse", "a GPU type no node has",
    "gpu:x is a GPU type named x, which no node has",
    "more -w nodes than -N allows", "a required node that is also excluded",
])
def test_impossible_requests_are_refused_at_submit(fcluster, args, err):
    p = fcluster.run(["sbatch", *args, "--wrap", "true"])
    assert (p.returncode, p.stdout, p.stderr) == (
        1, "", f"sbatch: error: Batch job submission failed: {err}\n")


def test_refused_requests_queue_nothing(fcluster):
    before = fcluster.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout
    for args in (["-w", "node9"], ["-C", "turbo"], ["--gres=gpu:h100:1"]):
        assert fcluster.run(["sbatch", *args, "--wrap", "true"]).returncode == 1
    assert fcluster.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout == before


def test_test_only_prints_slurms_line_and_queues_nothing(fcluster):
    before = fcluster.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout
    p = fcluster.run(["sbatch", "--test-only", "-N2", "-C", "fast", "--wrap", "true"])
    assert p.returncode == 0 and p.stdout == "", p
    assert re.fullmatch(r"sbatch: Job \d+ to start at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d using 2 "
                        r"processors on nodes node\[1-2\] in partition debug\n", p.stderr), p.stderr
    assert fcluster.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout == before


def test_test_only_estimates_the_end_of_a_running_job(fcluster):
    gate = fcluster.work / "estimate-gate"
    jid = fcluster.sbatch("-w", "node3", "-c", "2", "-t", "10", "-o", "/dev/null", "--wrap",
                          f"while [ ! -e {gate} ]; do sleep 0.1; done")
    try:
        fcluster.wait_state(jid, "RUNNING")
        end_time = re.search(r"EndTime=(\S+)", _show(fcluster, jid)).group(1)
        p = fcluster.run(["sbatch", "--test-only", "-w", "node3", "--wrap", "true"])
        assert p.returncode == 0, p
        assert f"to start at {end_time} using 1 processors on nodes node3 " in p.stderr, \
            (end_time, p.stderr)
    finally:
        gate.touch()
    fcluster.wait_state(jid, "COMPLETED", timeout=60)


def test_required_node_drained_pends_with_reqnodenotavail(fcluster):
    fcluster.run(["scontrol", "update", "NodeName=node4", "State=DRAIN", "Reason=test"],
                 check=True)
    try:
        jid = fcluster.sbatch("-w", "node4", "-o", "/dev/null", "--wrap", "true")
        deadline = time.time() + 20
        reason = ""
        while time.time() < deadline:
            reason = fcluster.squeue(jid, "%r")
            if reason.startswith("ReqNodeNotAvail"):
                break
            time.sleep(0.2)
        assert reason == "ReqNodeNotAvail, UnavailableNodes:node4"
        assert "Reason=ReqNodeNotAvail,_UnavailableNodes:node4" in _show(fcluster, jid)
        other = fcluster.sbatch("-o", "/dev/null", "--wrap", "true")
        fcluster.wait_state(other, "COMPLETED", timeout=60)   # it does not hold others back
    finally:
        fcluster.run(["scontrol", "update", "NodeName=node4", "State=RESUME"], check=True)
    fcluster.wait_state(jid, "COMPLETED", timeout=60)


def test_signal_before_the_time_limit(fcluster):
    """Two jobs side by side (the warning is due 10 s after start, 60 s limit - 50 s):
    with B: the batch shell's trap runs; without it the step's trap runs and
    the batch shell, which has no trap (USR1 would end it), carries on, as Slurm."""
    shell_got, step_got = fcluster.work / "got-usr1", fcluster.work / "step-got-usr1"
    shell_out, step_out = fcluster.work / "signal.out", fcluster.work / "step-signal.out"
    shell_sh, step_sh = fcluster.work / "signal.sh", fcluster.work / "step-signal.sh"
    shell_sh.write_text("#!/bin/bash\n#SBATCH -t 1\n#SBATCH --signal=B:USR1@50\n"
                        f"trap 'date +%s > {shell_got}; exit 0' USR1\n"
                        "while true; do sleep 0.2; done\n")
    step_sh.write_text("#!/bin/bash\n#SBATCH -t 1\n#SBATCH --signal=USR1@50\n"
                       f"srun bash -c 'trap \"touch {step_got}; exit 0\" USR1; "
                       "while true; do sleep 0.2; done'\n"
                       "echo shell alive\n")
    shell_job = fcluster.sbatch("-o", str(shell_out), str(shell_sh))
    step_job = fcluster.sbatch("-o", str(step_out), str(step_sh))
    fcluster.wait_state(shell_job, "RUNNING")
    started = time.time()
    fcluster.wait_file(shell_got, timeout=30)
    waited = time.time() - started
    # The controller checks at least every 2 s; allow for a loaded machine.
    assert 5 <= waited <= 20, f"USR1 after {waited:.1f}s, want ~10 s"
    fcluster.wait_file(step_got, timeout=30)
    done = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
    assert fcluster.wait_state(shell_job, done, timeout=30) == "COMPLETED"
    assert fcluster.wait_state(step_job, done, timeout=30) == "COMPLETED", step_out.read_text()
    assert "shell alive" in step_out.read_text()


def test_open_mode_append_keeps_the_earlier_output(fcluster):
    out = fcluster.work / "append.out"
    out.write_text("before\n")
    jid = fcluster.sbatch("--open-mode=append", "-o", str(out), "--wrap", "echo after")
    fcluster.wait_state(jid, "COMPLETED", timeout=60)
    assert out.read_text() == "before\nafter\n"


def test_wait_returns_the_jobs_exit_code(fcluster):
    p = fcluster.run(["sbatch", "-W", "-o", "/dev/null", "--wrap", "exit 3"], timeout=90)
    assert p.returncode == 3, p
    assert re.fullmatch(r"Submitted batch job \d+\n", p.stdout), p.stdout


def test_nodes_show_their_features_and_gpu_type(fcluster):
    sinfo = fcluster.run(["sinfo", "-h", "-N", "-o", "%N %f %G"], check=True).stdout
    assert sinfo.splitlines() == ["node1 fast gpu:a100:1", "node2 fast gpu:a100:1",
                                  "node3 (null) gpu:a100:1", "node4 slow gpu:a100:1"], sinfo
    show = fcluster.run(["scontrol", "show", "node", "node4"], check=True).stdout
    for token in ["AvailableFeatures=slow", "ActiveFeatures=slow", "Gres=gpu:a100:1"]:
        assert token in show, f"want {token!r} in:\n{show}"


def test_mem_per_cpu_reaches_the_job(fcluster):
    out = fcluster.work / "mem-per-cpu.out"
    jid = fcluster.sbatch("--mem-per-cpu=300", "-c", "2", "-o", str(out), "--wrap",
                          "echo MEM=$SLURM_MEM_PER_CPU")
    fcluster.wait_state(jid, "COMPLETED", timeout=60)
    assert out.read_text() == "MEM=300\n"
    assert "mem=600M" in _show(fcluster, jid)

"""preempt/qos, account quotas and lending idle quota on a real local cluster.

One cluster for the file: node[1-2], 8 CPUs and 4 (declared) GPUs each, so
8 GPUs; AccountingStorageEnforce associations and limits; PreemptType
preempt/qos; lending off until the last test turns it on with `scontrol
reconfigure`. sacctmgr sets everything up as a site would.

1. A job of QOS ``high`` (Preempt=low) preempts a running ``low`` job, which
   is requeued and runs again after.
2. Accounts acct_a and acct_b, GrpTRES=gres/gpu=4 each, run 200 short
   1-GPU jobs together; the controller's WatchJobs log (every committed
   change, in commit order, so every pass's outcome) is replayed afterwards
   and neither account ever has more than 4 GPUs running.
3. With lending on, acct_a alone uses all 8 GPUs, 4 of them Borrowed; when
   acct_b submits, acct_a's borrowed jobs are preempted and requeued and
   acct_b's jobs start; acct_a's own four are never touched.
"""
from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import BIN, Cluster, wait_for
from tests.e2e.test_preemption import _field, _show

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
EXTRA = """
[accounting]
enforce = ["associations", "limits"]

[preempt]
type = "qos"
mode = "REQUEUE"

[scheduler]
lend_idle_quota = false
"""
DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("qoslend")
    extra = root / "extra.toml"
    extra.write_text(EXTRA)
    c = Cluster(root, nodes=2, cpus=8, up_args=("--gpus", "4", "--extra-config", str(extra)))
    c.env["PYTHONPATH"] = str(REPO)       # the commands and daemons of this tree
    c.up()
    try:
        c.wait_nodes_up()
        yield c
    finally:
        c.down()


def _events_after(c: Cluster, cursor: int) -> list[tuple[int, int, str]]:
    """(cursor, job id, state) of every job change committed after ``cursor``."""
    code = ("from lingjun.sdk import Client\n"
            f"for e in Client().events(after={cursor}, until_idle=True, idle_s=1.0):\n"
            "    print(e.cursor, e.job_id, e.state)\n")
    p = subprocess.run([f"{BIN}/python", "-c", code], env=c.env, capture_output=True, text=True,
                       timeout=120, check=True)
    return [(int(a), int(b), s) for a, b, s in (line.split() for line in p.stdout.splitlines())]


def _last_cursor(c: Cluster) -> int:
    evs = _events_after(c, 0)
    return evs[-1][0] if evs else 0


def test_a_high_qos_job_preempts_a_low_one_which_requeues_and_runs_again(cluster):
    c = cluster
    run = c.run
    run(["sacctmgr", "-i", "add", "qos", "low", "PreemptMode=requeue"], check=True)
    p = run(["sacctmgr", "-i", "add", "qos", "high", "Preempt=low", "PreemptMode=requeue"],
            check=True)
    assert "  Preempt                  = low\n  PreemptMode              = REQUEUE\n" in p.stdout
    assert run(["sacctmgr", "-P", "-n", "show", "qos", "format=Name,Preempt,PreemptMode"],
               check=True).stdout == "normal||cluster\nlow||requeue\nhigh|low|requeue\n"
    # bad input: Slurm's words, nothing changed
    p = run(["sacctmgr", "-i", "modify", "qos", "low", "set", "Preempt=high"])
    assert (p.returncode, p.stderr) == (1, "sacctmgr: error: QOS Preemption loop detected\n"
                                           " Error with request: QOS Preemption loop detected\n")
    p = run(["sacctmgr", "-i", "modify", "qos", "high", "set", "Preempt=nosuch"])
    assert p.returncode == 1 and "You gave a bad qos 'nosuch'" in p.stderr, p.stderr
    assert run(["sacctmgr", "-P", "-n", "show", "qos", "format=Name,Preempt"],
               check=True).stdout == "normal|\nlow|\nhigh|low\n"
    conf = run(["scontrol", "show", "config"], check=True).stdout
    assert re.search(r"^PreemptType\s+= preempt/qos$", conf, re.M), conf

    log = c.work / "low.log"
    script = c.work / "low.sh"
    script.write_text("#!/bin/bash\n#SBATCH --qos=low -N 2 --gres=gpu:4 --requeue -t 5\n"
                      f"echo start ${{SLURM_RESTART_COUNT:-0}} >> {log}\n"
                      "if [ \"${SLURM_RESTART_COUNT:-0}\" -gt 0 ]; then exit 0; fi\n"
                      "exec sleep 300\n")
    low = c.sbatch("-o", "/dev/null", str(script))
    c.wait_state(low, "RUNNING", timeout=30)
    c.wait_file(log, contains="start 0")
    plain = c.sbatch("--gres=gpu:1", "-o", "/dev/null", "--wrap", "sleep 1")
    wait_for("the normal job waits, preempting nothing",
             lambda: c.squeue(plain, "%r") == "Resources", timeout=15)
    assert _field(_show(c, low), "Restarts") == "0"

    high = c.sbatch("--qos=high", "--gres=gpu:2", "-o", "/dev/null", "--wrap", "sleep 1")
    c.wait_state(high, ("RUNNING", "COMPLETED"), timeout=30)
    show = _show(c, low)
    assert _field(show, "Restarts") == "1", show
    assert _field(show, "PreemptTime") not in ("", "None"), show
    assert c.wait_state(high, DONE, timeout=30) == "COMPLETED"
    assert c.wait_state(low, DONE, timeout=60) == "COMPLETED", _show(c, low)
    assert log.read_text() == "start 0\nstart 1\n"
    assert c.wait_state(plain, DONE, timeout=30) == "COMPLETED"


def _set_up_accounts(c: Cluster) -> None:
    if "acct_a" in c.run(["sacctmgr", "-n", "-P", "show", "account", "format=account"],
                         check=True).stdout.split():
        return
    c.run(["sacctmgr", "-i", "add", "account", "acct_a,acct_b", "GrpTRES=gres/gpu=4"], check=True)
    c.run(["sacctmgr", "-i", "add", "user", "root", "account=acct_a,acct_b"], check=True)


def test_neither_account_ever_runs_past_its_gpu_quota(cluster):
    """Issue 16, must-show 2 (lending off): 200 short jobs of two accounts with
    GrpTRES=gres/gpu=4 each on 8 GPUs; every committed change is checked."""
    c = cluster
    _set_up_accounts(c)
    shown = c.run(["sacctmgr", "-n", "-P", "show", "assoc", "where", "account=acct_a,acct_b",
                   "format=account,user,grptres"], check=True).stdout.splitlines()
    assert {"acct_a||gres/gpu=4", "acct_b||gres/gpu=4"} <= set(shown), shown
    cursor = _last_cursor(c)
    started = time.time()
    arrays = {acc: c.sbatch("-A", acc, "--array=0-99", "--gres=gpu:1", "-t", "1", "-o", "/dev/null",
                            "--wrap", "sleep 0.2")
              for acc in ("acct_a", "acct_b")}

    def left() -> int:
        out = c.run(["squeue", "-h", "-o", "%i"], check=True).stdout
        return len(out.split())
    wait_for("all 200 jobs done", lambda: left() == 0, timeout=150)
    took = time.time() - started

    # which job (each array task is one) belongs to which account
    acct = {}
    sacct = c.run(["sacct", "-X", "-n", "-P", "-o", "JobIDRaw,JobID,Account", "-S", "now-1hour"],
                  check=True).stdout
    for line in sacct.splitlines():
        raw, jid, account = line.split("|")
        base = int(jid.split("_")[0])
        if base in arrays.values():
            acct[int(raw)] = account
    assert len(acct) >= 200, f"want the 200 tasks in sacct, got {len(acct)}"

    running: dict[str, set[int]] = {"acct_a": set(), "acct_b": set()}
    peak = {"acct_a": 0, "acct_b": 0}
    states = {}
    for cur, jid, state in _events_after(c, cursor):
        account = acct.get(jid)
        if account is None:
            continue
        states[jid] = state
        if state == "RUNNING":
            running[account].add(jid)
        else:
            running[account].discard(jid)
        held = len(running[account])            # 1 GPU each
        assert held <= 4, f"{account} ran {held} GPUs after change {cur} (job {jid} {state})"
        peak[account] = max(peak[account], held)
    assert sum(s == "COMPLETED" for s in states.values()) == 200, states
    assert peak == {"acct_a": 4, "acct_b": 4}, f"both accounts used their whole quota: {peak}"
    assert took < 120, f"200 short jobs took {took:.0f} s"


def test_with_lending_one_account_borrows_the_idle_quota_and_gives_it_back(cluster):
    c = cluster
    _set_up_accounts(c)
    conf = c.state / "lingjun.toml"
    conf.write_text(conf.read_text().replace("lend_idle_quota = false", "lend_idle_quota = true"))
    c.run(["scontrol", "reconfigure"], check=True)

    a_jobs = [c.sbatch("-A", "acct_a", "--gres=gpu:1", "--requeue", "-t", "5", "-o", "/dev/null",
                       "--wrap", "sleep 300") for _ in range(8)]

    def reasons(jobs) -> dict[int, str]:
        return {j: c.squeue(j, "%T %r") for j in jobs}
    wait_for("acct_a runs on all 8 GPUs",
             lambda: all(r.startswith("RUNNING") for r in reasons(a_jobs).values()), timeout=30)
    got = reasons(a_jobs)
    own = [j for j in a_jobs if got[j] == "RUNNING None"]
    borrowed = [j for j in a_jobs if got[j] == "RUNNING Borrowed"]
    assert (len(own), len(borrowed)) == (4, 4), got
    assert _field(_show(c, borrowed[0]), "Reason") == "Borrowed"

    b_jobs = [c.sbatch("-A", "acct_b", "--gres=gpu:1", "-t", "5", "-o", "/dev/null",
                       "--wrap", "sleep 3") for _ in range(4)]
    wait_for("acct_b's jobs run",
             lambda: all(c.squeue(j, "%T") in ("RUNNING", "COMPLETED") for j in b_jobs),
             timeout=60)
    for j in borrowed:
        show = _show(c, j)
        assert _field(show, "Restarts") == "1", f"borrowed job {j} was not requeued: {show}"
    for j in own:
        show = _show(c, j)
        assert (_field(show, "JobState"), _field(show, "Restarts")) == ("RUNNING", "0"), show
    for j in b_jobs:
        assert c.wait_state(j, DONE, timeout=30) == "COMPLETED"
    # acct_b is gone: the requeued ones borrow again
    wait_for("acct_a borrows again",
             lambda: sum(r == "RUNNING Borrowed" for r in reasons(borrowed).values()) == 4,
             timeout=60)
    c.run(["scancel", *map(str, a_jobs)], check=True)

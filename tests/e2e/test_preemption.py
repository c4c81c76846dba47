"""Preemption and --signal timing on a real local cluster (issue 7, shows 3 and 4).

One cluster for the file: node[1-5], 2 CPUs each, KillWait 2 s, and through
``lingjun up --extra-config``: PreemptType partition_prio, partitions
``low`` (tier 1, REQUEUE, GraceTime 2 s) and ``lowc`` (tier 1, CANCEL,
GraceTime 1 s) and ``high`` (tier 2, never preempted) on node[1-4], and
``solo`` on node5 where show 3's job runs beside the others.

Show 3 needs a one-minute limit (Slurm's resolution: ``--time`` rounds
seconds up to minutes), so its job is submitted when the cluster comes up
and checked by the last test; the preemption tests run meanwhile.
"""
from __future__ import annotations

import re
import time

import pytest

from tests.e2e.conftest import Cluster

pytestmark = pytest.mark.long     # a minute or more: started first (tests/conftest.py)

EXTRA = """
[preempt]
type = "partition_prio"
mode = "REQUEUE"

[[partitions]]
name = "low"
nodes = "node[1-4]"
grace_time_s = 2

[[partitions]]
name = "lowc"
nodes = "node[1-4]"
preempt_mode = "CANCEL"
grace_time_s = 1

[[partitions]]
name = "high"
nodes = "node[1-4]"
priority_tier = 2
preempt_mode = "OFF"

[[partitions]]
name = "solo"
nodes = "node5"
preempt_mode = "OFF"
"""

DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL")


class PreemptCluster(Cluster):
    def up(self) -> None:
        extra = self.root / "preempt.toml"
        extra.write_text(EXTRA)
        self.run(["lingjun", "up", "--nodes", str(self.nodes), "--cpus", str(self.cpus),
                  "--state-dir", str(self.state), "--port", str(self.port), "--kill-wait", "2",
                  "--heartbeat-timeout", str(self.heartbeat_timeout),
                  "--extra-config", str(extra)], check=True, timeout=90)


@pytest.fixture(scope="module")
def pcluster(tmp_path_factory):
    c = PreemptCluster(tmp_path_factory.mktemp("preempt"), nodes=5)
    c.up()
    try:
        # Show 3, started now so that its minute overlaps the tests below.
        log = c.work / "warn.log"
        script = c.work / "warn.sh"
        script.write_text("#!/bin/bash\n#SBATCH -p solo -t 1 --signal=B:USR1@5\n"
                          f"trap 'echo trap $(date +%s.%N) >> {log}; exit 0' USR1\n"
                          f"echo start $(date +%s.%N) >> {log}\n"
                          "while true; do sleep 0.1; done\n")
        c.warn_job = c.sbatch("-o", "/dev/null", str(script))
        c.warn_log = log
        yield c
    finally:
        c.down()


def _show(c: Cluster, jid: int) -> str:
    return c.run(["scontrol", "-o", "show", "job", str(jid)], check=True).stdout


def _field(text: str, key: str) -> str:
    m = re.search(rf"(?:^|\s){key}=(\S*)", text)
    return m.group(1) if m else ""


def _times(path, word: str) -> list[float]:
    return [float(line.split()[-1]) for line in path.read_text().splitlines()
            if line.startswith(word + " ")]


def test_partitions_show_tier_mode_and_grace_as_slurm(pcluster):
    show = pcluster.run(["scontrol", "-o", "show", "partition"], check=True).stdout
    got = {_field(l, "PartitionName"): (_field(l, "PriorityTier"), _field(l, "PreemptMode"),
                                        _field(l, "GraceTime")) for l in show.splitlines()}
    assert got == {"debug": ("1", "REQUEUE", "0"), "low": ("1", "REQUEUE", "2"),
                   "lowc": ("1", "CANCEL", "1"), "high": ("2", "OFF", "0"),
                   "solo": ("1", "OFF", "0")}, show
    sinfo = pcluster.run(["sinfo", "-h", "-p", "high,lowc", "-o", "%P %p %M"], check=True).stdout
    assert sinfo.split("\n")[:2] == ["lowc 1 CANCEL", "high 2 OFF"], sinfo
    conf = pcluster.run(["scontrol", "show", "config"], check=True).stdout
    assert re.search(r"^PreemptType\s+= preempt/partition_prio$", conf, re.M), conf


def test_high_tier_job_preempts_and_the_victim_requeues_and_completes(pcluster):
    """Show 4: a 4-node preemptible job, a 2-node high-tier job arrives."""
    c = pcluster
    log = c.work / "victim.log"
    script = c.work / "victim.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH -p low -N 4 --exclusive --requeue --signal=B:USR1@30 -t 5\n"
        f"echo start ${{SLURM_RESTART_COUNT:-0}} >> {log}\n"
        f"if [ \"${{SLURM_RESTART_COUNT:-0}}\" -gt 0 ]; then echo resumed 1 >> {log}; exit 0; fi\n"
        f"trap 'echo usr1 $(date +%s.%N) >> {log}; exit 0' USR1\n"
        "while true; do sleep 0.1; done\n")
    victim = c.sbatch("-o", "/dev/null", str(script))
    c.wait_state(victim, "RUNNING", timeout=30)
    c.wait_file(log, contains="start 0")
    assert _field(_show(c, victim), "PreemptTime") == "None"

    submitted = time.time()
    high = c.sbatch("-p", "high", "-N", "2", "-o", "/dev/null", "--wrap", "sleep 3")
    c.wait_file(log, contains="usr1", timeout=15)
    trap_after = _times(log, "usr1")[0] - submitted
    assert trap_after < 5, f"victim's trap {trap_after:.2f}s after the high job came, want < 5 s"

    c.wait_state(high, "RUNNING", timeout=20)
    started_after = time.time() - submitted
    assert started_after < 15, f"high job started {started_after:.1f}s after submission"
    assert re.fullmatch(r"node\[?[1-4][-,]?[1-4]?\]?", c.squeue(high, "%N")), c.squeue(high, "%N")

    show = _show(c, victim)
    assert _field(show, "JobState") in ("PENDING", "COMPLETING"), show
    assert _field(show, "Restarts") == "1", show
    assert _field(show, "PreemptTime") not in ("", "None"), show
    # It waits for the nodes the high job holds, then runs again and completes.
    assert c.wait_state(victim, DONE, timeout=40) == "COMPLETED", _show(c, victim)
    assert c.wait_state(high, DONE, timeout=10) == "COMPLETED"
    assert log.read_text().count("start") == 2 and "resumed" in log.read_text(), log.read_text()
    assert len(_times(log, "usr1")) == 1, "the victim was signalled more than once"


def test_cancel_mode_victim_ends_preempted(pcluster):
    c = pcluster
    log = c.work / "cancel.log"
    script = c.work / "cancel.sh"
    script.write_text("#!/bin/bash\n#SBATCH -p lowc -N 4 --exclusive -t 5\n"
                      f"echo start >> {log}\n"
                      "while true; do sleep 0.1; done\n")
    victim = c.sbatch("-o", "/dev/null", str(script))
    c.wait_state(victim, "RUNNING", timeout=30)
    c.wait_file(log, contains="start")
    high = c.sbatch("-p", "high", "-N", "2", "-o", "/dev/null", "--wrap", "sleep 1")
    assert c.wait_state(victim, DONE, timeout=20) == "PREEMPTED"
    assert c.squeue(victim, "%t") == "PR"
    sacct = c.run(["sacct", "-X", "-n", "-P", "-j", str(victim), "-o", "State"], check=True).stdout
    assert sacct.strip() == "PREEMPTED", sacct
    assert c.wait_state(high, DONE, timeout=30) == "COMPLETED"
    time.sleep(1)
    assert log.read_text().count("start") == 1, "a CANCEL-mode victim must not run again"
    assert _field(_show(c, victim), "Restarts") == "0"


def test_signal_reaches_the_batch_shell_five_seconds_before_the_limit(pcluster):
    """Show 3: --signal=B:USR1@5 --time=1: the trap runs ~55 s into the 60 s."""
    c = pcluster
    c.wait_file(c.warn_log, contains="trap", timeout=75)
    start, trap = _times(c.warn_log, "start")[0], _times(c.warn_log, "trap")[0]
    before_limit = 60 - (trap - start)
    # The script starts a little after the controller's StartTime, which only widens this.
    assert 4.0 <= before_limit <= 7.0, f"trap {before_limit:.2f}s before the limit, want ~5 s"
    assert c.wait_state(c.warn_job, DONE, timeout=15) == "COMPLETED"

"""sprio side by side with real Slurm 22.05, field by field.

``sprio_golden/`` holds what the anchor's Slurm (priority/multifactor,
PriorityWeightAge=1000 FairShare=10000 JobSize=1000 Partition=1000 QOS=2000,
node[1-4] of 2 CPUs, one partition) printed for four pending jobs of root's
(each file: "$ command", stdout, "--- stderr", stderr, "--- rc N"):

    6151  -N1 -n1                 6152  -N2 -n4 --nice=100
    6153  -N1 -c2 --nice=-50      6154  -N3

Here the same four jobs go through our priority/multifactor arithmetic
(``lingjund/sched/plugins/multifactor.py``) on the same cluster and weights,
and our sprio prints them; every file must come out byte for byte. So the
integers are Slurm's for the same inputs (11187, 11400, 11300, 11562: job
size 0.1875 is (1/4 nodes + 1/8 CPUs) / 2, fair share 1.0, age 0 just after
submission) and so are the layouts of -l, -n, -w, -o, -S, -h, -j and -u.
"""
from __future__ import annotations

import io
import shlex
from pathlib import Path

import pytest

from cli import sprio
from lingjun import messages
from lingjund.sched.plugins.multifactor import Cluster, Weights, combine, factors
from lingjund.sched.snapshot import JobRequest, PartitionView

GOLDEN = Path(__file__).parent / "sprio_golden"
WEIGHTS = Weights(age=1000, assoc=0, fairshare=10000, job_size=1000, partition=1000, qos=2000,
                  max_age_s=7 * 86400)
CLUSTER = Cluster(nodes=4, cpus=8, max_partition_factor=1)
DEBUG = PartitionView(name="debug", nodes=(), priority_job_factor=1)
NOW = 1796363640.0
JOBS = [JobRequest(job_id=6151, priority=0, submit_time=NOW, partition="debug", begin_time=NOW,
                   user="root", account="root", qos="normal"),
        JobRequest(job_id=6152, priority=0, submit_time=NOW, partition="debug", begin_time=NOW,
                   min_nodes=2, num_tasks=4, nice=100, user="root", account="root", qos="normal"),
        JobRequest(job_id=6153, priority=0, submit_time=NOW, partition="debug", begin_time=NOW,
                   cpus_per_task=2, nice=-50, user="root", account="root", qos="normal"),
        JobRequest(job_id=6154, priority=0, submit_time=NOW, partition="debug", begin_time=NOW,
                   min_nodes=3, user="root", account="root", qos="normal")]


class FakeController:
    """GetPriorityFactors as the service answers it, over the four jobs above."""

    def call(self, method: str, req):
        assert method == "GetPriorityFactors"
        out = []
        for j in JOBS:
            if req.job_ids and j.job_id not in req.job_ids:
                continue
            if (req.users and j.user not in req.users) or \
                    (req.partitions and j.partition not in req.partitions):
                continue
            f = factors(j, DEBUG, CLUSTER, WEIGHTS, NOW)
            out.append(messages.JobPriorityFactors(
                job_id=j.job_id, partition=j.partition, user=j.user, account=j.account,
                qos=j.qos, priority=combine(f, WEIGHTS), site=f.site, age=f.age, assoc=f.assoc,
                fairshare=f.fairshare, job_size=f.job_size, partition_factor=f.partition,
                qos_factor=f.qos, nice=f.nice))
        w = WEIGHTS
        return messages.PriorityFactorsResponse(
            priority_type="priority/multifactor", jobs=out,
            weights={"age": w.age, "assoc": w.assoc, "fairshare": w.fairshare,
                     "jobsize": w.job_size, "partition": w.partition, "qos": w.qos})


def golden(path: Path) -> tuple[list[str], str, str, int]:
    text = path.read_text()
    first, rest = text.split("\n", 1)
    stdout, rest = rest.split("--- stderr\n", 1)
    stderr, rc = rest.rsplit("--- rc ", 1)
    return shlex.split(first.removeprefix("$ "))[1:], stdout, stderr, int(rc)


# -V: our commands say "slurm 22.05.8", the anchor's Debian build "slurm-wlm 22.05.8".
FILES = sorted(p for p in GOLDEN.glob("sprio*.txt") if p.name != "sprio_v.txt")


def test_the_captures_are_here():
    assert len(FILES) >= 25


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_sprio_prints_what_slurm_printed(path):
    argv, want_out, want_err, want_rc = golden(path)
    out, err = io.StringIO(), io.StringIO()
    rc = sprio.main(argv, api=FakeController(), out=out, err=err)
    assert (out.getvalue(), err.getvalue(), rc) == (want_out, want_err, want_rc)


def test_the_arithmetic_gives_slurms_integers():
    got = {j.job_id: combine(factors(j, DEBUG, CLUSTER, WEIGHTS, NOW), WEIGHTS) for j in JOBS}
    assert got == {6151: 11187, 6152: 11400, 6153: 11300, 6154: 11562}


def test_scontrol_show_config_priority_lines_are_slurms():
    """Ours with the anchor's [priority] settings: every Priority* line we print
    is the anchor's (PriorityDecayHalfLife and PriorityUsageResetPeriod belong to
    fair share, PriorityCalcPeriod to a plugin that recomputes on a timer: ours
    recomputes every pass)."""
    from types import SimpleNamespace

    from cli.formats.show_cluster import scontrol_show_config
    from lingjun import config
    from lingjund.service.priority import config_settings
    conf = config.parse('[priority]\nweight_age = 1000\nweight_fairshare = 10000\n'
                        'weight_job_size = 1000\nweight_partition = 1000\nweight_qos = 2000\n'
                        'max_age = "7-0"\n')
    ours = scontrol_show_config(config_settings(SimpleNamespace(config=conf)), 0)
    ours = ours.splitlines()[1:]
    theirs = [line for line in (GOLDEN / "scontrol_show_config_priority.txt").read_text()
              .splitlines() if line.split()[0] in {o.split()[0] for o in ours}]
    assert ours == theirs
    assert len(ours) == 11

"""Accounts and fair share on a real local cluster, through the commands.

`lingjun up` with AccountingStorageEnforce on (associations, limits, qos)
and usage charged every second: sacctmgr adds an account and a user, a job
for an account its user has no association with is refused in Slurm's words
and nothing is stored, the default account is applied, a disallowed QOS and
MaxSubmitJobs refuse, and sshare shows usage grow after a job ran and keep
it over a controller restart.
"""
from __future__ import annotations

import pytest

from tests.e2e.conftest import Cluster, wait_for

pytestmark = pytest.mark.timeout(300)

EXTRA = """
[accounting]
enforce = ["associations", "limits", "qos"]
usage_interval_s = 1
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("assoc")
    extra = root / "extra.toml"
    extra.write_text(EXTRA)
    c = Cluster(root, nodes=2, up_args=("--extra-config", str(extra)))
    c.up()
    try:
        yield c
    finally:
        c.down()


def _usage(cluster: Cluster, account: str, user: str) -> int:
    out = cluster.run(["sshare", "-a", "-P", "-n", "-o", "account,user,rawusage"], check=True).stdout
    for line in out.splitlines():
        acc, usr, raw = line.split("|")
        if acc.strip() == account and usr == user:
            return int(raw)
    return -1


def test_sacctmgr_enforcement_default_account_and_usage(cluster):
    run = cluster.run
    p = run(["sacctmgr", "-i", "add", "account", "phys", "Description=physics"], check=True)
    assert p.stdout.startswith(" Adding Account(s)\n  phys\n")
    assert run(["sacctmgr", "-n", "-P", "show", "account", "phys"], check=True).stdout == \
        "phys|physics|phys\n"

    # root has no association with phys yet: refused, nothing stored
    before = run(["squeue", "-h", "-t", "all", "-o", "%i"], check=True).stdout
    p = run(["sbatch", "-A", "phys", "--wrap", "true"])
    assert p.returncode == 1
    assert p.stderr == ("sbatch: error: Batch job submission failed: Invalid account or "
                        "account/partition combination specified\n")
    p = run(["sbatch", "--qos", "bogus", "--wrap", "true"])
    assert (p.returncode, p.stderr) == (1, "sbatch: error: Batch job submission failed: "
                                           "Invalid qos specification\n")
    assert run(["squeue", "-h", "-t", "all", "-o", "%i"], check=True).stdout == before

    # no -A: the user's default account (root's is root)
    jid = cluster.sbatch("--hold", "--wrap", "true")
    assert cluster.squeue(jid, "%a") == "root"
    run(["scancel", str(jid)], check=True)

    p = run(["sacctmgr", "-i", "add", "user", "root", "account=phys"], check=True)
    assert "  U = root      A = phys       C = " in p.stdout
    run(["sacctmgr", "-i", "modify", "user", "root", "set", "defaultaccount=phys"], check=True)
    assert run(["sacctmgr", "-n", "-P", "show", "user", "root", "format=user,defaultaccount"],
               check=True).stdout == "root|phys\n"

    # MaxSubmitJobs on the association: the second pending job is refused
    run(["sacctmgr", "-i", "modify", "user", "root", "where", "account=phys", "set",
         "maxsubmitjobs=1"], check=True)
    held = cluster.sbatch("--hold", "--wrap", "true")
    assert cluster.squeue(held, "%a") == "phys"
    p = run(["sbatch", "--wrap", "true"])
    assert (p.returncode, p.stderr) == (1, "sbatch: error: Batch job submission failed: Job violates "
                                           "accounting/QOS policy (job submit limit, user's size "
                                           "and/or time limits)\n")
    run(["scancel", str(held)], check=True)
    run(["sacctmgr", "-i", "modify", "user", "root", "where", "account=phys", "set",
         "maxsubmitjobs=-1"], check=True)

    # usage grows while a job of phys runs, and survives a controller restart
    assert _usage(cluster, "phys", "root") == 0
    jid = cluster.sbatch("-c", "2", "--wrap", "sleep 3")
    cluster.wait_state(jid, "COMPLETED", timeout=60)
    used = wait_for("usage charged", lambda: _usage(cluster, "phys", "root") >= 4, timeout=15)
    assert used
    first = _usage(cluster, "phys", "root")
    assert first <= 2 * 3 + 4           # 2 CPUs for about 3 seconds, decayed a little at most
    cluster.kill9("lingjund")
    cluster.restart("lingjund")
    wait_for("controller back", lambda: cluster.run(["sshare", "-a"]).returncode == 0, timeout=30)
    assert _usage(cluster, "phys", "root") >= first - 1
    fs = cluster.run(["sshare", "-a", "-P", "-n", "-o", "account,user,fairshare"], check=True).stdout
    factors = {tuple(x.strip() for x in line.split("|")[:2]): line.split("|")[2]
               for line in fs.splitlines()}
    # root's association in root has used nothing: it ranks first
    assert float(factors[("root", "root")]) > float(factors[("phys", "root")])

"""QOS limits applied by the scheduling pass on a real local cluster.

`lingjun up` with AccountingStorageEnforce limits and one node of 4 GPUs:
sacctmgr sets QOS normal's GrpTRES=gres/gpu=2; of two 2-GPU jobs the second
pends with QOSGrpGRES in squeue while the first runs, and starts once it ends.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, wait_for

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
EXTRA = """
[accounting]
enforce = ["associations", "limits"]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("limits")
    extra = root / "extra.toml"
    extra.write_text(EXTRA)
    c = Cluster(root, nodes=1, cpus=8, up_args=("--gpus", "4", "--extra-config", str(extra)))
    c.env["PYTHONPATH"] = str(REPO)
    c.up()
    try:
        yield c
    finally:
        c.down()


def test_qos_grp_gpus_hold_the_second_job_until_the_first_ends(cluster):
    run = cluster.run
    run(["sacctmgr", "-i", "modify", "qos", "normal", "set", "GrpTRES=gres/gpu=2"], check=True)
    first = cluster.sbatch("--gres=gpu:2", "-o", "/dev/null", "--wrap", "sleep 4")
    second = cluster.sbatch("--gres=gpu:2", "-o", "/dev/null", "--wrap", "true")
    assert cluster.wait_state(first, "RUNNING", timeout=60) == "RUNNING"
    assert cluster.wait_state(second, "PENDING", timeout=10) == "PENDING"

    def reason():
        return run(["squeue", "-h", "-j", str(second), "-o", "%T %r"], check=True).stdout.strip()
    wait_for("the pass gave its reason", lambda: reason().endswith("QOSGrpGRES"), timeout=15)
    out = reason()
    assert out == "PENDING QOSGrpGRES"
    assert cluster.wait_state(second, "COMPLETED", timeout=60) == "COMPLETED"
    assert cluster.wait_state(first, "COMPLETED", timeout=10) == "COMPLETED"

"""Submissions that arrive together are committed together, and each is
acknowledged only once it is on disk: kill -9 of the controller right after
the answers loses none of them, and a refused one among them fails alone."""
from __future__ import annotations

import json
import sys

import pytest

from tests.e2e.conftest import Cluster, wait_for

# Submits every argv-given partition at once from as many threads, as an SDK
# client would (sbatch's own request, a fresh client token each), and prints
# what each got: {"ok": job_id} or {"error": Slurm's message}.
CLIENT = r"""
import json, os, sys, threading
import grpc
from lingjun import sbatch_options
from lingjun.client import Api

parts = sys.argv[1:]
api = Api()
results = [None] * len(parts)
go = threading.Barrier(len(parts))

def one(i):
    req = sbatch_options.parse_args(["-H", "-p", parts[i], "-o", "/dev/null", "--wrap", "true"],
                            None, os.environ, os.getcwd()).request
    go.wait()
    try:
        results[i] = {"ok": api.call("SubmitJob", req).job_id}
    except grpc.RpcError as e:
        results[i] = {"error": e.details()}

threads = [threading.Thread(target=one, args=(i,)) for i in range(len(parts))]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(results), flush=True)
"""


@pytest.fixture
def fresh(tmp_path):
    c = Cluster(tmp_path, nodes=1, heartbeat_timeout=15)
    c.up()
    try:
        yield c
    finally:
        c.down()


def test_concurrent_submissions_all_survive_kill9_and_a_bad_one_fails_alone(fresh):
    c = fresh
    parts = ["debug"] * 40
    parts[17] = "nosuch"
    p = c.run([sys.executable, "-c", CLIENT, *parts], check=True, timeout=120)
    c.kill9("lingjund")     # the moment the last answer came
    results = json.loads(p.stdout)

    assert results[17] == {"error": "Invalid partition name specified"}
    acked = [r["ok"] for i, r in enumerate(results) if i != 17]
    assert len(acked) == 39 and len(set(acked)) == 39, results

    c.restart("lingjund")
    ids = ",".join(map(str, acked))
    listed = wait_for("the restarted controller answering squeue",
                      lambda: c.run(["squeue", "-h", "-j", ids, "-o", "%i %T %r"]).stdout, 30)
    assert sorted(listed.splitlines()) == sorted(f"{j} PENDING JobHeldUser" for j in acked)

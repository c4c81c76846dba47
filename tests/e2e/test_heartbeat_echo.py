"""A real agent's lease while the controller answers only some of its heartbeats.

``lingjun up --heartbeat-timeout 20`` beats every 2 s; with 2,000 more nodes
configured (never started: only the count matters) the configured nodes send
1,000 heartbeats a second, a big cluster's, where the controller answers a
heartbeat only at least 4 s after the last answered one (a quarter of the
timeout less half an interval: lingjund/service/nodes.py ``echo_after_s``),
so about every second one. A job that runs longer than the timeout must
never be fenced, and the lease must be renewed with most of it left.
"""
from __future__ import annotations

import time

import pytest

from lingjun_agent.launcher import lease
from tests.e2e.conftest import Cluster, wait_for

TIMEOUT = 20.0
RUN_S = 28          # longer than the timeout: only renewals keep the job alive


@pytest.fixture
def cluster(tmp_path):
    extra = tmp_path / "spare-nodes.toml"
    extra.write_text('[[nodes]]\nnames = "spare[1-2000]"\ncpus = 2\nmemory_mb = 2000\n')
    c = Cluster(tmp_path, nodes=1, heartbeat_timeout=TIMEOUT,
                up_args=("--extra-config", str(extra)))
    c.up()
    try:
        yield c
    finally:
        c.down()


def test_a_job_outlives_the_timeout_on_thinned_answers_and_its_lease_keeps_most_of_it(cluster):
    c = cluster
    # (not wait_nodes_up: the spare nodes never register)
    wait_for("node1 up", lambda: c.run(["sinfo", "-h", "-n", "node1", "-o", "%t"]).stdout.strip()
             == "idle", 30)
    (state_dir,) = c.info()["agent_state_dirs"].values()
    path = lease.lease_path(state_dir)
    jid = c.sbatch("-o", "/dev/null", "--wrap", f"sleep {RUN_S}")
    wait_for("job running", lambda: c.state_of(jid) == "RUNNING", 30)
    ends, least = set(), None
    t0 = time.time()
    while c.state_of(jid) == "RUNNING" and time.time() - t0 < RUN_S + 30:
        cur = lease.read(path)
        if cur is not None:
            ends.add(cur.expires_at)
            least = cur.left() if least is None else min(least, cur.left())
        time.sleep(0.25)
    # a fenced batch script is killed: the job would end NODE_FAIL or FAILED
    assert c.wait_state(jid, ("COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED")) == "COMPLETED"
    # renewed about every 4 s, not at each of the ~14 heartbeats of the run,
    # and always with more than half of the 20 s lease left
    print(f"\n{len(ends)} renewals in {time.time() - t0:.0f} s; least left {least:.1f} s")
    assert 3 <= len(ends) <= 10, len(ends)
    assert least > TIMEOUT / 2, least

"""The purge rule on a real controller: at start, finished jobs older than
``[accounting] purge_job_after`` leave the history sacct reads; newer ones and
unfinished ones stay. A bad value stops the controller with the key named."""
from __future__ import annotations

import subprocess
import sys
import time

from bench.sim.controller import ClusterShape, SimController, config_text, free_port
from lingjun.v1 import api_pb2
from lingjund.store.store import StepRecord, Store

DAY = 86400.0


def test_a_controller_purges_old_finished_jobs_at_start_and_keeps_the_rest(tmp_path):
    shape = ClusterShape(nodes=1, cpus=2, gpus=0, extra='[accounting]\npurge_job_after = "30days"\n')
    ctl = SimController(tmp_path, shape, probe=False)
    (tmp_path / "controller").mkdir(mode=0o700)
    now = time.time()
    store = Store(str(tmp_path / "controller" / "lingjund.db"))
    base = dict(name="hist", user="root", uid=0, partition="gpu", priority=1, time_limit_min=10,
                spec=api_pb2.JobSpec(work_dir="/tmp"))
    with store.transaction() as st:
        old = st.insert_job(**base, state="COMPLETED", submit_time=now - 41 * DAY,
                            eligible_time=now - 41 * DAY, start_time=now - 40 * DAY - 60,
                            end_time=now - 40 * DAY)
        st.put_step(StepRecord(job_id=old, step_id="batch", name="batch", state="COMPLETED"))
        recent = st.insert_job(**base, state="FAILED", submit_time=now - 3 * DAY,
                               eligible_time=now - 3 * DAY, start_time=now - 3 * DAY,
                               end_time=now - 2 * DAY, exit_code=1)
        waiting = st.insert_job(**base, state="PENDING", submit_time=now - 90 * DAY,
                                eligible_time=now - 90 * DAY, held=True)
    store.close()
    ctl.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            p = subprocess.run([sys.executable, "-m", "cli.sacct", "-j", f"{old},{recent},{waiting}",
                                "-n", "-P", "-X", "-o", "JobID,State"],
                               env=ctl.env, capture_output=True, text=True, timeout=30)
            if str(old) not in p.stdout:
                break
            time.sleep(0.2)
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines() == [f"{recent}|FAILED", f"{waiting}|PENDING"], p.stdout
        assert "purged 1 finished jobs" in ctl.log_tail(), ctl.log_tail()
    finally:
        ctl.stop()


def test_a_bad_purge_job_after_stops_the_controller_naming_the_key(tmp_path):
    shape = ClusterShape(nodes=1, extra='[accounting]\npurge_job_after = "soon"\n')
    conf = tmp_path / "lingjun.toml"
    conf.write_text(config_text(shape, free_port(), tmp_path))
    p = subprocess.run([sys.executable, "-m", "lingjund.daemon", "-c", str(conf)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert "lingjund: error: [accounting] purge_job_after: invalid value 'soon'" in p.stderr, p.stderr
    assert not (tmp_path / "controller").exists(), "nothing may be created"

"""sacct's history readers on a real controller: separate processes that end
with it, even when it is killed with SIGKILL, and never more than
``accounting.READERS`` at once however many sacct calls come."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psutil

from bench.sim.controller import ClusterShape, SimController
from lingjun.v1 import api_pb2
from lingjund.service import accounting
from lingjund.store.store import StepRecord, Store

READER = "lingjund.service.history_reader"


def started_with_history(tmp_path, jobs: int) -> SimController:
    ctl = SimController(tmp_path, ClusterShape(nodes=1, cpus=2, gpus=0), probe=False)
    (tmp_path / "controller").mkdir(mode=0o700)
    now = time.time()
    store = Store(str(tmp_path / "controller" / "lingjund.db"))
    with store.transaction() as st:
        for i in range(jobs):
            end = now - 3600 + i * 3600 / jobs
            job = st.insert_job(name=f"h{i % 3}", user="root", uid=0, partition="gpu", priority=1,
                                time_limit_min=10, spec=api_pb2.JobSpec(work_dir="/tmp"),
                                state="COMPLETED", submit_time=end - 120, eligible_time=end - 120,
                                start_time=end - 60, end_time=end)
            st.put_step(StepRecord(job_id=job, step_id="batch", name="batch", state="COMPLETED",
                                   start_time=end - 60, end_time=end))
    store.close()
    ctl.start()
    return ctl


def sacct(ctl: SimController, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.sacct", *args], env=ctl.env,
                          capture_output=True, text=True, timeout=120)


def readers_of(ctl: SimController) -> list[psutil.Process]:
    out = []
    for p in ctl.ps.children(recursive=True):
        try:
            if READER in " ".join(p.cmdline()):
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def gone(p: psutil.Process) -> bool:
    """Exited (a zombie waiting for whoever adopted it has exited too)."""
    try:
        return not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(procs: list[psutil.Process], timeout: float = 15.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(gone(p) for p in procs):
        time.sleep(0.1)
    return [p for p in procs if not gone(p)]


def test_a_controller_killed_with_sigkill_leaves_no_history_reader_behind(tmp_path):
    ctl = started_with_history(tmp_path, 200)
    try:
        p = sacct(ctl, "-a", "-S", "2000-01-01", "-n", "-P", "-X", "-o", "JobIDRaw")
        assert p.returncode == 0, p.stderr
        assert len(p.stdout.split()) == 200
        readers = readers_of(ctl)
        assert len(readers) == 1, "the reader is kept for the next sacct"
        # a reader that dies (killed, out of memory) is replaced at the next sacct
        readers[0].kill()                           # the reader, by its PID
        assert wait_gone(readers) == []
        again = sacct(ctl, "-a", "-S", "2000-01-01", "-n", "-P", "-X", "-o", "JobIDRaw")
        assert (again.returncode, again.stdout) == (0, p.stdout), again.stderr
        readers = readers_of(ctl)
        assert len(readers) == 1 and not gone(readers[0])
        os.kill(ctl.proc.pid, signal.SIGKILL)       # the controller we started, by its PID
        ctl.proc.wait(10)
        assert wait_gone(readers) == [], "a history reader outlived its controller"
    finally:
        ctl.stop()


def test_concurrent_sacct_calls_share_at_most_the_readers_and_all_get_every_job(tmp_path):
    ctl = started_with_history(tmp_path, 3000)
    try:
        results: list[subprocess.CompletedProcess] = []
        seen, stop = [0], threading.Event()

        def watch():
            while not stop.wait(0.02):
                seen[0] = max(seen[0], len([p for p in readers_of(ctl) if not gone(p)]))

        w = threading.Thread(target=watch)
        w.start()
        calls = [threading.Thread(target=lambda: results.append(
            sacct(ctl, "-a", "-S", "2000-01-01", "-n", "-P", "-o", "JobID,JobName,State,Elapsed")))
            for _ in range(accounting.READERS + 3)]
        for t in calls:
            t.start()
        for t in calls:
            t.join()
        stop.set()
        w.join()
        assert [r.returncode for r in results] == [0] * len(calls), [r.stderr for r in results]
        assert len({r.stdout for r in results}) == 1
        assert len(results[0].stdout.splitlines()) == 2 * 3000      # each job and its batch step
        assert 1 <= seen[0] <= accounting.READERS, seen[0]
        readers = readers_of(ctl)
        ctl.stop()                                   # SIGTERM: a clean stop
        assert wait_gone(readers) == [], "a history reader outlived its controller"
    finally:
        ctl.stop()

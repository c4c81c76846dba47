"""Batch scripts under their supervisor, with real processes and files."""
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from lingjun_agent.launcher.batch import (
    BatchSpec,
    LaunchError,
    forget_batch,
    job_dir,
    recover_batches,
    start_batch,
)
from lingjun_agent.launcher import cgroups, lease
from lingjun_agent.launcher.forkserver import ForkServer
from lingjun_agent.launcher.procs import job_processes, running_jobs, signal_job, terminate_job
from lingjun_agent.launcher.marks import start_ticks

REPO = Path(__file__).resolve().parents[2]
PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture
def node():
    n = f"testnode-{uuid.uuid4().hex[:8]}"
    yield n
    # Whatever a test left running under its made-up node name.
    for job_id in range(1, 50):
        for p in job_processes(n, job_id):
            p.kill()
    for cg in cgroups.jobs(n):
        cgroups.kill(cg, unkillable_s=5)
        cgroups.remove(cg)
    cgroups.remove_node(n)


def make_spec(node, tmp_path, script, **kw):
    base = dict(job_id=1, node=node, script=script, argv=(), env={"PATH": PATH},
                work_dir=str(tmp_path), stdout="slurm-1.out", stderr="", stdin="",
                uid=os.getuid(), gid=os.getgid())
    base.update(kw)
    return BatchSpec(**base)


@pytest.fixture(params=["afresh", "forked"])
def forks(request, tmp_path):
    """How the supervisor starts: a fresh interpreter, or forked from a forkserver."""
    if request.param == "afresh":
        yield None
        return
    server = ForkServer(tmp_path / "forkserver.log")
    yield server
    server.close()


def run(state, spec, forks=None):
    return asyncio.run(start_batch(state, spec, forks).wait())


def test_script_runs_with_env_argv_cwd_and_merged_output(node, tmp_path, forks):
    (tmp_path / "in.txt").write_text("from stdin\n")
    script = """#!/bin/bash
echo "job=$SLURM_JOB_ID args=$*"
pwd
read line; echo "$line"
echo "to stderr" >&2
echo "mark=$LINGJUN_JOB_MARK"
"""
    spec = make_spec(node, tmp_path, script, argv=("a", "b c"),
                     env={"PATH": PATH, "SLURM_JOB_ID": "1"}, stdin="in.txt")
    result = run(tmp_path / "state", spec, forks)
    assert (result.exit_code, result.signal, result.error) == (0, 0, "")
    assert result.start_time <= result.end_time
    want = (f"job=1 args=a b c\n{tmp_path}\nfrom stdin\nto stderr\n"
            f"mark={node}:1\n")
    got = (tmp_path / "slurm-1.out").read_text()
    assert got == want, f"want {want!r}, got {got!r}"


def test_split_output_truncates_and_append_appends(node, tmp_path):
    state = tmp_path / "state"
    (tmp_path / "o.txt").write_text("old\n")
    script = "#!/bin/sh\necho out\necho err >&2\n"
    spec = make_spec(node, tmp_path, script, stdout="o.txt",
                     stderr=str(tmp_path / "e.txt"))
    run(state, spec)
    assert (tmp_path / "o.txt").read_text() == "out\n"
    assert (tmp_path / "e.txt").read_text() == "err\n"
    forget_batch(state, 1)
    run(state, replace(spec, append=True))
    assert (tmp_path / "o.txt").read_text() == "out\nout\n"
    assert (tmp_path / "e.txt").read_text() == "err\nerr\n"


def test_exit_code_is_recorded(node, tmp_path, forks):
    result = run(tmp_path / "state", make_spec(node, tmp_path, "#!/bin/sh\nexit 3\n"), forks)
    assert (result.exit_code, result.signal) == (3, 0)


def test_killed_by_signal_is_0_colon_15(node, tmp_path, forks):
    spec = make_spec(node, tmp_path, "#!/bin/sh\nsleep 30\n")
    handle = start_batch(tmp_path / "state", spec, forks)
    assert handle.pid > 0 and start_ticks(handle.pid) is not None
    assert signal_job(node, 1, signal.SIGTERM) >= 1  # the shell (and its sleep)
    result = asyncio.run(handle.wait())
    assert (result.exit_code, result.signal) == (0, 15), result


def test_batch_only_signals_the_script_and_its_end_takes_the_children(node, tmp_path, forks):
    script = "#!/bin/bash\nsleep 30 &\nwait\n"
    handle = start_batch(tmp_path / "state", make_spec(node, tmp_path, script), forks)
    deadline = time.monotonic() + 5
    while len(job_processes(node, 1)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert signal_job(node, 1, signal.SIGKILL, batch_only=True) == 1
    result = asyncio.run(handle.wait())
    assert (result.exit_code, result.signal) == (0, 9)
    left = [p.name() for p in job_processes(node, 1)]
    assert left == [], f"the script's end ends the rest of the job here, got {left}"


def test_missing_work_dir_runs_in_tmp_with_slurms_error(node, tmp_path):
    out = tmp_path / "o.txt"
    spec = make_spec(node, tmp_path, "#!/bin/sh\npwd\n", work_dir="/nonexistent/x",
                     stdout=str(out))
    result = run(tmp_path / "state", spec)
    assert result.exit_code == 0
    want = ("slurmstepd: error: couldn't chdir to `/nonexistent/x': No such file or "
            "directory: going to /tmp instead\n/tmp\n")
    assert out.read_text() == want


def test_missing_interpreter_fails_like_slurmstepd(node, tmp_path, forks):
    state = tmp_path / "state"
    result = run(state, make_spec(node, tmp_path, "#!/no/such/shell\necho hi\n"), forks)
    script = job_dir(state, 1) / "script"
    want = f"execve(): {script}: No such file or directory"
    assert (result.exit_code, result.signal, result.error) == (2, 0, want)
    assert (tmp_path / "slurm-1.out").read_text() == f"slurmstepd: error: {want}\n"


def test_unopenable_output_fails_the_job(node, tmp_path):
    spec = make_spec(node, tmp_path, "#!/bin/sh\necho hi\n",
                     stdout="/nonexistent/dir/o.txt")
    result = run(tmp_path / "state", spec)
    assert result.exit_code == 1
    assert result.error == ("Could not open stdout file /nonexistent/dir/o.txt: "
                            "No such file or directory")


def test_an_output_directory_made_just_after_submission_is_used(node, tmp_path):
    """submitit makes its "%j" directory only once sbatch has answered; a job
    started within milliseconds finds it if it appears within the grace."""
    late = tmp_path / "made-late"
    spec = make_spec(node, tmp_path, "#!/bin/sh\necho hi\n", stdout=str(late / "o.txt"))
    maker = threading.Timer(0.5, late.mkdir)     # start_batch waits for the files to open
    maker.start()
    result = run(tmp_path / "state", spec)
    maker.join()
    assert (result.exit_code, result.error) == (0, "")
    assert (late / "o.txt").read_text() == "hi\n"


def test_a_running_job_cannot_start_twice(node, tmp_path):
    state = tmp_path / "state"
    spec = make_spec(node, tmp_path, "#!/bin/sh\nsleep 30\n")
    handle = start_batch(state, spec)
    with pytest.raises(LaunchError, match="already running"):
        start_batch(state, spec)
    asyncio.run(terminate_job(node, 1, 1.0))
    assert asyncio.run(handle.wait()).signal == 15


AGENT = """
import sys, time
from pathlib import Path
from lingjun_agent.launcher.batch import BatchSpec, start_batch
spec = BatchSpec(job_id=3, node=sys.argv[2], script="#!/bin/sh\\nsleep 1\\necho done\\nexit 4\\n",
                 argv=(), env={"PATH": "/usr/bin:/bin"}, work_dir=sys.argv[3],
                 stdout="out.txt", stderr="", stdin="", uid=0, gid=0)
h = start_batch(Path(sys.argv[1]), spec)
print(h.pid, h.supervisor_pid, flush=True)
time.sleep(60)
"""


def test_job_survives_agent_sigkill_and_is_recovered(node, tmp_path):
    state = tmp_path / "state"
    agent = subprocess.Popen([sys.executable, "-c", AGENT, str(state), node,
                              str(tmp_path)], stdout=subprocess.PIPE, text=True,
                             cwd=REPO)
    script_pid, stepd_pid = map(int, agent.stdout.readline().split())
    agent.kill()
    agent.wait()
    assert start_ticks(stepd_pid) is not None, "the supervisor died with the agent"
    assert start_ticks(script_pid) is not None, "the script died with the agent"

    handles, results = recover_batches(state)  # the restarted agent
    assert results == []
    assert [(h.job_id, h.pid, h.supervisor_pid) for h in handles] == \
        [(3, script_pid, stepd_pid)]
    result = asyncio.run(handles[0].wait())
    assert (result.job_id, result.exit_code, result.signal) == (3, 4, 0)
    assert (tmp_path / "out.txt").read_text() == "done\n"

    handles, results = recover_batches(state)  # and again: the result persists
    assert handles == [] and results == [result]
    forget_batch(state, 3)
    assert recover_batches(state) == ([], [])
    assert not job_dir(state, 3).exists()


AGENT_WITH_FORKSERVER = """
import sys, time
from pathlib import Path
from lingjun_agent.launcher.batch import BatchSpec, start_batch
from lingjun_agent.launcher.forkserver import ForkServer
forks = ForkServer(Path(sys.argv[1]) / "forkserver.log")
spec = BatchSpec(job_id=3, node=sys.argv[2], script="#!/bin/sh\\nsleep 2\\necho done\\nexit 4\\n",
                 argv=(), env={"PATH": "/usr/bin:/bin"}, work_dir=sys.argv[3],
                 stdout="out.txt", stderr="", stdin="", uid=0, gid=0)
h = start_batch(Path(sys.argv[1]), spec, forks)
print(h.pid, h.supervisor_pid, forks.pid, flush=True)
time.sleep(60)
"""


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while start_ticks(pid) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_forked_supervisor_survives_agent_sigkill_and_is_recovered(node, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    agent = subprocess.Popen([sys.executable, "-c", AGENT_WITH_FORKSERVER, str(state), node,
                              str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    script_pid, stepd_pid, server_pid = map(int, agent.stdout.readline().split())
    assert stepd_pid != server_pid
    agent.kill()
    agent.wait()
    assert start_ticks(stepd_pid) is not None, "the supervisor died with the agent"
    assert start_ticks(script_pid) is not None, "the script died with the agent"

    handles, results = recover_batches(state)  # the restarted agent
    assert results == []
    assert [(h.job_id, h.pid, h.supervisor_pid) for h in handles] == \
        [(3, script_pid, stepd_pid)]
    assert gone_within(server_pid, 10), "the forkserver outlived its agent"
    result = asyncio.run(handles[0].wait())
    assert (result.job_id, result.exit_code, result.signal) == (3, 4, 0)
    assert (tmp_path / "out.txt").read_text() == "done\n"


def test_a_forked_supervisor_is_a_session_of_its_own_found_by_its_marks(node, tmp_path):
    forks = ForkServer(tmp_path / "forkserver.log")
    try:
        handle = start_batch(tmp_path / "state", make_spec(node, tmp_path, "#!/bin/sh\nsleep 30\n"),
                             forks)
        sup = handle.supervisor_pid
        assert psutil.Process(sup).ppid() == forks.pid, "forked, not started by us"
        assert os.getsid(sup) == sup
        env = psutil.Process(sup).environ()
        assert env.get("LINGJUN_STEPD_MARK") == f"{node}:1", env
        assert env.get("LINGJUN_STEPD_DIR") == str(job_dir(tmp_path / "state", 1)), env
        assert 1 in running_jobs(node)
        assert sup not in {p.pid for p in job_processes(node, 1)}, \
            "the supervisor must outlive the job's processes to record the result"
        assert signal_job(node, 1, signal.SIGTERM, batch_only=True) == 1
        result = asyncio.run(handle.wait())
        assert (result.exit_code, result.signal) == (0, 15), result
    finally:
        forks.close()


def test_the_forkservers_death_is_survived(node, tmp_path):
    state = tmp_path / "state"
    forks = ForkServer(tmp_path / "forkserver.log")
    try:
        script = "#!/bin/sh\nsleep 1\necho done\nexit 5\n"
        running = start_batch(state, make_spec(node, tmp_path, script, stdout="a.txt"), forks)
        first = forks.pid
        os.kill(first, signal.SIGKILL)
        assert gone_within(first, 5)
        # the job forked before runs on and ends as it would have
        result = asyncio.run(running.wait())
        assert (result.exit_code, result.signal, result.error) == (5, 0, "")
        assert (tmp_path / "a.txt").read_text() == "done\n"
        # and the next job gets a new forkserver
        spec = make_spec(node, tmp_path, "#!/bin/sh\necho two\n", job_id=2, stdout="b.txt")
        handle = start_batch(state, spec, forks)
        assert forks.pid != first and forks.starts == 2
        assert psutil.Process(handle.supervisor_pid).ppid() == forks.pid
        assert asyncio.run(handle.wait()).exit_code == 0
        assert (tmp_path / "b.txt").read_text() == "two\n"
    finally:
        forks.close()


def test_without_a_forkserver_the_supervisor_starts_afresh(node, tmp_path):
    forks = ForkServer(tmp_path / "no-such-dir" / "forkserver.log")   # it cannot start
    handle = start_batch(tmp_path / "state", make_spec(node, tmp_path, "#!/bin/sh\necho hi\n"),
                         forks)
    assert psutil.Process(handle.supervisor_pid).ppid() == os.getpid()
    assert asyncio.run(handle.wait()).exit_code == 0
    assert (tmp_path / "slurm-1.out").read_text() == "hi\n"
    assert forks.pid is None


def test_a_forgotten_job_is_out_of_the_way_at_once_and_its_remains_go_at_recovery(node, tmp_path):
    state = tmp_path / "state"
    spec = make_spec(node, tmp_path, "#!/bin/sh\necho run\n", stdout="o.txt", append=True)
    first = run(state, spec)
    gone = forget_batch(state, 1, remove=False)     # what the agent removes in a thread
    assert gone is not None and gone.is_dir() and not job_dir(state, 1).exists()
    again = run(state, spec)                        # the job, requeued to this node at once
    assert (first.exit_code, again.exit_code) == (0, 0)
    assert (tmp_path / "o.txt").read_text() == "run\nrun\n"
    handles, results = recover_batches(state)       # as if the agent died before removing it
    assert not gone.exists()
    assert handles == [] and results == [again]


def test_a_recycled_supervisor_pid_is_not_mistaken(node, tmp_path):
    state = tmp_path / "state"
    d = job_dir(state, 5)
    d.mkdir(parents=True)
    (d / "spec.json").write_text("{}")
    # Our own pid, alive, but with a start time that is not ours.
    (d / "stepd.json").write_text(json.dumps(
        {"pid": os.getpid(), "start_ticks": start_ticks(os.getpid()) - 1}))
    handles, results = recover_batches(state)
    assert handles == []
    assert len(results) == 1
    lost = results[0]
    assert (lost.job_id, lost.exit_code, lost.signal) == (5, 0, 9)
    assert lost.error.startswith("lost")
    assert recover_batches(state) == ([], [lost]), "the lost result is kept"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users")
def test_runs_as_the_user_and_creates_files_as_them(node, forks):
    base = Path(tempfile.mkdtemp(prefix="lingjun-batch-test-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        work = base / "work"
        work.mkdir()
        os.chown(work, 65534, 65534)
        spec = BatchSpec(job_id=2, node=node, script="#!/bin/sh\nid -u; id -g\n",
                         argv=(), env={"PATH": PATH}, work_dir=str(work),
                         stdout="o.txt", stderr="", stdin="", uid=65534, gid=65534)
        result = run(base / "state", spec, forks)
        assert (result.exit_code, result.error) == (0, "")
        out = work / "o.txt"
        assert out.read_text() == "65534\n65534\n"
        assert (out.stat().st_uid, out.stat().st_gid) == (65534, 65534)
        # A root-owned directory the user cannot write: Slurm fails the job.
        os.chown(work, 0, 0)
        os.chmod(work, 0o755)
        out.unlink()
        forget_batch(base / "state", 2)
        result = run(base / "state", spec, forks)
        assert result.exit_code == 1
        assert "Permission denied" in result.error
    finally:
        shutil.rmtree(base, ignore_errors=True)


ESCAPING = """#!/bin/bash
setsid sleep 1000 &
( ( env -i setsid sleep 1001 & ) & )
sleep 0.3
echo "$(pgrep -xf "sleep 100[01]" | wc -l) escaped" > escaped.txt
exit 0
"""


def sleepers() -> set[int]:
    out = set()
    for p in psutil.process_iter():
        try:
            if " ".join(p.cmdline()) in ("sleep 1000", "sleep 1001") \
                    and p.status() != psutil.STATUS_ZOMBIE:
                out.add(p.pid)
        except psutil.Error:
            continue
    return out


def test_a_script_that_exits_0_takes_its_setsid_and_double_forked_children_along(node, tmp_path, forks):
    before = sleepers()
    result = run(tmp_path / "state", make_spec(node, tmp_path, ESCAPING), forks)
    assert (result.exit_code, result.signal, result.error) == (0, 0, "")
    assert (tmp_path / "escaped.txt").read_text().startswith("2 "), "both were running"
    left = sleepers() - before
    assert left == set(), f"the job ended COMPLETED; still running: {left}"
    assert cgroups.jobs(node) == [], "the job's cgroup is gone with it"


def test_the_supervisor_fences_the_job_when_the_lease_ends_unrenewed(node, tmp_path, forks):
    lease_file = tmp_path / "lease.json"
    lease.write(lease_file, lease.Lease(lease.clock() + 1.0, grace_s=0.5))
    script = "#!/bin/bash\ntrap '' TERM\nsetsid sleep 1000 &\nwhile true; do sleep 0.1; done\n"
    t = time.monotonic()
    handle = start_batch(tmp_path / "state", make_spec(node, tmp_path, script,
                                                       lease=str(lease_file)), forks)
    result = asyncio.run(handle.wait())
    took = time.monotonic() - t
    assert result.error.startswith("fenced: lease ended"), result
    assert result.signal == 9, "it ignored SIGTERM: SIGKILL after the grace"
    assert 1.3 < took < 4, f"want lease (1 s) + grace (0.5 s), took {took:.2f} s"
    assert job_processes(node, 1) == []


def test_a_renewed_lease_fences_nothing(node, tmp_path):
    lease_file = tmp_path / "lease.json"
    lease.write(lease_file, lease.Lease(lease.clock() + 0.5, grace_s=0.5))
    stop = threading.Event()

    def agent():
        while not stop.wait(0.2):
            lease.write(lease_file, lease.Lease(lease.clock() + 0.5, grace_s=0.5))
    threading.Thread(target=agent, daemon=True).start()
    try:
        result = run(tmp_path / "state", make_spec(node, tmp_path, "#!/bin/sh\nsleep 2\n",
                                                   lease=str(lease_file)))
    finally:
        stop.set()
    assert (result.exit_code, result.signal, result.error) == (0, 0, "")

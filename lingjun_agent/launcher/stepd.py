"""The batch supervisor: ``python -m lingjun_agent.launcher.stepd <job_dir> [fd]``.

One small process per batch job, our slurmstepd, forked from the agent's
forkserver (``forkserver``) or started afresh where there is none: ``main``
is the same either way. The agent starts it in a session of its own and
forgets it; it outlives the agent (a ``kill -9`` of the
agent leaves the job running) and leaves everything the agent needs to pick
the job up again in ``<job_dir>``:

    spec.json      written by the agent: what to run (BatchSpec)
    script         the batch script, owned by the user, mode 0700
    stepd.json     {"pid", "start_ticks"}     this supervisor, written first
    script.json    {"pid", "start_ticks"}     the script, once it runs
    result.json    BatchResult fields, written atomically as the last act
    stepd.log      this process's own stderr (tracebacks, if any)

and reads the agent's lease (``spec.json``'s ``lease``: a path in the
agent's state dir; see ``lease``).

What it does, in the order Slurm's stepd does it:

1. become a child subreaper, so that the script's orphans stay below us
   (``job_processes`` finds them through us even if they drop the marker);
2. take the user's identity for the file system only (effective ids and
   groups, as Slurm's ``_drop_privileges``), open stdin/stdout/stderr and
   change into the working directory; a missing one gets Slurm's
   ``couldn't chdir to ... going to /tmp instead`` line in the job's stderr;
3. take root back, start the script in its own session as the user (real
   ids, initgroups) with the job's environment plus ``LINGJUN_JOB_MARK``;
   an ``execve`` failure is written to the job's stderr as Slurm words it and
   becomes exit code ``errno`` (Slurm's ``exit(errno)``);
4. tell the agent the script's pid on the handshake fd, wait for the script
   (reaping adopted orphans on the way) while sampling the memory of every
   process below us (``usage``: the peak of the tree's summed RSS is the
   batch step's MaxRSS), and write the result;
5. when the script has exited, kill whatever of the job is left on this node
   (``setsid``, double-forked, background children), as Slurm's proctrack
   ends a step, before the result is written: a job never outlives its end.

Where it can, the script is born in the job's cgroup (``cgroups``: the
supervisor enters it, starts the script, and leaves), so nothing it starts
can escape the kill; elsewhere the kill takes what the marker and our
subreaper tree find (``procs``).

The job's cgroup holds it to its share of the node (``spec.json``'s
``limits``: memory, the CPUs the agent chose, the GPU device files of other
jobs denied); the script starts with its affinity set to those CPUs and
Slurm's ``SLURM_CPU_BIND``. When the OOM killer acted in the batch step's
cgroup, the result says so (``out_of_memory``, signal 125: Slurm's 0:125), the
job's stderr gets slurmstepd's "Detected N oom-kill event(s)" line, and the
controller ends the job OUT_OF_MEMORY. The script runs in the batch step's
cgroup below the job's (``job_N/step_batch``, as Slurm lays it out), so an
srun step that the OOM killer hits in its own cgroup (``step_0``) ends that
step, not the batch script. MaxRSS and CPU time come from the batch step's
cgroup's own accounting where it has one (the sampled tree otherwise).

Fencing (``lease``): while it waits, the supervisor also watches the
agent's lease on this node (``spec["lease"]``). If the lease ends unrenewed
(the agent frozen, dead, or cut off from the controller, which is about to
declare the node DOWN and run the job elsewhere), it stops the job here at
once: SIGTERM, the lease's grace, SIGKILL; the result's ``error`` then
starts with ``fenced:``.

This module is deliberately quick to import, the standard library and
psutil (through ``usage``) only: where there is no forkserver it starts
once per batch job. The marker
names and the process identity helper it shares with the agent side
(procs, batch, taskd) live in ``marks``, below both.
"""
from __future__ import annotations

import ctypes
import json
import os
import pwd
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

from lingjun_agent.launcher import cgroups, lease, usage
from lingjun_agent.launcher.marks import MARK_VAR, SCRIPT_PID, job_mark, start_ticks

PR_SET_CHILD_SUBREAPER = 36

SPEC = "spec.json"
SCRIPT = "script"
STEPD = "stepd.json"
RESULT = "result.json"
LOG = "stepd.log"


def write_json_atomic(path: Path, obj: dict, durable: bool = True) -> None:
    """Write ``obj`` so that a reader sees the old file or the whole new one.

    ``durable``: on disk before we return, so that it outlives a crash of the
    host. Records of live processes (a supervisor's pid, a script's) need
    not: no process survives that crash, and the rename alone is atomic for
    every reader on a running host (an fsync costs milliseconds per file,
    several per job, when the disk is shared with the controller's log).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_EXCL, 0o600)
    try:
        os.write(fd, json.dumps(obj, sort_keys=True).encode())
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if not durable:
        return
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class _UserFs:
    """Act on the file system as the job's user (effective ids only), then return.

    Only in this single-threaded supervisor: effective ids are per process.
    """

    def __init__(self, uid: int, gid: int, groups: list[int]):
        self.active = os.geteuid() == 0 and uid != 0
        self.uid, self.gid, self.groups = uid, gid, groups

    def __enter__(self) -> None:
        if self.active:
            self.saved = os.getgroups()
            os.setgroups(self.groups)
            os.setegid(self.gid)
            os.seteuid(self.uid)

    def __exit__(self, *exc: object) -> None:
        if self.active:
            os.seteuid(0)
            os.setegid(0)
            os.setgroups(self.saved)


def user_groups(uid: int, gid: int) -> list[int]:
    """The supplementary groups ``initgroups`` would give ``uid``."""
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return [gid]
    try:
        return os.getgrouplist(name, gid)
    except OSError:
        return [gid]


# A missing output directory gets this long to appear before the job fails.
# Clients that name the job id in the directory (submitit's "%j/%j_0_log.out")
# can only create it after sbatch has answered; Slurm's start latency hides
# that race, ours (milliseconds) does not. Only the failing case waits.
OUTPUT_DIR_GRACE_S = 3.0


def _open_with_grace(path: str, append: bool) -> int:
    deadline = time.monotonic() + OUTPUT_DIR_GRACE_S
    while True:
        try:
            return _open_output(path, append)
        except FileNotFoundError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def _open_output(path: str, append: bool) -> int:
    """The script's output file, emptied first unless ``append``
    (--open-mode). Always O_APPEND: every write lands at the end, so what the
    agent adds (slurmstepd's "CANCELLED AT" line, written through a descriptor
    of its own) is not overwritten by the script's next write, which it
    would be at the script's own offset."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (0 if append else os.O_TRUNC)
    return os.open(path, flags, 0o666)


def _stderr_line(fd: int | None, text: str) -> None:
    if fd is None:
        return
    try:
        os.write(fd, f"slurmstepd: error: {text}\n".encode())
    except OSError:
        pass


class _Handshake:
    """Tells the waiting agent the script's pid (0: it did not start), once."""

    def __init__(self, fd: int | None):
        self.fd = fd

    def send(self, pid: int) -> None:
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        try:
            os.write(fd, f"{pid}\n".encode())
        except OSError:  # the agent died while starting us: carry on without it
            pass
        finally:
            os.close(fd)


FENCED = "fenced"


def _own_children() -> list[int]:
    """This process's live children (orphans of the job land here: we are a subreaper)."""
    found: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                found.extend(int(p) for p in f.read().split())
    except OSError:
        return [-1]       # cannot tell: look everywhere
    return [p for p in found if start_ticks(p) is not None]


def _kill_rest(node: str, job_id: int, cg: cgroups.JobCgroup | None, grace_s: float) -> None:
    """Stop every process of the job on this node but us: by cgroup where we
    have one (nothing started in it leaves it: Slurm's proctrack/cgroup), and
    whatever the marker and our subreaper tree find where we have none, or
    where a child of ours outlived the cgroup's kill (a scan of all /proc,
    some milliseconds of CPU, that a job's end in its cgroup is spared)."""
    if cg is not None:
        cgroups.terminate(cg, grace_s)
        if not _own_children():
            return
        grace_s = 0.0
    from lingjun_agent.launcher import procs      # here: psutil, only when a job outlived its cgroup
    try:
        procs.terminate_found(node, job_id, grace_s, procs.UNKILLABLE_TIMEOUT_S)
    except procs.UnkillableError:
        traceback.print_exc()


def _result(job_id: int, start: int, *, exit_code: int = 0, sig: int = 0,
            max_rss_kb: int = 0, ave_rss_kb: int = 0, user_cpu_ms: int = 0,
            system_cpu_ms: int = 0, error: str = "", out_of_memory: bool = False) -> dict:
    return {"job_id": job_id, "exit_code": exit_code, "signal": sig,
            "start_time": start, "end_time": int(time.time()),
            "max_rss_kb": max_rss_kb, "ave_rss_kb": ave_rss_kb, "user_cpu_ms": user_cpu_ms,
            "system_cpu_ms": system_cpu_ms, "error": error, "out_of_memory": out_of_memory}


# Slurm's status for a step the OOM killer hit (SIG_OOM 253): sacct shows 0:125.
OOM_SIGNAL = 125


def oom_line(kills: int, job_id: int, step: str) -> str:
    """What Slurm's task/cgroup writes to the job's stderr after an OOM kill."""
    return (f"Detected {kills} oom-kill event(s) in StepId={job_id}.{step}. Some of your "
            "processes may have been killed by the cgroup out-of-memory handler.")


def supervise(job_dir: Path, handshake: _Handshake) -> dict:
    """Run the job described in ``job_dir`` to its end; return the result."""
    spec = json.loads((job_dir / SPEC).read_text())
    job_id = int(spec["job_id"])
    start = int(time.time())
    uid, gid = int(spec["uid"]), int(spec["gid"])
    groups = user_groups(uid, gid)
    work_dir = spec["work_dir"] or "/tmp"
    script = str(job_dir / SCRIPT)

    umask = spec["env"].get("SLURM_UMASK")
    if umask:
        try:
            os.umask(int(umask, 8))
        except ValueError:
            pass

    def resolved(path: str) -> str:
        return path if os.path.isabs(path) else os.path.join(work_dir, path)

    stdout = resolved(spec["stdout"] or f"slurm-{job_id}.out")
    stderr = resolved(spec["stderr"]) if spec["stderr"] else stdout
    stdin = resolved(spec["stdin"]) if spec["stdin"] else os.devnull
    append = bool(spec.get("append", False))

    fds: dict[str, int] = {}
    as_user = _UserFs(uid, gid, groups)
    error = ""
    with as_user:
        for name, path in (("stdout", stdout), ("stderr", stderr), ("stdin", stdin)):
            if name == "stderr" and stderr == stdout and "stdout" in fds:
                fds["stderr"] = fds["stdout"]
                continue
            try:
                if name == "stdin":
                    fds[name] = os.open(path, os.O_RDONLY)
                else:
                    fds[name] = _open_with_grace(path, append)
            except OSError as e:
                error = f"Could not open {name} file {path}: {e.strerror}"
                break
        if not error:
            try:
                os.chdir(work_dir)
            except OSError as e:
                _stderr_line(fds["stderr"],
                             f"couldn't chdir to `{work_dir}': {e.strerror}: "
                             "going to /tmp instead")
                try:
                    os.chdir("/tmp")
                except OSError:
                    error = "couldn't chdir to /tmp either. dying."
    if error:
        _stderr_line(fds.get("stderr"), error)
        handshake.send(0)
        return _result(job_id, start, exit_code=1, error=error)

    env = dict(spec["env"])
    env[MARK_VAR] = job_mark(spec["node"], job_id)
    drop: dict = {}
    if os.geteuid() == 0 and uid != 0:
        drop = {"user": uid, "group": gid, "extra_groups": groups}
    limits = cgroups.Limits.from_json(spec.get("limits"))
    # the job's cgroup, held to its share of the node, and the batch step's
    # below it (job_N/step_batch): the script and all it starts live there,
    # its srun steps beside it in their own
    job_cg = cgroups.create(spec["node"], job_id, limits=limits)
    cg = cgroups.create_step(job_cg, "batch", limits)
    if limits is not None and limits.cpus:
        env.update(cgroups.cpu_bind_env(limits.cpus))
    try:
        # born in the job's cgroup, on its CPUs (pinned alone where no cgroup is)
        with cgroups.inside(cg), cgroups.pinned(limits.cpus if limits and cg is None else ()):
            proc = subprocess.Popen(
                [script, *spec["argv"]], stdin=fds["stdin"], stdout=fds["stdout"],
                stderr=fds["stderr"], env=env, start_new_session=True,
                close_fds=True, restore_signals=True, **drop)
    except OSError as e:
        errno_ = e.errno or 1
        msg = f"execve(): {script}: {os.strerror(errno_)}"
        _stderr_line(fds["stderr"], msg)
        handshake.send(0)
        return _result(job_id, start, exit_code=errno_, error=msg)
    rss = usage.RssSampler()
    # now, before a quick script is gone: the script alone (its tree is a
    # scan of all /proc, and it has had no time to start one)
    rss.add(_rss_kb(proc.pid))
    for fd in set(fds.values()):
        os.close(fd)

    write_json_atomic(job_dir / SCRIPT_PID,
                      {"pid": proc.pid, "start_ticks": start_ticks(proc.pid)}, durable=False)
    handshake.send(proc.pid)

    lease_file = spec.get("lease") or None
    fenced = ""

    def fence(lapsed: lease.Lapsed) -> None:
        nonlocal fenced
        fenced = f"{FENCED}: {lapsed}"
        print(f"job {job_id}: {fenced}; stopping it here", file=sys.stderr, flush=True)
        _kill_rest(spec["node"], job_id, job_cg, lapsed.lease.grace_s)

    status = _wait_sampling(proc.pid, rss, lease_file, fence)
    # The script is done: the rest of the job on this node goes with it.
    _kill_rest(spec["node"], job_id, job_cg, 0.0)
    _reap_children()
    oom_kills, held = 0, cgroups.Usage()
    if cg is not None:     # the batch step's own: an srun step's OOM kill is not its
        oom_kills, held = cgroups.oom_kills(cg), cgroups.usage(cg)
    if job_cg is not None:
        cgroups.remove(job_cg)
    if not fenced and lease_file is not None:
        cur = lease.read(lease_file)
        if cur is not None and cur.left() <= 0:     # it ended while we were killing
            fenced = f"{FENCED}: {lease.Lapsed(cur)}"
    user_ms, sys_ms = usage.children_cpu_ms()
    if held.user_cpu_ms or held.system_cpu_ms:    # the cgroup's count misses no process
        user_ms, sys_ms = held.user_cpu_ms, held.system_cpu_ms
    proc.returncode = os.waitstatus_to_exitcode(status)
    if os.WIFSIGNALED(status):
        code, sig = 0, os.WTERMSIG(status)
    else:
        code, sig = os.WEXITSTATUS(status), 0
    if oom_kills:
        code, sig = 0, OOM_SIGNAL
        _tell_stderr(stderr, as_user, oom_line(oom_kills, job_id, "batch"))
        print(f"job {job_id}: {oom_kills} OOM kill(s) in {cg}", file=sys.stderr, flush=True)
    return _result(job_id, start, exit_code=code, sig=sig,
                   max_rss_kb=max(rss.peak_kb, held.max_rss_kb),
                   ave_rss_kb=rss.average_kb, user_cpu_ms=user_ms, system_cpu_ms=sys_ms,
                   error=fenced, out_of_memory=bool(oom_kills))


def _rss_kb(pid: int) -> int:
    """One process's resident set (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE_KB
    except (OSError, IndexError, ValueError):
        return 0


PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def _tell_stderr(path: str, as_user: _UserFs, text: str) -> None:
    """One more slurmstepd line at the end of the job's stderr, written as the user."""
    with as_user:
        try:
            fd = _open_output(path, True)
        except OSError:
            return
    try:
        _stderr_line(fd, text)
    finally:
        os.close(fd)


def _reap_children() -> None:
    """Reap the killed orphans that were ours (we are their subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        except InterruptedError:
            continue
        if not pid:
            return


def _wait_sampling(script_pid: int, rss: usage.RssSampler, lease_file: str | None = None,
                   on_lapse=None) -> int:
    """Wait for the script, reaping adopted orphans, and sample the memory of
    everything below this supervisor (the script and whatever it left behind:
    we are their subreaper) until the script ends. Returns its wait status.

    The script's pidfd wakes us at once when it exits; an orphan's exit is
    reaped at the next tick. The end of the agent's lease wakes us too: then
    ``on_lapse(Lapsed)`` fences the job, once, and we wait on for the script.
    """
    pidfd = os.pidfd_open(script_pid)
    ticks = usage.intervals()
    sample = False        # the caller has just taken one
    try:
        while True:
            try:
                pid, status, _ = os.wait4(-1, os.WNOHANG)
            except InterruptedError:
                continue
            if pid == script_pid:
                return status
            if pid:
                continue  # an orphan: look again before sleeping
            if sample:
                try:
                    rss.add(usage.tree_rss_kb(os.getpid(), include_root=False))
                except Exception:  # accounting must never lose the exit status
                    traceback.print_exc()
            sample = True
            try:
                lease.wait(lease_file, [pidfd], next(ticks))
            except lease.Lapsed as lapsed:
                lease_file = None            # fence once; then only wait
                if on_lapse is not None:
                    on_lapse(lapsed)
    finally:
        os.close(pidfd)


def begin_supervisor(argv: list[str]) -> tuple[Path, _Handshake]:
    """What every supervisor (this one, and taskd's for steps) does first:
    record itself in its directory (``argv[1]``), ignore SIGPIPE (a vanished
    agent; its children get it back through Popen's restore_signals; nothing
    else is ignored, as dispositions survive exec), and become a child
    subreaper so its children's orphans stay below it."""
    where = Path(argv[1])
    handshake = _Handshake(int(argv[2]) if len(argv) > 2 else None)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    write_json_atomic(where / STEPD, {"pid": os.getpid(),
                                      "start_ticks": start_ticks(os.getpid())}, durable=False)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    return where, handshake


def main(argv: list[str]) -> int:
    job_dir, handshake = begin_supervisor(argv)
    try:
        result = supervise(job_dir, handshake)
    except Exception as e:  # a supervisor bug must still leave a result behind
        traceback.print_exc()
        name = job_dir.name
        result = _result(int(name) if name.isdigit() else 0, int(time.time()),
                         exit_code=1,
                         error=f"slurmstepd failed: {type(e).__name__}: {e}")
        handshake.send(0)
    write_json_atomic(job_dir / RESULT, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

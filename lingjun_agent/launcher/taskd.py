"""The step supervisor: ``python -m lingjun_agent.launcher.taskd <step_dir> [fd]``.

One small single-threaded process per srun step per node, the sibling of the
batch supervisor (``stepd``): the agent starts it in a session of its own
and forgets it, so the step's tasks outlive an agent restart, and everything
the agent (this one or the next) needs lies in ``<step_dir>``:

    spec.json          written by the agent: what to run (launcher/steps.py StepSpec)
    stepd.json         {"pid", "start_ticks"}   this supervisor, written first
    task.<rank>.json   {"pid", "start_ticks"}   each task, once it runs
    out.<rank>.1       the task's stdout, for the agent to relay by offset
    out.<rank>.2       its stderr (absent where srun -o/-e sends a stream to a file)
    exit.<rank>.json   how the task ended (TaskResult fields), after its output is whole
    result.json        {"ranks": n}, written last: every task has its exit file
    stepd.log          this process's own stderr

Why a process of its own, not the agent: the agent is a multi-threaded gRPC
process, and ``fork()`` there (which a switch of user ids forces on
``subprocess``) runs gRPC's fork handlers while other threads hold its
locks; tasks of ordinary users crashed that way. Here there is one thread.

What it does, in slurmstepd's order:

1. become a child subreaper (orphans of the tasks stay below us);
2. take the user's identity for the file system (``stepd._UserFs``: effective
   ids and groups), open the ``srun -o/-e`` files of the tasks (``%t``,
   ``%n``, ``%N``; each emptied once, then shared in append mode) and change
   into the working directory *as the user*: a directory the user may not
   enter gives Slurm's ``couldn't chdir to `...': Permission denied: going to
   /tmp instead`` on each task's stderr, and the task runs in /tmp;
3. take root back and start each task in its own session as the user (real
   ids, initgroups) with the step's environment plus ``LINGJUN_JOB_MARK``;
   an ``execve`` failure is written as Slurm words it and becomes exit code
   ``errno``;
4. tell the agent how many tasks started on the handshake fd; wait for the
   tasks (reaping adopted orphans), sampling each task's tree for MaxRSS;
   when a task exits, what is left in its session gets DRAIN_S to finish
   writing and is then killed (Slurm's proctrack ends the rest of a step);
   then its exit file is written.

The tasks live in the step's own cgroup below the job's (``job_N/step_M``,
Slurm's layout): the job's holds them to the job's share of the node
(``spec.json``'s ``limits``; see ``cgroups``), the step's to the step's
``--mem`` within it (``step_memory_bytes``). Each task starts on the job's
CPUs with ``SLURM_CPU_BIND`` set; a task that the OOM killer took in the
step's cgroup exits with signal 125 (Slurm's 0:125; srun then exits 253) and
slurmstepd's "Detected N oom-kill event(s)" line on its stderr, and the
batch script (in ``step_batch``) goes on. When the step's last task here
ends, whatever is left in the step's cgroup is killed (a ``setsid`` or
double-forked child), and the cgroup's CPU time and peak memory complete
the step's usage.

SIGTERM to this supervisor kills every task's process group with SIGKILL
(the agent's way to end a step at once); the exits then say signal 9.

The relay files are written by the tasks themselves through the descriptors
we give them, so output is on disk as soon as it is written, whether or not
an agent is there to read it.

Fencing and confinement (``lease``, ``cgroups``): each task is started
inside the job's cgroup on this node, so everything it forks is found and
killed with the job; while tasks run the supervisor watches the agent's
lease (``spec.json``'s ``lease``) and, when it lapses unrenewed, kills the
step and the rest of the job's cgroup here, as the batch supervisor does.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

from lingjun_agent.launcher import cgroups, lease, usage, userfs
from lingjun_agent.launcher.marks import MARK_VAR, job_mark, start_ticks
from lingjun_agent.launcher.stepd import (
    OOM_SIGNAL,
    begin_supervisor,
    RESULT,
    SPEC,
    _Handshake,
    _stderr_line,
    _UserFs,
    oom_line,
    user_groups,
    write_json_atomic,
)

DRAIN_S = 0.2  # after a task exits, how long what it left running may keep writing


def task_file(rank: int) -> str:
    return f"task.{rank}.json"


def exit_file(rank: int) -> str:
    return f"exit.{rank}.json"


def out_file(rank: int, stream: int) -> str:
    return f"out.{rank}.{stream}"


def _exit(rank: int, *, exit_code: int = 0, sig: int = 0, error: str = "",
          max_rss_kb: int = 0, ave_rss_kb: int = 0, user_cpu_ms: int = 0,
          system_cpu_ms: int = 0) -> dict:
    return {"rank": rank, "exit_code": exit_code, "signal": sig, "error": error,
            "max_rss_kb": max_rss_kb, "ave_rss_kb": ave_rss_kb,
            "user_cpu_ms": user_cpu_ms, "system_cpu_ms": system_cpu_ms}


class _Step:
    """The tasks of one step on this node, while they run."""

    def __init__(self, step_dir: Path, spec: dict):
        self.dir = step_dir
        self.spec = spec
        self.killing = False
        self.pids: dict[int, int] = {}            # pid -> rank, while it runs
        self.rss: dict[int, usage.RssSampler] = {}
        self.ended: dict[int, dict] = {}          # rank -> its exit, not yet written
        self.drain_until: dict[int, float] = {}   # rank -> when what is left gets killed
        self.pgids: dict[int, int] = {}           # rank -> its session's id
        # The job's cgroup on this node and this step's below it (job_N/step_M;
        # None: no cgroups here, the marker tracks), the step held to its own
        # --mem within the job's
        self.limits = cgroups.Limits.from_json(spec.get("limits"))
        self.job_cgroup = cgroups.create(spec["node"], int(spec["job_id"]), limits=self.limits)
        step_mem = int(spec.get("step_memory_bytes") or 0)
        self.cgroup = cgroups.create_step(
            self.job_cgroup, str(spec["step_id"]),
            cgroups.Limits(memory_bytes=step_mem, cpus=self.limits.cpus if self.limits else ())
            if step_mem or self.limits else None)
        self.oom_seen = cgroups.oom_kills(self.cgroup) if self.cgroup is not None else 0
        self.cpu_reported_ms = 0                  # CPU time in the exits written so far
        self.lease_file: str | None = spec.get("lease") or None

    def kill_all(self, *_: object) -> None:
        """SIGTERM: end the step now (runs as a signal handler, too): each
        task's session, then whatever is left in the step's cgroup (what
        left its session: setsid, a double fork)."""
        self.killing = True
        for pgid in self.pgids.values():
            _kill_group(pgid)
        if self.cgroup is not None:
            cgroups.kill(self.cgroup, unkillable_s=5.0)

    def finish(self, rank: int, result: dict) -> None:
        write_json_atomic(self.dir / exit_file(rank), result)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _open_user_files(tasks: list[dict]) -> tuple[dict[str, int], str]:
    """The srun -o/-e files of the tasks, each opened once (emptied, then
    appended to by every task that shares it). Called as the user."""
    fds: dict[str, int] = {}
    for t in tasks:
        for path in (t.get("stdout_path", ""), t.get("stderr_path", "")):
            if not path or path in fds:
                continue
            try:
                fds[path] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
                                    0o666)
            except OSError as e:
                return fds, f"Could not open output file {path}: {e.strerror}"
    return fds, ""


def supervise(step_dir: Path, step: _Step, handshake: _Handshake) -> None:
    spec = step.spec
    uid, gid = int(spec["uid"]), int(spec["gid"])
    groups = user_groups(uid, gid)
    tasks = spec["tasks"]
    os.umask(userfs.umask_of(spec["env"]))

    # Where each task's streams go: the user's file (srun -o/-e %t) or a relay
    # file here, which root creates in its own directory before taking the
    # user's identity (the task writes it through the descriptor only).
    relay: dict[tuple[int, int], int] = {}
    for t in tasks:
        for stream, key in ((1, "stdout_path"), (2, "stderr_path")):
            if not t.get(key):
                relay[(t["rank"], stream)] = os.open(
                    step_dir / out_file(t["rank"], stream),
                    os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

    work_dir = spec["work_dir"] or "/tmp"
    chdir_error = fatal = ""
    with _UserFs(uid, gid, groups):
        user_fds, fatal = _open_user_files(tasks)
        if not fatal:
            try:
                os.chdir(work_dir)
            except OSError as e:
                chdir_error = (f"couldn't chdir to `{work_dir}': {e.strerror}: "
                               "going to /tmp instead")
                try:
                    os.chdir("/tmp")
                except OSError:
                    fatal = "couldn't chdir to /tmp either. dying."

    def fd_of(t: dict, stream: int) -> int:
        path = t.get("stdout_path" if stream == 1 else "stderr_path", "")
        return user_fds[path] if path else relay[(t["rank"], stream)]

    if fatal:
        for t in tasks:
            if (t["rank"], 2) in relay:
                _stderr_line(relay[(t["rank"], 2)], fatal)
            step.finish(t["rank"], _exit(t["rank"], exit_code=1, error=fatal))
        handshake.send(0)
        return
    started = 0
    for t in tasks:
        err_fd = fd_of(t, 2)
        if chdir_error:
            _stderr_line(err_fd, chdir_error)
        if step.killing:
            step.finish(t["rank"], _exit(t["rank"], sig=int(signal.SIGKILL)))
            continue
        started += _start_task(step, t, fd_of(t, 1), err_fd, uid, gid, groups)
    for fd in set(relay.values()) | set(user_fds.values()):
        os.close(fd)
    handshake.send(started)
    _wait(step)


def _start_task(step: _Step, t: dict, out_fd: int, err_fd: int, uid: int, gid: int,
                groups: list[int]) -> int:
    """Start one task as the user; 1 if it runs, 0 if it could not start.

    The job's cgroup is joined here: this supervisor joins it before the
    first Popen (see ``main``), so every task and all it forks start inside.
    """
    spec, rank = step.spec, t["rank"]
    argv = list(spec["argv"])
    if not argv:
        msg = "execve(): : No such file or directory"
        _stderr_line(err_fd, msg)
        step.finish(rank, _exit(rank, exit_code=2, error=msg))
        return 0
    env = dict(spec["env"])
    env.update(t.get("env", {}))
    env[MARK_VAR] = job_mark(spec["node"], int(spec["job_id"]))
    if step.limits is not None and step.limits.cpus:
        env.update(cgroups.cpu_bind_env(step.limits.cpus))
    drop: dict = {}
    if os.geteuid() == 0 and uid != 0:
        drop = {"user": uid, "group": gid, "extra_groups": groups}
    try:
        # born in the job's cgroup, on its CPUs (pinned alone where no cgroup is)
        with cgroups.inside(step.cgroup), cgroups.pinned(
                step.limits.cpus if step.limits and step.cgroup is None else ()):
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out_fd, stderr=err_fd, env=env,
                start_new_session=True, close_fds=True, restore_signals=True, **drop)
    except OSError as e:
        errno_ = e.errno or 1
        msg = f"execve(): {argv[0]}: {os.strerror(errno_)}"
        _stderr_line(err_fd, msg)
        step.finish(rank, _exit(rank, exit_code=errno_, error=msg))
        return 0
    step.pids[proc.pid] = rank
    step.pgids[rank] = proc.pid
    proc.returncode = 0   # we reap it ourselves (wait4); keep Popen's __del__ quiet
    sampler = step.rss[rank] = usage.RssSampler()
    sampler.add(usage.tree_rss_kb(proc.pid))  # now, before a quick task is gone
    write_json_atomic(step.dir / task_file(rank),
                      {"pid": proc.pid, "start_ticks": start_ticks(proc.pid)}, durable=False)
    if step.killing:
        _kill_group(proc.pid)
    return 1


def _new_oom_kills(step: _Step, rank: int) -> int:
    """OOM kills in the job's cgroup since we last looked; a task that died of
    SIGKILL meanwhile is counted as one of them, and its stderr says so as
    slurmstepd says it."""
    if step.cgroup is None:
        return 0
    seen = cgroups.oom_kills(step.cgroup)
    new, step.oom_seen = seen - step.oom_seen, seen
    if new > 0 and (step.dir / out_file(rank, 2)).exists():
        fd = os.open(step.dir / out_file(rank, 2), os.O_WRONLY | os.O_APPEND)
        try:
            _stderr_line(fd, oom_line(new, int(step.spec["job_id"]), str(step.spec["step_id"])))
        finally:
            os.close(fd)
    return max(new, 0)


def _end_of_step(step: _Step, last: dict) -> None:
    """The step's last task here has ended: kill what is left in the step's
    cgroup (Slurm's proctrack ends a step with every process in it), then
    fold the cgroup's own accounting into the last exit: the CPU time its
    reaped tasks did not account for (orphans, killed leftovers), and on a
    node with one task its peak memory, which the sampling may have missed."""
    cg = step.cgroup
    if cg is None:
        return
    cgroups.kill(cg, unkillable_s=5.0)
    held = cgroups.usage(cg)
    total = held.user_cpu_ms + held.system_cpu_ms
    mine = last["user_cpu_ms"] + last["system_cpu_ms"]
    extra = total - step.cpu_reported_ms - mine
    if extra > 0 and total:
        last["user_cpu_ms"] += extra * held.user_cpu_ms // total
        last["system_cpu_ms"] += extra - extra * held.user_cpu_ms // total
    if len(step.spec.get("tasks", ())) == 1:
        last["max_rss_kb"] = max(last["max_rss_kb"], held.max_rss_kb)


def _wait(step: _Step) -> None:
    """Reap tasks and orphans until every task's exit is written."""
    pidfds = {}
    for pid in step.pids:
        try:
            pidfds[pid] = os.pidfd_open(pid)
        except ProcessLookupError:
            pass
    ticks = usage.intervals()
    next_sample = time.monotonic()
    while step.pids or step.ended:
        while True:
            try:
                pid, status, ru = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            except InterruptedError:
                continue
            if not pid:
                break
            rank = step.pids.pop(pid, None)
            fd = pidfds.pop(pid, None)
            if fd is not None:
                os.close(fd)
            if rank is None:
                continue            # an orphan we adopted
            if os.WIFSIGNALED(status):
                code, sig = 0, os.WTERMSIG(status)
            else:
                code, sig = os.WEXITSTATUS(status), 0
            if sig == signal.SIGKILL and _new_oom_kills(step, rank):
                sig = OOM_SIGNAL       # srun then exits 253, Slurm's code for it
            user_ms, sys_ms = usage.cpu_ms(ru)
            rss = step.rss[rank]
            step.ended[rank] = _exit(rank, exit_code=code, sig=sig, max_rss_kb=rss.peak_kb,
                                     ave_rss_kb=rss.average_kb, user_cpu_ms=user_ms,
                                     system_cpu_ms=sys_ms)
            step.drain_until[rank] = time.monotonic() + DRAIN_S
        now = time.monotonic()
        for rank in list(step.ended):
            pgid = step.pgids[rank]
            if _group_alive(pgid):
                if now < step.drain_until[rank]:
                    continue
                _kill_group(pgid)
                if _group_alive(pgid) and now < step.drain_until[rank] + 1.0:
                    continue   # let the kill land, then its output is whole
            result = step.ended.pop(rank)
            if not step.pids and not step.ended:
                _end_of_step(step, result)
            step.cpu_reported_ms += result["user_cpu_ms"] + result["system_cpu_ms"]
            step.finish(rank, result)
        if not step.pids and not step.ended:
            break
        if now >= next_sample:
            for pid, rank in step.pids.items():
                try:
                    step.rss[rank].add(usage.tree_rss_kb(pid))
                except Exception:  # accounting must never lose the exit status
                    traceback.print_exc()
            next_sample = now + next(ticks)
        wait = next_sample - now
        if step.ended:
            wait = min(wait, 0.02)
        if step.lease_file is not None and not step.killing:
            cur = lease.read(step.lease_file)
            if cur is not None and cur.left() <= 0:
                # Fenced: the agent's lease lapsed unrenewed, so the controller
                # may start this job elsewhere; nothing of it may run on here.
                print(f"taskd: {lease.Lapsed(cur)}: killing the step", file=sys.stderr)
                step.kill_all()
                if step.job_cgroup is not None:
                    cgroups.kill(step.job_cgroup)
            elif cur is not None:
                wait = min(wait, max(cur.left(), 0.0))
        try:
            select.select(list(pidfds.values()), [], [], max(wait, 0.0))
        except InterruptedError:
            pass
    for fd in pidfds.values():
        os.close(fd)


def main(argv: list[str]) -> int:
    step_dir, handshake = begin_supervisor(argv)
    spec = json.loads((step_dir / SPEC).read_text())
    step = _Step(step_dir, spec)
    signal.signal(signal.SIGTERM, step.kill_all)
    # Confinement: each task is born in the job's cgroup (_start_task), and
    # _wait watches the agent's lease at each turn (a lapsed lease kills the
    # step and the job's cgroup here): no task outlives a fence.
    try:
        supervise(step_dir, step, handshake)
    except Exception as e:  # a supervisor bug must still leave every exit behind
        traceback.print_exc()
        step.kill_all()
        msg = f"slurmstepd failed: {type(e).__name__}: {e}"
        for t in spec.get("tasks", []):
            if not (step_dir / exit_file(t["rank"])).exists():
                step.finish(t["rank"], _exit(t["rank"], exit_code=1, error=msg))
        handshake.send(0)
    if step.cgroup is not None:
        cgroups.kill(step.cgroup, unkillable_s=5.0)
        cgroups.remove(step.cgroup)
    write_json_atomic(step_dir / RESULT, {"ranks": len(spec.get("tasks", []))})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

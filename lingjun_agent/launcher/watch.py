"""The last sign of life of each job on this node, for hang detection.

A job lives, as far as the controller can tell, while it writes: its batch
script's output files grow, its srun tasks' output passes through the agent,
or it touches ``LINGJUN_HEARTBEAT_FILE`` (for a trainer that logs rarely).
``ActivityWatch`` keeps, per job, the newest of those moments; the agent
reports them in each heartbeat and the controller decides what is a hang
(``lingjund/service/faulttol.py``). Files are looked at only when a heartbeat
goes out (one ``stat`` per file), never polled in between.

Only regular files count: ``-o /dev/null`` has an mtime that any process on
the machine moves.

    w = ActivityWatch()
    w.watch(7, ["/home/u/slurm-7.out", "/ckpt/7/.lingjun-heartbeat"])
    w.touch(7, 1000.0)              # task output relayed at t=1000
    w.activity([7])                 # -> {7: max(1000.0, mtimes of the files)}
"""
from __future__ import annotations

import logging
import os
import stat
import time
from pathlib import Path

log = logging.getLogger(__name__)

HEARTBEAT_VAR = "LINGJUN_HEARTBEAT_FILE"
CHECKPOINT_VAR = "LINGJUN_CHECKPOINT_DIR"


class ActivityWatch:
    def __init__(self) -> None:
        self._seen: dict[int, float] = {}
        self._files: dict[int, tuple[str, ...]] = {}

    def watch(self, job_id: int, paths) -> None:
        """Count growth of these files (absolute paths; "" ignored) as the job's activity."""
        self._files[job_id] = tuple(p for p in paths if p)

    def touch(self, job_id: int, when: float | None = None) -> None:
        t = time.time() if when is None else when
        if t > self._seen.get(job_id, 0.0):
            self._seen[job_id] = t

    def forget(self, job_id: int) -> None:
        self._seen.pop(job_id, None)
        self._files.pop(job_id, None)

    def activity(self, job_ids) -> dict[int, float]:
        """Per job of ``job_ids`` with any sign of life: the newest, Unix seconds."""
        out: dict[int, float] = {}
        for jid in job_ids:
            last = self._seen.get(jid, 0.0)
            for path in self._files.get(jid, ()):
                last = max(last, _mtime(path))
            if last:
                out[jid] = last
        return out


def _mtime(path: str) -> float:
    try:
        st = os.stat(path)
    except OSError:
        return 0.0
    return st.st_mtime if stat.S_ISREG(st.st_mode) else 0.0


def batch_paths(stdout: str, stderr: str, work_dir: str, env: dict[str, str]) -> list[str]:
    """What to watch for a batch script: its output files and its heartbeat file."""
    def resolved(p: str) -> str:
        return p if not p or os.path.isabs(p) else os.path.join(work_dir or "/", p)
    return [resolved(stdout), resolved(stderr), env.get(HEARTBEAT_VAR, "")]


def prepare_checkpoint_dir(env: dict[str, str], uid: int, gid: int) -> None:
    """Make the job's LINGJUN_CHECKPOINT_DIR (kept across its runs), owned by the
    job's user when the agent runs as root. A failure is logged, not fatal: the
    job may not use it, and a job that does finds out from its own error."""
    path = env.get(CHECKPOINT_VAR)
    if not path:
        return
    d = Path(path)
    try:
        created = not d.exists()
        d.mkdir(parents=True, exist_ok=True)
        if created and os.geteuid() == 0:
            os.chown(d, uid, gid)
            d.chmod(0o700)
    except OSError as e:
        log.warning("cannot prepare checkpoint directory %s: %s", path, e)

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

Per rank, too, so a hang names who stopped while the others went on: each
srun task on this node counts from its start, and lives by its own relayed
output, its own output files (``srun -o``) and the mtime of
``$LINGJUN_HEARTBEAT_DIR/rank.N`` (N its SLURM_PROCID; a trainer's step
loop may touch it). Heartbeats carry only the ``QUIET_RANKS`` longest silent
ranks of each job on this node, so a report stays small at any size; the
controller needs no more to find a straggler.

    w.watch_ranks(7, 0, {4: ["/ckpt/7/.lingjun-heartbeat.d/rank.4"], 5: [...]}, at=990.0)
    w.touch_rank(7, 0, 5, 1000.0)   # rank 5 wrote at t=1000
    w.quiet_ranks(7)                # -> [(0, 4, 990.0), (0, 5, 1000.0)], oldest first
"""
from __future__ import annotations

import logging
import os
import stat
import time
from pathlib import Path

log = logging.getLogger(__name__)

HEARTBEAT_VAR = "LINGJUN_HEARTBEAT_FILE"
HEARTBEAT_DIR_VAR = "LINGJUN_HEARTBEAT_DIR"
CHECKPOINT_VAR = "LINGJUN_CHECKPOINT_DIR"
QUIET_RANKS = 4          # per job and heartbeat: the ranks silent the longest


class ActivityWatch:
    def __init__(self) -> None:
        self._seen: dict[int, float] = {}
        self._files: dict[int, tuple[str, ...]] = {}
        # job -> (step, rank) -> (its start, its last sign of life (0: none yet), its files)
        self._ranks: dict[int, dict[tuple[int, int], tuple[float, float, tuple[str, ...]]]] = {}

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
        self._ranks.pop(job_id, None)

    def watch_ranks(self, job_id: int, step_id: int, files: dict[int, list[str]],
                    at: float | None = None) -> None:
        """Follow each of a step's ranks here (rank -> its files), alive at ``at``."""
        t = time.time() if at is None else at
        ranks = self._ranks.setdefault(job_id, {})
        for rank, paths in files.items():
            ranks[(step_id, rank)] = (t, 0.0, tuple(p for p in paths if p))

    def touch_rank(self, job_id: int, step_id: int, rank: int, when: float | None = None) -> None:
        t = time.time() if when is None else when
        self.touch(job_id, t)
        ranks = self._ranks.get(job_id)
        if ranks is None or (step_id, rank) not in ranks:
            return
        start, last, paths = ranks[(step_id, rank)]
        if t > last:
            ranks[(step_id, rank)] = (start, t, paths)

    def forget_rank(self, job_id: int, step_id: int, rank: int) -> None:
        """A rank that exited is not silent."""
        ranks = self._ranks.get(job_id)
        if ranks is not None:
            ranks.pop((step_id, rank), None)

    def forget_step(self, job_id: int, step_id: int) -> None:
        ranks = self._ranks.get(job_id)
        if ranks is not None:
            for key in [k for k in ranks if k[0] == step_id]:
                del ranks[key]

    def quiet_ranks(self, job_id: int, limit: int = QUIET_RANKS) -> list[tuple[int, int, float]]:
        """The ``limit`` ranks of ``job_id`` here silent the longest: (step, rank,
        last sign of life), oldest first."""
        out = sorted(self._rank_times(job_id))
        return [(step, rank, last) for last, step, rank in out[:limit]]

    def _rank_times(self, job_id: int, since_start: bool = True) -> list[tuple[float, int, int]]:
        """(last sign of life, step, rank) of each rank; ``since_start``: a rank
        that has shown none counts from its start (its silence is timed from
        there), else only real signs count (the job's own activity: a step
        that merely started is no sign that the job lives)."""
        out = []
        for (step, rank), (start, last, paths) in self._ranks.get(job_id, {}).items():
            for path in paths:
                last = max(last, _mtime(path))
            out.append((max(last, start) if since_start else last, step, rank))
        return out

    def activity(self, job_ids) -> dict[int, float]:
        """Per job of ``job_ids`` with any sign of life: the newest, Unix seconds."""
        out: dict[int, float] = {}
        for jid in job_ids:
            last = self._seen.get(jid, 0.0)
            for path in self._files.get(jid, ()):
                last = max(last, _mtime(path))
            for t, _, _ in self._rank_times(jid, since_start=False):
                last = max(last, t)
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


def rank_paths(env: dict[str, str], work_dir: str, rank: int, stdout: str,
               stderr: str) -> list[str]:
    """What to watch for one srun task: its own output files (srun -o; "" when
    relayed) and its heartbeat file in LINGJUN_HEARTBEAT_DIR."""
    def resolved(p: str) -> str:
        return p if not p or os.path.isabs(p) else os.path.join(work_dir or "/", p)
    d = env.get(HEARTBEAT_DIR_VAR, "")
    return [resolved(stdout), resolved(stderr), os.path.join(d, f"rank.{rank}") if d else ""]


def prepare_checkpoint_dir(env: dict[str, str], uid: int, gid: int) -> None:
    """Make the job's LINGJUN_CHECKPOINT_DIR (kept across its runs) and its
    LINGJUN_HEARTBEAT_DIR, owned by the job's user when the agent runs as
    root. A failure is logged, not fatal: the job may not use them, and a job
    that does finds out from its own error."""
    for var in (CHECKPOINT_VAR, HEARTBEAT_DIR_VAR):
        path = env.get(var)
        if not path:
            continue
        d = Path(path)
        try:
            created = not d.exists()
            d.mkdir(parents=True, exist_ok=True)
            if created and os.geteuid() == 0:
                os.chown(d, uid, gid)
                d.chmod(0o700)
        except OSError as e:
            log.warning("cannot prepare directory %s=%s: %s", var, path, e)

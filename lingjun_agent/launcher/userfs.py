"""A job's files are opened as the job's user, never as the agent.

The agent runs as root; a task's ``srun -o`` file opened by root would let a
user write (or truncate) anything root can: ``-o /etc/cron.d/x``, a symlink
planted in a shared directory, ``../../`` out of a directory they may not
write; a working directory entered by root would let ``srun --chdir`` read
through directories the user may not enter. Slurm's stepd opens output files
and changes directory after ``_drop_privileges``; so do ours: the batch and
step supervisors (stepd.py, taskd.py) are single-threaded processes that take
the user's effective ids for the file system (``stepd._UserFs``), and the
kernel's permission checks decide, not string checks on the path. The agent
itself (threaded, gRPC) never switches ids and never forks to do so.

``umask_of`` is the umask both supervisors give the user's files and tasks.
"""
from __future__ import annotations

DEFAULT_UMASK = 0o022


def umask_of(env: dict[str, str]) -> int:
    """SLURM_UMASK ("0027", as sbatch/srun record the submitter's umask), else 022."""
    text = env.get("SLURM_UMASK", "")
    try:
        value = int(text, 8)
    except ValueError:
        return DEFAULT_UMASK
    return value if 0 <= value <= 0o777 else DEFAULT_UMASK

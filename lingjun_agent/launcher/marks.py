"""How a job's processes are found on a node, by the agent and by their supervisor.

Every process of a job carries a marker in its environment
(``LINGJUN_JOB_MARK=<node>:<job id>``, set by ``stepd`` and ``taskd`` as they
start the script and the tasks); a batch supervisor carries its own
(``LINGJUN_STEPD_MARK``) and its job directory (``LINGJUN_STEPD_DIR``), where
it records the script's pid and start (``script.json``). A pid with its start
in clock ticks since boot (``start_ticks``) names one process for the
whole uptime.

Both sides read these: the supervisor (``stepd``) and the task starter
(``taskd``) set them, and the agent side (``procs``, ``batch``) finds,
signals and ends a job's processes by them, while ``stepd`` calls on
``procs`` to end what a job left behind. So they live here, below both,
in the standard library only: ``stepd`` starts once per batch job where
there is no forkserver, and must stay quick to import.
"""
from __future__ import annotations

MARK_VAR = "LINGJUN_JOB_MARK"
STEPD_MARK_VAR = "LINGJUN_STEPD_MARK"
STEPD_DIR_VAR = "LINGJUN_STEPD_DIR"      # the supervisor's job (or step) directory
SCRIPT_PID = "script.json"               # in that directory: {"pid", "start_ticks"} of the script


def job_mark(node: str, job_id: int) -> str:
    """The marker value for one job on one node (several agents share a host)."""
    return f"{node}:{job_id}"


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot; None if it is gone.

    With the pid this names one process for the whole uptime: a recycled pid
    has a later start. Zombies count as gone.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])

"""A rank's heartbeat, for a training script: the agent counts the mtime of
``$LINGJUN_HEARTBEAT_DIR/rank.N`` (N: the srun task's SLURM_PROCID) as that
rank's sign of life (lingjun_agent/launcher/watch.py), so a hang names the
rank that stopped while the others went on.

Touch it from the step loop (``touch()``), or let a thread do it
(``start()``): a thread keeps beating while the main thread waits in a
collective for a peer, so the ranks that wait stay "active" and the one that
stopped (SIGSTOP, a dead machine, a process wedged whole) is the one named.
A thread does not see a main thread stuck with the GIL released; touch from
the loop where that matters.

    import lingjun.heartbeat
    lingjun.heartbeat.start()          # every 2 s, in a daemon thread
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

DIR_VAR = "LINGJUN_HEARTBEAT_DIR"


def path() -> Path | None:
    """This rank's heartbeat file; None outside a Lingjun job step."""
    d, rank = os.environ.get(DIR_VAR), os.environ.get("SLURM_PROCID")
    return Path(d) / f"rank.{rank}" if d and rank is not None else None


def touch() -> None:
    p = path()
    if p is not None:
        try:
            p.touch()
        except OSError:
            pass        # the directory went with the job; nothing to tell


def start(interval_s: float = 2.0) -> threading.Thread | None:
    """Touch the file every ``interval_s`` from a daemon thread; None outside a step."""
    if path() is None:
        return None
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(interval_s):
            touch()
    touch()
    t = threading.Thread(target=beat, name="lingjun-heartbeat", daemon=True)
    t.start()
    return t

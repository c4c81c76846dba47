"""sd_notify(3) for Type=notify units: datagrams to $NOTIFY_SOCKET.

What the daemons say, and when:

    READY=1                 serving (the controller: listening; the agent: registered)
    RELOADING=1             SIGHUP received, re-reading the configuration (with
    MONOTONIC_USEC=...      the monotonic clock, as sd_notify(3) asks), then
                            READY=1 once done, whether the new file was taken or not
    STOPPING=1              SIGTERM received, shutting down
    WATCHDOG=1              every third of WatchdogSec, from the event loop

The watchdog pings come from a task on the daemon's one event loop: a loop
that is wedged (a blocking call, a pass that never yields) sends none, and
systemd kills and restarts the daemon after ``WatchdogSec=``. A thread would
keep pinging while the loop is stuck, which is what the watchdog must catch.

A few lines of the standard library; systemd's protocol is stable and a
dependency (python-systemd, sdnotify) would add nothing but an import.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import time

log = logging.getLogger("lingjun.sdnotify")

# Pings per WatchdogSec: sd_watchdog_enabled(3) advises at least two; three
# leave room for a loop that is slow for a moment without being wedged.
PINGS_PER_INTERVAL = 3


def notify(state: str) -> bool:
    """Send ``state`` ("READY=1", several lines allowed); False when not under
    systemd ($NOTIFY_SOCKET unset) or the socket cannot be reached (said once
    in the log at debug level: a daemon never fails for its supervisor's sake)."""
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(addr)
            s.sendall(state.encode())
    except OSError as e:
        log.debug("sd_notify %r to %s failed: %s", state, addr, e)
        return False
    return True


def reloading() -> bool:
    """RELOADING=1 with the monotonic clock in microseconds (sd_notify(3))."""
    usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    return notify(f"RELOADING=1\nMONOTONIC_USEC={usec}")


def watchdog_interval_s() -> float | None:
    """How often to ping, from $WATCHDOG_USEC (None: no watchdog asked for).

    $WATCHDOG_PID, when set, must be this process (sd_watchdog_enabled(3)):
    a child that inherited the environment must not ping for its parent."""
    usec = os.environ.get("WATCHDOG_USEC", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    pid = os.environ.get("WATCHDOG_PID", "")
    if pid and pid != str(os.getpid()):
        return None
    return int(usec) / 1e6 / PINGS_PER_INTERVAL


async def watchdog(interval_s: float) -> None:
    """Ping WATCHDOG=1 every ``interval_s`` for as long as the event loop runs
    this task; a loop that does not come back to it stops the pings."""
    while True:
        notify("WATCHDOG=1")
        await asyncio.sleep(interval_s)


def start_watchdog() -> asyncio.Task | None:
    """The watchdog task on the running loop, when systemd asked for one.
    The caller keeps the reference (a task nobody holds may be collected)."""
    interval = watchdog_interval_s()
    if interval is None:
        return None
    log.info("systemd watchdog: pinging every %.1f s", interval)
    return asyncio.get_running_loop().create_task(watchdog(interval), name="sd-watchdog")

"""``lingjund`` with two measurements added from outside its code.

    python -m bench.sim.probe -c lingjun.toml      (the same arguments as lingjund)

The controller is the real one (``lingjund.daemon.main``); before it starts
this wraps ``lingjund.service.scheduling.run_pass_off_loop`` to log each pass's wall
time, and runs a task on its event loop that logs how late the loop wakes
(its lag, what a heartbeat or a command waits behind a long handler). The
lines (``sim-probe pass ...``, ``sim-probe lag ...``) go to the
controller's log, where ``report.py`` reads them. Where the controller one
day logs its own pass times, read those instead; if ``run_pass_off_loop`` moves,
passes go unmeasured and the report says so.
"""
from __future__ import annotations

import asyncio
import logging
import sys
import time

from lingjund import daemon
from lingjund.service import scheduling

log = logging.getLogger("lingjun.sim.probe")
LAG_TICK_S = 0.05
LAG_WINDOW_S = 5.0


def _time_passes() -> None:
    run_pass = getattr(scheduling, "run_pass_off_loop", None)
    if run_pass is None:
        return

    async def timed(ctl, *args, **kwargs):
        t0 = time.perf_counter()
        started = await run_pass(ctl, *args, **kwargs)
        log.info("sim-probe pass %.4f s started %s", time.perf_counter() - t0, started)
        return started
    scheduling.run_pass_off_loop = timed


async def _lag_monitor() -> None:
    worst, total, n = 0.0, 0.0, 0
    window_end = time.monotonic() + LAG_WINDOW_S
    while True:
        t0 = time.monotonic()
        await asyncio.sleep(LAG_TICK_S)
        lag = max(0.0, time.monotonic() - t0 - LAG_TICK_S)
        worst, total, n = max(worst, lag), total + lag, n + 1
        if time.monotonic() >= window_end:
            log.info("sim-probe lag max %.4f s mean %.4f s", worst, total / n)
            worst, total, n = 0.0, 0.0, 0
            window_end = time.monotonic() + LAG_WINDOW_S


def main() -> int:
    _time_passes()
    serve = daemon.serve
    keep: list[asyncio.Task] = []

    async def probed_serve(*args, **kwargs):
        keep.append(asyncio.get_running_loop().create_task(_lag_monitor()))
        try:
            return await serve(*args, **kwargs)
        finally:
            keep[0].cancel()
    daemon.serve = probed_serve
    return daemon.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())

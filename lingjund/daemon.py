"""lingjund: the controller daemon.

    lingjund [-c lingjun.toml] [--listen HOST:PORT] [--state-dir DIR]

Runs the gRPC server and the scheduler loop on one asyncio loop. The
scheduler runs when something changed (a submission, a job's end, a node
registering) and on a timer, never once per event in a storm: wake-ups that
arrive during a pass coalesce into the next one. The pure core of a pass
runs in a worker thread (``scheduling.run_pass_off_loop``), so heartbeats and
commands are served while it decides; the live state it was given is a
frozen snapshot, and what changed meanwhile is caught at commit.

It runs as ``[controller] user`` (Slurm's SlurmUser), never needing root:
started by root with that set, it becomes that user before it opens
anything, as slurmctld does; started by anyone else than that user, it
refuses with a message saying so (``controller_user.py``).
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Callable

from grpc_health.v1 import health_pb2

from lingjun import auth, logs
from lingjun import config as configmod
from lingjun.admission import Admission, raise_descriptor_limit
from lingjun.command_server import CommandSocketServer
from lingjun.credential import CredentialServer
from lingjun import sdnotify
from lingjun.httpdoor import HttpDoor
from lingjun.sdnotify import notify
from lingjund import controller_user, statedir
from lingjund.service import (accounting, allocations, configuration, faulttol, health, mail, nodes,
                              quarantine, scheduling, steps, timers, webhooks)
from lingjund.service import associations
from lingjund.metrics import ControllerMetrics, RpcTimer
from lingjund.service.context import Controller
from lingjund.store.store import Store, StoreFull
from lingjund.transport.api import SlurmApiServicer
from lingjund.transport.authn import ServerAuth
from lingjund.transport.command_socket import servicer_answer
from lingjund.transport.server import SERVICES, build_server
from lingjund.web.dashboard import Dashboard
from lingjund.web.samples import Ring

log = logging.getLogger("lingjund")


# A wake is followed by more in a storm (a batch of submissions, jobs ending
# together): the pass waits until none came for SETTLE_QUIET_S, at most
# SETTLE_MAX_S after the first, so a storm makes a few passes, not one each.
# And a pass that a wake asks for starts no sooner after the last one ended
# than the CPU time that one took on this loop's thread (at most
# BUSY_GAP_MAX_S): a pass builds its snapshot and applies its plan here, and
# back to back, passes would leave the loop little time to take the
# submissions in. Small passes leave no gap to speak of.
SETTLE_QUIET_S = 0.01
SETTLE_MAX_S = 0.05
BUSY_GAP_MAX_S = 1.0


async def _settle(wake: asyncio.Event, not_before: float) -> None:
    loop = asyncio.get_running_loop()
    until = loop.time() + SETTLE_MAX_S
    while (left := until - loop.time()) > 0:
        wake.clear()
        try:
            await asyncio.wait_for(wake.wait(), timeout=min(SETTLE_QUIET_S, left))
        except asyncio.TimeoutError:
            break
    if (gap := not_before - loop.time()) > 0:
        await asyncio.sleep(gap)


# The collector's thresholds once the state is loaded: Python's default runs a
# young collection every 700 allocations and a full one every 70,000 (subject
# to its rule of a quarter of the heap); with 100,000 pending jobs in memory
# that was half of a scheduling pass. Young collections every 50,000, full
# ones a few hundred times rarer; what the start loaded is frozen out of them.
GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def scheduler_loop(ctl: Controller, on_pass: Callable[[float], None] | None = None) -> None:
    """``on_pass``: told each scheduling pass's duration in seconds (metrics)."""
    wake = ctl.wake_event()
    started_at = ctl.clock()
    loop = asyncio.get_running_loop()
    not_before = 0.0        # loop time: the last pass's end + the loop CPU it took
    while True:
        cc = ctl.config.controller       # read each time: a reconfigure may change it
        timeout = min(cc.scheduler_interval_s, cc.heartbeat_timeout_s / 2)
        deadline = timers.next_deadline(ctl)     # the lifecycle's next moment
        if deadline is not None:
            timeout = max(0.05, min(timeout, deadline - ctl.clock() + 0.01))
        try:
            await asyncio.wait_for(wake.wait(), timeout=timeout)
            await _settle(wake, not_before)
        except asyncio.TimeoutError:
            pass
        wake.clear()
        began = time.thread_time()      # this thread's CPU: the loop's, not the core's
        try:
            nodes.check_heartbeats(ctl)
            faulttol.handle_lost_nodes(ctl)
            faulttol.check_hangs(ctl)
            quarantine.check_suspects(ctl)
            health.check_prologs(ctl)
            allocations.sweep_orphans(ctl, started_at)
            steps.sweep_unfollowed(ctl, started_at)
            t0 = time.perf_counter()
            await scheduling.run_pass_off_loop(ctl)
            if on_pass is not None:
                on_pass(time.perf_counter() - t0)
            not_before = loop.time() + min(time.thread_time() - began, BUSY_GAP_MAX_S)
        except StoreFull as e:
            # Said once a pass, without a traceback: the log may share the full disk.
            log.error("scheduling pass wrote nothing: no space left for the state store (%s)", e)
            await asyncio.sleep(1.0)
        except Exception:
            log.exception("scheduling pass failed")
            await asyncio.sleep(0.5)


def reconfigure(ctl: Controller) -> None:
    """SIGHUP: re-read the configuration file, as ``scontrol reconfigure``;
    systemd hears RELOADING=1 before and READY=1 after (sd_notify(3))."""
    sdnotify.reloading()
    try:
        configuration.reload(ctl)
    except configmod.ConfigError as e:
        log.error("reconfigure (SIGHUP) failed, configuration unchanged: %s", e)
    finally:
        notify("READY=1")


async def serve(cfg: configmod.Config, server_auth: ServerAuth, ready_file: str | None = None) -> None:
    """Serve until SIGTERM; the caller holds the state directory's lock (statedir.acquire)."""
    cc = cfg.controller
    # History reads (sacct) build their pages in a worker thread; the event
    # loop waits for the GIL at most this long each time it wakes (CPython's
    # default is 5 ms, several of which a single RPC may pay).
    sys.setswitchinterval(0.001)
    store = Store(os.path.join(cc.state_dir, "lingjund.db"), synchronous=cc.synchronous,
                  keep_finished_s=cc.min_job_age_s)
    ctl = Controller(config=cfg, store=store)
    ctl.started_at = ctl.clock()
    steps.recover(ctl)
    tune_gc()
    ctl.wake_event()
    mailer = mail.Mailer(ctl)       # --mail-type: told of each committed state change
    store.watch_states(mailer.job_changed)
    mailer.start()
    hooks = webhooks.Webhooks(ctl)   # [[webhooks]]: job and node events, POSTed off the hot path
    store.watch_states(hooks.job_changed)
    store.watch_nodes(hooks.node_changed)
    hooks.start()
    api = SlurmApiServicer(ctl)
    metrics = ControllerMetrics(ctl) if cc.metrics_address else None
    # What one user may hold of this daemon, at every door (lingjun/admission.py):
    # worked out from the descriptor limit, raised to its hard limit first.
    doors = Admission.for_daemon(cfg.limits, logging.getLogger("lingjund.admission"),
                                 raise_descriptor_limit())
    log.info("limits: %d connections at the unix doors (%d per user), %d gRPC connections, "
             "%d calls and %d streams per user", doors.budget.connections,
             doors.budget.connections_per_user, doors.budget.grpc_connections,
             doors.budget.requests_per_user, doors.budget.streams_per_user)
    server, port, health_servicer = build_server(ctl, cc.listen, server_auth, api,
                                                 RpcTimer(metrics) if metrics else None,
                                                 admission=doors)
    creds = commands = None
    if cfg.auth.controller_serves_socket:   # users' tokens on this host, and their commands' calls
        creds = CredentialServer(server_auth.key, cfg.auth.socket, cfg.auth.token_ttl_s, doors)
        await creds.start()
        answer = servicer_answer(api)
        commands = CommandSocketServer(cfg.auth.socket,
                                       metrics.timed_answer(answer) if metrics else answer,
                                       cfg.authz.max_message_bytes, doors)
        await commands.start()
    await server.start()
    door = ring = None
    if metrics is not None:     # /metrics and the dashboard, on this loop (lingjun/httpdoor.py)
        ring = Ring()
        door = HttpDoor(Dashboard(ctl, server_auth.key, metrics, ring).routes(), "the dashboard")
        web_port = await door.start(cc.metrics_address)
        host = cc.metrics_address.rpartition(":")[0]
        Path(cc.state_dir, "metrics.address").write_text(f"{host}:{web_port}\n")
        log.info("metrics and dashboard on http://%s:%d/ (metrics at /metrics)", host, web_port)
    for name in ("", *SERVICES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("lingjund for cluster %s listening on %s (port %d), state in %s",
             cfg.cluster_name, cc.listen, port, cc.state_dir)
    if ready_file:
        Path(ready_file).write_text(str(port))
    # Handlers before READY=1: a SIGTERM right after it must stop us cleanly,
    # not kill us with the default action before they exist.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, reconfigure, ctl)
    notify("READY=1")
    watchdog = sdnotify.start_watchdog()
    sched = asyncio.create_task(scheduler_loop(ctl, metrics.observe_pass if metrics else None))
    sampler = asyncio.create_task(ring.keep(ctl)) if ring is not None else None
    purger = asyncio.create_task(accounting.purge_loop(ctl))
    usage = asyncio.create_task(associations.usage_loop(ctl))
    await stop.wait()
    log.info("stopping")
    notify("STOPPING=1")
    # Every service NOT_SERVING while the listener is still open, so health
    # watchers and load balancers hear it before connections are refused.
    await health_servicer.enter_graceful_shutdown()
    if watchdog is not None:
        watchdog.cancel()
    ctl.stopping = True  # allocation streams now break by our doing: keep their jobs
    sched.cancel()
    purger.cancel()
    if sampler is not None:
        sampler.cancel()
    if door is not None:
        await door.close()
    usage.cancel()
    accounting.close_readers(ctl)
    ctl.agents.close_all()
    if commands is not None:       # no new calls by either door while the last ones finish
        await commands.close()
    await server.stop(grace=2)
    if creds is not None:
        await creds.close()
    await mailer.close()
    await hooks.close()
    store.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="lingjund", description="Lingjun controller daemon")
    p.add_argument("-c", "--config", help="TOML configuration file (default: $LINGJUN_CONF or /etc/lingjun/lingjun.toml)")
    p.add_argument("--listen", help="HOST:PORT to listen on (overrides the config)")
    p.add_argument("--state-dir", help="directory of the state store (overrides the config)")
    p.add_argument("--ready-file", help="write the bound port here once serving")
    p.add_argument("-v", "--verbose", action="store_true", help="the same as --log-level=debug")
    p.add_argument("--log-level", choices=logs.LEVELS, default="info")
    p.add_argument("--check-config", action="store_true",
                   help="check the configuration file, say what is wrong in it, and exit")
    args = p.parse_args(argv)
    logs.setup("debug" if args.verbose else args.log_level, "%(name)s %(levelname)s %(message)s")
    try:
        cfg = configmod.load(args.config)
    except configmod.ConfigError as e:
        print(f"lingjund: error: {e}", file=sys.stderr)
        return 1
    if args.check_config:
        print(f"lingjund: {cfg.path or 'the default configuration'}: {len(cfg.nodes)} nodes, "
              f"{len(cfg.effective_partitions())} partitions; no errors")
        return 0
    over = {}
    if args.listen:
        over["listen"] = args.listen
    if args.state_dir:
        over["state_dir"] = args.state_dir
    if over:
        cfg = dataclasses.replace(cfg, controller=dataclasses.replace(cfg.controller, **over))
    # Before anything is opened or bound: the user we run as (root becomes
    # [controller] user, as slurmctld becomes SlurmUser: controller_user.py),
    # files we make are ours alone, and the state directory is ours alone for
    # as long as we live (statedir.py).
    try:
        controller_user.become(cfg.controller.user, cfg.controller.state_dir, cfg.auth.socket)
    except (controller_user.ControllerUserError, OSError) as e:
        print(f"lingjund: error: {e}", file=sys.stderr)
        return 1
    os.umask(0o077)
    try:
        lock_fd = statedir.acquire(cfg.controller.state_dir)
        statedir.secure(cfg.controller.state_dir)
    except OSError as e:
        print(f"lingjund: error: {e.strerror or e}", file=sys.stderr)
        return 1
    try:
        server_auth = ServerAuth.from_config(cfg)   # no key, no controller
    except (auth.KeyFileError, OSError) as e:
        print(f"lingjund: error: {e}", file=sys.stderr)
        return 1
    try:
        asyncio.run(serve(cfg, server_auth, args.ready_file))
    except OSError as e:
        print(f"lingjund: error: {e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        os.close(lock_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())

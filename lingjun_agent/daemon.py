"""lingjun-agent: the per-node agent.

    lingjun-agent --node NAME [--controller HOST:PORT] [--state-dir DIR] [-c lingjun.toml]
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sys
from pathlib import Path
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST

from lingjun import auth, logs
from lingjun import config as configmod
from lingjun.admission import Admission
from lingjun.command_server import CommandSocketServer, ControllerChannel, relay_answer
from lingjun.credential import CredentialServer
from lingjun import sdnotify
from lingjun.httpdoor import HttpDoor, Response
from lingjun.sdnotify import notify
from lingjun_agent import metrics
from lingjun_agent.runner import Agent

log = logging.getLogger("lingjun_agent")


async def _serve_metrics(agent: Agent, address: str) -> HttpDoor:
    """The agent's /metrics (lingjun_agent/metrics.py) on this loop; where it
    listens goes to STATE_DIR/metrics.address (port 0 picks a free one)."""
    reg = metrics.registry(agent)
    door = HttpDoor({"/metrics": lambda req: Response(200, metrics.render(reg), CONTENT_TYPE_LATEST)},
                    "the agent's metrics")
    port = await door.start(address)
    host = address.rpartition(":")[0]
    agent.state_dir.mkdir(parents=True, exist_ok=True)
    (agent.state_dir / "metrics.address").write_text(f"{host}:{port}\n")
    log.info("node=%s: metrics on http://%s:%d/metrics", agent.node, host, port)
    return door


async def _main(agent: Agent, creds: CredentialServer | None = None,
                commands: CommandSocketServer | None = None,
                relay: ControllerChannel | None = None,
                reload: Callable[[], None] | None = None, metrics_address: str = "") -> None:
    door = await _serve_metrics(agent, metrics_address) if metrics_address else None
    if creds is not None:
        await creds.start()      # [auth] agent_serves_socket
    if commands is not None:
        await commands.start()   # and this host's commands, relayed to the controller
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if reload is not None:
        loop.add_signal_handler(signal.SIGHUP, reload)
    task = asyncio.create_task(agent.run())

    async def ready() -> None:
        await agent.registered.wait()
        notify("READY=1")
    announced = asyncio.create_task(ready())
    watchdog = sdnotify.start_watchdog()       # from this loop: a wedged loop stops it
    await stop.wait()
    # Jobs keep running: their supervisors outlive the agent, as slurmstepd does.
    notify("STOPPING=1")
    for t in (announced, watchdog):
        if t is not None:
            t.cancel()
    task.cancel()
    if creds is not None:
        await creds.close()
    if commands is not None:
        await commands.close()
    if relay is not None:
        await relay.close()
    if door is not None:
        await door.close()
    agent.net.stop()


# Read at start only: a change to these in the file is logged on SIGHUP and
# waits for a restart (the agent's identity, its sockets and where it keeps state).
RESTART_ONLY = ("auth", "agent.state_dir", "agent.device_root", "agent.sysfs_root",
                "agent.mps_control", "controller.listen", "controller.address",
                "network.rdma_sysfs_root", "agent.metrics_address", "agent.output_sink")


def reloader(agent: Agent, path: str | None, node: str, cfg: configmod.Config) -> Callable[[], None]:
    """SIGHUP: re-read the configuration file, as slurmd does on ``scontrol
    reconfigure``. The probes, their interval and the reconnect backoff change
    at once; RESTART_ONLY keys are logged; a broken file changes nothing. No job
    is touched. systemd hears RELOADING=1 before and READY=1 after."""
    current = [cfg]

    def reload() -> None:
        sdnotify.reloading()
        try:
            new = configmod.load(path)
        except configmod.ConfigError as e:
            log.error("reconfigure (SIGHUP) failed, configuration unchanged: %s", e)
            notify("READY=1")
            return
        pending = [k for k in RESTART_ONLY if _key(current[0], k) != _key(new, k)]
        if pending:
            log.warning("reconfigure (SIGHUP): %s changed; it takes effect when the agent "
                        "restarts", ", ".join(pending))
        agent.reconfigure(new.sanity, new.agent.reconnect_min_s, new.agent.reconnect_max_s,
                          _configured(new, node))
        current[0] = new
        log.info("reconfigure (SIGHUP): configuration re-read from %s", path or "the default file")
        notify("READY=1")
    return reload


def _key(cfg: configmod.Config, dotted: str):
    value = cfg
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def _configured(cfg: configmod.Config, node: str) -> tuple[int, int, int]:
    """(cpus, memory MB, GPUs) the configuration gives the node: what its probes check."""
    n = cfg.node(node)
    return (n.cpus, n.memory_mb, n.gpus) if n else (0, 0, 0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="lingjun-agent", description="Lingjun node agent")
    p.add_argument("-c", "--config")
    p.add_argument("--node", default=socket.gethostname().split(".")[0], help="node name (default: short hostname)")
    p.add_argument("--controller", help="controller HOST:PORT (default: from the config)")
    p.add_argument("--state-dir", help="agent state directory")
    p.add_argument("--cpus", type=int, default=0, help="report this many CPUs (local cluster)")
    p.add_argument("--memory-mb", type=int, default=0, help="report this much memory (local cluster)")
    p.add_argument("--own-hostname", action="store_true",
                   help="run in a UTS namespace whose hostname is the node name (local cluster)")
    p.add_argument("-v", "--verbose", action="store_true", help="the same as --log-level=debug")
    p.add_argument("--log-level", choices=logs.LEVELS, default="info")
    args = p.parse_args(argv)
    if args.own_hostname:
        from lingjun_agent import hostname  # here: only the local cluster's agents take a hostname of their own
        hostname.become(args.node)  # first, before any thread exists
    logs.setup("debug" if args.verbose else args.log_level,
               f"{args.node} %(name)s %(levelname)s %(message)s")
    try:
        cfg = configmod.load(args.config)
    except configmod.ConfigError as e:
        print(f"lingjun-agent: error: {e}", file=sys.stderr)
        return 1
    try:
        key = auth.ClusterKey.load(cfg.auth.key_file, auth.key_owners(cfg.controller.user))
        tls_ca = None
        if cfg.auth.tls:
            with open(cfg.auth.tls_ca or cfg.auth.tls_cert, "rb") as f:
                tls_ca = f.read()
    except (auth.KeyFileError, OSError) as e:
        print(f"lingjun-agent: error: {e}", file=sys.stderr)
        return 1
    job_env = {"LINGJUN_AUTH_SOCKET": cfg.auth.socket}
    if cfg.auth.tls:
        job_env["LINGJUN_TLS_CA"] = str(Path(cfg.auth.tls_ca or cfg.auth.tls_cert).absolute())
    creds = commands = relay = None
    controller = args.controller or cfg.controller.connect_address
    if cfg.auth.agent_serves_socket:
        # Each user's share of this agent's two sockets (lingjun/admission.py);
        # its descriptor limit is left as it is: the jobs it starts inherit it.
        doors = Admission.for_daemon(cfg.limits, logging.getLogger("lingjun_agent.admission"))
        creds = CredentialServer(key, cfg.auth.socket, cfg.auth.token_ttl_s, doors)
        relay = ControllerChannel(controller, tls_ca)
        commands = CommandSocketServer(cfg.auth.socket,
                                       relay_answer(relay.stub, key, cfg.auth.token_ttl_s),
                                       cfg.authz.max_message_bytes, doors)
    agent = Agent(args.node, controller,
                  args.state_dir or f"{cfg.agent.state_dir}/{args.node}",
                  cpus=args.cpus, memory_mb=args.memory_mb,
                  reconnect_min_s=cfg.agent.reconnect_min_s, reconnect_max_s=cfg.agent.reconnect_max_s,
                  rdma_root=cfg.network.rdma_sysfs_root, key=key, tls_ca=tls_ca,
                  job_env=job_env, sanity=cfg.sanity, configured=_configured(cfg, args.node),
                  device_root=cfg.agent.device_root, sysfs_root=cfg.agent.sysfs_root,
                  mps_control=cfg.agent.mps_control, lldpctl=cfg.agent.lldpctl,
                  output_sink=configmod.output_sink_target(cfg.agent.output_sink))
    try:
        asyncio.run(_main(agent, creds, commands, relay,
                          reloader(agent, args.config, args.node, cfg), cfg.agent.metrics_address))
    except OSError as e:                    # the credential socket could not be served
        print(f"lingjun-agent: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

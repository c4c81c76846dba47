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

from lingjun import auth, logs
from lingjun import config as configmod
from lingjun.command_server import CommandSocketServer, ControllerChannel, relay_answer
from lingjun.credential import CredentialServer
from lingjun import sdnotify
from lingjun.sdnotify import notify
from lingjun_agent.runner import Agent

log = logging.getLogger("lingjun_agent")


async def _main(agent: Agent, creds: CredentialServer | None = None,
                commands: CommandSocketServer | None = None,
                relay: ControllerChannel | None = None) -> None:
    if creds is not None:
        await creds.start()      # [auth] agent_serves_socket
    if commands is not None:
        await commands.start()   # and this host's commands, relayed to the controller
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
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
    agent.net.stop()


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
        from lingjun_agent import hostname
        hostname.become(args.node)  # first, before any thread exists
    logs.setup("debug" if args.verbose else args.log_level,
               f"{args.node} %(name)s %(levelname)s %(message)s")
    try:
        cfg = configmod.load(args.config)
    except configmod.ConfigError as e:
        print(f"lingjun-agent: error: {e}", file=sys.stderr)
        return 1
    try:
        key = auth.ClusterKey.load(cfg.auth.key_file)
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
        creds = CredentialServer(key, cfg.auth.socket, cfg.auth.token_ttl_s)
        relay = ControllerChannel(controller, tls_ca)
        commands = CommandSocketServer(cfg.auth.socket,
                                       relay_answer(relay.stub, key, cfg.auth.token_ttl_s),
                                       cfg.authz.max_message_bytes)
    agent = Agent(args.node, controller,
                  args.state_dir or f"{cfg.agent.state_dir}/{args.node}",
                  cpus=args.cpus, memory_mb=args.memory_mb,
                  reconnect_min_s=cfg.agent.reconnect_min_s, reconnect_max_s=cfg.agent.reconnect_max_s,
                  rdma_root=cfg.network.rdma_sysfs_root, key=key, tls_ca=tls_ca,
                  job_env=job_env, sanity=cfg.sanity, configured=_configured(cfg, args.node),
                  device_root=cfg.agent.device_root, sysfs_root=cfg.agent.sysfs_root,
                  mps_control=cfg.agent.mps_control, lldpctl=cfg.agent.lldpctl)
    try:
        asyncio.run(_main(agent, creds, commands, relay))
    except OSError as e:                    # the credential socket could not be served
        print(f"lingjun-agent: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

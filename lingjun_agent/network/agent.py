"""The agent's side of the network: profiles in from the controller, reports out.

The controller sends the node's profile in the registration reply and again
whenever ``scontrol reconfigure`` changes it. A new profile is handed to the
running watcher (no restart); no profile stops the watcher and leaves the
NICs as they are (the reconciler never undoes a configuration, it only stops
owning it). Reports cross from the watcher thread to the asyncio loop with
``call_soon_threadsafe`` and go up only when they say something new; after a
reconnect the last one is sent again, so the controller never shows stale
state for long.
"""
from __future__ import annotations

import asyncio
import logging

from lingjun.v1 import agent_pb2, api_pb2
from lingjun_agent.network import rdma
from lingjun.netprofile import ProfileError, check_static, from_spec
from lingjun_agent.network.watcher import REFUSED, NetReconciler, Report, report_msg

log = logging.getLogger("lingjun_agent.network")


class NetworkOwner:
    def __init__(self, agent, rdma_root: str):
        self.agent = agent
        self.rdma_root = rdma_root
        self.rec: NetReconciler | None = None
        self.spec: agent_pb2.NetProfileSpec | None = None
        self.last_sent: api_pb2.NetStatusReport | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        # uplink -> times its traffic moved from primary to backup since the
        # agent started (lingjun_agent/metrics.py)
        self.failovers: dict[str, int] = {}

    def set_profile(self, spec: agent_pb2.NetProfileSpec | None) -> None:
        """Called on the agent's loop, at registration and on a push."""
        self.loop = asyncio.get_running_loop()
        if spec is not None and not spec.name and not spec.interfaces and not spec.uplinks:
            spec = None
        if spec == self.spec and (spec is None or self.rec is not None):
            if self.last_sent is not None:
                self._send(self.last_sent)          # a new session: say it again
            elif spec is None:
                self._no_profile()
            return
        self.spec = spec
        if spec is None:
            self.stop()
            self._no_profile()
            return
        prof = from_spec(spec)
        try:
            check_static(prof)
        except ProfileError as e:
            log.error("network: profile %s refused: %s", prof.name, e)
            self.stop()
            self._report(Report(profile=prof.name, state=REFUSED, message=str(e),
                                rdma=tuple(rdma.inventory(self.rdma_root))))
            return
        if self.rec is None:
            self.rec = NetReconciler(prof, rdma_root=self.rdma_root, on_report=self._from_thread)
            self.rec.start()
        else:
            log.info("network: profile %s pushed, converging to it", prof.name)
            self.rec.set_profile(prof)

    def stop(self) -> None:
        if self.rec is not None:
            self.rec.stop()
            self.rec = None

    def _no_profile(self) -> None:
        self._report(Report(profile="", state="none", rdma=tuple(rdma.inventory(self.rdma_root))))

    def _from_thread(self, rep: Report) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._report, rep)

    def _report(self, rep: Report) -> None:
        if rep.changes or rep.errors:
            log.info("network: %s: %d change(s) %s", rep.state, len(rep.changes),
                     "; ".join(rep.errors))
        msg = report_msg(rep)
        before = {u.name: u.active for u in self.last_sent.uplinks} if self.last_sent else {}
        for u in msg.uplinks:
            if u.active == "backup" and before.get(u.name, "primary") != "backup":
                self.failovers[u.name] = self.failovers.get(u.name, 0) + 1
        same = self.last_sent is not None and not rep.changes and _key(msg) == _key(self.last_sent)
        if same:
            return
        if self.last_sent is None or msg.state != self.last_sent.state:
            log.info("network: profile %r %s %s", rep.profile, rep.state, rep.message)
        self.last_sent = msg
        self._send(msg)

    def _send(self, msg: api_pb2.NetStatusReport) -> None:
        self.agent.send(agent_pb2.AgentMessage(net_status=msg))


def _key(msg: api_pb2.NetStatusReport) -> bytes:
    m = api_pb2.NetStatusReport()
    m.CopyFrom(msg)
    m.ClearField("time")
    m.ClearField("changes")
    return m.SerializeToString(deterministic=True)



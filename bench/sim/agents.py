"""Simulated node agents: K nodes speaking the real agent protocol from one process.

Each simulated node opens one AgentService.Connect stream to a real
``lingjund`` and does what ``lingjun_agent/runner.py`` does on the wire,
without processes behind it:

    connect ──► AuthHello, ◄── AuthChallenge    (lingjun_agent.runner.prove)
            ──► AuthProof, Register(inventory, running jobs, unacked results)
            ◄── RegisterReply(heartbeat interval, expected jobs, acked results)
            ──► Heartbeat every interval (one ticker for all nodes)
            ◄── SanityPrologRequest ──► SanityReport(prolog, passed)
            ◄── LaunchBatch ──► BatchStarted ... run time later ... BatchFinished
            ◄── TerminateJob ──► BatchFinished(signal 15) if it ran here, JobCleaned
            ◄── SignalJob(TERM/KILL/INT to the batch) ──► BatchFinished(signal)
            ◄── LaunchTasks ──► AgentTaskExit(0) per task (steps end at once)
    stream breaks ──► back off (0.2 s doubling to 5 s, jittered) and register again

A simulated batch job runs for the time its script names in a directive
line ``# lingjun-sim: run=SECONDS [exit=CODE]`` (``workload.py`` writes it);
a script without one runs ``DEFAULT_RUN_S``. The same script run on a real
cluster just sleeps (the directive is a comment).

Cheap per node: a node is a small object with a stream and a dict of its
jobs; heartbeats come from one ticker task that walks the nodes in slices
over the interval (so 10,000 nodes do not wake 10,000 sleeping tasks);
writes go through a per-node deque drained by a task that exists only while
something is queued. Each node has its own channel (one TCP connection, as
a real agent) unless ``per_channel`` > 1 puts that many streams on one:
cheaper, but not what a controller sees in a real cluster. (Bursts of
streams CANCELLED at the handshake were gRPC core's limit on calls the
server has not yet taken, 1,000 to 3,000, and its 30 s limit on their wait;
the controller raises both, ``lingjund/transport/server.py``.)

Faults on purpose: ``silence(node)`` makes a node stop heartbeating and
answering, and keeps it from reconnecting once the controller ends its
stream (a node whose host hung); ``break_stream(node)`` ends the stream from
the agent's side and lets it reconnect (a network blip).
"""
from __future__ import annotations

import asyncio
import collections
import logging
import random
import re
import signal
import time
from dataclasses import dataclass, field

import grpc

from lingjun import auth
from lingjun.v1 import agent_pb2, agent_pb2_grpc
from lingjun_agent import runner

log = logging.getLogger("lingjun.sim.agents")

VERSION = "lingjun-sim-0.1"
DEFAULT_RUN_S = 1.0
DIRECTIVE = re.compile(r"^#\s*lingjun-sim:(.*)$", re.MULTILINE)
END_SIGNALS = {int(signal.SIGTERM), int(signal.SIGKILL), int(signal.SIGINT)}


def run_spec(script: str) -> tuple[float, int]:
    """(run seconds, exit code) from the script's ``# lingjun-sim:`` line."""
    run_s, exit_code = DEFAULT_RUN_S, 0
    m = DIRECTIVE.search(script)
    if m:
        for word in m.group(1).split():
            key, _, value = word.partition("=")
            try:
                if key == "run":
                    run_s = float(value)
                elif key == "exit":
                    exit_code = int(value)
            except ValueError:
                pass
    return run_s, exit_code


async def prove(call, key: auth.ClusterKey, node: str) -> None:
    """The real agent's handshake (lingjun_agent.runner.prove, mutual: the
    controller proves the cluster key too), so a change there reaches here."""
    await runner.prove(call, key, node)


@dataclass(frozen=True)
class NodeShape:
    cpus: int = 64
    memory_mb: int = 512_000
    gpus: int = 8
    gpu_type: str = ""


@dataclass
class FleetStats:
    """What the agents saw; the report reads it."""
    connects: int = 0                  # streams opened
    registrations: int = 0             # RegisterReply accepted
    refused: int = 0
    disconnects: int = 0               # a registered stream ended without us asking
    failed_connects: int = 0           # a session failed before registering
    heartbeats: int = 0
    launches: int = 0                  # LaunchBatch received (repeats included)
    finished: int = 0                  # BatchFinished sent
    terminates: int = 0
    prologs: int = 0
    messages: collections.Counter = field(default_factory=collections.Counter)
    failures: collections.Counter = field(default_factory=collections.Counter)   # why connects failed
    first_registered: dict[str, float] = field(default_factory=dict)   # node -> wall time
    launched_at: dict[int, float] = field(default_factory=dict)        # job -> first launch
    launch_host: dict[int, str] = field(default_factory=dict)
    array_of: dict[int, int] = field(default_factory=dict)             # task job -> array job
    ended: dict[int, tuple[int, int]] = field(default_factory=dict)    # job -> (exit, signal)

    def summary(self) -> dict:
        return {k: v for k, v in self.__dict__.items()
                if isinstance(v, int)} | {"messages": dict(self.messages),
                                           "failures": dict(self.failures)}


class SimJob:
    __slots__ = ("job_id", "start", "timer", "exit_code")

    def __init__(self, job_id: int, start: float, exit_code: int):
        self.job_id = job_id
        self.start = start
        self.timer: asyncio.TimerHandle | None = None
        self.exit_code = exit_code


class SimNode:
    """One simulated agent: its stream, its jobs, its unacknowledged results."""
    __slots__ = ("fleet", "name", "index", "call", "registered", "silent", "jobs", "unacked",
                 "seq", "outq", "writer", "task", "started_at", "stop_asked", "stage")

    def __init__(self, fleet: "Fleet", name: str, index: int):
        self.fleet = fleet
        self.name = name
        self.index = index
        self.call = None
        self.registered = False
        self.silent = False
        self.jobs: dict[int, SimJob] = {}
        self.unacked: dict[int, agent_pb2.BatchFinished] = {}
        self.seq = 0
        self.outq: collections.deque = collections.deque()
        self.writer: asyncio.Task | None = None
        self.task: asyncio.Task | None = None
        self.started_at = int(time.time())
        self.stop_asked = False
        self.stage = ""             # how far the current session got (for failure counts)

    # -- the stream -------------------------------------------------------------
    async def run(self) -> None:
        fl = self.fleet
        delay = fl.reconnect[0]
        rng = random.Random(self.name)
        while not fl.stopping:
            try:
                await self.session()
                delay = fl.reconnect[0]
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as e:
                why = f"{e.code().name} {e.details()} at {self.stage}"[:80]
                if not self.registered and not fl.stopping:     # not our own stop's cancel
                    fl.stats.failed_connects += 1
                    fl.stats.failures[why] += 1
                log.debug("node=%s stream: %s", self.name, why)
            except Exception as e:      # noqa: BLE001 - a simulated agent keeps trying
                fl.stats.failed_connects += 1
                fl.stats.failures[f"{type(e).__name__} {e} at {self.stage}"[:80]] += 1
                log.debug("node=%s session failed: %s", self.name, e)
            if self.registered and not (self.stop_asked or self.silent or fl.stopping):
                fl.stats.disconnects += 1
            self.registered = False
            self.call = None
            self.stop_asked = False
            while self.silent and not fl.stopping:
                await asyncio.sleep(0.5)        # a hung host: it does not come back
            if fl.stopping:
                return
            await asyncio.sleep(delay * (0.75 + 0.5 * rng.random()))
            delay = min(delay * 2, fl.reconnect[1])

    async def session(self) -> None:
        fl = self.fleet
        call = fl.stub_for(self.index).Connect()
        self.call = call
        fl.stats.connects += 1
        self.stage = "handshake"
        await prove(call, fl.key, self.name)
        self.stage = "register"

        shape = fl.shape
        await call.write(agent_pb2.AgentMessage(register=agent_pb2.Register(
            node_name=self.name,
            inventory=agent_pb2.Inventory(
                hostname=self.name, cpus=shape.cpus, real_memory_mb=shape.memory_mb,
                free_memory_mb=shape.memory_mb, gpus=shape.gpus, sockets=2,
                cores_per_socket=max(1, shape.cpus // 2), threads_per_core=1, arch="x86_64",
                os="Linux", boot_time=self.started_at, address="127.0.0.1",
                gpu_type=shape.gpu_type),
            running_job_ids=sorted(self.jobs), unacked=list(self.unacked.values()),
            agent_start_time=self.started_at, version=VERSION)))
        self.stage = "register reply"
        first = await call.read()
        if first is grpc.aio.EOF or first.WhichOneof("msg") != "register_reply":
            raise ConnectionError("controller closed the stream before replying")
        reply = first.register_reply
        if not reply.accepted:
            fl.stats.refused += 1
            raise ConnectionError(f"refused: {reply.message}")
        for jid in reply.acked_job_ids:
            self.unacked.pop(jid, None)
        for jid in set(self.jobs) - set(reply.expected_job_ids):
            self._drop(jid)                     # the real agent kills what is not expected
        fl.heartbeat_s = reply.heartbeat_interval_s or fl.heartbeat_s
        self.registered = True
        self.stage = "registered"
        fl.stats.registrations += 1
        fl.stats.first_registered.setdefault(self.name, time.time())
        while True:
            msg = await call.read()
            if msg is grpc.aio.EOF:
                return
            if self.silent:
                continue
            self.dispatch(msg)

    def send(self, msg: agent_pb2.AgentMessage) -> None:
        if self.call is None or not self.registered or self.silent:
            return
        self.outq.append(msg)
        if self.writer is None:
            self.writer = asyncio.get_running_loop().create_task(self._drain(self.call))

    async def _drain(self, call) -> None:
        try:
            while self.outq:
                msg = self.outq.popleft()
                if call is not self.call:
                    break
                await call.write(msg)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
            pass                    # the stream is gone; the read side notices
        finally:
            self.writer = None
            if call is not self.call:
                self.outq.clear()           # said on a stream that is gone: reconcile repairs it

    # -- commands ----------------------------------------------------------------
    def dispatch(self, msg: agent_pb2.ControllerMessage) -> None:
        fl = self.fleet
        kind = msg.WhichOneof("msg")
        fl.stats.messages[kind] += 1
        if kind == "launch_batch":
            self._launch(msg.launch_batch)
        elif kind == "terminate_job":
            fl.stats.terminates += 1
            jid = msg.terminate_job.job_id
            if jid in self.jobs:
                self._end(jid, 0, int(signal.SIGTERM))
            self.send(agent_pb2.AgentMessage(job_cleaned=agent_pb2.JobCleaned(job_id=jid)))
        elif kind == "signal_job":
            sj = msg.signal_job
            if sj.job_id in self.jobs and sj.signal in END_SIGNALS and not sj.steps_only:
                self._end(sj.job_id, 0, sj.signal)
        elif kind == "ack_batch_finished":
            self.unacked.pop(msg.ack_batch_finished.job_id, None)
        elif kind == "sanity_prolog":
            fl.stats.prologs += 1
            self.send(agent_pb2.AgentMessage(sanity_report=agent_pb2.SanityReport(
                phase="prolog", job_id=msg.sanity_prolog.job_id)))
        elif kind == "launch_tasks":
            lt = msg.launch_tasks
            for t in lt.tasks:
                self.send(agent_pb2.AgentMessage(task_exit=agent_pb2.AgentTaskExit(
                    job_id=lt.job_id, step_id=lt.step_id, rank=t.rank)))

    def _launch(self, lb: agent_pb2.LaunchBatch) -> None:
        fl = self.fleet
        jid = lb.job_id
        fl.stats.launches += 1
        if jid in self.unacked:
            self.send(agent_pb2.AgentMessage(batch_finished=self.unacked[jid]))
            return
        if jid in self.jobs:
            self.send(agent_pb2.AgentMessage(batch_started=agent_pb2.BatchStarted(
                job_id=jid, pid=100000 + jid % 800000)))
            return
        now = time.time()
        fl.stats.launched_at.setdefault(jid, now)
        fl.stats.launch_host[jid] = self.name
        array = lb.environment.get("SLURM_ARRAY_JOB_ID")
        if array and array.isdigit() and int(array) != jid:
            fl.stats.array_of[jid] = int(array)
        run_s, exit_code = run_spec(lb.script)
        job = SimJob(jid, now, exit_code)
        self.jobs[jid] = job
        self.send(agent_pb2.AgentMessage(batch_started=agent_pb2.BatchStarted(
            job_id=jid, pid=100000 + jid % 800000)))
        job.timer = asyncio.get_running_loop().call_later(run_s, self._end, jid, exit_code, 0)

    def _end(self, jid: int, exit_code: int, sig: int) -> None:
        job = self.jobs.pop(jid, None)
        if job is None:
            return
        if job.timer is not None:
            job.timer.cancel()
        if self.silent:
            return                  # a hung host reports nothing
        res = agent_pb2.BatchFinished(job_id=jid, exit_code=exit_code, signal=sig,
                                      start_time=int(job.start), end_time=int(time.time()))
        self.unacked[jid] = res
        self.fleet.stats.finished += 1
        self.fleet.stats.ended[jid] = (exit_code, sig)
        self.send(agent_pb2.AgentMessage(batch_finished=res))

    def _drop(self, jid: int) -> None:
        job = self.jobs.pop(jid, None)
        if job is not None and job.timer is not None:
            job.timer.cancel()

    def heartbeat(self) -> None:
        if not self.registered or self.silent:
            return
        self.seq += 1
        self.fleet.stats.heartbeats += 1
        self.send(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(
            seq=self.seq, sent_at=time.time(), free_memory_mb=self.fleet.shape.memory_mb,
            cpu_load=0.0, running_job_ids=sorted(self.jobs))))


class Fleet:
    """K simulated nodes on one event loop."""

    def __init__(self, address: str, key: auth.ClusterKey, names: list[str], *,
                 shape: NodeShape = NodeShape(), per_channel: int = 1,
                 reconnect: tuple[float, float] = (0.2, 5.0), connect_rate: float = 0.0):
        self.address = address
        self.key = key
        self.shape = shape
        self.reconnect = reconnect
        self.per_channel = max(1, per_channel)
        self.connect_rate = connect_rate          # new streams per second at start (0 = all at once)
        self.nodes = {n: SimNode(self, n, i) for i, n in enumerate(names)}
        self.stats = FleetStats()
        self.heartbeat_s = 5.0
        self.beating = True         # False: the streams stay open and say nothing
        self.stopping = False
        self._channels: list[grpc.aio.Channel] = []
        self._stubs: list[agent_pb2_grpc.AgentServiceStub] = []
        self._ticker: asyncio.Task | None = None

    def stub_for(self, index: int) -> agent_pb2_grpc.AgentServiceStub:
        return self._stubs[index // self.per_channel]

    async def start(self) -> None:
        n_channels = (len(self.nodes) + self.per_channel - 1) // self.per_channel
        for i in range(max(1, n_channels)):
            # A local subchannel pool: each channel its own TCP connection (channels
            # with equal arguments otherwise share one).
            ch = grpc.aio.insecure_channel(self.address, options=[
                ("grpc.use_local_subchannel_pool", 1), ("grpc.sim_channel", i),
                ("grpc.keepalive_time_ms", 10_000), ("grpc.keepalive_timeout_ms", 5_000),
                ("grpc.max_receive_message_length", 64 * 1024 * 1024)])
            self._channels.append(ch)
            self._stubs.append(agent_pb2_grpc.AgentServiceStub(ch))
        loop = asyncio.get_running_loop()
        for node in self.nodes.values():
            node.task = loop.create_task(node.run())
            if self.connect_rate:
                await asyncio.sleep(1.0 / self.connect_rate)
        self._ticker = loop.create_task(self._heartbeats())

    async def _heartbeats(self) -> None:
        """Each node beats once per interval, at its own phase in it."""
        nodes = list(self.nodes.values())
        slices = 20
        while not self.stopping:
            for s in range(slices):
                # Read per slice: the interval the controller names at
                # registration takes effect at once, not after a round at
                # the default (which alone could outlast a short timeout).
                step = self.heartbeat_s / slices
                t0 = time.monotonic()
                if self.beating:
                    for node in nodes[s::slices]:
                        node.heartbeat()
                await asyncio.sleep(max(0.0, step - (time.monotonic() - t0)))

    def registered(self) -> int:
        return sum(1 for n in self.nodes.values() if n.registered)

    def silence(self, name: str) -> None:
        """The node stops heartbeating and answering, and will not reconnect."""
        self.nodes[name].silent = True

    def break_stream(self, name: str) -> None:
        node = self.nodes[name]
        if node.call is not None:
            node.stop_asked = True
            node.call.cancel()

    async def stop(self) -> None:
        self.stopping = True
        if self._ticker:
            self._ticker.cancel()
        for node in self.nodes.values():
            if node.call is not None:
                node.call.cancel()
            if node.task is not None:
                node.task.cancel()
        await asyncio.gather(*(n.task for n in self.nodes.values() if n.task),
                             return_exceptions=True)
        for ch in self._channels:
            await ch.close()

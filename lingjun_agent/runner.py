"""The agent's runner: one long-lived stream to the controller, kept alive.

A reconciler: the controller says what it wants (launch, signal, terminate,
the jobs it expects here), the node has what it has (live processes, batch
results on disk), and the runner moves the node toward what was asked.

    connect ──► AuthHello(node, our nonce)        (lingjun/auth.py)
            ◄── AuthChallenge(nonce, the controller's HMAC of our nonce)
                a wrong HMAC: not our cluster's controller; say nothing more,
                log, back off (reconnect_max_s) and try again
            ──► AuthProof(HMAC of nonce, node, time with the cluster key)
            ──► Register(inventory, running jobs, unacked results)
            ◄── RegisterReply(expected jobs, acked results)
            kill what is not expected; forget what was acked
            ◄─► heartbeats, launches, task output, exits, cleanups
    stream breaks ──► back off (0.2 s doubling to 5 s) and connect again

Batch scripts and step tasks run under detached supervisors
(``launcher.stepd``, ``launcher.taskd``) that outlive this process, so
``kill -9`` of the agent disturbs no job: the next agent recovers the
supervisors and their results from the state dir. Step output and exits are
relayed from the step's files by offset (``_relay_steps``); the controller
says where to start (RegisterReply.resume_steps, ResumeStep) and drops
what it already has, so a reconnect loses and repeats nothing.

Fencing: each heartbeat the controller answers (and the registration)
renews the agent's lease on its jobs (``launcher.lease``), written to
``<state_dir>/lease.json``. When it lapses unrenewed (this agent frozen,
dead, or cut off from the controller) the jobs here are stopped by the
batch supervisors and by the node's fence keeper (``launcher.fencekeeper``,
a process of its own that the agent keeps running), in time for the
controller to restart them elsewhere; the argument is in ``lease``.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import random
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import grpc

from lingjun import auth, launchers
from lingjun.v1 import agent_pb2, agent_pb2_grpc
from lingjun_agent import gpus, gpuusage, inventory, lldp, outputsink
from lingjun_agent.launcher import (
    batch,
    cgroups,
    cpus as cpuchoice,
    distributed,
    fencekeeper,
    forkserver,
    lease,
    mps,
    output,
    procs,
    steps,
    watch,
)
from lingjun_agent.launcher.marks import start_ticks
from lingjun_agent.network.agent import NetworkOwner
from lingjun_agent.sanity import probes as sanity_probes
from lingjun_agent.sanity import reach
from lingjun_agent.sanity.checks import PERIODIC, SUSPECT
from lingjun_agent.sanity.runner import SanityRunner, to_pb

log = logging.getLogger("lingjun_agent")
VERSION = "lingjun-0.1.0"
RELAY_S = 0.05   # how often step files are looked at for new output


class Refused(Exception):
    pass


class Unauthenticated(Exception):
    """The controller did not accept our proof of the cluster key."""


class ControllerUnproven(Exception):
    """The controller did not prove it holds the cluster key: not ours to obey."""


async def prove(call, key: auth.ClusterKey, node: str) -> None:
    """The mutual handshake (lingjun/auth.py) on a fresh Connect stream:
    challenge the controller, check its answer, then answer its challenge.
    Raises ControllerUnproven, having sent nothing but the hello, when the
    controller's answer is wrong. A plain function, so that the simulated
    agents of bench/sim speak exactly this handshake."""
    hello = auth.new_nonce()
    await call.write(agent_pb2.AgentMessage(auth_hello=agent_pb2.AuthHello(
        node_name=node, nonce=hello)))
    first = await call.read()
    if first is grpc.aio.EOF or first.WhichOneof("msg") != "auth_challenge":
        raise ConnectionError("controller did not answer with a challenge")
    challenge = first.auth_challenge
    try:
        auth.verify_controller_proof(key, hello, challenge.nonce, node, challenge.controller_mac)
    except auth.AuthError as e:
        # Hang up politely (half-close), so the controller can log why.
        with contextlib.suppress(Exception):
            await call.done_writing()
            await asyncio.wait_for(call.code(), timeout=1.0)
        raise ControllerUnproven(str(e)) from None
    now_ms = int(time.time() * 1000)
    await call.write(agent_pb2.AgentMessage(auth_proof=agent_pb2.AuthProof(
        node_name=node, nonce=challenge.nonce, time_ms=now_ms,
        mac=auth.proof_mac(key, challenge.nonce, node, now_ms))))


class Agent:
    def __init__(self, node: str, controller: str, state_dir: str, *, cpus: int = 0,
                 memory_mb: int = 0, gpus: int = 0, reconnect_min_s: float = 0.2,
                 reconnect_max_s: float = 5.0, rdma_root: str = "/sys/class/infiniband",
                 key: auth.ClusterKey | None = None, tls_ca: bytes | None = None,
                 job_env: dict[str, str] | None = None,
                 sanity=None, configured: tuple[int, int, int] = (0, 0, 0),
                 device_root: str = "/dev", sysfs_root: str = "/sys",
                 mps_control: str = "nvidia-cuda-mps-control", lldpctl: str = "",
                 output_sink: tuple[str, str] = ("", "")):
        self.node = node
        # [agent] output_sink: batch output lines to the site's logs too (outputsink.py)
        self.sink = outputsink.Sink(*output_sink, node) if output_sink[0] else None
        self.forwarding: set[asyncio.Task] = set()
        self.controller = controller
        # the cluster key proves membership; tls_ca (PEM), when set, verifies the controller.
        if key is None:
            raise ValueError("an agent needs the cluster key")
        self.key = key
        self.tls_ca = tls_ca
        # Where commands inside a job find this node's credential socket (and TLS CA):
        # the node's own settings, not whatever the submit host's environment said.
        self.job_env = dict(job_env or {})
        self.state_dir = Path(state_dir)
        # What marks this agent's job processes: the node name alone is not unique
        # when several clusters' agents share a host (tests, a laptop).
        self.mark = procs.node_identity(node, self.state_dir)
        self.inv_args = (cpus, memory_mb, gpus)
        # Confinement: the node's CPU indices each job here holds (the agent
        # picks them: launcher/cpus.py), the host CPUs they map onto, and
        # where the GPU device files are (a test's fake /dev).
        self.host_cpus = tuple(sorted(os.sched_getaffinity(0)))
        self.node_cpus = configured[0] or cpus or len(self.host_cpus)
        self.job_cpus: dict[int, tuple[int, ...]] = {}
        self.device_root = device_root
        # where GPU topology is read (PCI tree, NUMA nodes, RDMA NICs): a test's fake sysfs
        self.sysfs_root = sysfs_root
        self.gpus_seen = None       # the last GPU discovery logged (gpus.Discovery)
        self.lldpctl = lldpctl      # lldpd's client: the leaf switch heard (lldp.py); "" = off
        # --gres=mps jobs: each GPU's MPS control daemon while they run (launcher/mps.py)
        self.mps = mps.MpsDaemons(mps_control, self.state_dir / "mps")
        self.reconnect = (reconnect_min_s, reconnect_max_s)
        self.started_at = int(time.time())
        self.batches: dict[int, batch.BatchHandle] = {}
        self.unacked: dict[int, batch.BatchResult] = {}
        self.steps: dict[tuple[int, int], steps.StepHandle] = {}
        self.step_starts: set[asyncio.Task] = set()
        # steps whose supervisor is starting, and those told to end meanwhile
        self.starting_steps: set[tuple[int, int]] = set()
        self.kill_when_started: set[tuple[int, int]] = set()
        self.terminating: dict[int, asyncio.Task] = {}
        self.launching: set[int] = set()
        # batch jobs told to end while their script was being started: job ->
        # (grace, report); ended as soon as the start returns (_launch_batch)
        self.end_when_launched: dict[int, tuple[float, bool]] = {}
        # Signals (scancel -s, a --signal warning) for a job whose script is
        # being started: delivered once it has started, in the order they came.
        self.signal_when_launched: dict[int, list[agent_pb2.SignalJob]] = {}
        # job -> (its batch script's stderr file, its uid): where a stop is
        # announced as slurmstepd does (``_announce``). Not known again after an
        # agent restart: a job adopted then is stopped without the line.
        self.batch_stderr: dict[int, tuple[str, int]] = {}
        self.output_reads: set[asyncio.Task] = set()    # answering ReadOutput (lingjun logs)
        # launches, prologs and the waits that report a batch script's end:
        # held here until done (the loop keeps only a weak reference to a task)
        self.background: set[asyncio.Task] = set()
        self.outbox: asyncio.Queue | None = None
        self.heartbeat_s = 5.0
        self.registered = asyncio.Event()
        # the lease on this node's jobs, renewed by the controller's answers
        self.lease = lease.Holder(lease.lease_path(self.state_dir.absolute()),
                                  agent_pid=os.getpid(),
                                  agent_start=start_ticks(os.getpid()) or 0)
        self.lease.on_renew = lambda _: self._ensure_keeper()
        self.keeper: subprocess.Popen | None = None
        # supervisors are forked from here (started on first use, again if it dies)
        self.forks = forkserver.ForkServer(self.state_dir / "forkserver.log")
        self.seq = 0
        self._rng = random.Random(node)
        # the NIC reconciler (a thread) while the node has a profile
        self.net = NetworkOwner(self, rdma_root)
        # each job's last sign of life here, sent with heartbeats
        self.activity = watch.ActivityWatch()
        # health probes; ``configured`` is the node's (cpus, memory, gpus)
        # in the controller's configuration, what the probes hold the node to.
        from lingjun.config import SanityConfig
        self.clock_offset: float | None = None
        self.reach = reach.Listener(node)
        self.address = "127.0.0.1"       # as registered (inventory); set at each session
        self.job_uids: dict[int, int] = {}
        # GPU usage of running batch jobs through NVML (sacct gres/gpuutil, gres/gpumem)
        self.job_gpus: dict[int, tuple[int, ...]] = {}
        self.step_gpus: dict[tuple[int, int], tuple[int, ...]] = {}
        self.gpu_usage = gpuusage.GpuSampler((sanity or SanityConfig()).nvml_module)
        self.sanity = SanityRunner(sanity or SanityConfig(), sanity_probes.NodeContext(
            node=node, spool=str(self.state_dir), cpus=configured[0], memory_mb=configured[1],
            gpus=configured[2], mark=self.mark, rdma_root=rdma_root,
            clock_offset=lambda: self.clock_offset, expected_jobs=self._expected_jobs,
            job_users=lambda: set(self.job_uids.values()), declared_cpus=cpus,
            declared_memory_mb=memory_mb))
        self.sanity_changed = asyncio.Event()      # set by reconfigure (SIGHUP)

    # -- lifecycle -------------------------------------------------------------
    async def run(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        # Job dirs below hold scripts and environments (spec.json, root's
        # alone); their users reach their own script by path, so the way
        # there is traversable and not listable, as /var/spool/slurmd is.
        self.state_dir.chmod(0o711)
        # cgroup v2 where the host has a usable one, else v1, else none (said once)
        unified = cgroups.host_unified()
        if not cgroups.available():
            _, why = cgroups.probe_unified()
            log.warning("node=%s: no per-job cgroups here (needs root, and a usable cgroup v2 "
                        "(%s) or the v1 freezer at %s): job processes are tracked by their "
                        "marker and supervisor only, and a process of an srun task that drops "
                        "both escapes; memory, CPUs and GPU device files are not enforced",
                        self.node, why or "not chosen", cgroups.FREEZER)
        elif unified is not None:
            cgroups.delegate(unified)
            log.warning("node=%s: cgroup v2 at %s, jobs below %s (%s): held to their memory "
                        "and CPUs; GPU device files are not enforced (no BPF_CGROUP_DEVICE "
                        "program is loaded)", self.node, unified.mount, unified.base,
                        " ".join(unified.controllers))
        else:
            lacking = [h for h in ("memory", "cpuset", "devices") if not cgroups.mounted(h)]
            if lacking:
                log.warning("node=%s: no v1 %s hierarchy: %s not enforced", self.node,
                            ", ".join(lacking), ", ".join(
                                {"memory": "--mem", "cpuset": "CPU binding (affinity only)",
                                 "devices": "GPU device files"}[h] for h in lacking))
        self._ensure_keeper()
        handles, results = batch.recover_batches(self.state_dir)
        for h in handles:
            log.info("job=%d: recovered running batch script pid %d", h.job_id, h.pid)
            self._held_cpus(h.job_id, h.job_dir)
            self._watch(h)
            self._watch_recovered(h)
        for r in results:
            self.unacked[r.job_id] = r
        for h in steps.recover_steps(self.state_dir):
            log.info("job=%d step=%d: recovered (%s)", h.job_id, h.step_id,
                     "running" if h.running() else "ended")
            self.steps[h.key] = h
            self.job_uids.setdefault(h.job_id, h.uid)
            if h.running():
                self._held_cpus(h.job_id, h.dir)
        delay = self.reconnect[0]
        while True:
            try:
                await self._session()
                delay = self.reconnect[0]
            except Refused as e:
                log.error("controller refused node %s: %s", self.node, e)
                delay = self.reconnect[1]
            except ControllerUnproven as e:
                log.error("controller at %s did not prove it holds the cluster key (%s): refusing it, "
                          "node %s neither registers with it nor runs anything it sends; wrong key file "
                          "on one side, or not this cluster's controller?", self.controller, e, self.node)
                delay = self.reconnect[1]
            except Unauthenticated as e:
                log.error("controller refused node %s's proof of the cluster key (%s): wrong key "
                          "file, or a clock off by more than the allowed skew?", self.node, e)
                delay = self.reconnect[1]
            except grpc.aio.AioRpcError as e:
                log.warning("stream to %s: %s %s", self.controller, e.code().name, e.details())
            except Exception:
                log.exception("session failed")
            self.outbox = None
            self.registered.clear()
            await asyncio.sleep(self._backoff(delay) * (0.75 + 0.5 * self._rng.random()))
            delay = min(delay * 2, self.reconnect[1])

    def _backoff(self, delay: float) -> float:
        """The wait before the next connect: ``delay``, but while a lease runs,
        at most a quarter of what is left of it, so that a controller back
        before the lease ends finds us in time (a restart, not a fence)."""
        left = self.lease.left()
        if left is not None and left > 0:
            return min(delay, max(self.reconnect[0], left / 4))
        return delay

    def _channel(self) -> grpc.aio.Channel:
        options = [("grpc.keepalive_time_ms", 10_000), ("grpc.keepalive_timeout_ms", 5_000),
                   ("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        if self.tls_ca is not None:
            return grpc.aio.secure_channel(
                self.controller, grpc.ssl_channel_credentials(root_certificates=self.tls_ca), options=options)
        return grpc.aio.insecure_channel(self.controller, options=options)

    async def _prove(self, call) -> None:
        await prove(call, self.key, self.node)

    async def _session(self) -> None:
        async with self._channel() as ch:
            call = agent_pb2_grpc.AgentServiceStub(ch).Connect()
            running = procs.running_jobs(self.mark) | set(self.batches)
            checked = await self.sanity.run("register")    # before the handshake
            found = await asyncio.to_thread(gpus.discover, self.sanity.cfg.nvml_module,
                                            self.sysfs_root)
            self._log_gpus(found)
            leaf = await asyncio.to_thread(lldp.discover, self.lldpctl)
            inv = inventory.collect(*self.inv_args, found=found, leaf_switch=leaf)
            self.address = inv.address or "127.0.0.1"
            if self.sanity.cfg.enabled and self.sanity.cfg.reachability:
                if self.reach.server is None:
                    await self.reach.start(inv.address or "127.0.0.1")
                inv.sanity_port = self.reach.port
            try:
                await self._prove(call)
                register_sent = lease.clock()     # the lease runs from here if accepted
                await call.write(agent_pb2.AgentMessage(register=agent_pb2.Register(
                    node_name=self.node, inventory=inv,
                    running_job_ids=sorted(running),
                    unacked=[self._result_msg(r) for r in self.unacked.values()],
                    agent_start_time=self.started_at, version=VERSION,
                    sanity=[to_pb(r) for r in checked],
                    steps=[agent_pb2.StepHeld(job_id=j, step_id=s)
                           for j, s in sorted(set(self.steps) | self.starting_steps)])))
                first = await call.read()
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                # A write to a stream the controller already ended fails with a
                # status of its own; the controller's reason is the call's status.
                if await call.code() == grpc.StatusCode.UNAUTHENTICATED:
                    raise Unauthenticated(await call.details()) from None
                raise
            if first is grpc.aio.EOF or first.WhichOneof("msg") != "register_reply":
                raise ConnectionError("controller closed the stream before replying")
            reply = first.register_reply
            if not reply.accepted:
                raise Refused(reply.message)
            self._lease_terms(reply, register_sent)
            self._reconcile(reply, running)
            self.outbox = asyncio.Queue()
            self.heartbeat_s = reply.heartbeat_interval_s or 5.0
            self.registered.set()
            log.info("node=%s registered with %s", self.node, self.controller)
            self.net.set_profile(reply.net_profile if reply.HasField("net_profile") else None)
            writer = asyncio.create_task(self._write(call, self.outbox))
            beat = asyncio.create_task(self._heartbeats())
            probing = asyncio.create_task(self._periodic_sanity())
            relay = asyncio.create_task(self._relay_steps())
            sampling = asyncio.create_task(self._sample_gpus())
            try:
                while True:
                    msg = await call.read()
                    if msg is grpc.aio.EOF:
                        log.warning("controller closed the stream")
                        return
                    self._dispatch(msg)
            finally:
                writer.cancel()
                beat.cancel()
                probing.cancel()
                relay.cancel()
                sampling.cancel()

    async def _sample_gpus(self) -> None:
        """Every gpuusage.INTERVAL_S: one NVML sample of each running batch
        job's GPUs here (off the loop: NVML calls block)."""
        while True:
            await asyncio.sleep(gpuusage.INTERVAL_S)
            running: dict = {j: ids for j, ids in self.job_gpus.items() if j in self.batches}
            running.update((key, ids) for key, ids in self.step_gpus.items()
                           if key in self.steps and self.steps[key].running())
            if running:
                await asyncio.to_thread(self.gpu_usage.sample, running)

    async def _write(self, call, queue: asyncio.Queue) -> None:
        while True:
            msg = await queue.get()
            await call.write(msg)

    def _lease_terms(self, reply: agent_pb2.RegisterReply, register_sent: float) -> None:
        """Take the controller's lease terms; the accepted Register renews it."""
        self.lease.configure(reply.heartbeat_timeout_s, reply.fence_grace_s)
        if reply.heartbeat_timeout_s <= 0:
            # a controller without leases: a lease file left from before would
            # fence every job at once
            self.lease.path.unlink(missing_ok=True)
            return
        self.lease.renew(register_sent)

    def _ensure_keeper(self) -> None:
        """Keep the node's fence keeper running (cheap when it does)."""
        if self.keeper is not None and self.keeper.poll() is None:
            return
        try:
            self.keeper = fencekeeper.ensure(self.state_dir, self.mark)
        except OSError as e:
            log.error("node=%s: cannot start the fence keeper: %s", self.node, e)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            self.seq += 1
            seq = self.seq
            self.lease.sent(seq)
            free, load = inventory.live_numbers()
            running = sorted(set(self.batches) | {j for j, _ in self.steps})
            seen = self.activity.activity(running)
            self.send(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(
                seq=seq, sent_at=time.time(), free_memory_mb=free, cpu_load=load,
                running_job_ids=running,
                activity=[agent_pb2.JobActivity(
                    job_id=j, last_activity=t,
                    quiet_ranks=[agent_pb2.RankActivity(step_id=s, rank=r, last_activity=last)
                                 for s, r, last in self.activity.quiet_ranks(j)])
                    for j, t in sorted(seen.items())])))

    def _watch_recovered(self, h: batch.BatchHandle) -> None:
        """After an agent restart: watch a recovered script's files again."""
        try:
            spec = json.loads((h.job_dir / "spec.json").read_text())
        except (OSError, ValueError):
            return
        self.activity.watch(h.job_id, watch.batch_paths(
            spec.get("stdout", ""), spec.get("stderr", ""), spec.get("work_dir", ""),
            spec.get("env", {})))

    def _log_gpus(self, found: gpus.Discovery) -> None:
        """One line on what NVML found, when it differs from the last time."""
        if found == self.gpus_seen:
            return
        self.gpus_seen = found
        if not found.nvml:
            log.info("node=%s: no GPU devices: NVML is not available (%s)", self.node, found.error)
        elif not found.devices:
            log.info("node=%s: no GPU devices: NVML counts none", self.node)
        else:
            log.info("node=%s: %d GPU devices through NVML: %s", self.node, len(found.devices),
                     ", ".join(f"{d.index}:{d.type or d.name}"
                               + (f" nvlink={','.join(map(str, d.nvlink_peers))}" if d.nvlink_peers else "")
                               + (f" numa={d.numa_node}" if d.numa_node >= 0 else "")
                               + (f" nic={d.nic}" if d.nic else "") for d in found.devices))

    def reconfigure(self, sanity: SanityConfig, reconnect_min_s: float, reconnect_max_s: float,
                    configured: tuple[int, int, int]) -> None:
        """What the agent takes from a re-read file (SIGHUP) without a restart: the
        probes and their interval, the reconnect backoff, the resources the probes
        hold the node to. Jobs are not touched."""
        ctx = self.sanity.ctx
        ctx.cpus, ctx.memory_mb, ctx.gpus = configured
        self.sanity.reconfigure(sanity)
        self.reconnect = (reconnect_min_s, reconnect_max_s)
        self.sanity_changed.set()       # the periodic pass starts its wait again

    async def _periodic_sanity(self) -> None:
        changed = self.sanity_changed
        while True:
            changed.clear()
            if not self.sanity.cfg.interval_s:      # none, until a reload sets one
                await changed.wait()
                continue
            try:
                await asyncio.wait_for(changed.wait(), self.sanity.next_wait())
                continue                            # a new interval: wait again from now
            except asyncio.TimeoutError:
                pass
            results = await self.sanity.run("periodic")
            self.send(agent_pb2.AgentMessage(sanity_report=agent_pb2.SanityReport(
                phase="periodic", results=[to_pb(r) for r in results])))

    async def _extended_check(self, req: agent_pb2.SanityPrologRequest) -> None:
        """A suspect node's check: the periodic probes and TCP bandwidth with
        healthy peers (lingjun_agent/sanity/reach.py)."""
        timeout = max(self.sanity.cfg.reach_timeout_s, 10.0)
        results, bw = await asyncio.gather(
            self.sanity.run(PERIODIC),
            reach.bandwidth(self.node, req.peers, req.bandwidth_bytes or (16 << 20),
                            req.min_bandwidth_mbps, timeout))
        results = [dataclasses.replace(r, phase=SUSPECT) for r in results] + [bw]
        self.send(agent_pb2.AgentMessage(sanity_report=agent_pb2.SanityReport(
            phase=SUSPECT, results=[to_pb(r) for r in results])))

    async def _prolog(self, req: agent_pb2.SanityPrologRequest) -> None:
        if req.extended:
            await self._extended_check(req)
            return
        unreachable: list[str] = []
        if req.peers:
            (results, (tcp, unreachable)) = await asyncio.gather(
                self.sanity.run("prolog", req.job_id),
                reach.check(self.node, req.peers, self.sanity.cfg.reach_timeout_s))
            results = [*results, tcp]
        else:
            results = await self.sanity.run("prolog", req.job_id)
        self.send(agent_pb2.AgentMessage(sanity_report=agent_pb2.SanityReport(
            phase="prolog", job_id=req.job_id, results=[to_pb(r) for r in results],
            unreachable=unreachable)))

    def _expected_jobs(self) -> set[int]:
        """Jobs whose processes belong here (the process probe's stray check)."""
        return (set(self.batches) | {j for j, _ in self.steps} | set(self.terminating)
                | set(self.launching) | set(self.unacked))

    def send(self, msg: agent_pb2.AgentMessage) -> bool:
        if self.outbox is None:
            return False
        self.outbox.put_nowait(msg)
        return True

    # -- reconcile ---------------------------------------------------------------
    def _reconcile(self, reply: agent_pb2.RegisterReply, running: set[int]) -> None:
        for jid in reply.acked_job_ids:
            self._forget(jid)
        wanted = {(r.job_id, r.step_id): r for r in reply.resume_steps}
        for key, h in list(self.steps.items()):
            if key in wanted:
                self._resume(wanted[key])
            elif key[1] != launchers.SERVICE_STEP_ID:
                log.warning("job=%d step=%d node=%s: step not expected any more, ending it",
                            key[0], key[1], self.node)
                self._forget_step(key)
            else:
                h.resume_from({})
        expected = set(reply.expected_job_ids)
        for jid in running - expected:
            if jid in self.unacked:
                continue
            log.warning("job=%d node=%s: not expected here any more, killing it", jid, self.node)
            self._terminate(jid, grace_s=2.0, report=False)
        # MPS daemons held for jobs that ended while this agent was away
        for jid in self.mps.held_jobs() - expected - running:
            self.mps.release(jid)

    def _forget(self, jid: int) -> None:
        self.unacked.pop(jid, None)
        self.activity.forget(jid)
        gone = batch.forget_batch(self.state_dir, jid, remove=False)
        if gone is not None:       # removed in a worker thread, off the event loop
            asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, gone, True)

    # -- commands ----------------------------------------------------------------
    def _dispatch(self, msg: agent_pb2.ControllerMessage) -> None:
        kind = msg.WhichOneof("msg")
        if kind == "launch_batch":
            self._keep(asyncio.create_task(self._launch_batch(msg.launch_batch)))
        elif kind == "launch_tasks":
            self._launch_tasks(msg.launch_tasks)
        elif kind == "signal_job":
            self._signal(msg.signal_job)
        elif kind == "terminate_job":
            t = msg.terminate_job
            if t.announce:
                self._announce(t.job_id, t.cause)
            self._terminate(t.job_id, t.grace_s, report=True)
        elif kind == "ack_batch_finished":
            self._forget(msg.ack_batch_finished.job_id)
        elif kind == "resume_step":
            self._resume(msg.resume_step)
        elif kind == "forget_step":
            self._forget_step((msg.forget_step.job_id, msg.forget_step.step_id))
        elif kind == "net_profile":
            self.net.set_profile(msg.net_profile)
        elif kind == "sanity_prolog":
            self._keep(asyncio.create_task(self._prolog(msg.sanity_prolog)))
        elif kind == "read_output":
            t = asyncio.create_task(self._read_output(msg.read_output))
            self.output_reads.add(t)          # kept until done: a task may be collected mid-run
            t.add_done_callback(self.output_reads.discard)
        elif kind == "sanity_clock":
            c = msg.sanity_clock
            self.clock_offset = c.controller_time - (c.echo_sent_at + time.time()) / 2
            if c.echo_seq:
                self.lease.acked(c.echo_seq)
        else:
            log.warning("unexpected message %s", kind)

    async def _read_output(self, req: agent_pb2.ReadOutput) -> None:
        """One chunk of a job's batch output for the controller (launcher/output.py)."""
        jid = req.job_id
        reply = await output.answer(req, lambda: jid in self.batches or jid in self.launching)
        if reply.error:
            log.warning("job=%d node=%s: output not read: %s", jid, self.node, reply.error)
        self.send(agent_pb2.AgentMessage(output_chunk=reply))

    async def _launch_batch(self, lb: agent_pb2.LaunchBatch) -> None:
        jid = lb.job_id
        if jid in self.launching:
            return
        if jid in self.unacked:
            self.send(agent_pb2.AgentMessage(batch_finished=self._result_msg(self.unacked[jid])))
            return
        if jid in self.batches:
            self.send(agent_pb2.AgentMessage(batch_started=agent_pb2.BatchStarted(
                job_id=jid, pid=self.batches[jid].pid)))
            return
        self.launching.add(jid)
        self.job_uids[jid] = lb.uid
        port = 0
        try:
            env = dict(lb.environment)
            env.update(self.job_env)
            files: dict[str, str] = {}
            if lb.launcher:
                port, files = await self._prepare_launcher(lb, env)
            watch.prepare_checkpoint_dir(env, lb.uid, lb.gid)
            if lb.HasField("share") and lb.share.mps_percentage:
                env.update(await self._mps_start(jid, lb.share))
            spec = batch.BatchSpec(
                job_id=jid, node=self.mark, script=lb.script, argv=tuple(lb.argv),
                env=env, work_dir=lb.work_dir, stdout=lb.stdout_path,
                stderr=lb.stderr_path, stdin=lb.stdin_path or "/dev/null", uid=lb.uid, gid=lb.gid,
                append=lb.append, files=files, lease=str(self.lease.path),
                limits=self._limits(jid, lb.share) if lb.HasField("share") else None)
            if lb.HasField("share") and lb.share.gpu_ids:
                self.job_gpus[jid] = tuple(lb.share.gpu_ids)
            # Until the supervisor reports the script's pid (milliseconds when
            # forked, ~0.1 s when started afresh): off the loop.
            handle = await asyncio.to_thread(batch.start_batch, self.state_dir, spec, self.forks)
        except (batch.LaunchError, mps.MpsError) as e:
            log.error("job=%d: launch failed: %s", jid, e)
            now = int(time.time())
            res = batch.BatchResult(job_id=jid, exit_code=1, signal=0, start_time=now,
                                    end_time=now, max_rss_kb=0, error=str(e))
            self.unacked[jid] = res
            self.send(agent_pb2.AgentMessage(batch_finished=self._result_msg(res)))
            self.signal_when_launched.pop(jid, None)
            end = self.end_when_launched.pop(jid, None)
            if end is not None and end[1]:
                self._cleaned(jid)
            return
        finally:
            self.launching.discard(jid)
        log.info("job=%d: batch script started, pid %d", jid, handle.pid)
        err = lb.stderr_path or lb.stdout_path
        if err:
            self.batch_stderr[jid] = (os.path.join(lb.work_dir, err), lb.uid)
        self.activity.watch(jid, watch.batch_paths(lb.stdout_path, lb.stderr_path,
                                                   lb.work_dir, env))
        self.send(agent_pb2.AgentMessage(batch_started=agent_pb2.BatchStarted(
            job_id=jid, pid=handle.pid, launcher_port=port)))
        self._watch(handle)
        if self.sink is not None:
            t = asyncio.create_task(outputsink.forward(
                self.sink, jid, lb.user or str(lb.uid), lb.uid, lb.stdout_path,
                lambda: jid in self.batches))
            self.forwarding.add(t)            # kept until done: a task may be collected mid-run
            t.add_done_callback(self.forwarding.discard)
        for sj in self.signal_when_launched.pop(jid, ()):
            log.info("job=%d: signal %d delivered on start: it came while starting",
                     jid, sj.signal)
            self._signal(sj)
        end = self.end_when_launched.pop(jid, None)
        if end is not None:        # cancelled (or timed out) while it was starting
            log.info("job=%d: ended on start: it was told to end while starting", jid)
            self._terminate(jid, *end)

    async def _mps_start(self, jid: int, share: agent_pb2.JobShare) -> dict[str, str]:
        """An MPS job's GPU gets its control daemon (started off the loop if it is
        the first MPS job there); what the job's processes see of it."""
        gpu = share.gpu_ids[0] if share.gpu_ids else 0
        await asyncio.to_thread(self.mps.acquire, jid, gpu)
        return self.mps.job_env(gpu, share.mps_percentage)

    def _limits(self, jid: int, share: agent_pb2.JobShare) -> cgroups.Limits:
        """What the job's cgroup here holds it to: its memory, the CPUs it
        holds on this node (chosen at its first launch here, the same for its
        steps), and every GPU device file but its own denied."""
        ids = self.job_cpus.get(jid)
        if ids is None and share.cpus:
            ids = cpuchoice.choose(self.node_cpus, share.cpus,
                                   [v for j, v in self.job_cpus.items() if j != jid])
            self.job_cpus[jid] = ids
            log.info("job=%d: CPUs %s of %s (host CPUs %s)", jid, cgroups.cpu_list(ids),
                     self.node, cgroups.cpu_list(cpuchoice.on_host(ids, self.host_cpus)))
        ids = ids or ()
        return cgroups.Limits(
            memory_bytes=share.memory_bytes, cpu_ids=ids,
            cpus=cpuchoice.on_host(ids, self.host_cpus),
            deny_devices=cgroups.gpu_device_denials(self.device_root, share.gpu_ids))

    def _held_cpus(self, jid: int, d: Path) -> None:
        """After a restart: the CPUs a job still running here holds (its spec.json)."""
        try:
            limits = json.loads((d / "spec.json").read_text()).get("limits") or {}
        except (OSError, ValueError):
            return
        if limits.get("cpu_ids"):
            self.job_cpus[jid] = tuple(int(i) for i in limits["cpu_ids"])

    async def _prepare_launcher(self, lb: agent_pb2.LaunchBatch,
                                env: dict[str, str]) -> tuple[int, dict[str, str]]:
        """--launcher on the first node: port, host files, and the head service
        (running before the script, so the script finds it listening)."""
        jid = lb.job_id
        try:
            port, files = distributed.prepare(lb.launcher, env, batch.job_dir(self.state_dir, jid))
        except (OSError, ValueError) as e:
            raise batch.LaunchError(f"job {jid}: launcher {lb.launcher}: {e}") from e
        addr = env.get("MASTER_ADDR", "127.0.0.1")
        cpus = int(env.get("SLURM_CPUS_ON_NODE", "1") or 1)
        head = launchers.head_argv(lb.launcher, addr, port, cpus)
        listen = port
        if env.get(launchers.RDZV_BACKEND_VAR) == "c10d" and not head:
            # an elastic torchrun: this agent hosts its rendezvous (launchers.py)
            listen = distributed.free_port()
            env[launchers.RDZV_ENDPOINT_VAR] = f"{addr}:{listen}"
            head = launchers.rendezvous_argv(distributed.job_python(env), addr, listen)
        if head:
            key = (jid, launchers.SERVICE_STEP_ID)
            self._launch_tasks(agent_pb2.LaunchTasks(
                job_id=jid, step_id=launchers.SERVICE_STEP_ID, argv=head, environment=env,
                work_dir=lb.work_dir, tasks=[agent_pb2.TaskSpec(rank=0, local_id=0)],
                uid=lb.uid, gid=lb.gid, share=lb.share if lb.HasField("share") else None))
            await asyncio.gather(*[t for t in self.step_starts])
            up = await distributed.wait_listening(
                addr, listen, launchers.HEAD_START_TIMEOUT_S,
                alive=lambda: key in self.steps and self.steps[key].running())
            if not up:
                if key in self.steps:
                    self.steps[key].kill()
                raise batch.LaunchError(
                    f"job {jid}: launcher {lb.launcher}: {head[0]} head did not listen on "
                    f"{addr}:{listen}")
            log.info("job=%d: %s head listening on %s:%d", jid, lb.launcher, addr, listen)
        return port, files

    def _watch(self, handle: batch.BatchHandle) -> None:
        self.batches[handle.job_id] = handle

        async def wait() -> None:
            res = await handle.wait()
            self.batches.pop(handle.job_id, None)
            self.batch_stderr.pop(handle.job_id, None)
            if self.job_gpus.pop(handle.job_id, None) is not None:
                g = self.gpu_usage.take(handle.job_id)
                res = dataclasses.replace(
                    res, gpu_util_ave=g.util_ave, gpu_util_max=g.util_max,
                    gpu_mem_ave_kb=g.mem_ave_kb, gpu_mem_max_kb=g.mem_max_kb)
            self.unacked[handle.job_id] = res
            log.info("job=%d: batch script ended %d:%d", res.job_id, res.exit_code, res.signal)
            self.send(agent_pb2.AgentMessage(batch_finished=self._result_msg(res)))
        self._keep(asyncio.create_task(wait()))

    def _keep(self, task: asyncio.Task) -> None:
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    @staticmethod
    def _result_msg(r: batch.BatchResult) -> agent_pb2.BatchFinished:
        return agent_pb2.BatchFinished(job_id=r.job_id, exit_code=r.exit_code, signal=r.signal,
                                       start_time=r.start_time, end_time=r.end_time,
                                       max_rss_kb=r.max_rss_kb, error=r.error,
                                       ave_rss_kb=r.ave_rss_kb, user_cpu_ms=r.user_cpu_ms,
                                       system_cpu_ms=r.system_cpu_ms,
                                       out_of_memory=r.out_of_memory,
                                       gpu_util_ave=r.gpu_util_ave, gpu_util_max=r.gpu_util_max,
                                       gpu_mem_ave_kb=r.gpu_mem_ave_kb,
                                       gpu_mem_max_kb=r.gpu_mem_max_kb)

    def _launch_tasks(self, lt: agent_pb2.LaunchTasks) -> None:
        key = (lt.job_id, lt.step_id)
        if key in self.steps or key in self.starting_steps:
            return   # a launch sent again: the step runs (or ran) here already
        self.starting_steps.add(key)
        self.job_uids[lt.job_id] = lt.uid
        env = dict(lt.environment)
        env.update(self.job_env)
        if env.get(launchers.RDZV_BACKEND_VAR) == "c10d":
            # torchrun's c10d rendezvous tells peers where this node's agent is at
            # (its hostname may not resolve; the registered address does)
            env.setdefault("PET_LOCAL_ADDR", self.address)
        spec = steps.StepSpec(
            job_id=lt.job_id, step_id=lt.step_id, node=self.mark, argv=tuple(lt.argv), env=env,
            work_dir=lt.work_dir, uid=lt.uid, gid=lt.gid,
            tasks=tuple(steps.TaskSpec(rank=t.rank, env=dict(t.environment),
                                       stdout_path=t.stdout_path, stderr_path=t.stderr_path)
                        for t in lt.tasks),
            lease=str(self.lease.path),
            limits=self._limits(lt.job_id, lt.share) if lt.HasField("share") else None,
            step_memory_bytes=lt.step_memory_bytes)
        ids = env.get("SLURM_STEP_GPUS", "")
        if lt.HasField("share") and lt.share.gpu_ids and ids:
            with contextlib.suppress(ValueError):
                self.step_gpus[key] = tuple(int(i) for i in ids.split(","))
        mps_share = lt.share if lt.HasField("share") and lt.share.mps_percentage else None
        t = asyncio.create_task(self._start_step(spec, mps_share))
        self.step_starts.add(t)
        t.add_done_callback(self.step_starts.discard)

    async def _start_step(self, spec: steps.StepSpec,
                          mps_share: agent_pb2.JobShare | None = None) -> None:
        jid, sid = spec.job_id, spec.step_id
        try:
            if mps_share is not None:
                try:
                    spec.env.update(await self._mps_start(jid, mps_share))
                except mps.MpsError as e:
                    raise steps.LaunchError(str(e)) from None
            # Until the supervisor reports its tasks started: off the loop.
            handle = await asyncio.to_thread(steps.start_step, self.state_dir, spec, self.forks)
        except steps.LaunchError as e:
            log.error("job=%d step=%d: launch failed: %s", jid, sid, e)
            for t in spec.tasks:
                self.send(self._exit_msg(jid, sid, t.rank, steps.TaskResult(
                    exit_code=1, signal=0, error=str(e))))
            return
        finally:
            self.starting_steps.discard((jid, sid))
        self.steps[handle.key] = handle
        if sid != launchers.SERVICE_STEP_ID:
            self.activity.watch_ranks(jid, sid, {
                t.rank: watch.rank_paths({**spec.env, **t.env}, spec.work_dir, t.rank,
                                         t.stdout_path, t.stderr_path) for t in spec.tasks})
        if handle.key in self.kill_when_started or jid in self.terminating:
            # Ended while it was starting (srun gone, job cancelled): a scan for
            # the job's processes then found none of these tasks yet.
            self.kill_when_started.discard(handle.key)
            log.info("job=%d step=%d: ended while starting, killing its tasks", jid, sid)
            handle.kill()

    async def _relay_steps(self) -> None:
        """While registered: relay what each step wrote past its offsets, and the
        exits of tasks whose output is whole. The tasks write files, which give
        no event to wait on (inotify is not in the standard library): a look
        every RELAY_S, a stat-sized read of each file."""
        while True:
            for key, h in list(self.steps.items()):
                chunks, exits = h.read()
                for rank, stream, offset, data in chunks:
                    self.activity.touch_rank(h.job_id, h.step_id, rank)
                    self.send(agent_pb2.AgentMessage(task_output=agent_pb2.AgentTaskOutput(
                        job_id=h.job_id, step_id=h.step_id, rank=rank, stream=stream,
                        data=data, offset=offset)))
                gpu = self.gpu_usage.peek(key) if key in self.step_gpus else None
                for rank, res in exits:
                    self.activity.forget_rank(h.job_id, h.step_id, rank)
                    self.send(self._exit_msg(h.job_id, h.step_id, rank, res, gpu))
                if h.done():
                    self.activity.forget_step(h.job_id, h.step_id)
                    if self.step_gpus.pop(key, None) is not None:
                        self.gpu_usage.take(key)
                    steps.reap(h)
                    if key[1] == launchers.SERVICE_STEP_ID:
                        self._forget_step(key)   # no controller records it
            await asyncio.sleep(RELAY_S)

    def _resume(self, r: agent_pb2.StepResume) -> None:
        h = self.steps.get((r.job_id, r.step_id))
        if h is not None:
            h.resume_from({(o.rank, o.stream): o.offset for o in r.offsets})

    def _forget_step(self, key: tuple[int, int]) -> None:
        h = self.steps.pop(key, None)
        if h is None:
            if key in self.starting_steps:
                self.kill_when_started.add(key)
            return
        if h.running():
            h.kill()

            async def later() -> None:
                for _ in range(500):
                    if not h.running():
                        break
                    await asyncio.sleep(RELAY_S)
                steps.forget_step(h)
            t = asyncio.create_task(later())
            self.step_starts.add(t)
            t.add_done_callback(self.step_starts.discard)
        else:
            steps.forget_step(h)

    @staticmethod
    def _exit_msg(jid, sid, rank, res, gpu: gpuusage.GpuUsage | None = None
                  ) -> agent_pb2.AgentMessage:
        gpu = gpu or gpuusage.GpuUsage()
        return agent_pb2.AgentMessage(task_exit=agent_pb2.AgentTaskExit(
            job_id=jid, step_id=sid, rank=rank, exit_code=res.exit_code, signal=res.signal,
            error=res.error, max_rss_kb=res.max_rss_kb, ave_rss_kb=res.ave_rss_kb,
            user_cpu_ms=res.user_cpu_ms, system_cpu_ms=res.system_cpu_ms,
            gpu_util_ave=gpu.util_ave, gpu_util_max=gpu.util_max,
            gpu_mem_ave_kb=gpu.mem_ave_kb, gpu_mem_max_kb=gpu.mem_max_kb))

    def _signal(self, sj: agent_pb2.SignalJob) -> None:
        if sj.step_id >= 0 and sj.signal == signal.SIGKILL:
            key = (sj.job_id, sj.step_id)
            if key in self.steps:
                self.steps[key].kill()
            elif key in self.starting_steps:
                self.kill_when_started.add(key)
            return
        if sj.job_id in self.launching:
            # its script is being started (a thread): no process to find yet
            self.signal_when_launched.setdefault(sj.job_id, []).append(sj)
            return
        n = procs.signal_job(self.mark, sj.job_id, sj.signal, batch_only=sj.batch_only,
                             steps_only=sj.steps_only)
        log.info("job=%d: signal %d sent to %d process(es)", sj.job_id, sj.signal, n)

    def _announce(self, jid: int, cause: str) -> None:
        """Write slurmstepd's line for a stopped job into its batch script's
        stderr, before the script is signalled: "slurmstepd-node1: error: ***
        JOB 5 ON node1 CANCELLED AT 2026-12-02T10:05:25 DUE TO TIME LIMIT ***"
        (no "DUE TO" for scancel). Tools and users grep for it to tell a time
        limit or a preemption from a crash. Only into a regular file the job's
        owner owns, opened without following a last-component symlink: the
        agent is root, and the path is the user's to point anywhere."""
        where = self.batch_stderr.get(jid)
        if where is None or jid not in self.batches:
            return
        path, uid = where
        due = f" DUE TO {cause}" if cause else ""
        line = (f"slurmstepd-{self.node}: error: *** JOB {jid} ON {self.node} CANCELLED AT "
                f"{time.strftime('%Y-%m-%dT%H:%M:%S')}{due} ***\n")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as e:
            log.info("job=%d: stop not written to %s: %s", jid, path, e)
            return
        try:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_uid == uid:
                os.write(fd, line.encode())
        except OSError as e:
            log.info("job=%d: stop not written to %s: %s", jid, path, e)
        finally:
            os.close(fd)

    def _terminate(self, jid: int, grace_s: float, report: bool) -> None:
        # The job's step tasks are among its marked processes: terminate_job
        # ends them; their supervisors record how. One still starting is
        # killed once started (_start_step looks at self.terminating).
        for key in self.starting_steps:
            if key[0] == jid:
                self.kill_when_started.add(key)
        if jid in self.launching:
            # its script is being started (a thread): no process to find yet, so
            # a search now would miss it and the job would run on untold
            was = self.end_when_launched.get(jid)
            self.end_when_launched[jid] = (min(grace_s, was[0]) if was else grace_s,
                                           report or bool(was and was[1]))
            return
        if jid in self.terminating:
            if report:
                self.terminating[jid].add_done_callback(lambda _: self._cleaned(jid))
            return
        if report and self._nothing_left(jid):
            self._cleaned(jid)
            return

        async def go() -> None:
            try:
                await procs.terminate_job(self.mark, jid, grace_s)
            except Exception:
                log.exception("job=%d: ending its processes failed; not reported clean", jid)
                return
            finally:
                self.terminating.pop(jid, None)
            if report:
                self._cleaned(jid)
        self.terminating[jid] = asyncio.create_task(go())

    def _nothing_left(self, jid: int) -> bool:
        """Whether the job certainly has no process on this node, so that its
        cleanup needs no search (a scan of all /proc, in a thread): no batch
        script of it runs or starts here (a supervisor that has exited killed
        the rest of the job in its cgroup, then removed that), no step of it
        is here, and cgroups are in use and the job has none left."""
        return (jid not in self.batches and jid not in self.launching
                and not any(k[0] == jid for k in (*self.steps, *self.starting_steps))
                and cgroups.available() and cgroups.find(self.mark, jid) is None)

    def _cleaned(self, jid: int) -> None:
        if jid not in self.batches:
            self.activity.forget(jid)
        for key, h in list(self.steps.items()):
            if key[0] == jid and h.done():
                self._forget_step(key)
        self.job_uids.pop(jid, None)
        self.job_cpus.pop(jid, None)
        self.mps.release(jid)
        self.send(agent_pb2.AgentMessage(job_cleaned=agent_pb2.JobCleaned(job_id=jid)))

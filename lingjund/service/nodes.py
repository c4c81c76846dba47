"""Node operations: agent registration and reconcile, heartbeats, drain/resume.

Node state as Slurm shows it is derived, never stored twice: the base state
comes from the jobs holding the node (IDLE / MIXED / ALLOCATED), DOWN and
DRAIN are what a person (or, later, a probe) said, ``*`` is a missing agent
stream, UNKNOWN a node that never registered.
"""
from __future__ import annotations

import asyncio
import logging

from lingjun import slurm
from lingjun.netprofile import to_spec
from lingjun.v1 import agent_pb2, api_pb2
from lingjund import lifecycle
from lingjund.service import authz, batch, devices, errors, faulttol, health, steps, timers
from lingjund.service import topology
from lingjund.service.agents import Connection
from lingjund.service.batch import launch_message
from lingjund.service.context import Controller
from lingjund.sched.snapshot import MPS, SHARD
from lingjund.service.resources import node_capacity, node_features, node_gpu_type, node_shared_gpus
from lingjund.service.views import allocations

log = logging.getLogger("lingjund.nodes")

NOT_RESPONDING = lifecycle.NOT_RESPONDING


def register(ctl: Controller, conn: Connection, reg: agent_pb2.Register) -> tuple[agent_pb2.RegisterReply, list]:
    """Accept (or refuse) an agent; returns the reply and the commands that follow it."""
    name = reg.node_name
    if ctl.config.nodes and ctl.config.node(name) is None:
        return agent_pb2.RegisterReply(accepted=False, message=f"unknown node {name!r}: not in the configuration"), []
    now = ctl.clock()
    acked = []
    for res in reg.unacked:
        batch.record_batch_finished(ctl, name, res)
        acked.append(res.job_id)
    running_there = set(reg.running_job_ids)
    with ctl.store.transaction() as st:
        rec = st.node(name)
        jobs = {j.job_id: j for j in st.jobs_on_node(name)}
        r = lifecycle.registered(name, rec, tuple(jobs.values()), frozenset(running_there),
                                 frozenset(acked))
        back = dict(down=False, reason="", reason_user="", reason_time=0) if r.back else {}
        if r.back:
            log.info("node=%s: responding again, returned to service", name)
        gres_low, gres_notes = devices.gres_check(ctl.config.node(name), reg.inventory)
        st.put_node(name, registered=True, inventory=reg.inventory,
                    agent_start_time=reg.agent_start_time, last_seen=now,
                    **{**back, **_gres_drain(st, name, rec, gres_low, now)})
    if rec is None or rec.inventory != reg.inventory:
        ctl.nodes_changed()     # a new node, or new capacity: submissions check against it
        for note in gres_notes:
            log.warning("node=%s: %s", name, note)
        note = topology.discovered_note(ctl.config.topology.index, name, reg.inventory.leaf_switch)
        if note:
            log.warning("node=%s: %s", name, note)
    conn.last_heartbeat = now
    conn.echoed_at = now                # the accepted Register renews the agent's lease
    conn.echo_after_s = echo_after_s(ctl.config.heartbeat_interval,
                                     ctl.config.controller.heartbeat_timeout_s,
                                     ctl.config.heartbeats_per_s)
    expected = list(r.expected)
    follow = [_follow(ctl, jobs[jid], what, why) for what, jid, why in r.follow]
    lost = [jobs[jid] for jid in r.lost]
    for job in lost:
        log.warning("job=%d node=%s: the agent no longer runs the batch script and has no result",
                    job.job_id, name)
        batch.record_batch_finished(ctl, name, agent_pb2.BatchFinished(
            job_id=job.job_id, exit_code=0, signal=9, start_time=int(job.start_time),
            end_time=int(now), error="batch script lost"), lost=True)
    # the probes it ran just before registering; a failing node is
    # drained before any scheduling pass can see it IDLE.
    health.record(ctl, name, "register", reg.sanity)
    log.info("node=%s registered: %d cpus, %d MB, running %s, expected %s",
             name, reg.inventory.cpus, reg.inventory.real_memory_mb,
             sorted(running_there), expected)
    reply = agent_pb2.RegisterReply(
        accepted=True, controller_time=now,
        heartbeat_interval_s=ctl.config.heartbeat_interval,
        expected_job_ids=expected, acked_job_ids=acked,
        heartbeat_timeout_s=ctl.config.controller.heartbeat_timeout_s,
        fence_grace_s=ctl.config.controller.fence_grace,
        resume_steps=steps.resume_for(ctl, name, {(s.job_id, s.step_id) for s in reg.steps}))
    profile = ctl.config.network.profile_for(name)
    if profile is not None:
        reply.net_profile.CopyFrom(to_spec(profile))
    if follow or lost or back:
        ctl.wake_scheduler()
    else:
        _wake_for_capacity(ctl)
    return reply, follow


def _gres_drain(st, name: str, rec, reason: str, now: float) -> dict:
    """The node's drain fields after a registration's GPU count check: drained
    as Slurm drains it when the agent found fewer GPUs than configured,
    returned to service once it reports them all (only from that drain)."""
    drained = rec is not None and rec.drain
    if reason:
        if drained and (rec.reason == reason or not devices.is_gres_drain(rec.reason)):
            return {}           # already drained, for this or by a person or a probe
        log.warning("node=%s: drained: %s", name, reason)
        st.add_node_event(name, now, health.DRAIN, reason, by=devices.DRAIN_USER)
        return dict(drain=True, drain_by_probe=False, reason=reason,
                    reason_user=devices.DRAIN_USER, reason_time=now)
    if drained and devices.is_gres_drain(rec.reason):
        log.info("node=%s: reports its configured GPUs again, returned to service (was: %s)",
                 name, rec.reason)
        st.add_node_event(name, now, health.RESUME, rec.reason, by=devices.DRAIN_USER)
        return dict(drain=False, reason="", reason_user="", reason_time=0)
    return {}


def _follow(ctl: Controller, job, what: str, why: str) -> agent_pb2.ControllerMessage:
    """The message that carries out one of ``lifecycle.registered``'s follow-ups."""
    if what == lifecycle.LAUNCH:
        return launch_message(ctl, job)
    grace = ctl.config.controller.kill_wait_s if what == lifecycle.TERMINATE else 0
    return agent_pb2.ControllerMessage(terminate_job=agent_pb2.TerminateJob(
        job_id=job.job_id, grace_s=grace, reason=why))


# A node that registers with nothing to repair only adds capacity: a pass
# within this long uses it. Registrations in a burst (a cluster's agents
# reconnecting to a restarted controller) then share a pass or two a second
# instead of asking for one each, which kept passes back to back and the
# loop from taking the next agents' handshakes.
CAPACITY_WAKE_S = 0.5


def _wake_for_capacity(ctl: Controller) -> None:
    agents = ctl.agents
    if agents.capacity_wake is not None:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:        # called outside the loop (a test's direct call)
        ctl.wake_scheduler()
        return

    def wake() -> None:
        agents.capacity_wake = None
        ctl.wake_scheduler()
    agents.capacity_wake = loop.call_later(CAPACITY_WAKE_S, wake)


async def register_batched(ctl: Controller, conn: Connection,
                           reg: agent_pb2.Register) -> tuple[agent_pb2.RegisterReply, list]:
    """``register``, with every other registration that arrives in the same turn
    of the event loop, in one transaction: one commit (one fsync with
    synchronous=FULL, a few milliseconds) for a burst of agents instead of one
    each, which at 10,000 agents reconnecting was most of a minute of the loop.
    The replies go out only once the batch is committed."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    queue = ctl.agents.registering
    queue.append((conn, reg, fut))
    if len(queue) == 1:
        loop.call_soon(_register_batch, ctl)
    return await fut


def _register_batch(ctl: Controller) -> None:
    batch = list(ctl.agents.registering)
    ctl.agents.registering.clear()
    done = []
    try:
        with ctl.store.transaction():
            for conn, reg, fut in batch:
                try:
                    done.append((fut, register(ctl, conn, reg), None))
                except Exception as e:      # noqa: BLE001 - that agent's stream ends with it
                    done.append((fut, None, e))
    except Exception as e:                  # noqa: BLE001 - the commit: nobody is registered
        done = [(fut, None, e) for _, _, fut in batch]
    for fut, result, err in done:
        if fut.done():                      # its stream was cancelled meanwhile
            continue
        if err is not None:
            fut.set_exception(err)
        else:
            fut.set_result(result)


# The answer to a heartbeat (SanityClock) renews the agent's lease on its jobs
# to the heartbeat's send + heartbeat_timeout_s (lingjun_agent/launcher/lease.py)
# and feeds its clock probe. Writing it is a good part of what a heartbeat
# costs the controller, so on a big cluster (its configured nodes sending at
# least THIN_FROM_PER_S heartbeats a second together) a node's heartbeats are
# answered only as often as its lease needs: at least ECHOES_PER_TIMEOUT times
# per timeout, i.e. every 15 s at the defaults (5 s, 60 s): every third.
# Smaller clusters get every heartbeat answered, as before: thinning shortens
# how long a controller outage the running jobs survive (below), for no CPU
# worth saving.
ECHOES_PER_TIMEOUT = 4
THIN_FROM_PER_S = 500.0


def echo_after_s(interval_s: float, timeout_s: float, heartbeats_per_s: float) -> float:
    """How long after the last answered heartbeat (or registration) of a node
    the next one is answered; 0: every one (always below THIN_FROM_PER_S).

    The next answer comes at most ``timeout_s / ECHOES_PER_TIMEOUT`` after the
    last plus half an interval of jitter (the heartbeats arrive about
    ``interval_s`` apart; the threshold sits half an interval early so a beat a
    little early is not put off a whole interval), so the lease is renewed
    while at least ``timeout_s * 3/4 - interval_s / 2`` of it is left (42.5 s
    of 60 at the defaults). What that costs: a controller away for longer than
    that (a restart) lets the leases lapse and the jobs are fenced, where
    before it took ``timeout_s - interval_s`` (55 s). Below THIN_FROM_PER_S,
    and where the timeout holds fewer than ``ECHOES_PER_TIMEOUT`` intervals
    (``lingjun up``: timeout = 3 intervals; the tests' short timeouts), every
    heartbeat is answered, as before. Answering fewer never lets a lease
    outlast the controller's DOWN: the lease runs from the send of a heartbeat
    the controller received, and DOWN comes one timeout after the newest one
    received."""
    if timeout_s <= 0 or interval_s <= 0 or heartbeats_per_s < THIN_FROM_PER_S:
        return 0.0
    every = timeout_s / ECHOES_PER_TIMEOUT
    if every <= interval_s:
        return 0.0
    return every - interval_s / 2


def heartbeat(ctl: Controller, conn: Connection, hb: agent_pb2.Heartbeat) -> bool:
    """Note a heartbeat; True when it is to be answered (``echo_after_s``)."""
    now = ctl.clock()
    conn.last_heartbeat = now
    ctl.live[conn.node] = (hb.free_memory_mb, hb.cpu_load)
    if hb.activity or conn.node in ctl.rank_reports:
        faulttol.note_activity(ctl, conn.node, hb)
    if now - conn.echoed_at < conn.echo_after_s:
        return False
    conn.echoed_at = now
    return True


def check_heartbeats(ctl: Controller) -> None:
    """Silence past heartbeat_timeout_s: a stream that stopped beating is closed,
    and a node without a stream that long is DOWN with reason "Not responding".

    Silence is timed from the last heartbeat (or registration) received, also
    across the close of the stream (``disconnected`` records that time, not
    the close's): one timeout after the last word, not one to notice the
    stream is dead plus another to declare the node DOWN. The agent's lease
    ends at the latest then (lingjun_agent/launcher/lease.py).

    What becomes of the jobs of a node that went DOWN is the fault-tolerance
    layer's business; here the node only stops taking new work. The decision
    is ``lifecycle.heartbeats``; this carries it out.
    """
    now = ctl.clock()
    changes = lifecycle.heartbeats(timers.view(ctl, now, jobs=False, nodes=True), now)
    for c in changes:
        if isinstance(c, lifecycle.CloseStream) and (conn := ctl.agents.get(c.node)) is not None:
            log.warning("node=%s: no heartbeat for %.1f s, closing its stream", c.node, c.silent_s)
            conn.close()
            # Take it off the registry now, so the same pass can declare it DOWN.
            disconnected(ctl, conn)
    silent = [c for c in changes if isinstance(c, lifecycle.NodeDown)]
    if not silent:
        return
    with ctl.store.transaction() as st:
        for c in silent:
            st.put_node(c.node, down=True, reason=NOT_RESPONDING, reason_user="slurm",
                        reason_time=now)
    for c in silent:
        log.warning("node=%s: not responding for %.1f s, set DOWN", c.node, c.silent_s)


def disconnected(ctl: Controller, conn: Connection) -> None:
    """The node's stream ended: its silence counts from the last heartbeat (or
    registration) we received on it, not from now (see ``check_heartbeats``)."""
    if ctl.agents.detach(conn):
        log.warning("node=%s: agent stream closed", conn.node)
        with ctl.store.transaction() as st:
            st.put_node(conn.node, last_seen=conn.last_heartbeat or ctl.clock())
        ctl.wake_scheduler()     # time its silence (timers.next_deadline)


def update_node(ctl: Controller, req: api_pb2.UpdateNodeRequest) -> None:
    authz.require_operator(req.requester_uid, ctl.config.authz)     # before anything
    known = set(ctl.known_nodes())
    for name in req.names:
        if name not in known:
            raise errors.InvalidNodeName()
    state = req.state.upper()
    now = ctl.clock()
    with ctl.store.transaction() as st:
        for name in req.names:
            if state in ("DRAIN", "DOWN"):
                if not req.reason:
                    raise errors.InvalidRequest(
                        "You must specify a reason when DOWNING or DRAINING a node. Request denied")
                fields = {"drain": True} if state == "DRAIN" else {"down": True}
                fields["drain_by_probe"] = False    # a person's: only a person lifts it
                st.put_node(name, reason=req.reason, reason_user=req.requester or str(req.requester_uid),
                            reason_time=now, **fields)
            elif state in ("RESUME", "IDLE"):
                st.put_node(name, drain=False, down=False, reason="", reason_user="", reason_time=0,
                            drain_by_probe=False)
            elif state == "UNDRAIN":
                st.put_node(name, drain=False, reason="", reason_user="", reason_time=0,
                            drain_by_probe=False)
            else:
                raise errors.InvalidRequest("Invalid node state specified")
            # what a person did is a node event too (and restarts flap counting)
            st.add_node_event(name, now, state.lower(), req.reason,
                              by=req.requester or str(req.requester_uid))
    log.info("nodes %s set %s by %s: %s", ",".join(req.names), state, req.requester, req.reason)
    ctl.wake_scheduler()


def node_infos(ctl: Controller, req: api_pb2.GetNodesRequest) -> api_pb2.GetNodesResponse:
    now = ctl.clock()
    records = ctl.store.nodes()
    holding = ctl.store.holding_jobs()
    alloc = allocations(holding)
    completing = {n for j in holding for n in j.completing}
    names = ctl.known_nodes()
    if req.names:
        wanted = set(req.names)
        if not wanted & set(names):
            raise errors.InvalidNodeName()
        names = [n for n in names if n in wanted]
    probed = ctl.store.probe_results(names)
    layout = ctl.node_layout()
    out = []
    for name in names:
        rec = records.get(name)
        node_parts = layout.partitions_of.get(name, ())
        if req.partitions and not set(req.partitions) & set(node_parts):
            continue
        cap = node_capacity(ctl, name) or (0, 0, 0)
        a = alloc.get(name, {"cpus": 0, "mem": 0, "gpus": 0, "jobs": [], "exclusive": False})
        cpus_alloc = cap[0] if a["exclusive"] else a["cpus"]
        if rec is None or not rec.registered:
            base = slurm.NODE_UNKNOWN
        elif rec.down:
            base = slurm.NODE_DOWN
        elif not a["jobs"]:
            base = slurm.NODE_IDLE
        elif cpus_alloc >= cap[0]:
            base = slurm.NODE_ALLOCATED
        else:
            base = slurm.NODE_MIXED
        inv = rec.inventory if rec else agent_pb2.Inventory()
        shared = node_shared_gpus(ctl, name) if cap[2] else (0, 0)
        free_mem, load = ctl.live.get(name, (inv.free_memory_mb, inv.cpu_load))
        out.append(api_pb2.NodeInfo(
            name=name, state=base, drain=bool(rec and rec.drain),
            not_responding=not ctl.agents.connected(name),
            reason=rec.reason if rec else "", reason_user=rec.reason_user if rec else "",
            reason_time=int(rec.reason_time) if rec else 0,
            cpus=cap[0], cpus_alloc=cpus_alloc, real_memory_mb=cap[1], alloc_memory_mb=a["mem"],
            free_memory_mb=free_mem, gpus=cap[2], gpus_alloc=a["gpus"], partitions=node_parts,
            address=inv.address or "127.0.0.1", hostname=inv.hostname, boot_time=inv.boot_time,
            agent_start_time=int(rec.agent_start_time) if rec else 0, cpu_load=load,
            os=inv.os, arch=inv.arch, sockets=inv.sockets or 1,
            cores_per_socket=inv.cores_per_socket or cap[0], threads_per_core=inv.threads_per_core or 1,
            last_busy_time=int(rec.last_busy_time) if rec else 0, version="lingjun-0.1.0",
            job_ids=a["jobs"], weight=1, tmp_disk_mb=0, completing=name in completing,
            features=node_features(ctl, name), gpu_type=node_gpu_type(ctl, name, rec),
            gpu_devices=devices.node_devices(ctl.config.node(name), inv, cap[2]),
            gpu_ids_alloc=a.get("gpu_ids", ()),
            shards=shared[0], mps=shared[1],
            shards_alloc=sum(n for _, k, n in a.get("shared", ()) if k == SHARD),
            mps_alloc=sum(n for _, k, n in a.get("shared", ()) if k == MPS),
            net_status=rec.net_status if rec else None, sanity_results=[health.probe_msg(r) for r in probed.get(name, [])],
            leaf_switch=topology.leaf_of(ctl.config.topology.index, name, inv.leaf_switch)))
    return api_pb2.GetNodesResponse(nodes=out, now=int(now))


def partition_infos(ctl: Controller, req: api_pb2.GetPartitionsRequest) -> api_pb2.GetPartitionsResponse:
    out = []
    for p in ctl.partitions():
        if req.names and p.name not in req.names:
            continue
        nodes = ctl.partition_nodes(p)
        caps = [node_capacity(ctl, n) or (0, 0, 0) for n in nodes]
        out.append(api_pb2.PartitionInfo(
            name=p.name, default=p.default, state=p.state, max_time_min=p.max_time_min,
            default_time_min=p.default_time_min, max_nodes=p.max_nodes, min_nodes=p.min_nodes,
            node_names=nodes, total_cpus=sum(c[0] for c in caps), total_nodes=len(nodes),
            priority_tier=p.priority_tier, priority_job_factor=p.priority_job_factor,
            total_memory_mb=sum(c[1] for c in caps),
            preempt_mode=ctl.config.preempt_mode(p), grace_time_s=int(p.grace_time_s)))
    return api_pb2.GetPartitionsResponse(partitions=out)

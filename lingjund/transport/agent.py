"""AgentService servicer: one bidirectional stream per node agent.

The agent opens every stream with an AuthHello (its own nonce); the
controller answers with an AuthChallenge (a fresh nonce, and its MAC over
the agent's nonce, which proves to the agent that this is its cluster's
controller) and sends nothing else until the agent's AuthProof verifies
(lingjun/auth.py: the MAC, the clock skew, one use per nonce); a stream
that fails is logged with its peer and reason and ends UNAUTHENTICATED
without the node ever being registered. An agent that hangs up instead of
proving has refused our proof: it holds another key. Then the next message must be
Register, for the node the proof named; nothing else is sent to a stream
before its registration has been accepted (registrations arriving together
are committed together, nodes.register_batched). Then a reader task
dispatches what the agent says to the service layer and answers the
heartbeats itself (as often as the agent's lease needs: nodes.heartbeat),
while this generator writes the commands queued for the node; a lock keeps
their writes apart.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import grpc

from lingjun import auth
from lingjun.v1 import agent_pb2, agent_pb2_grpc
from lingjund.service import batch, health, joboutput, network, nodes, quarantine, steps
from lingjund.service.agents import Connection
from lingjund.service.context import Controller
from lingjund.transport.authn import ServerAuth

log = logging.getLogger("lingjund.agent_channel")


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    # Long enough that a loop busy for seconds (a scheduling pass over 10,000
    # nodes) does not refuse agents whose proof is already waiting.
    HANDSHAKE_TIMEOUT_S = 30.0

    def __init__(self, ctl: Controller, auth_: ServerAuth):
        self.ctl = ctl
        self.auth = auth_
        self.nonces = auth.NonceBook(lifetime_s=self.HANDSHAKE_TIMEOUT_S * 2)

    async def _refuse(self, context, it, why: str, node: str = "?") -> None:
        """Log and end the stream UNAUTHENTICATED; the caller returns at once.

        What the agent already sent behind its proof (its Register) is read
        first: ending the stream while a write of the agent's is in flight made
        the agent's call end "INTERNAL: Internal error from Core" now and then,
        instead of with the refusal. A refused peer waits a moment; no harm."""
        log.warning("refused agent stream from %s (node %r): %s", context.peer(), node, why)
        with contextlib.suppress(Exception):
            for _ in range(4):
                await asyncio.wait_for(it.__anext__(), timeout=0.3)
        context.set_code(grpc.StatusCode.UNAUTHENTICATED)
        context.set_details(auth.AUTH_ERROR)

    async def Connect(self, request_iterator, context):
        ctl = self.ctl
        it = request_iterator.__aiter__()
        try:
            first = await asyncio.wait_for(it.__anext__(), timeout=self.HANDSHAKE_TIMEOUT_S)
        except (StopAsyncIteration, asyncio.TimeoutError):
            await self._refuse(context, it, "no hello (the agent must open with its own nonce)")
            return
        if first.WhichOneof("msg") != "auth_hello":
            await self._refuse(context, it, f"sent {first.WhichOneof('msg')} before its hello")
            return
        hello = first.auth_hello
        if len(hello.nonce) != auth.NONCE_BYTES:
            await self._refuse(context, it, "its hello carries no fresh nonce", hello.node_name)
            return
        nonce = self.nonces.issue()
        yield agent_pb2.ControllerMessage(auth_challenge=agent_pb2.AuthChallenge(
            nonce=nonce, controller_time_ms=int(time.time() * 1000),
            controller_mac=auth.controller_proof_mac(self.auth.key, hello.nonce, nonce, hello.node_name)))
        try:
            first = await asyncio.wait_for(it.__anext__(), timeout=self.HANDSHAKE_TIMEOUT_S)
        except StopAsyncIteration:
            await self._refuse(context, it, "it hung up without proving the cluster key (it holds "
                               "another key, and refused ours?)", hello.node_name)
            return
        except asyncio.TimeoutError:
            await self._refuse(context, it, "no proof of the cluster key", hello.node_name)
            return
        if first.WhichOneof("msg") != "auth_proof":
            await self._refuse(context, it, f"sent {first.WhichOneof('msg')} before proving the cluster key",
                               hello.node_name)
            return
        proof = first.auth_proof
        if proof.node_name != hello.node_name:
            await self._refuse(context, it, f"said hello as {hello.node_name!r} but proves {proof.node_name!r}",
                               proof.node_name)
            return
        try:
            auth.verify_proof(self.auth.key, nonce, self.nonces, proof.node_name, proof.nonce,
                              proof.time_ms, proof.mac, self.auth.handshake_max_skew_s)
        except auth.AuthError as e:
            await self._refuse(context, it, str(e), proof.node_name)
            return
        try:
            first = await asyncio.wait_for(it.__anext__(), timeout=30)
        except (StopAsyncIteration, asyncio.TimeoutError):
            return
        if first.WhichOneof("msg") != "register":
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "first message must be Register")
        reg = first.register
        if reg.node_name != proof.node_name:
            await self._refuse(context, it, f"proved {proof.node_name!r} but registers {reg.node_name!r}",
                         reg.node_name)
            return
        conn = Connection(reg.node_name)
        reply, follow = await nodes.register_batched(ctl, conn, reg)
        yield agent_pb2.ControllerMessage(register_reply=reply)
        if not reply.accepted:
            log.warning("refused agent %r: %s", reg.node_name, reply.message)
            return
        ctl.agents.attach(conn)
        for msg in follow:
            conn.send(msg)
        # From here on both this generator (the commands queued for the node) and
        # the reader (the answer to each heartbeat, written at once rather than
        # queued: a queue hop and a task switch less per heartbeat, about a third
        # of its cost) write to the stream, one at a time.
        writing = asyncio.Lock()
        reader = asyncio.create_task(self._read(conn, it, context, writing))
        try:
            while True:
                msg = await conn.outbox.get()
                if msg is None:
                    break
                if not await self._write(context, writing, msg):
                    break
        finally:
            reader.cancel()
            # Steps on the node keep running under their supervisors: the agent
            # relays them again when it registers; a node that stays away is
            # found DOWN and its tasks lost (steps._end_lost_tasks).
            nodes.disconnected(ctl, conn)

    @staticmethod
    async def _write(context, writing: asyncio.Lock, msg: agent_pb2.ControllerMessage) -> bool:
        """Send ``msg`` on the stream; False once the stream is gone."""
        try:
            async with writing:
                await context.write(msg)
            return True
        except asyncio.CancelledError:
            raise
        except Exception as e:      # noqa: BLE001 - the stream ended under us
            log.debug("write to agent stream failed: %s", e)
            return False

    async def _read(self, conn: Connection, it, context, writing: asyncio.Lock) -> None:
        ctl = self.ctl
        try:
            async for msg in it:
                kind = msg.WhichOneof("msg")
                try:
                    if kind == "heartbeat":
                        # answered only as often as the agent's lease needs
                        if (nodes.heartbeat(ctl, conn, msg.heartbeat) and not await self._write(
                                context, writing, health.clock_reply(msg.heartbeat))):
                            break
                    elif kind == "batch_started":
                        batch.batch_started(ctl, conn.node, msg.batch_started)
                    elif kind == "batch_finished":
                        batch.record_batch_finished(ctl, conn.node, msg.batch_finished)
                        conn.send(agent_pb2.ControllerMessage(
                            ack_batch_finished=agent_pb2.AckBatchFinished(job_id=msg.batch_finished.job_id)))
                    elif kind == "task_output":
                        steps.task_output(ctl, conn.node, msg.task_output)
                    elif kind == "output_chunk":
                        joboutput.chunk_arrived(conn.reads, msg.output_chunk)
                    elif kind == "task_exit":
                        steps.task_exit(ctl, conn.node, msg.task_exit)
                        quarantine.note_task_exit(ctl, conn.node, msg.task_exit)
                    elif kind == "job_cleaned":
                        batch.job_cleaned(ctl, conn.node, msg.job_cleaned)
                    elif kind == "net_status":
                        network.record_status(ctl, conn.node, msg.net_status)
                    elif kind == "sanity_report":
                        if msg.sanity_report.phase == "prolog":
                            health.prolog_report(ctl, conn.node, msg.sanity_report)
                        elif msg.sanity_report.phase == "suspect":
                            quarantine.check_report(ctl, conn.node, msg.sanity_report)
                        else:
                            health.record(ctl, conn.node, msg.sanity_report.phase,
                                          msg.sanity_report.results)
                    else:
                        log.warning("node=%s: unexpected %s", conn.node, kind)
                except Exception:
                    log.exception("node=%s: handling %s failed", conn.node, kind)
        except (grpc.aio.AioRpcError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("node=%s: stream read failed", conn.node)
        finally:
            conn.close()

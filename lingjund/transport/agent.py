"""AgentService servicer: one bidirectional stream per node agent.

The first message must be Register; nothing is sent to a stream before its
registration has been accepted. Then a reader task dispatches what the agent
says to the service layer while this generator yields the commands queued
for the node.
"""
from __future__ import annotations

import asyncio
import logging

import grpc

from lingjun.v1 import agent_pb2, agent_pb2_grpc
from lingjund.service import batch, health, network, nodes, steps
from lingjund.service.agents import Connection
from lingjund.service.context import Controller

log = logging.getLogger("lingjund.agent_channel")


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    def __init__(self, ctl: Controller):
        self.ctl = ctl

    async def Connect(self, request_iterator, context):
        ctl = self.ctl
        it = request_iterator.__aiter__()
        try:
            first = await asyncio.wait_for(it.__anext__(), timeout=30)
        except (StopAsyncIteration, asyncio.TimeoutError):
            return
        if first.WhichOneof("msg") != "register":
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "first message must be Register")
        reg = first.register
        conn = Connection(reg.node_name)
        reply, follow = nodes.register(ctl, conn, reg)
        yield agent_pb2.ControllerMessage(register_reply=reply)
        if not reply.accepted:
            log.warning("refused agent %r: %s", reg.node_name, reply.message)
            return
        ctl.agents.attach(conn)
        for msg in follow:
            conn.send(msg)
        reader = asyncio.create_task(self._read(conn, it))
        try:
            while True:
                msg = await conn.outbox.get()
                if msg is None:
                    break
                yield msg
        finally:
            reader.cancel()
            nodes.disconnected(ctl, conn)
            if not ctl.agents.connected(conn.node):
                steps.node_lost(ctl, conn.node)

    async def _read(self, conn: Connection, it) -> None:
        ctl = self.ctl
        try:
            async for msg in it:
                kind = msg.WhichOneof("msg")
                try:
                    if kind == "heartbeat":
                        nodes.heartbeat(ctl, conn, msg.heartbeat)
                        health.clock_reply(conn, msg.heartbeat)
                    elif kind == "batch_started":
                        batch.batch_started(ctl, conn.node, msg.batch_started)
                    elif kind == "batch_finished":
                        batch.record_batch_finished(ctl, conn.node, msg.batch_finished)
                        conn.send(agent_pb2.ControllerMessage(
                            ack_batch_finished=agent_pb2.AckBatchFinished(job_id=msg.batch_finished.job_id)))
                    elif kind == "task_output":
                        steps.task_output(ctl, conn.node, msg.task_output)
                    elif kind == "task_exit":
                        steps.task_exit(ctl, conn.node, msg.task_exit)
                    elif kind == "job_cleaned":
                        batch.job_cleaned(ctl, conn.node, msg.job_cleaned)
                    elif kind == "net_status":
                        network.record_status(ctl, conn.node, msg.net_status)
                    elif kind == "sanity_report":
                        if msg.sanity_report.phase == "prolog":
                            health.prolog_report(ctl, conn.node, msg.sanity_report)
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

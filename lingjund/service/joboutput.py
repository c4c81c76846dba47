"""lingjun logs: a job's batch output, relayed from the node that has it.

The batch script's StdOut is a file on its node (``job.batch_host``), which
the caller's machine may not mount. ``read`` asks that node's agent for it
over the agent's stream, one chunk at a time (ReadOutput, answered by
OutputChunk; lingjun_agent/launcher/output.py), and asks for the next only
after the caller's stream has taken the last: a slow reader holds back the
agent, never the controller's memory, and the controller touches no file.

    client ──ReadJobOutput(job, offset, follow)──► lingjund
        authz (owner or operator), the batch node, its live stream
        loop: ReadOutput(read_id, path, offset) ──► agent of batch_host
              ◄── OutputChunk(data | nothing new | ended | error)
              data: yield it, offset += len
              nothing (not follow): done
              ended (follow): done, unless the controller has sent the
                  launch but the agent has not started the script yet
                  (job RUNNING, not launched): ask again shortly

A pending job has no output yet: without follow the answer is empty; with
follow it is JobPending, and the caller waits for the start (the SDK does,
through WatchJobs). A job whose batch node's agent is not connected (the
node is down, or was removed) answers ``NodeNotResponding`` naming the node;
the output is still where it was, on that node.
"""
from __future__ import annotations

import asyncio
import logging
from typing import AsyncIterator

from lingjun import slurm
from lingjun.v1 import agent_pb2, api_pb2
from lingjund.service import authz, errors
from lingjund.service.batch import output_paths
from lingjund.service.context import Controller

log = logging.getLogger("lingjund.joboutput")

ANSWER_TIMEOUT_S = 30.0    # an agent silent this long about one chunk is not responding
LAUNCH_WAIT_S = 0.5        # a started job's script is not running on its node yet: ask again after


async def read(ctl: Controller, req: api_pb2.ReadJobOutputRequest) -> AsyncIterator[api_pb2.JobOutputChunk]:
    job = ctl.store.job(req.job_id)
    if job is None:
        raise errors.InvalidJobId()
    authz.require(req.requester_uid, job.uid, ctl.config.authz)
    if not job.spec.batch:
        raise errors.BatchOnly()
    offset = req.offset
    while True:
        if job.state not in slurm.FINISHED_STATES:     # it may have started, ended, or moved
            job = ctl.store.job(req.job_id) or job
        node = job.batch_host
        if not node:                                 # never started
            if req.follow and job.state == slurm.PENDING:
                raise errors.JobPending()
            return
        conn = ctl.agents.get(node)
        if conn is None or conn.closed.is_set():
            raise errors.NodeNotResponding(f"Job's output is on {node}, which is not responding")
        read_id = next(ctl.agents.read_ids)
        answer: asyncio.Future = asyncio.get_running_loop().create_future()
        conn.reads[read_id] = answer
        conn.send(agent_pb2.ControllerMessage(read_output=agent_pb2.ReadOutput(
            read_id=read_id, job_id=job.job_id, path=output_paths(job)[0], offset=offset,
            follow=req.follow, uid=job.spec.uid)))
        try:
            chunk = await asyncio.wait_for(answer, ANSWER_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise errors.NodeNotResponding(f"Job's output is on {node}, which is not responding") from None
        finally:
            conn.reads.pop(read_id, None)
        if chunk is None:               # the stream closed: a new one, or none (checked above)
            continue
        if chunk.error:
            raise errors.OutputUnreadable(f"Job's output on {node} could not be read: {chunk.error}")
        if chunk.data:
            yield api_pb2.JobOutputChunk(offset=offset, data=chunk.data, node=node)
            offset += len(chunk.data)
            continue
        if not req.follow:
            return
        if chunk.ended:
            if job.state == slurm.RUNNING and not job.launched:
                await asyncio.sleep(LAUNCH_WAIT_S)
                continue
            return


def chunk_arrived(conn_reads: dict, msg: agent_pb2.OutputChunk) -> None:
    """An agent's OutputChunk: the answer its read is waiting for (dropped when
    that reader has gone)."""
    fut = conn_reads.pop(msg.read_id, None)
    if fut is not None and not fut.done():
        fut.set_result(msg)

"""lingjun events JOB: what happened to a job and why (RPC GetJobEvents).

One line per event, oldest first: the node lost, each restart with the
nodes of the new attempt, a hang detected, a preemption, giving up:

    JobId=12 State=RUNNING Restarts=1
    2026-12-03T07:50:01 node_lost  node node2 lost (Not responding) while running on node[1-2]
    2026-12-03T07:50:02 requeued   attempt 1 ended NODE_FAIL on node[1-2]; restart 1 of 5 in 1 s
    2026-12-03T07:50:03 restarted  attempt 2 started on node[1,3]
"""
from __future__ import annotations

import sys
from typing import TextIO

import grpc

from lingjun import slurm
from lingjun.client import Api, ControllerUnreachable
from lingjun.v1 import api_pb2


def format_events(job_id: int, reply: api_pb2.GetJobEventsResponse) -> str:
    lines = [f"JobId={job_id} State={reply.state} Restarts={len(reply.attempts)}"]
    width = max((len(e.kind) for e in reply.events), default=0)
    for e in reply.events:
        lines.append(f"{slurm.format_timestamp(e.time)} {e.kind:<{width}} {e.text}")
    return "\n".join(lines) + "\n"


def events(job: str, out: TextIO = sys.stdout, err: TextIO = sys.stderr, api=None) -> int:
    try:
        job_id = slurm.parse_job_id(job)
    except ValueError:
        print(f"lingjun: error: Invalid job id specified: {job}", file=err)
        return 1
    try:
        reply = (api or Api()).call("GetJobEvents", api_pb2.GetJobEventsRequest(job_id=job_id))
    except ControllerUnreachable as e:
        print(f"lingjun: error: {e}", file=err)
        return 1
    except grpc.RpcError as e:
        print(f"lingjun: error: {e.details()}", file=err)
        return 1
    out.write(format_events(job_id, reply))
    return 0

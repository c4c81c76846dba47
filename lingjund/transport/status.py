"""The one table from service errors to gRPC statuses and Slurm's error names.

Service code raises ``errors.SlurmError`` subclasses carrying Slurm's words
and knows nothing of gRPC; here each class gets its status code and its
Slurm error name (slurm_errno.h: ESLURM_INVALID_JOB_ID...). A class not in a
table takes its nearest listed base's (``SlurmError`` itself:
INVALID_ARGUMENT, SLURM_ERROR). The commands decide their exit and message
from the codes, so a code here changes what a user sees.

Every error a servicer answers carries, besides the code and Slurm's
message, a ``google.rpc.Status`` in the trailing metadata
(``grpc-status-details-bin``, read with grpcio-status's
``rpc_status.from_call``) whose details hold one ``google.rpc.ErrorInfo``:
``reason`` is Slurm's error name, ``domain`` is "lingjun". A program then
tells "no such job" from "not yours" by name, not by parsing English:

    status = rpc_status.from_call(err)     # err: the grpc.RpcError
    info = ErrorInfo(); status.details[0].Unpack(info)
    info.reason == "ESLURM_INVALID_JOB_ID"

``lingjun.client.error_reason(err)`` does exactly that.
"""
from __future__ import annotations

from typing import NoReturn

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from lingjund.service import authz, errors

DOMAIN = "lingjun"

STATUS: dict[type[errors.SlurmError], grpc.StatusCode] = {
    errors.SlurmError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.InvalidJobId: grpc.StatusCode.NOT_FOUND,
    errors.InvalidNodeName: grpc.StatusCode.NOT_FOUND,
    errors.JobNotRunning: grpc.StatusCode.FAILED_PRECONDITION,
    errors.AlreadyDone: grpc.StatusCode.FAILED_PRECONDITION,
    errors.JobPending: grpc.StatusCode.FAILED_PRECONDITION,
    errors.JobNotPending: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Disabled: grpc.StatusCode.FAILED_PRECONDITION,
    errors.JobHeld: grpc.StatusCode.FAILED_PRECONDITION,
    errors.InvalidNice: grpc.StatusCode.PERMISSION_DENIED,
    errors.PriorityResetFail: grpc.StatusCode.PERMISSION_DENIED,
    errors.BatchOnly: grpc.StatusCode.FAILED_PRECONDITION,
    errors.MailUnavailable: grpc.StatusCode.FAILED_PRECONDITION,
    errors.AccessDenied: grpc.StatusCode.PERMISSION_DENIED,
    authz.InvalidUserId: grpc.StatusCode.PERMISSION_DENIED,   # ESLURM_USER_ID_MISSING
    errors.NoSpace: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.WatcherTooSlow: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.NodeNotResponding: grpc.StatusCode.FAILED_PRECONDITION,
    errors.OutputUnreadable: grpc.StatusCode.FAILED_PRECONDITION,
}

# Slurm's name for each failure (slurm_errno.h), the ErrorInfo reason.
REASON: dict[type[errors.SlurmError], str] = {
    errors.SlurmError: "SLURM_ERROR",                 # "Unspecified error"
    errors.InvalidRequest: "EINVAL",                  # a malformed request: Slurm answers EINVAL
    errors.InvalidPartition: "ESLURM_INVALID_PARTITION_NAME",
    errors.NodeConfigUnavailable: "ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE",
    errors.InvalidTaskMemory: "ESLURM_INVALID_TASK_MEMORY",
    errors.InvalidNodeCount: "ESLURM_INVALID_NODE_COUNT",
    errors.TooManyCpus: "ESLURM_TOO_MANY_REQUESTED_CPUS",
    errors.InvalidTimeLimit: "ESLURM_INVALID_TIME_LIMIT",
    errors.InvalidFeature: "ESLURM_INVALID_FEATURE",
    errors.InvalidGres: "ESLURM_INVALID_GRES",
    errors.InvalidArraySpec: "ESLURM_INVALID_ARRAY",
    errors.InvalidJobId: "ESLURM_INVALID_JOB_ID",
    errors.InvalidNodeName: "ESLURM_INVALID_NODE_NAME",
    errors.JobNotRunning: "ESLURM_JOB_NOT_RUNNING",
    errors.AlreadyDone: "ESLURM_ALREADY_DONE",
    errors.AccessDenied: "ESLURM_ACCESS_DENIED",
    errors.DependencyProblem: "ESLURM_DEPENDENCY",
    errors.JobPending: "ESLURM_JOB_PENDING",
    errors.JobNotPending: "ESLURM_JOB_NOT_PENDING",
    errors.Disabled: "ESLURM_DISABLED",
    errors.JobHeld: "ESLURM_JOB_HELD",
    errors.InvalidNice: "ESLURM_INVALID_NICE",
    errors.PriorityResetFail: "ESLURM_PRIO_RESET_FAIL",
    errors.BatchOnly: "ESLURM_BATCH_ONLY",
    errors.InvalidTimeValue: "ESLURM_INVALID_TIME_VALUE",
    errors.NoSpace: "ENOSPC",
    errors.WatcherTooSlow: "EAGAIN",                  # try again (from the last cursor)
    errors.MailUnavailable: "ESLURM_NOT_SUPPORTED",
    authz.InvalidUserId: "ESLURM_USER_ID_MISSING",
    authz.SubmitLimit: "ESLURM_ACCOUNTING_POLICY",
    errors.InvalidAccount: "ESLURM_INVALID_ACCOUNT",
    errors.InvalidQos: "ESLURM_INVALID_QOS",
    errors.NoSuchAccount: "ESLURM_INVALID_PARENT_ACCOUNT",   # sacctmgr's "doesn't exist"
    errors.UnknownOption: "EINVAL",
    errors.NodeNotResponding: "ESLURM_NODE_NOT_AVAIL",
    errors.OutputUnreadable: "EACCES",
}
# Failures that are no SlurmError, answered by the transport itself.
INTERNAL = "ESLURM_INTERNAL"                          # a bug: see the controller's log
AUTHENTICATION = "SLURM_PROTOCOL_AUTHENTICATION_ERROR"
UNDECODABLE = "SLURM_UNEXPECTED_MSG_ERROR"


def _nearest(table: dict, err: errors.SlurmError):
    for cls in type(err).__mro__:
        found = table.get(cls)
        if found is not None:
            return found
    return None


def status_of(err: errors.SlurmError) -> grpc.StatusCode:
    """The status ``err`` is answered with."""
    return _nearest(STATUS, err) or grpc.StatusCode.INVALID_ARGUMENT


def reason_of(err: errors.SlurmError) -> str:
    """Slurm's name for ``err`` (the ErrorInfo reason)."""
    return _nearest(REASON, err) or "SLURM_ERROR"


# The message travels twice in the trailers (grpc-message, and inside the
# google.rpc.Status), and gRPC refuses trailers past 8 KiB at random and past
# 16 KiB always (RESOURCE_EXHAUSTED instead of the answer): a message that
# quotes a huge bad value is cut to this many characters.
MAX_MESSAGE_CHARS = 1000


def rich_status(code: grpc.StatusCode, message: str, reason: str) -> grpc.Status:
    """``code`` and ``message`` with a google.rpc.Status holding ErrorInfo(reason, "lingjun")."""
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS - 3] + "..."
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN))
    return rpc_status.to_status(status_pb2.Status(code=code.value[0], message=message,
                                                  details=[detail]))


def status_for(err: errors.SlurmError) -> grpc.Status:
    return rich_status(status_of(err), str(err), reason_of(err))


async def abort(context, err: errors.SlurmError) -> NoReturn:
    """End the call with ``err``'s status, Slurm's message and its ErrorInfo."""
    await abort_with(context, status_for(err))


async def abort_with(context, status: grpc.Status) -> NoReturn:
    await context.abort(status.code, status.details, status.trailing_metadata)
    raise AssertionError("not reached: abort raises")


assert code_pb2.INVALID_ARGUMENT == grpc.StatusCode.INVALID_ARGUMENT.value[0]

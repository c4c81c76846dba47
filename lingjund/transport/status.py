"""The one table from service errors to gRPC status codes.

Service code raises ``errors.SlurmError`` subclasses carrying Slurm's words
and knows nothing of gRPC; here each class gets its status. A class not in
the table takes its nearest listed base's (``SlurmError`` itself:
INVALID_ARGUMENT). The commands decide their exit and message from these
codes, so a code here changes what a user sees.
"""
from __future__ import annotations

import grpc

from lingjund.service import authz, errors

STATUS: dict[type[errors.SlurmError], grpc.StatusCode] = {
    errors.SlurmError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.InvalidJobId: grpc.StatusCode.NOT_FOUND,
    errors.InvalidNodeName: grpc.StatusCode.NOT_FOUND,
    errors.JobNotRunning: grpc.StatusCode.FAILED_PRECONDITION,
    errors.AlreadyDone: grpc.StatusCode.FAILED_PRECONDITION,
    errors.JobPending: grpc.StatusCode.FAILED_PRECONDITION,
    errors.JobNotPending: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Disabled: grpc.StatusCode.FAILED_PRECONDITION,
    errors.BatchOnly: grpc.StatusCode.FAILED_PRECONDITION,
    errors.MailUnavailable: grpc.StatusCode.FAILED_PRECONDITION,
    errors.AccessDenied: grpc.StatusCode.PERMISSION_DENIED,
    authz.InvalidUserId: grpc.StatusCode.PERMISSION_DENIED,   # ESLURM_USER_ID_MISSING
    errors.NoSpace: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def status_of(err: errors.SlurmError) -> grpc.StatusCode:
    """The status ``err`` is answered with."""
    for cls in type(err).__mro__:
        code = STATUS.get(cls)
        if code is not None:
            return code
    return grpc.StatusCode.INVALID_ARGUMENT

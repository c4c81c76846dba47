"""Failures a user can act on, each with Slurm's words (slurm_errno.c).

The transport maps each class once to a gRPC status; the commands print the
message after their usual prefix ("sbatch: error: Batch job submission
failed: ...").
"""
from __future__ import annotations

import grpc


class SlurmError(Exception):
    code = grpc.StatusCode.INVALID_ARGUMENT
    message = "Unspecified error"

    def __init__(self, message: str | None = None):
        super().__init__(message or self.message)


class InvalidPartition(SlurmError):
    message = "Invalid partition name specified"


class NodeConfigUnavailable(SlurmError):
    message = "Requested node configuration is not available"


class InvalidNodeCount(SlurmError):
    message = "Node count specification invalid"


class TooManyCpus(SlurmError):
    message = "More processors requested than permitted"


class InvalidTimeLimit(SlurmError):
    message = "Requested time limit is invalid (missing or exceeds some limit)"


class InvalidFeature(SlurmError):
    message = "Invalid feature specification"


class InvalidGres(SlurmError):
    message = "Invalid generic resource (gres) specification"


class InvalidArraySpec(SlurmError):
    message = "Invalid job array specification"


class InvalidJobId(SlurmError):
    code = grpc.StatusCode.NOT_FOUND
    message = "Invalid job id specified"


class InvalidNodeName(SlurmError):
    code = grpc.StatusCode.NOT_FOUND
    message = "Invalid node name specified"


class JobNotRunning(SlurmError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    message = "Job is no longer running"


class AlreadyDone(SlurmError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    message = "Job/step already completing or completed"


class AccessDenied(SlurmError):
    code = grpc.StatusCode.PERMISSION_DENIED
    message = "Access/permission denied"


class InvalidRequest(SlurmError):
    message = "Invalid request"


# -- dependencies, holds, requeue, job updates -----------------------
class DependencyProblem(SlurmError):
    message = "Job dependency problem"


class JobPending(SlurmError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    message = "Job is pending execution"


class JobNotPending(SlurmError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    message = "Job is no longer pending execution"


class Disabled(SlurmError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    message = "Requested operation is presently disabled"


class BatchOnly(SlurmError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    message = "Only batch jobs are accepted or processed"


class InvalidTimeValue(SlurmError):
    message = "Invalid time specified"


class NoSpace(SlurmError):
    """The controller's disk is full: nothing was written (the store rolled back)."""
    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    message = "No space left on device"

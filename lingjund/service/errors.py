"""Failures a user can act on, each with Slurm's words (slurm_errno.c).

The transport maps each class once to a gRPC status (the table in
lingjund/transport/status.py; nothing here knows of gRPC); the commands
print the message after their usual prefix ("sbatch: error: Batch job
submission failed: ...").
"""
from __future__ import annotations


class SlurmError(Exception):
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
    message = "Invalid job id specified"


class InvalidNodeName(SlurmError):
    message = "Invalid node name specified"


class JobNotRunning(SlurmError):
    message = "Job is no longer running"


class AlreadyDone(SlurmError):
    message = "Job/step already completing or completed"


class AccessDenied(SlurmError):
    message = "Access/permission denied"


class InvalidRequest(SlurmError):
    message = "Invalid request"


# -- dependencies, holds, requeue, job updates -----------------------
class InvalidTaskMemory(InvalidRequest):
    message = "Memory required by task is not available"


class DependencyProblem(SlurmError):
    message = "Job dependency problem"


class JobPending(SlurmError):
    message = "Job is pending execution"


class JobNotPending(SlurmError):
    message = "Job is no longer pending execution"


class Disabled(SlurmError):
    message = "Requested operation is presently disabled"


class InvalidNice(SlurmError):
    message = "Invalid --nice value"


class JobHeld(SlurmError):
    message = "Job is in held state, pending scheduler release"


class PriorityResetFail(SlurmError):
    message = "Changes to job priority are not persistent, change nice instead"


class BatchOnly(SlurmError):
    message = "Only batch jobs are accepted or processed"


class InvalidTimeValue(SlurmError):
    message = "Invalid time specified"


class NoSpace(SlurmError):
    """The controller's disk is full: nothing was written (the store rolled back)."""
    message = "No space left on device"


# -- accounts and associations (service/associations.py) ----------------
class InvalidAccount(SlurmError):
    message = "Invalid account or account/partition combination specified"


class InvalidQos(SlurmError):
    message = "Invalid qos specification"


class NoSuchAccount(SlurmError):
    """sacctmgr names an account (a parent, a user's) that does not exist."""
    message = "This account doesn't exist."


class UnknownOption(SlurmError):
    """sacctmgr was given a setting or condition it does not know."""
    message = "Unknown option"


class MailUnavailable(SlurmError):
    """--mail-type was asked for and this controller can send no mail."""
    message = "--mail-type is not available: no MailProg"


class WatcherTooSlow(SlurmError):
    """A watcher (WatchJobs/WatchNodes) that fell too far behind was dropped;
    it resumes with its last cursor, from the store."""
    message = "Watcher fell behind and was dropped: resume with the last cursor"


class NodeNotResponding(SlurmError):
    """What is asked for is on a node whose agent is not connected (lingjun
    logs: the batch output file is on the batch node)."""
    message = "Required node not available (down, drained or reserved)"


class OutputUnreadable(SlurmError):
    """The job's output file is there but the agent would not or could not read
    it (not a regular file, not the job owner's, an I/O error), in words."""
    message = "The job's output file could not be read"

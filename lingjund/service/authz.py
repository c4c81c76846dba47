"""Who may do what.

Slurm's rules, as slurmctld applies them after munge has told it the
caller's uid:

    operation                                   owner   operator/root   others
    squeue / scontrol show job (see any job)     yes       yes           yes
    scancel, hold/release, update, requeue       yes       yes           no: Access/permission denied
    scontrol write batch_script (read script)    yes       yes           no: Access/permission denied
    scontrol update NodeName=... (node state)    -         yes           no: Invalid user id
    scontrol reconfigure                         -         yes           no: Invalid user id
    sbatch/srun/salloc --nice=-N                  no        yes           no: Invalid --nice value
    scontrol update Nice=-N                       no        yes           no: Access/permission denied

Operators are root (uid 0) and the users named in ``[authz] operators``
(by name or uid), like Slurm's AdminLevel=Operator. The requester's uid
comes from the request (``requester_uid``); the transport is what makes it
trustworthy (peer credentials), not this module. A refusal raises before
anything is written, so a refused request changes nothing.

A negative nice raises a job above everyone else's, so only operators may
set one, at submission as on update (slurmctld refuses a submission with
ESLURM_INVALID_NICE, "Invalid --nice value", as the anchor's Slurm 22.05 answers
a user's sbatch --nice=-5, and a job update with ESLURM_ACCESS_DENIED). Slurm lets only its
administrators reconfigure; here the operators are the administrators.

Slurm itself is not uniform in its words: a job update by a non-owner is
ESLURM_USER_ID_MISSING in job_mgr.c, a cancel ESLURM_ACCESS_DENIED; here
every job operation says "Access/permission denied" (the issue asks for it,
and it is what a user understands) and node updates keep Slurm's
"Invalid user id" (proc_req.c, _slurm_rpc_update_node).
"""
from __future__ import annotations

import functools
import pwd

from lingjun.config import AuthzConfig
from lingjund.service import errors

ROOT = 0


class InvalidUserId(errors.SlurmError):
    """ESLURM_USER_ID_MISSING: what slurmctld answers a non-admin changing a node."""
    message = "Invalid user id"


@functools.lru_cache(maxsize=1024)
def _user_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError, ValueError):
        return None


def is_operator(requester_uid: int, cfg: AuthzConfig) -> bool:
    """Root, or a user named (or numbered) in ``[authz] operators``."""
    if requester_uid == ROOT:
        return True
    if not cfg.operators:
        return False
    if str(requester_uid) in cfg.operators:
        return True
    name = _user_name(requester_uid) if requester_uid >= 0 else None
    return name is not None and name in cfg.operators


def allowed(requester_uid: int, owner_uid: int, cfg: AuthzConfig) -> bool:
    """May this requester act on a job owned by ``owner_uid``?"""
    return requester_uid == owner_uid or is_operator(requester_uid, cfg)


def require(requester_uid: int, owner_uid: int, cfg: AuthzConfig) -> None:
    """Raise Slurm's "Access/permission denied" unless ``allowed``."""
    if not allowed(requester_uid, owner_uid, cfg):
        raise errors.AccessDenied()


def require_owner_or_root(requester_uid: int, owner_uid: int) -> None:
    """Steps in a job and its allocation's lease: the owner's (and root's) alone, as
    slurmctld's step creation checks validate_slurm_user, not operators."""
    if requester_uid not in (owner_uid, ROOT):
        raise errors.AccessDenied()


def require_operator(requester_uid: int, cfg: AuthzConfig) -> None:
    """Node state changes and other cluster-wide acts: operators only."""
    if not is_operator(requester_uid, cfg):
        raise InvalidUserId()


def require_nice(requester_uid: int, nice: int, cfg: AuthzConfig, submit: bool = False) -> None:
    """A negative nice (a raise above other users' jobs) is an operator's to give."""
    if nice < 0 and not is_operator(requester_uid, cfg):
        raise errors.InvalidNice() if submit else errors.AccessDenied()


# -- scontrol write batch_script JOB ------------------------------------------------
def batch_script(ctl, req) -> "api_pb2.GetBatchScriptResponse":
    """The batch script of a job, for its owner or an operator (proc_req.c's
    _slurm_rpc_batch_script refuses everyone else)."""
    from lingjun.v1 import api_pb2  # here: the checks above need no protobuf; only this reply does
    job = ctl.store.job(req.job_id)
    if job is None:
        raise errors.InvalidJobId()
    require(req.requester_uid, job.uid, ctl.config.authz)
    if not job.spec.batch or not job.spec.script:
        raise errors.SlurmError("No batch script for job")
    return api_pb2.GetBatchScriptResponse(script=job.spec.script, job_id=job.job_id)


# -- MaxSubmitJobsPerUser ------------------------------------------------------------
class SubmitLimit(errors.SlurmError):
    """ESLURM_ACCOUNTING_POLICY, as sbatch prints it after "Batch job submission failed: "."""
    message = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"


def check_submit_limit(ctl, st, uid: int, new_jobs: int) -> None:
    """Refuse a submission that would give ``uid`` more than
    ``[authz] max_submit_jobs_per_user`` pending and running jobs (an array
    counts each task). Called inside the submit transaction, so two racing
    submissions cannot both slip under the limit."""
    limit = ctl.config.authz.max_submit_jobs_per_user
    if limit and st.active_job_count(uid) + new_jobs > limit:
        raise SubmitLimit()

"""scancel: cancel or signal jobs.

Ids, -u, -n, -t, -p narrow one request; the controller answers per job.
A job that has already finished is not an error (as in Slurm 22.05); an id
that does not exist, or any other refusal, is printed per job and makes the
exit 1.
"""
from __future__ import annotations

import os
import sys
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import TextIO

from cli.common import (CONNECT_FAILURE, CommandError, current_user, details, full_help, make_api,
                        own_options, parse_array_selectors, parse_options, refusals, resolve_user,
                        run)
from lingjun.options import NO, REQUIRED, Opt, comma_list
from lingjun import slurm
from lingjun import messages
from lingjun.endpoints import ControllerUnreachable

PROG = "scancel"
OPTIONS = [
    Opt("account", ("account",), "A", REQUIRED), Opt("batch", ("batch",), "b", NO),
    Opt("full", ("full",), "f", NO), Opt("hurry", ("hurry",), "H", NO),
    Opt("help", ("help",), "", NO), Opt("usage", ("usage",), "", NO),
    Opt("name", ("name", "jobname"), "n", REQUIRED), Opt("partition", ("partition",), "p", REQUIRED),
    Opt("qos", ("qos",), "q", REQUIRED), Opt("quiet", ("quiet",), "Q", NO),
    Opt("signal", ("signal",), "s", REQUIRED), Opt("state", ("state",), "t", REQUIRED),
    Opt("user", ("user",), "u", REQUIRED), Opt("me", ("me",), "", NO),
    Opt("verbose", ("verbose",), "v", NO), Opt("version", ("version",), "V", NO),
    Opt("clusters", ("clusters",), "M", REQUIRED),
    Opt("unsupported", ("interactive",), "i", NO), Opt("unsupported", ("nodelist",), "w", REQUIRED),
    Opt("unsupported", ("reservation",), "R", REQUIRED), Opt("unsupported", ("wckey",), "", REQUIRED),
    Opt("unsupported", ("sibling",), "", REQUIRED),
]
USAGE = ("Usage: scancel [-A account] [--batch] [--full] [--interactive] [-n job_name]\n"
         "               [-p partition] [-Q] [-q qos] [-R reservation] [-s signal | integer]\n"
         "               [-t PENDING | RUNNING | SUSPENDED] [--usage] [-u user_name]\n"
         "               [--hurry] [-V] [-v] [-w hosts...] [--wckey=wckey]\n"
         "               [job_id[_array_id][.step_id]]\n")
# Per-job answers scancel keeps quiet about (golden scancel_already_done: rc 0, nothing
# printed). An id that never existed is NOT among them: the anchor cluster printed
# nothing for 999999, but a user who mistyped an id must be told (issue #2 asks for a
# clear message and a non-zero exit), so we print Slurm's usual
# "Kill job error on job id N: Invalid job id specified" and exit 1.
QUIET_ERRORS = frozenset({"Job/step already completing or completed"})


def main(argv: list[str] | None = None, api=None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    return run(_scancel, argv, api, out, err, exit_now=True)


def _signal(req: messages.CancelJobsRequest, key: str, value: str) -> bool:
    try:
        req.signal = slurm.parse_signal(value)
    except ValueError:
        raise CommandError(f"scancel: error: Invalid job signal: {value}") from None
    return False


def _states(req: messages.CancelJobsRequest, key: str, value: str) -> bool:
    for w in comma_list(value):
        try:
            req.states.append(slurm.parse_job_state(w))
        except ValueError:
            raise CommandError(f"scancel: error: Invalid job state specified: {w}") from None
    return True


def _user(req: messages.CancelJobsRequest, key: str, value: str | None) -> bool:
    name = current_user()[0] if key == "me" else resolve_user(value)
    if name is None:
        raise CommandError(f"scancel: error: Invalid user name: {value}")
    req.user = name
    return True


def _not_yet(req: messages.CancelJobsRequest, key: str, value: str) -> bool:
    # worded by key, not as spelled: "-A" says --account
    raise CommandError(f"scancel: error: --{key} is not supported yet")


def _batch(req: messages.CancelJobsRequest, key: str, value: None) -> bool:
    req.batch_only = True
    return False


def _name(req: messages.CancelJobsRequest, key: str, value: str) -> bool:
    req.name = value
    return True


def _partition(req: messages.CancelJobsRequest, key: str, value: str) -> bool:
    req.partitions.extend(comma_list(value))
    return True


# What each option does to the request; True where it selects jobs (so that
# no job id is needed).
_APPLY = {"batch": _batch, "name": _name, "partition": _partition, "signal": _signal,
          "state": _states, "user": _user, "me": _user, "account": _not_yet, "qos": _not_yet}


def _add_job_ids(req: messages.CancelJobsRequest, positional: list[str]) -> None:
    """The job ids named: "12", "12_2", "12_[1-3]" (those tasks of array 12 only)."""
    for word in positional:
        head = word.split("_")[0]
        if "." in word:
            raise CommandError(f"scancel: error: cancelling job steps ({word}) is not supported yet")
        if not slurm.is_job_id(head):
            raise CommandError(f"scancel: error: Invalid job id {word}")
        try:
            [(job_id, tasks)] = parse_array_selectors(PROG, word)
        except (CommandError, ValueError):
            raise CommandError(f"scancel: error: Invalid job id {word}") from None
        if tasks is None:
            req.job_ids.append(job_id)
        else:
            req.array_tasks.add(array_job_id=job_id, task_ids=sorted(tasks))


def _scancel(argv: list[str], api, out: TextIO, err: TextIO) -> int:
    opts, positional = parse_options(PROG, argv, OPTIONS)
    req = messages.CancelJobsRequest(requester_uid=os.getuid())
    quiet = False
    filtered = False
    for key, value, spelled in own_options(PROG, opts, USAGE, full_help("SCANCEL")):
        if key == "quiet":
            quiet = True
        elif key in _APPLY:
            filtered = _APPLY[key](req, key, value) or filtered
    _add_job_ids(req, positional)
    if not req.job_ids and not req.array_tasks and not filtered:
        raise CommandError("scancel: error: No job identification provided")
    try:
        api = api or make_api()
        reply = api.call("CancelJobs", req)
    except ControllerUnreachable:
        if req.job_ids:
            for jid in req.job_ids:
                print(f"scancel: error: Kill job error on job id {jid}: {CONNECT_FAILURE}", file=err)
        else:
            print(f"scancel: error: {CONNECT_FAILURE}", file=err)
        return 1
    except refusals() as e:
        text = details(e)
        if text in QUIET_ERRORS:
            return 0
        print(f"scancel: error: {text}", file=err)
        return 1
    rc = 0
    for r in reply.results:
        if r.ok or r.error in QUIET_ERRORS:
            continue
        rc = 1
        if not quiet:
            print(f"scancel: error: Kill job error on job id {r.array_id or r.job_id}: {r.error}",
                  file=err)
    return rc


if __name__ == "__main__":
    sys.exit(main())

"""squeue: view the job queue.

Without -t only active jobs show (pending, running, completing, ...); a job
named with -j that the controller does not know is an error, one that has
merely finished is silently left out, as in Slurm.
"""
from __future__ import annotations

import os
import sys
from typing import TextIO

import grpc

from cli import formats
from cli.common import CONNECT_FAILURE, current_user, details, is_not_found, make_api, resolve_user
from cli.options import NO, REQUIRED, OPTIONAL, Opt, UsageError, getopt
from lingjun import slurm
from lingjun.client import ControllerUnreachable
from lingjun.v1 import api_pb2

PROG = "squeue"
OPTIONS = [
    Opt("account", ("account",), "A", REQUIRED), Opt("all", ("all",), "a", NO),
    Opt("array", ("array",), "r", NO), Opt("noheader", ("noheader",), "h", NO),
    Opt("help", ("help",), "", NO), Opt("usage", ("usage",), "", NO),
    Opt("jobs", ("jobs",), "j", REQUIRED), Opt("long", ("long",), "l", NO),
    Opt("name", ("name",), "n", REQUIRED), Opt("format", ("format",), "o", REQUIRED),
    Opt("Format", ("Format",), "O", REQUIRED), Opt("partition", ("partition",), "p", REQUIRED),
    Opt("qos", ("qos",), "q", REQUIRED), Opt("sort", ("sort",), "S", REQUIRED),
    Opt("states", ("states",), "t", REQUIRED), Opt("user", ("user",), "u", REQUIRED),
    Opt("me", ("me",), "", NO), Opt("verbose", ("verbose",), "v", NO),
    Opt("version", ("version",), "V", NO), Opt("nodelist", ("nodelist",), "w", REQUIRED),
    Opt("clusters", ("clusters",), "M", REQUIRED), Opt("local", ("local",), "", NO),
    Opt("federation", ("federation",), "", NO), Opt("hide", ("hide",), "", NO),
    Opt("unsupported", ("iterate",), "i", REQUIRED), Opt("unsupported", ("json",), "", NO),
    Opt("unsupported", ("yaml",), "", NO), Opt("unsupported", ("start",), "", NO),
    Opt("unsupported", ("steps",), "s", OPTIONAL), Opt("unsupported", ("licenses",), "L", REQUIRED),
    Opt("unsupported", ("reservation",), "R", REQUIRED),
]


class SqueueError(Exception):
    def __init__(self, message: str, rc: int = 1):
        super().__init__(message)
        self.message, self.rc = message, rc


def parse_states(text: str) -> set[str] | None:
    """-t "PD,running" -> {"PENDING", "RUNNING"}; "all" -> None (every state)."""
    out: set[str] = set()
    for word in (w for w in text.split(",") if w):
        if word.lower() == "all":
            return None
        try:
            out.add(slurm.parse_job_state(word))
        except ValueError:
            raise SqueueError(f"squeue: error: Invalid job state specified: {word}") from None
    return out


def parse_job_ids(text: str) -> list[int]:
    ids = []
    for word in (w for w in text.split(",") if w):
        head = word.split("_")[0].split(".")[0]
        if not head.isdigit():
            raise SqueueError(f"squeue: error: Invalid job id: {word}")
        ids.append(int(head))
    return ids


def main(argv: list[str] | None = None, api=None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts, positional = getopt(PROG, argv, OPTIONS)
    except UsageError as e:
        print(f'{e}\nTry "squeue --help" for more information', file=err)
        return 1
    header, long_, fmt, fmt_O = True, False, os.environ.get("SQUEUE_FORMAT", ""), ""
    job_ids: list[int] = []
    users: list[str] = []
    states: set[str] | None = set()
    partitions: list[str] = []
    names: list[str] = []
    accounts: list[str] = []
    nodelist: set[str] = set()
    bad_user = False
    try:
        for key, value, spelled in opts:
            if key == "unsupported":
                raise SqueueError(f"squeue: error: {spelled} is not supported yet")
            if key in ("help", "usage"):
                out.write("Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid]\n"
                          "              [-n name] [-o format] [-O fields] [-p partitions] [--qos qos]\n"
                          "              [--reservation reservation] [--sort fields] [--start]\n"
                          "              [--step step_id] [-t states] [-u user_name] [--usage]\n"
                          "              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]\n"
                          "              [-ahjlrsv]\n")
                return 0
            if key == "version":
                out.write("slurm 22.05.8\n")
                return 0
            if key == "noheader":
                header = False
            elif key == "long":
                long_ = True
            elif key == "format":
                fmt = value
            elif key == "Format":
                fmt_O = value
            elif key == "jobs":
                job_ids += parse_job_ids(value)
            elif key == "states":
                s = parse_states(value)
                states = None if s is None or states is None else states | s
            elif key == "partition":
                partitions += [p for p in value.split(",") if p]
            elif key == "name":
                names += [n for n in value.split(",") if n]
            elif key == "account":
                accounts += [a for a in value.split(",") if a]
            elif key == "nodelist":
                nodelist |= set(slurm.expand_hostlist(value))
            elif key == "me":
                users.append(current_user()[0])
            elif key == "user":
                for u in (u for u in value.split(",") if u):
                    name = resolve_user(u)
                    if name is None:
                        print(f"squeue: error: Invalid user: {u}\n", file=err)
                        bad_user = True
                    else:
                        users.append(name)
        for p in positional:   # "squeue -j 1 2" style job ids
            job_ids += parse_job_ids(p)
        if fmt_O:
            formats.parse_squeue_O(fmt_O)
    except SqueueError as e:
        print(e.message, file=err)
        return e.rc
    except formats.FormatError as e:
        print(f"squeue: error: {e}", file=err)
        return 1
    except ValueError as e:
        print(f"squeue: error: {e}", file=err)
        return 1

    jobs: list[api_pb2.JobInfo] = []
    now = 0
    if not (bad_user and not users):
        request = api_pb2.GetJobsRequest(
            job_ids=job_ids, users=users, partitions=partitions, names=names,
            states=sorted(states or ()), all_states=bool(job_ids) or states is None or bool(states))
        try:
            api = api or make_api()
            reply = api.call("GetJobs", request)
        except ControllerUnreachable:
            print(f"slurm_load_jobs error: {CONNECT_FAILURE}", file=err)
            return 1
        except grpc.RpcError as e:
            if is_not_found(e):
                print("slurm_load_jobs error: Invalid job id specified", file=err)
            else:
                print(f"slurm_load_jobs error: {details(e)}", file=err)
            return 1
        now = reply.now
        wanted = slurm.DEFAULT_SQUEUE_STATES if states == set() else states
        for j in reply.jobs:
            if wanted is not None and j.state not in wanted:
                continue
            if job_ids and j.job_id not in job_ids:
                continue
            if users and j.user not in users:
                continue
            if partitions and j.partition not in partitions:
                continue
            if names and j.name not in names:
                continue
            if accounts and j.account not in accounts:
                continue
            if nodelist and not nodelist & set(slurm.expand_hostlist(j.nodes)):
                continue
            jobs.append(j)
    if not now:
        import time
        now = int(time.time())
    for j in jobs:
        if not j.now:
            j.now = now
    text = ""
    if fmt_O:
        text = formats.squeue_O_table(jobs, fmt_O, header=header, now=now)
    else:
        if long_ and not fmt:
            fmt = formats.SQUEUE_LONG_FORMAT
        if long_ and header:
            text += formats.squeue_long_header(now)
        text += formats.squeue_table(jobs, fmt or formats.SQUEUE_DEFAULT_FORMAT,
                                     header=header, now=now)
    out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

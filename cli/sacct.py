"""sacct: accounting data for jobs and their steps (RPC GetAccounting).

Rows are each job, then its steps (ID.batch, ID.0, ...) unless -X. --json
and --yaml dump the same selection in slurmdbd's dbv0.0.38 shape, each job
with its steps inside it. Without
-j, a user sees their own jobs since midnight (root and -a: everyone's).

The controller filters (-j, -u, -A, -r, --name, -s, -S/-E) in SQL and sends
its answer in pages; the time window is Slurm's: without -s, jobs eligible
or running in [-S, -E]; with -s, jobs in those states during it (an end
state: ended in it). The default -S is midnight, "now" with -s; with -j
there is no window unless -S or -E is given. -X reads no steps.

TRES (cli/formats/sacct.py sacct_tres): AllocTRES/ReqTRES in Slurm's order with
the GPUs, "billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=48G,node=1" (steps
without billing; -o AllocTRES%60 to see it uncut). GPU usage is Slurm 24's:
TRESUsageInAve/TRESUsageInMax carry gres/gpuutil (percent, mean over the
step's GPUs) and gres/gpumem (memory used on them) on a step that held GPUs,
from the NVML samples of its node's agent (the batch step: the job's GPUs).
"""
from __future__ import annotations

import os
import sys
import time
from typing import TextIO

import grpc

from cli import formats_json
from cli.formats import sacct as sacct_format
from cli.common import (CONNECT_FAILURE, CommandError, bad_values, cluster_name, current_user, details,
                        full_help, is_not_found, make_api, own_options, parse_array_selectors,
                        parse_options, resolve_user, run, select_array_tasks, select_jobs)
from lingjun.options import NO, REQUIRED, Opt, comma_list
from lingjun import slurm
from lingjun.client import ControllerUnreachable
from lingjun.v1 import api_pb2

PROG = "sacct"
OPTIONS = [
    Opt("allusers", ("allusers",), "a", NO), Opt("accounts", ("accounts",), "A", REQUIRED),
    Opt("brief", ("brief",), "b", NO), Opt("duplicates", ("duplicates",), "D", NO),
    Opt("endtime", ("endtime",), "E", REQUIRED), Opt("helpformat", ("helpformat",), "e", NO),
    Opt("help", ("help",), "h", NO), Opt("usage", ("usage",), "", NO),
    Opt("jobs", ("jobs",), "j", REQUIRED), Opt("long", ("long",), "l", NO),
    Opt("allclusters", ("allclusters",), "L", NO), Opt("clusters", ("clusters",), "M", REQUIRED),
    Opt("noheader", ("noheader",), "n", NO), Opt("nodelist", ("nodelist",), "N", REQUIRED),
    Opt("name", ("name",), "", REQUIRED), Opt("format", ("format",), "o", REQUIRED),
    Opt("parsable", ("parsable",), "p", NO), Opt("parsable2", ("parsable2",), "P", NO),
    Opt("partition", ("partition",), "r", REQUIRED), Opt("starttime", ("starttime",), "S", REQUIRED),
    Opt("state", ("state",), "s", REQUIRED), Opt("user", ("user",), "u", REQUIRED),
    Opt("uid", ("uid",), "", REQUIRED), Opt("verbose", ("verbose",), "v", NO),
    Opt("version", ("version",), "V", NO), Opt("allocations", ("allocations",), "X", NO),
    Opt("delimiter", ("delimiter",), "", REQUIRED), Opt("units", ("units",), "", REQUIRED),
    Opt("truncate", ("truncate",), "T", NO), Opt("local", ("local",), "", NO),
    Opt("json", ("json",), "", NO), Opt("yaml", ("yaml",), "", NO),
    Opt("unsupported", ("qos",), "q", REQUIRED), Opt("unsupported", ("wckeys",), "W", REQUIRED),
]
USAGE = "Usage: sacct [options]\n\tUse --help for help\n"
# the whole answer, page after page (a million jobs took minutes on a loaded 2-core machine)
STREAM_TIMEOUT_S = 3600.0


def parse_time(text: str, now: float) -> int | None:
    """sacct -S/-E: Slurm's date forms (lingjun.slurm.parse_time) looking back:
    "1203" is the last December 3rd, "10:00" today's. None for "" (no bound);
    Slurm's one line and exit 1 for anything it cannot read."""
    try:
        return slurm.parse_time(text, now, past=True) or None
    except ValueError as e:
        raise CommandError(str(e)) from None


def main(argv: list[str] | None = None, api=None, out: TextIO | None = None,
         err: TextIO | None = None, now: float | None = None) -> int:
    return run(_sacct, argv, api, out, err, now=time.time() if now is None else now)


class _Query:
    """What the command line asks: which jobs, over which window, printed how."""

    def __init__(self, now: float):
        self.now = now
        self.fields = os.environ.get("SACCT_FORMAT", "") or sacct_format.SACCT_DEFAULT_FIELDS
        self.header, self.parsable, self.delimiter = True, "", "|"
        self.allocs, self.all_users, self.duplicates = False, False, False
        self.job_ids: list[int] = []
        self.selectors: list[tuple[int, frozenset[int] | None]] = []
        self.users: list[str] = []
        self.states: set[str] = set()
        self.partitions: list[str] = []
        self.names: list[str] = []
        self.accounts: list[str] = []
        self.nodes: set[str] = set()
        self.start: int | None = None
        self.end: int | None = None
        self.dump = ""

    def add_jobs(self, value: str) -> None:
        self.selectors += parse_array_selectors(PROG, value)
        self.job_ids += [a for a, _ in parse_array_selectors(PROG, value)]

    def add_users(self, value: str) -> None:
        for u in comma_list(value):
            name = resolve_user(u)
            if name is None:
                raise CommandError(f"sacct: error: Invalid user id: {u}")
            self.users.append(name)

    def add_states(self, value: str) -> None:
        for w in comma_list(value):
            try:
                self.states.add(slurm.parse_job_state(w))
            except ValueError:
                raise CommandError(f"sacct: error: Invalid state: {w}") from None

    def request(self) -> api_pb2.GetJobsRequest:
        """GetAccounting's request, with Slurm's defaults: the caller's own jobs
        (root: everyone's), since midnight (with -s: the states now)."""
        if not self.job_ids and not self.users and not self.all_users and os.getuid() != 0:
            self.users = [current_user()[0]]
        start, end = self.start, self.end
        if start is None and not self.job_ids:
            start = int(self.now) if self.states else slurm.parse_time("midnight", self.now,
                                                                       past=True)
        if start is not None and end is not None and start > end:
            raise CommandError(f"sacct: error: Start time ({slurm.format_timestamp(start)}) "
                               f"requested is after end time ({slurm.format_timestamp(end)}).")
        request = api_pb2.GetJobsRequest(
            job_ids=self.job_ids, users=self.users, states=sorted(self.states),
            partitions=self.partitions, names=self.names, accounts=self.accounts,
            all_states=True, with_steps=not self.allocs)
        if start is not None:
            request.window_start = max(0, start)      # before 1970: from the first job
        if end is not None:
            request.window_end = max(0, end)
        return request


def _set(attr: str, value):
    return lambda q, _: setattr(q, attr, value)


# What each option does to the query, in the order given on the command line.
_APPLY = {
    "json": _set("dump", "json"), "yaml": _set("dump", "yaml"),
    "allusers": _set("all_users", True),
    "brief": _set("fields", sacct_format.SACCT_BRIEF_FIELDS),
    "long": _set("fields", sacct_format.SACCT_LONG_FIELDS),
    "format": lambda q, v: setattr(q, "fields", v),
    "noheader": _set("header", False),
    "parsable": _set("parsable", "parsable"), "parsable2": _set("parsable", "parsable2"),
    "delimiter": lambda q, v: setattr(q, "delimiter", v),
    "allocations": _set("allocs", True), "duplicates": _set("duplicates", True),
    "jobs": _Query.add_jobs, "user": _Query.add_users, "uid": _Query.add_users,
    "state": _Query.add_states,
    "partition": lambda q, v: q.partitions.extend(comma_list(v)),
    "name": lambda q, v: q.names.extend(comma_list(v)),
    "accounts": lambda q, v: q.accounts.extend(comma_list(v)),
    "nodelist": lambda q, v: q.nodes.update(slurm.expand_hostlist(v)),
    "starttime": lambda q, v: setattr(q, "start", parse_time(v, q.now)),
    "endtime": lambda q, v: setattr(q, "end", parse_time(v, q.now)),
}


def _help_format(out: TextIO) -> int:
    """--helpformat: every field name, four to a line."""
    names_ = sorted(sacct_format.SACCT_NAMES.values(), key=str.lower)
    for i in range(0, len(names_), 4):
        out.write("".join(f"{n:<20}" for n in names_[i:i + 4]).rstrip() + "\n")
    return 0


def _sacct(argv: list[str], api, out: TextIO, err: TextIO, now: float) -> int:
    opts, positional = parse_options(PROG, argv, OPTIONS)
    q = _Query(now)
    with bad_values(PROG):
        for key, value, spelled in own_options(PROG, opts, USAGE, full_help("SACCT")):
            if key == "helpformat":
                return _help_format(out)
            if key in _APPLY:
                _APPLY[key](q, value)
        sacct_format.parse_sacct_fields(q.fields)
    request = q.request()
    try:
        api = api or make_api()
        jobs = fetch(api, request)
    except ControllerUnreachable:
        print(f"sacct: error: Problem talking to the database: {CONNECT_FAILURE}", file=err)
        return 1
    except grpc.RpcError as e:
        if not is_not_found(e):
            print(f"sacct: error: {details(e)}", file=err)
            return 1
        jobs = []
    # the controller applied every filter but the node list; the rest is
    # checked again here, which costs little
    keep = select_jobs(jobs, job_ids=q.job_ids, users=q.users, partitions=q.partitions,
                       names=q.names, accounts=q.accounts, nodes=q.nodes)
    if any(t is not None for _, t in q.selectors):     # -j 12_2: that task only
        keep = select_array_tasks(keep, q.selectors)
    if q.duplicates:
        keep = with_attempts(keep)
    if q.dump:
        doc = formats_json.sacct_document(keep, cluster_name(api), int(now),
                                          with_steps=not q.allocs)
        out.write(formats_json.dump_json(doc) if q.dump == "json" else formats_json.dump_yaml(doc))
        return 0
    _write_lines(q, keep, out)
    return 0


def _write_lines(q: _Query, jobs: list[api_pb2.JobInfo], out: TextIO) -> None:
    """The table, written 10,000 lines at a time (a million jobs' text is not held whole)."""
    lines = sacct_format.sacct_lines(jobs, q.fields, header=q.header, parsable=q.parsable,
                                     allocations_only=q.allocs)
    chunk: list[str] = []
    for line in lines:
        chunk.append(line.replace("|", q.delimiter) if q.parsable and q.delimiter != "|" else line)
        if len(chunk) >= 10_000:
            out.write("".join(chunk))
            chunk.clear()
    out.write("".join(chunk))


def fetch(api, request: api_pb2.GetJobsRequest) -> list[api_pb2.JobInfo]:
    """Every page of GetAccounting's answer (a stream: a million jobs do not
    fit one message), in the order sent."""
    jobs: list[api_pb2.JobInfo] = []
    try:
        for reply in api.call("GetAccounting", request, timeout=STREAM_TIMEOUT_S):
            jobs.extend(reply.jobs)
    except grpc.RpcError as e:
        if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise ControllerUnreachable(e.details() or str(e.code())) from None
        raise
    return jobs


def with_attempts(jobs: list[api_pb2.JobInfo]) -> list[api_pb2.JobInfo]:
    """-D/--duplicates: each earlier run of a restarted or requeued job as a row
    of its own, oldest first, before the current one (same JobID), as Slurm
    keeps one record per run. Earlier runs show no steps: only the last run's
    are kept. A run's Submit and Eligible are when the run before it ended
    (the first run's: the job's submission; the controller keeps no earlier
    eligible time, so a first run that waited for --begin shows its submit)."""
    out = []
    for job in jobs:
        submitted = job.submit_time
        for a in job.attempts:
            run_ = api_pb2.JobInfo()
            run_.CopyFrom(job)
            run_.ClearField("steps")
            run_.ClearField("attempts")
            run_.state, run_.reason = a.state, "None"
            # each run was submitted (and eligible) when the one before it ended
            run_.submit_time = run_.eligible_time = submitted
            submitted = a.end_time
            run_.start_time, run_.end_time = a.start_time, a.end_time
            run_.nodes = a.nodes
            run_.node_names[:] = slurm.expand_hostlist(a.nodes) if a.nodes else []
            run_.num_nodes = len(run_.node_names) or run_.num_nodes
            run_.exit_code, run_.exit_signal = a.exit_code, a.exit_signal
            run_.derived_exit_code = run_.derived_exit_signal = 0
            run_.restarts = a.attempt - 1
            out.append(run_)
        out.append(job)
    return out


if __name__ == "__main__":
    sys.exit(main())

"""squeue: view the job queue.

With --json or --yaml every job the controller still holds is dumped in
Slurm 22.05's data_parser shape (finished ones too, as the golden capture
shows), and the formatting options are ignored.

--start shows the pending jobs' expected start times and the nodes backfill
reserved for them (SCHEDNODES), earliest first, as Slurm's "--start" does
(its format, -S S and -t PENDING, each replaced by an explicit option).

Without -t only active jobs show (pending, running, completing, ...); a job
named with -j that the controller does not know is an error, one that has
merely finished is silently left out, as in Slurm.
"""
from __future__ import annotations

import os
import sys
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import TextIO

from cli.formats.fields import bad_format_letters, bad_O_fields
from cli.formats.units import squeue_long_header
from cli.formats import squeue as squeue_format
from cli.common import (CommandError, bad_values, cluster_name, controller_errors, current_user,
                        full_help, make_api, own_options, parse_array_selectors, parse_options,
                        resolve_user, run, select_array_tasks, select_jobs)
from cli import sorting
from lingjun.options import NO, REQUIRED, OPTIONAL, Opt, comma_list, env_options
from lingjun import slurm
from lingjun import messages

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
    Opt("unsupported", ("iterate",), "i", REQUIRED), Opt("json", ("json",), "", NO),
    Opt("yaml", ("yaml",), "", NO), Opt("start", ("start",), "", NO),
    Opt("unsupported", ("steps",), "s", OPTIONAL), Opt("unsupported", ("licenses",), "L", REQUIRED),
    Opt("unsupported", ("reservation",), "R", REQUIRED),
]
# squeue's input environment variables (squeue.1): each stands for an option,
# which the command line overrides.
ENV_OPTIONS = {
    "SQUEUE_ACCOUNT": "account", "SQUEUE_ALL": "all", "SQUEUE_ARRAY": "array",
    "SQUEUE_NAMES": "name", "SQUEUE_FEDERATION": "federation", "SQUEUE_FORMAT": "format",
    "SQUEUE_FORMAT2": "Format", "SQUEUE_LICENSES": "licenses", "SQUEUE_LOCAL": "local",
    "SQUEUE_PARTITION": "partition", "SQUEUE_QOS": "qos", "SQUEUE_SORT": "sort",
    "SQUEUE_STATES": "states", "SQUEUE_USERS": "user",
}
USAGE = ("Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid]\n"
         "              [-n name] [-o format] [-O fields] [-p partitions] [--qos qos]\n"
         "              [--reservation reservation] [--sort fields] [--start]\n"
         "              [--step step_id] [-t states] [-u user_name] [--usage]\n"
         "              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]\n"
         "              [-ahjlrsv]\n")


def parse_states(text: str) -> set[str] | None:
    """-t "PD,running" -> {"PENDING", "RUNNING"}; "all" -> None (every state)."""
    out: set[str] = set()
    for word in comma_list(text):
        if word.lower() == "all":
            return None
        try:
            out.add(slurm.parse_job_state(word))
        except ValueError:
            raise CommandError(f"squeue: error: Invalid job state specified: {word}") from None
    return out


def main(argv: list[str] | None = None, api=None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    return run(_squeue, argv, api, out, err, exit_now=True)


class _Query:
    """What the command line asks: the filters sent to the controller, the
    output form and the order. A plain class: dataclasses would cost every
    squeue its import of inspect (bench/README.md)."""

    def __init__(self, err: TextIO):
        self.err = err
        self.header, self.long_, self.start, self.unfold = True, False, False, False
        self.fmt, self.fmt_O, self.dump = "", "", ""
        self.sort_keys: list[sorting.SortKey] | None = None
        self.selectors: list[tuple[int, frozenset[int] | None]] = []
        self.users: list[str] = []
        self.states: set[str] | None = set()     # empty: the active states; None: all
        self.partitions: list[str] = []
        self.names: list[str] = []
        self.accounts: list[str] = []
        self.qos: set[str] = set()
        self.nodelist: set[str] = set()
        self.bad_user = False

    def sort(self, value: str) -> None:
        try:
            self.sort_keys = sorting.parse_squeue_sort(value)
        except sorting.SortError as e:
            raise CommandError(f"squeue: error: {e}") from None
        if any(k.letter == "b" for k in self.sort_keys):
            print("squeue: Invalid sort specification: b", file=self.err)

    def add_states(self, value: str) -> None:
        s = parse_states(value)
        self.states = None if s is None or self.states is None else self.states | s

    def add_users(self, value: str) -> None:
        for u in comma_list(value):
            name = resolve_user(u)
            if name is None:
                print(f"squeue: error: Invalid user: {u}\n", file=self.err)
                self.bad_user = True
            else:
                self.users.append(name)

    @property
    def job_ids(self) -> list[int]:
        return list(dict.fromkeys(a for a, _ in self.selectors))

    @property
    def filtered(self) -> bool:
        return bool(self.users or self.partitions or self.names or self.accounts
                    or self.nodelist or self.job_ids)


def _set(attr: str, value):
    return lambda q, _: setattr(q, attr, value)


def _keep(attr: str):
    return lambda q, v: setattr(q, attr, v)


# What each option does to the query, in the order given on the command line.
_APPLY = {
    "json": _set("dump", "json"), "yaml": _set("dump", "yaml"),
    "noheader": _set("header", False), "start": _set("start", True),
    "long": _set("long_", True), "array": _set("unfold", True),
    "format": _keep("fmt"), "Format": _keep("fmt_O"),
    "sort": _Query.sort, "states": _Query.add_states, "user": _Query.add_users,
    "jobs": lambda q, v: q.selectors.extend(parse_array_selectors(PROG, v)),
    "partition": lambda q, v: q.partitions.extend(comma_list(v)),
    "name": lambda q, v: q.names.extend(comma_list(v)),
    "account": lambda q, v: q.accounts.extend(comma_list(v)),
    "qos": lambda q, v: q.qos.update(x.lower() for x in comma_list(v)),
    "nodelist": lambda q, v: q.nodelist.update(slurm.expand_hostlist(v)),
    "me": lambda q, _: q.users.append(current_user()[0]),
}


def _command_line(argv: list[str], err: TextIO) -> _Query:
    """The options, with squeue's environment variables under them, as a query."""
    opts, positional = parse_options(PROG, argv, OPTIONS)
    given = {k for k, _, _ in opts}
    if given & {"format", "Format", "long"}:      # one output form: the command line's
        given |= {"format", "Format"}
    if "me" in given:
        given.add("user")
    from_env = env_options(os.environ, ENV_OPTIONS, OPTIONS, given)
    if any(k == "format" for k, _, _ in from_env):     # SQUEUE_FORMAT over SQUEUE_FORMAT2
        from_env = [o for o in from_env if o[0] != "Format"]
    q = _Query(err)
    with bad_values(PROG):
        for key, value, spelled in own_options(PROG, from_env + opts, USAGE, full_help("SQUEUE")):
            if key in _APPLY:
                _APPLY[key](q, value)
        for p in positional:   # "squeue -j 1 2" style job ids
            q.selectors += parse_array_selectors(PROG, p)
        for letter in bad_format_letters(q.fmt) if q.fmt and not q.fmt_O else ():
            print(f"squeue: error: Invalid job format specification: {letter}", file=err)
        for name in bad_O_fields(q.fmt_O, squeue_format.SQUEUE_O_FIELDS) if q.fmt_O else ():
            # Slurm reports it and prints the other columns (rc 0)
            print(f"squeue: error: Invalid job format specification: {name}", file=err)
    return q


def _squeue(argv: list[str], api, out: TextIO, err: TextIO) -> int:
    q = _command_line(argv, err)
    if q.dump:
        return _dump(api or make_api(), q.dump, out)
    if q.start and not q.fmt and not q.fmt_O:
        q.fmt = squeue_format.SQUEUE_START_FORMAT
    if q.start and q.states == set():
        q.states = {slurm.PENDING}
    if q.fmt_O:
        columns = squeue_format.squeue_O_fields(q.fmt_O)
    else:
        if q.long_ and not q.fmt:
            q.fmt = squeue_format.SQUEUE_LONG_FORMAT
        q.fmt = q.fmt or squeue_format.SQUEUE_DEFAULT_FORMAT
        columns = squeue_format.squeue_format_fields(q.fmt)
    jobs: list[messages.JobInfo] = []
    now = 0
    in_order = False
    if not (q.bad_user and not q.users):
        jobs, now, in_order = _fetch(api, q, columns)
    if not now:
        import time
        now = int(time.time())
    if "now" in columns:        # a job's own clock (-O PendingTime); a cut-down one has none
        for j in jobs:
            if not j.now:
                j.now = now
    if q.sort_keys is not None:   # -S or SQUEUE_SORT: the order asked, not the default one
        jobs, in_order = sorting.sort_squeue(jobs, q.sort_keys, now), True
    elif q.start:       # earliest expected start first (Slurm's -S S), else squeue's order
        if not in_order:
            jobs = squeue_format.sort_jobs(jobs)
        jobs.sort(key=lambda j: j.sched_start_time if j.state == slurm.PENDING else j.start_time)
        in_order = True
    out.write(_table(q, jobs, now, in_order))
    return 0


def _table(q: _Query, jobs: list, now: int, in_order: bool) -> str:
    if q.fmt_O:
        return squeue_format.squeue_O_table(jobs, q.fmt_O, header=q.header, now=now,
                                            sort=not in_order)
    text = squeue_long_header(now) if q.long_ and q.header else ""
    return text + squeue_format.squeue_table(jobs, q.fmt, header=q.header, now=now,
                                             sort=not in_order)


def _fetch(api, q: _Query, columns: set[str]) -> tuple[list, int, bool]:
    """The jobs the query selects, the reply's clock, and whether they came
    in the order squeue prints them."""
    # Only the fields this format shows (and what squeue itself reads);
    # the controller filters and sorts, and the rows come as they will print.
    job_ids, filtered, states = q.job_ids, q.filtered, q.states
    wanted_fields = columns | set(squeue_format.SQUEUE_BASE_FIELDS)
    if filtered:
        wanted_fields |= {"user", "name", "account", "nodes"}
    if q.qos:
        wanted_fields.add("qos")
    if q.sort_keys is not None:
        wanted_fields |= sorting.squeue_sort_fields(q.sort_keys)
    request = messages.GetJobsRequest(
        job_ids=job_ids, users=q.users, partitions=q.partitions, names=q.names,
        states=sorted(states or ()), all_states=bool(job_ids) or states is None or bool(states),
        accounts=q.accounts, nodes=sorted(q.nodelist), job_fields=sorted(wanted_fields),
        squeue_order=True)
    with controller_errors("slurm_load_jobs error: ",
                           not_found="slurm_load_jobs error: Invalid job id specified"):
        reply = (api or make_api()).call("GetJobs", request)
    jobs = list(reply.jobs)
    if not reply.squeue_order or states != set() or job_ids:
        # without -t or -j a controller that knows job_fields sent the active jobs only
        wanted = slurm.DEFAULT_SQUEUE_STATES if states == set() else states
        if wanted is not None:
            jobs = [j for j in jobs if j.state in wanted]
    if filtered:
        jobs = select_jobs(jobs, users=q.users, partitions=q.partitions, names=q.names,
                           accounts=q.accounts, nodes=q.nodelist)
    if q.qos:     # -q: the jobs of these QOS names (Slurm compares them without case)
        jobs = [j for j in jobs if j.qos.lower() in q.qos]
    if q.selectors or q.unfold:
        # -j 12 takes the whole array, -j 12_2 one task; -r shows each pending task
        jobs = select_array_tasks(jobs, q.selectors, unfold=q.unfold)
    return jobs, reply.now, reply.squeue_order and not (q.selectors or q.unfold)


def _dump(api, kind: str, out: TextIO) -> int:
    with controller_errors("slurm_load_jobs error: "):
        reply = api.call("GetJobs", messages.GetJobsRequest(all_states=True))
    from cli import formats_json    # here: only --json and --yaml need it
    doc = formats_json.squeue_document(reply.jobs, cluster_name(api))
    out.write(formats_json.dump_json(doc) if kind == "json" else formats_json.dump_yaml(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

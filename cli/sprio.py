"""sprio: the factors that make up each pending job's priority (priority/multifactor).

    sprio [-l] [-n] [-w] [-h] [-j IDS] [-u USERS] [-p PARTITIONS] [-o FORMAT] [-S SORT]

As Slurm 22.05's sprio: one line per pending job that accrues priority
(eligible, not held, its priority not set by an operator), by job id; the
default format leaves out the factors whose weight is 0; weighted factors
are printed rounded to integers, normalised ones (-n) with 7 decimals; -w
prints the weights alone. Under priority/basic it says that only
priority/multifactor is supported, as Slurm's does.
"""
from __future__ import annotations

import sys
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import TextIO

from cli.common import CommandError, controller_errors, make_api, own_options, parse_options, \
    resolve_user, run
from cli.formats import parse_format, render_rows
from cli.options import NO, OPTIONAL, REQUIRED, Opt, comma_list
from lingjun import messages, slurm

PROG = "sprio"
OPTIONS = [
    Opt("noheader", ("noheader",), "h", NO), Opt("help", ("help",), "", NO),
    Opt("usage", ("usage",), "", NO), Opt("version", ("version",), "V", NO),
    Opt("jobs", ("jobs",), "j", OPTIONAL), Opt("long", ("long",), "l", NO),
    Opt("norm", ("norm",), "n", NO), Opt("format", ("format",), "o", REQUIRED),
    Opt("partition", ("partition",), "p", REQUIRED), Opt("sort", ("sort",), "S", REQUIRED),
    Opt("user", ("user",), "u", REQUIRED), Opt("verbose", ("verbose",), "v", NO),
    Opt("weights", ("weights",), "w", NO), Opt("local", ("local",), "", NO),
    Opt("unsupported", ("clusters",), "M", REQUIRED), Opt("unsupported", ("federation",), "", NO),
    Opt("unsupported", ("sibling",), "", NO),
]
USAGE = ("Usage: sprio [-j jid[s]] [-u user_name[s]] [-o format] [-p partitions]\n"
         "     [--federation] [--local] [--sibling] [--usage] [-hlnvVw]\n")
HELP = """\
Usage: sprio [OPTIONS]
      --federation                display jobs in federation if a member of one
  -h, --noheader                  no headers on output
  -j, --jobs                      comma separated list of jobs
                                  to view, default is all
      --local                     display jobs on local cluster only
  -l, --long                      long report
  -M, --cluster=cluster_name      cluster to issue commands to.  Default is
                                  current cluster.  cluster with no name will
                                  reset to default.
                                  NOTE: SlurmDBD must be up.
  -n, --norm                      display normalized values
  -o, --format=format             format specification
  -p, --partition=partition_name  comma separated list of partitions
  -S, --sort=fields               comma seperated list of fields to sort on
      --sibling                   display job priorities on sibling clusters
  -u, --user=user_name            comma separated list of users to view
  -v, --verbose                   verbosity level
  -V, --version                   output version information and exit
  -w, --weights                   show the weights for each priority factor

Help options:
  --help                          show this help message
  --usage                         display a brief summary of sprio options
"""
NOT_MULTIFACTOR = ("You are not running a supported priority plugin\n({type}).\n"
                   "Only 'priority/multifactor' is supported.")

# The default formats when every weight is non-zero (sprio.c); a factor whose
# weight is 0 is left out of them.
DEFAULT_FORMAT = "%.15i %9r %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %20T"
LONG_FORMAT = "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T"
# letter -> the weight that keeps it in a default format
_WEIGHT_OF = {"A": "age", "a": "age", "B": "assoc", "b": "assoc", "F": "fairshare",
              "f": "fairshare", "J": "jobsize", "j": "jobsize", "P": "partition",
              "p": "partition", "Q": "qos", "q": "qos", "T": "tres", "t": "tres"}
HEADERS = {"i": "JOBID", "r": "PARTITION", "u": "USER", "o": "ACCOUNT", "Y": "PRIORITY",
           "y": "PRIORITY", "S": "SITE", "A": "AGE", "a": "AGE", "B": "ASSOC", "b": "ASSOC",
           "F": "FAIRSHARE", "f": "FAIRSHARE", "J": "JOBSIZE", "j": "JOBSIZE", "P": "PARTITION",
           "p": "PARTITION", "Q": "QOS", "q": "QOS", "n": "QOSNAME", "N": "NICE", "T": "TRES",
           "t": "TRES", "c": "CLUSTER"}
PRIORITY_SPAN = float(0xFFFFFFFF)


def main(argv: list[str] | None = None, api=None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    return run(_sprio, argv, api, out, err)


def _sprio(argv: list[str], api, out: TextIO, err: TextIO) -> int:
    opts, positional = parse_options(PROG, argv, OPTIONS)
    req = messages.PriorityFactorsRequest()
    header, long, norm, weights_only = True, False, False, False
    fmt = sort = None
    for key, value, _ in own_options(PROG, opts, USAGE, HELP):
        if key == "noheader":
            header = False
        elif key == "long":
            long = True
        elif key == "norm":
            norm = True
        elif key == "weights":
            weights_only = True
        elif key == "format":
            fmt = value
        elif key == "sort":
            sort = value
        elif key == "jobs":
            for w in comma_list(value or ""):
                if not slurm.is_job_id(w):
                    raise CommandError(f"Invalid job id: {w}")
                req.job_ids.append(int(w))
        elif key == "user":
            for u in comma_list(value):
                name = resolve_user(u)
                if name is None:
                    raise CommandError(f"Invalid user: {u}\n")
                req.users.append(name)
        elif key == "partition":
            req.partitions.extend(comma_list(value))
    if positional:
        raise CommandError(f"{PROG}: error: Unknown argument: {positional[0]}")
    api = api or make_api()
    with controller_errors("Unable to contact slurm controller: "):
        reply = api.call("GetPriorityFactors", req)
    if reply.priority_type != "priority/multifactor":
        raise CommandError(NOT_MULTIFACTOR.format(type=reply.priority_type))
    weights = dict(reply.weights)
    if fmt is None:
        fmt = _default_format(LONG_FORMAT if long else DEFAULT_FORMAT, weights, norm)
    fields, trailer = parse_format(fmt)
    headers = HEADERS if header else None
    if weights_only:
        out.write(render_rows(fields, trailer, [_weights_row(weights)], headers))
        return 0
    jobs = list(reply.jobs)
    if not jobs and (req.job_ids or req.users):
        raise CommandError("Unable to find jobs matching user/id(s) specified", 0)
    jobs = _sorted(jobs, sort, weights)
    out.write(render_rows(fields, trailer, [_row(j, weights) for j in jobs], headers))
    return 0


def _default_format(fmt: str, weights: dict[str, int], norm: bool) -> str:
    """The default format without the factors weighted 0; lower-case letters with -n."""
    fields, _ = parse_format(fmt)
    parts = []
    for f in fields:
        w = _WEIGHT_OF.get(f.letter)
        if w is not None and not weights.get(w, 0):
            continue
        letter = f.letter.lower() if norm and f.letter in "YABFJPQT" else f.letter
        parts.append(f"%{'.' if f.right else ''}{f.width or ''}{letter}")
    return " ".join(parts)


def _weighted(value: float) -> str:
    return f"{value:.0f}"


def _normal(value: float) -> str:
    return f"{value:.7f}"


def _row(j, w: dict[str, int]) -> dict[str, str]:
    return {
        "i": str(j.job_id), "r": j.partition, "u": j.user, "o": j.account, "n": j.qos,
        "Y": str(j.priority), "y": _normal(j.priority / PRIORITY_SPAN), "S": str(j.site),
        "A": _weighted(j.age * w.get("age", 0)), "a": _normal(j.age),
        "B": _weighted(j.assoc * w.get("assoc", 0)), "b": _normal(j.assoc),
        "F": _weighted(j.fairshare * w.get("fairshare", 0)), "f": _normal(j.fairshare),
        "J": _weighted(j.job_size * w.get("jobsize", 0)), "j": _normal(j.job_size),
        "P": _weighted(j.partition_factor * w.get("partition", 0)),
        "p": _normal(j.partition_factor),
        "Q": _weighted(j.qos_factor * w.get("qos", 0)), "q": _normal(j.qos_factor),
        "N": str(j.nice), "T": "", "t": "", "c": "",
    }


def _weights_row(w: dict[str, int]) -> dict[str, str]:
    return {"i": "Weights", "S": "1", "A": str(w.get("age", 0)), "a": str(w.get("age", 0)),
            "B": str(w.get("assoc", 0)), "b": str(w.get("assoc", 0)),
            "F": str(w.get("fairshare", 0)), "f": str(w.get("fairshare", 0)),
            "J": str(w.get("jobsize", 0)), "j": str(w.get("jobsize", 0)),
            "P": str(w.get("partition", 0)), "p": str(w.get("partition", 0)),
            "Q": str(w.get("qos", 0)), "q": str(w.get("qos", 0))}


def _sorted(jobs: list, spec: str | None, w: dict[str, int]) -> list:
    """-S "u,r,-y": stable sorts, last key first; the default is by job id."""
    jobs = sorted(jobs, key=lambda j: j.job_id)
    if not spec:
        return jobs
    for key in reversed([k for k in spec.split(",") if k]):
        desc = key.startswith("-")
        letter = key.lstrip("+-")[-1:]
        if not letter:
            continue

        def value(j, letter=letter):
            row = _row(j, w)
            v = row.get(letter, "")
            try:
                return (0, float(v), "")
            except ValueError:
                return (1, 0.0, v)
        jobs.sort(key=value, reverse=desc)
    return jobs


if __name__ == "__main__":
    sys.exit(main())

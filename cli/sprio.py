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
from lingjun.options import NO, OPTIONAL, REQUIRED, Opt, comma_list
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
         "   [--federation] [--local] [--sibling] [--usage] [-hlnvVw]\n")
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
      --sibling                   display job records separately for each federation cluster
  -p, --partition=partition_name  comma separated list of partitions
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
NO_JOBS = "Unable to find jobs matching user/id(s) specified"

# The factors of the default formats, in order: (weighted letter, normalised
# letter, the weight that keeps it in a short default format).
_FACTORS = (("A", "a", "age"), ("B", "b", "assoc"), ("F", "f", "fairshare"),
            ("J", "j", "jobsize"), ("P", "p", "partition"), ("Q", "q", "qos"))
HEADERS = {"i": "JOBID", "r": "PARTITION", "u": "USER", "Y": "PRIORITY", "y": "PRIORITY",
           "S": "SITE", "A": "AGE", "a": "AGE", "B": "ASSOC", "b": "ASSOC", "F": "FAIRSHARE",
           "f": "FAIRSHARE", "J": "JOBSIZE", "j": "JOBSIZE", "P": "PARTITION", "p": "PARTITION",
           "Q": "QOS", "q": "QOS", "N": "NICE", "T": "TRES", "t": "TRES", "c": "CLUSTER"}
PRIORITY_SPAN = float(0xFFFFFFFF)


def default_format(weights: dict[str, int], long: bool, norm: bool, users: bool) -> str:
    """sprio.c's default format: the long ones show every factor; the short ones
    leave out the factors weighted 0 (and TRES without TRESBillingWeights), and
    add USER when -u is given. The normalised ones leave out SITE and NICE."""
    out = ["%.15i", "%9r"]
    if long or users:
        out.append("%.8u")
    out.append("%10y" if norm else "%.10Y")
    if not norm:
        out.append("%.10S")
    for big, small, weight in _FACTORS:
        if long or weights.get(weight, 0):
            out.append(f"%10{small}" if norm else f"%.10{big}")
    if long and not norm:
        out.append("%.11N")
    if long or weights.get("tres", 0):
        out.append("%20t" if norm else ("%.20T" if long else "%20T"))
    return " ".join(out)


def parse(fmt: str, err: TextIO) -> list[tuple[str, str, int, bool, str]]:
    """Slurm's format tokens: (text before the first field only, letter, width,
    right-justified, text after it up to the next %). An unknown letter is
    reported and dropped with its text, as sprio does."""
    pieces = fmt.split("%")
    lead, fields = pieces[0], []
    for token in pieces[1:]:
        k = 0
        right = token[:1] == "."
        k += right
        digits = ""
        while k < len(token) and token[k].isdigit():
            digits += token[k]
            k += 1
        letter = token[k:k + 1]
        if not letter or letter not in HEADERS:
            print(f"sprio: error: Invalid job format specification: {letter}", file=err)
            continue
        fields.append((lead, letter, int(digits or 0), right, token[k + 1:]))
        lead = ""
    return fields


def render(fields, row: dict[str, str]) -> str:
    out = []
    for lead, letter, width, right, after in fields:
        v = row.get(letter, "")
        if width:
            v = v[:width]
            v = v.rjust(width) if right else v.ljust(width)
        out.append(f"{lead}{v}{after}")
    return "".join(out) + "\n"


def main(argv: list[str] | None = None, api=None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    return run(_sprio, argv, api, out, err)


def _sprio(argv: list[str], api, out: TextIO, err: TextIO) -> int:
    opts, positional = parse_options(PROG, argv, OPTIONS)
    req = messages.PriorityFactorsRequest()
    header, long, norm, weights_only, users = True, False, False, False, False
    fmt = sort = None
    jobs_bare = False
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
            if value is None:
                jobs_bare = True            # "-j 12": the list is the next word
            else:
                _job_ids(req, value)
        elif key == "user":
            users = True
            _add_users(req, value, err)
        elif key == "partition":
            req.partitions.extend(comma_list(value))
    if jobs_bare and positional:
        _job_ids(req, positional.pop(0))
    if positional:
        out.write(USAGE)
        raise CommandError(f"{PROG}: error: Unrecognized option: {positional[0]}")
    api = api or make_api()
    with controller_errors("Unable to contact slurm controller: "):
        reply = api.call("GetPriorityFactors", req)
    if reply.priority_type != "priority/multifactor":
        raise CommandError(NOT_MULTIFACTOR.format(type=reply.priority_type))
    weights = dict(reply.weights)
    fields = parse(fmt if fmt is not None else default_format(weights, long, norm, users), err)
    lines = [render(fields, HEADERS)] if header else []
    if weights_only:
        out.write("".join(lines) + render(fields, _weights_row(weights, long)))
        return 0
    jobs = list(reply.jobs)
    if not jobs and req.job_ids:
        out.write(NO_JOBS + "\n")
        return 0
    rows = _sorted([_row(j, weights) for j in jobs], sort)
    out.write("".join(lines + [render(fields, r) for r in rows]))
    return 0


def _add_users(req, value: str, err: TextIO) -> None:
    """-u: the users' jobs; a name that is no user matches no job, as Slurm's."""
    for u in comma_list(value):
        name = resolve_user(u)
        if name is None:
            print(f"sprio: error: Invalid user: {u}\n", file=err)
            name = ""
        req.users.append(name)


def _job_ids(req, value: str) -> None:
    for w in comma_list(value):
        if not slurm.is_job_id(w):
            raise CommandError(f"{PROG}: error: Invalid job id: {w}")
        req.job_ids.append(int(w))


def _row(j, w: dict[str, int]) -> dict[str, str]:
    """One job's fields: weighted factors rounded to integers (printf %.0f), the
    normalised ones with 7 decimals, %y the unrounded sum over 2^32-1 (14 decimals)."""
    weighted = [j.age * w.get("age", 0), j.assoc * w.get("assoc", 0),
                j.fairshare * w.get("fairshare", 0), j.job_size * w.get("jobsize", 0),
                j.partition_factor * w.get("partition", 0), j.qos_factor * w.get("qos", 0)]
    exact = float(j.site)
    for v in weighted:                       # Slurm's order of terms
        exact += v
    exact -= float(j.nice)
    age, assoc, fs, js, part, qos = (f"{v:.0f}" for v in weighted)
    return {
        "i": str(j.job_id), "r": j.partition, "u": j.user, "Y": str(j.priority),
        "y": f"{max(exact, 1.0) / PRIORITY_SPAN:.14f}", "S": str(j.site),
        "A": age, "a": f"{j.age:.7f}", "B": assoc, "b": f"{j.assoc:.7f}",
        "F": fs, "f": f"{j.fairshare:.7f}", "J": js, "j": f"{j.job_size:.7f}",
        "P": part, "p": f"{j.partition_factor:.7f}", "Q": qos, "q": f"{j.qos_factor:.7f}",
        "N": str(j.nice), "T": "", "t": "", "c": "",
        "_sort": (j.job_id, j.priority, exact),
    }


def _weights_row(w: dict[str, int], long: bool) -> dict[str, str]:
    """-w: the weights in the factors' columns (SITE's is 1); TRES "(null)" without any."""
    row = {"i": "Weights", "S": "1", "T": "(null)", "t": "(null)"}
    for big, small, weight in _FACTORS:
        row[big] = row[small] = str(w.get(weight, 0))
    return row


def _sorted(rows: list[dict], spec: str | None) -> list[dict]:
    """-S "u,r,-y": stable sorts, last key first; by job id unless asked otherwise.
    Numbers sort as numbers."""
    rows = sorted(rows, key=lambda r: r["_sort"][0])
    for key in reversed([k for k in (spec or "").split(",") if k]):
        desc = key.startswith("-")
        letter = key.lstrip("+-")[-1:]
        if letter not in HEADERS:
            continue

        def value(r, letter=letter):
            if letter in "Yy":
                return (0, r["_sort"][2], "")
            v = r.get(letter, "")
            try:
                return (0, float(v), "")
            except ValueError:
                return (1, 0.0, v)
        rows.sort(key=value, reverse=desc)
    return rows


if __name__ == "__main__":
    sys.exit(main())

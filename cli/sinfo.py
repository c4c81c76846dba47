"""sinfo: view nodes and partitions."""
from __future__ import annotations

import os
import sys
import time
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import TextIO

from cli.formats.fields import bad_O_fields
from cli.formats.units import squeue_long_header
from cli.formats import sinfo as sinfo_format
from cli.common import (CommandError, controller_errors, full_help, make_api, own_options,
                        parse_options, run)
from cli import sorting
from cli.options import NO, REQUIRED, Opt, comma_list, env_options
from lingjun import slurm
from lingjun import messages

PROG = "sinfo"
OPTIONS = [
    Opt("all", ("all",), "a", NO), Opt("dead", ("dead",), "d", NO), Opt("exact", ("exact",), "e", NO),
    Opt("noheader", ("noheader",), "h", NO), Opt("help", ("help",), "", NO),
    Opt("usage", ("usage",), "", NO), Opt("long", ("long",), "l", NO),
    Opt("nodes", ("nodes",), "n", REQUIRED), Opt("Node", ("Node",), "N", NO),
    Opt("format", ("format",), "o", REQUIRED), Opt("partition", ("partition",), "p", REQUIRED),
    Opt("responding", ("responding",), "r", NO), Opt("list-reasons", ("list-reasons",), "R", NO),
    Opt("summarize", ("summarize",), "s", NO), Opt("sort", ("sort",), "S", REQUIRED),
    Opt("states", ("states",), "t", REQUIRED), Opt("verbose", ("verbose",), "v", NO),
    Opt("version", ("version",), "V", NO), Opt("clusters", ("clusters",), "M", REQUIRED),
    Opt("local", ("local",), "", NO), Opt("federation", ("federation",), "", NO),
    Opt("hide", ("hide",), "", NO), Opt("future", ("future",), "F", NO),
    Opt("Format", ("Format",), "O", REQUIRED), Opt("unsupported", ("iterate",), "i", REQUIRED),
    Opt("unsupported", ("reservation",), "T", NO), Opt("json", ("json",), "", NO),
    Opt("yaml", ("yaml",), "", NO),
]
# sinfo's input environment variables (sinfo.1), each standing for an option
# the command line overrides.
ENV_OPTIONS = {
    "SINFO_ALL": "all", "SINFO_FEDERATION": "federation", "SINFO_FORMAT": "format",
    "SINFO_LOCAL": "local", "SINFO_PARTITION": "partition", "SINFO_SORT": "sort",
}
USAGE = ("Usage: sinfo [-adelNRrsTv] [-i seconds] [-t states] [-p partition] [-n nodes]\n"
         "             [-S fields] [-o format] [-O Format] [--federation] [--local]\n"
         "             [--cluster=names]\n")

# -t words -> a test on a node
_STATE_TESTS = {
    "idle": lambda n: n.state == "IDLE" and not n.drain,
    "alloc": lambda n: n.state == "ALLOCATED" and not n.drain,
    "allocated": lambda n: n.state == "ALLOCATED" and not n.drain,
    "mix": lambda n: n.state == "MIXED" and not n.drain,
    "mixed": lambda n: n.state == "MIXED" and not n.drain,
    "down": lambda n: n.state == "DOWN",
    "drain": lambda n: n.drain, "drained": lambda n: n.drain and n.state not in ("ALLOCATED", "MIXED"),
    "draining": lambda n: n.drain and n.state in ("ALLOCATED", "MIXED"),
    "drng": lambda n: n.drain and n.state in ("ALLOCATED", "MIXED"),
    "unknown": lambda n: n.state == "UNKNOWN", "unk": lambda n: n.state == "UNKNOWN",
    "comp": lambda n: n.completing, "completing": lambda n: n.completing,
    "no_respond": lambda n: n.not_responding, "responding": lambda n: not n.not_responding,
}


def main(argv: list[str] | None = None, api=None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    return run(_sinfo, argv, api, out, err, exit_now=True)


def _sinfo(argv: list[str], api, out: TextIO, err: TextIO) -> int:
    opts, positional = parse_options(PROG, argv, OPTIONS)
    given = {k for k, _, _ in opts}
    if given & {"format", "Format"}:
        given |= {"format", "Format"}
    opts = env_options(os.environ, ENV_OPTIONS, OPTIONS, given) + opts
    header, long_, node_mode, summarize, reasons = True, False, False, False, False
    fmt = ""
    sort_keys: list[sorting.SortKey] | None = None
    partitions: list[str] = []
    names: set[str] = set()
    tests = []
    dump = ""
    fields_O = None
    for key, value, spelled in own_options(PROG, opts, USAGE, full_help("SINFO")):
        if key in ("json", "yaml"):
            dump = key
        elif key == "Format":
            for name in bad_O_fields(value, sinfo_format.SINFO_O_FIELDS):
                # Slurm reports it (in squeue's words) and prints the rest (rc 0)
                print(f"sinfo: error: Invalid job format specification: {name}", file=err)
            fields_O = sinfo_format.parse_sinfo_O(value, strict=False)
        elif key == "noheader":
            header = False
        elif key == "long":
            long_ = True
        elif key == "Node":
            node_mode = True
        elif key == "summarize":
            summarize = True
        elif key == "list-reasons":
            reasons = True
        elif key == "format":
            fmt = value
        elif key == "sort":
            sort_keys = sorting.parse_sinfo_sort(value)
        elif key == "partition":
            partitions += comma_list(value)
        elif key == "nodes":
            try:
                names |= set(slurm.expand_hostlist(value))
            except ValueError:
                raise CommandError(f"sinfo: error: Invalid node name specified: {value}") from None
        elif key == "dead":
            tests.append(lambda n: n.not_responding or n.state == "DOWN")
        elif key == "responding":
            tests.append(lambda n: not n.not_responding)
        elif key == "states":
            words = [w.lower() for w in comma_list(value)]
            for w in words:
                if w not in _STATE_TESTS:
                    raise CommandError(f"sinfo: error: Invalid node state specified: {w}")
            tests.append(lambda n, ws=words: any(_STATE_TESTS[w](n) for w in ws))
    with controller_errors("slurm_load_partitions: "):
        api = api or make_api()
        parts = list(api.call("GetPartitions", messages.GetPartitionsRequest()).partitions)
        nodes = list(api.call("GetNodes", messages.GetNodesRequest()).nodes)
    if names:
        nodes = [n for n in nodes if n.name in names]
    if dump:  # the node and partition filters apply; formatting options do not
        for t in tests:
            nodes = [n for n in nodes if t(n)]
        if partitions:
            parts = [p for p in parts if p.name in partitions]
            nodes = [n for n in nodes if set(n.partitions) & set(partitions)]
        from cli import formats_json    # here: only --json and --yaml need it
        doc = formats_json.sinfo_document(nodes, parts)
        out.write(formats_json.dump_json(doc) if dump == "json" else formats_json.dump_yaml(doc))
        return 0
    for t in tests:
        nodes = [n for n in nodes if t(n)]
    text = ""
    if reasons:
        fmt = fmt or sinfo_format.SINFO_REASON_FORMAT
    elif summarize:
        fmt = fmt or sinfo_format.SINFO_SUMMARIZE_FORMAT
    elif node_mode:
        fmt = fmt or (sinfo_format.SINFO_NODE_LONG_FORMAT if long_ else sinfo_format.SINFO_NODE_FORMAT)
    else:
        fmt = fmt or (sinfo_format.SINFO_LONG_FORMAT if long_ else sinfo_format.SINFO_DEFAULT_FORMAT)
    if sort_keys is None and node_mode:         # Slurm's default for -N: by node name
        sort_keys = sorting.parse_sinfo_sort(sorting.SINFO_NODE_DEFAULT_SORT)
    if long_ and header:
        text += squeue_long_header(int(time.time()))
    text += sinfo_format.sinfo_table(nodes, parts, fmt, header=header, node_oriented=node_mode,
                                reasons_only=reasons,
                                partitions=partitions or [p.name for p in parts],
                                fields_O=fields_O,
                                order_rows=None if sort_keys is None else
                                lambda rows: sorting.sort_sinfo_rows(rows, sort_keys))
    out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

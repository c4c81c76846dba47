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
from lingjun.options import NO, REQUIRED, Opt, comma_list, env_options
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


class _Query:
    """What the command line asks: which nodes, in which form and order. A
    plain class: dataclasses would cost every sinfo its import of inspect."""

    def __init__(self, err: TextIO):
        self.err = err
        self.header, self.long_, self.node_mode = True, False, False
        self.summarize, self.reasons = False, False
        self.fmt, self.dump = "", ""
        self.sort_keys: list[sorting.SortKey] | None = None
        self.partitions: list[str] = []
        self.names: set[str] = set()
        self.tests: list = []               # each a test a node must pass
        self.fields_O = None

    def output_fields(self, value: str) -> None:
        for name in bad_O_fields(value, sinfo_format.SINFO_O_FIELDS):
            # Slurm reports it (in squeue's words) and prints the rest (rc 0)
            print(f"sinfo: error: Invalid job format specification: {name}", file=self.err)
        self.fields_O = sinfo_format.parse_sinfo_O(value, strict=False)

    def add_nodes(self, value: str) -> None:
        try:
            self.names |= set(slurm.expand_hostlist(value))
        except ValueError:
            raise CommandError(f"sinfo: error: Invalid node name specified: {value}") from None

    def add_states(self, value: str) -> None:
        words = [w.lower() for w in comma_list(value)]
        for w in words:
            if w not in _STATE_TESTS:
                raise CommandError(f"sinfo: error: Invalid node state specified: {w}")
        self.tests.append(lambda n, ws=words: any(_STATE_TESTS[w](n) for w in ws))

    def default_format(self) -> str:
        """The format -o gave, else the one -R, -s, -N (with -l) or -l pick."""
        if self.fmt:
            return self.fmt
        if self.reasons:
            return sinfo_format.SINFO_REASON_FORMAT
        if self.summarize:
            return sinfo_format.SINFO_SUMMARIZE_FORMAT
        if self.node_mode:
            return sinfo_format.SINFO_NODE_LONG_FORMAT if self.long_ else sinfo_format.SINFO_NODE_FORMAT
        return sinfo_format.SINFO_LONG_FORMAT if self.long_ else sinfo_format.SINFO_DEFAULT_FORMAT


def _set(attr: str, value):
    return lambda q, _: setattr(q, attr, value)


# What each option does to the query, in the order given on the command line.
_APPLY = {
    "json": _set("dump", "json"), "yaml": _set("dump", "yaml"),
    "Format": _Query.output_fields, "format": lambda q, v: setattr(q, "fmt", v),
    "noheader": _set("header", False), "long": _set("long_", True),
    "Node": _set("node_mode", True), "summarize": _set("summarize", True),
    "list-reasons": _set("reasons", True),
    "sort": lambda q, v: setattr(q, "sort_keys", sorting.parse_sinfo_sort(v)),
    "partition": lambda q, v: q.partitions.extend(comma_list(v)),
    "nodes": _Query.add_nodes, "states": _Query.add_states,
    "dead": lambda q, _: q.tests.append(lambda n: n.not_responding or n.state == "DOWN"),
    "responding": lambda q, _: q.tests.append(lambda n: not n.not_responding),
}


def _sinfo(argv: list[str], api, out: TextIO, err: TextIO) -> int:
    opts, positional = parse_options(PROG, argv, OPTIONS)
    given = {k for k, _, _ in opts}
    if given & {"format", "Format"}:
        given |= {"format", "Format"}
    opts = env_options(os.environ, ENV_OPTIONS, OPTIONS, given) + opts
    q = _Query(err)
    for key, value, spelled in own_options(PROG, opts, USAGE, full_help("SINFO")):
        if key in _APPLY:
            _APPLY[key](q, value)
    with controller_errors("slurm_load_partitions: "):
        api = api or make_api()
        parts = list(api.call("GetPartitions", messages.GetPartitionsRequest()).partitions)
        nodes = list(api.call("GetNodes", messages.GetNodesRequest()).nodes)
    if q.names:
        nodes = [n for n in nodes if n.name in q.names]
    for t in q.tests:
        nodes = [n for n in nodes if t(n)]
    if q.dump:  # the node and partition filters apply; formatting options do not
        return _dump(q, nodes, parts, out)
    sort_keys = q.sort_keys
    if sort_keys is None and q.node_mode:         # Slurm's default for -N: by node name
        sort_keys = sorting.parse_sinfo_sort(sorting.SINFO_NODE_DEFAULT_SORT)
    text = squeue_long_header(int(time.time())) if q.long_ and q.header else ""
    text += sinfo_format.sinfo_table(nodes, parts, q.default_format(), header=q.header,
                                     node_oriented=q.node_mode, reasons_only=q.reasons,
                                     partitions=q.partitions or [p.name for p in parts],
                                     fields_O=q.fields_O,
                                     order_rows=None if sort_keys is None else
                                     lambda rows: sorting.sort_sinfo_rows(rows, sort_keys))
    out.write(text)
    return 0


def _dump(q: _Query, nodes: list, parts: list, out: TextIO) -> int:
    """--json / --yaml: Slurm's data_parser document of the nodes and partitions."""
    if q.partitions:
        parts = [p for p in parts if p.name in q.partitions]
        nodes = [n for n in nodes if set(n.partitions) & set(q.partitions)]
    from cli import formats_json    # here: only --json and --yaml need it
    doc = formats_json.sinfo_document(nodes, parts)
    out.write(formats_json.dump_json(doc) if q.dump == "json" else formats_json.dump_yaml(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

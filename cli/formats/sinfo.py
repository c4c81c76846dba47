"""sinfo's tables: the %-letters and -O fields of a node or partition line,
the default, -l, -N, -s and -R formats, and the grouping of nodes that share
every printed value into one line; from Slurm 22.05's src/sinfo/print.c
(_print_*), sinfo.c (_build_sinfo_data, _match_node_data) and opts.c.
"""
from __future__ import annotations

TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Callable, Sequence

from lingjun import slurm
from cli.formats.fields import Field, FormatError, parse_format, render_rows, split_O_token
from cli.formats.show_node import node_gres, node_port, SLURM_VERSION
from cli.formats.show_cluster import job_factor
if TYPE_CHECKING:     # hints only: the commands read our messages or protobuf's alike
    from lingjun.v1 import api_pb2

SINFO_DEFAULT_FORMAT = "%#P %.5a %.10l %.6D %.6t %N"
SINFO_LONG_FORMAT = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
SINFO_NODE_FORMAT = "%#N %.6D %#P %6t"
# Slurm 22.05 prints -N -l with the partition right-justified and CPUS left-justified.
SINFO_NODE_LONG_FORMAT = "%#N %.6D %.#P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E"
SINFO_SUMMARIZE_FORMAT = "%#P %.5a %.10l %.16F %N"
SINFO_REASON_FORMAT = "%20E %9u %19H %N"
SINFO_HEADERS = {
    "N": "NODELIST", "n": "HOSTNAMES", "o": "NODE_ADDR", "t": "STATE", "T": "STATE",
    "c": "CPUS", "m": "MEMORY", "O": "CPU_LOAD", "e": "FREE_MEM", "C": "CPUS(A/I/O/T)",
    "F": "NODES(A/I/O/T)", "P": "PARTITION", "R": "PARTITION", "a": "AVAIL",
    "l": "TIMELIMIT", "L": "DEFAULTTIME", "D": "NODES", "E": "REASON", "H": "TIMESTAMP",
    "u": "USER", "U": "USER", "f": "AVAIL_FEATURES", "b": "ACTIVE_FEATURES", "G": "GRES",
    "s": "JOB_SIZE", "h": "OVERSUBSCRIBE", "g": "GROUPS", "r": "ROOT", "z": "S:C:T",
    "d": "TMP_DISK", "w": "WEIGHT", "X": "SOCKETS", "Y": "CORES", "Z": "THREADS",
    "B": "MAX_CPUS_PER_NODE", "S": "ALLOCNODES", "V": "CLUSTER", "x": "EXTRA",
    "p": "PRIO_TIER", "k": "OVERSUBSCRIBE", "A": "NODES(A/I)", "I": "PRIO_JOB_FACTOR",
    "M": "PREEMPT_MODE", "v": "VERSION",
    # -O fields without a % letter
    "allocmem": "ALLOCMEM", "port": "PORT", "comment": "COMMENT", "gresused": "GRES_USED",
    "statecomplete": "STATECOMPLETE",
}
# sinfo -O / --Format: field name -> the key of sinfo_node_values (a % letter
# where sinfo has one). Default width 20, as squeue's -O.
SINFO_O_FIELDS = {
    "allocmem": "allocmem", "allocnodes": "S", "available": "a", "cluster": "V",
    "comment": "comment", "cores": "Y", "cpus": "c", "cpusload": "O", "cpusstate": "C",
    "defaulttime": "L", "disk": "d", "extra": "x", "features": "f", "features_act": "b",
    "freemem": "e", "gres": "G", "gresused": "gresused", "groups": "g",
    "maxcpuspernode": "B", "memory": "m", "nodeaddr": "o", "nodeai": "A", "nodeaiot": "F",
    "nodehost": "n", "nodelist": "N", "nodes": "D", "oversubscribe": "h", "partition": "P",
    "partitionname": "R", "port": "port", "preemptmode": "M", "priorityjobfactor": "I",
    "prioritytier": "p", "reason": "E", "root": "r", "size": "s", "socketcorethread": "z",
    "sockets": "X", "statecompact": "t", "statelong": "T", "statecomplete": "statecomplete",
    "threads": "Z", "time": "l", "timestamp": "H", "user": "u", "userlong": "U",
    "version": "v", "weight": "w",
}


def parse_sinfo_O(spec: str, strict: bool = True) -> list[Field]:
    """"NodeList:10,StateLong:.12" -> Fields keyed as sinfo_node_values is.

    An unknown name raises FormatError (sinfo's words are squeue's), or with
    ``strict=False`` becomes a column that prints only its suffix."""
    out = []
    for token in (t for t in spec.split(",") if t):
        name, width, right, suffix = split_O_token(token)
        key = SINFO_O_FIELDS.get(name.lower())
        if key is None:
            if strict:
                raise FormatError(f"Invalid job format specification: {name}")
            out.append(Field("(invalid)", 0, False, suffix=suffix))
            continue
        out.append(Field(key, width, right, suffix=suffix))
    return out


# Letters summed over the nodes of a row rather than part of what groups them.
_SINFO_AGGREGATE = frozenset("NnoDCFA")
# sinfo's default order puts busier states first (node state enum, descending).
_STATE_RANK = {"MIXED": 0, "ALLOCATED": 1, "COMPLETING": 2, "IDLE": 3, "DOWN": 4, "UNKNOWN": 5}
# Slurm's node state numbers, which sinfo -S t compares.
_NODE_STATE_NUMBER = {"UNKNOWN": 0, "DOWN": 1, "IDLE": 2, "ALLOCATED": 3, "MIXED": 5, "FUTURE": 6}
MIN_FIELD_SIZE = 9


def _node_other(n: api_pb2.NodeInfo) -> bool:
    return n.drain or n.state == slurm.NODE_DOWN or n.not_responding


def _sinfo_time(minutes: int) -> str:
    return "infinite" if minutes < 0 else slurm.format_time_limit(minutes)


def sinfo_node_values(n: api_pb2.NodeInfo, part: api_pb2.PartitionInfo | None) -> dict[str, str]:
    threads = n.threads_per_core or 1
    sockets = n.sockets or 1
    cores = n.cores_per_socket or max(1, n.cpus // (sockets * threads))
    pname = part.name if part else (n.partitions[0] if n.partitions else "")
    return {
        "t": slurm.node_state_short(n.state, n.drain, n.not_responding, n.completing),
        "T": slurm.node_state_sinfo_long(n.state, n.drain, n.not_responding, n.completing),
        "c": str(n.cpus), "m": str(n.real_memory_mb), "O": f"{n.cpu_load:.2f}",
        "e": str(n.free_memory_mb),
        "P": pname + ("*" if part and part.default else ""), "R": pname,
        **_partition_values(part), **_reason_values(n),
        "f": ",".join(n.features) or "(null)", "b": ",".join(n.features) or "(null)",
        "G": node_gres(n),
        "h": "NO", "k": "NO", "g": "all", "r": "no",
        "z": f"{sockets}:{cores}:{threads}", "d": str(n.tmp_disk_mb), "w": str(n.weight or 1),
        "X": str(sockets), "Y": str(cores), "Z": str(threads), "B": "UNLIMITED", "S": "all",
        "V": "N/A", "x": "", "v": n.version or SLURM_VERSION,
        "allocmem": str(n.alloc_memory_mb), "port": node_port(n)[1], "comment": "(null)",
        "gresused": f"gpu:{n.gpus_alloc}" if n.gpus else "gpu:0",
        "statecomplete": slurm.node_state_long(n.state, n.drain, n.not_responding,
                                               n.completing).lower(),
    }


def _partition_values(part: api_pb2.PartitionInfo | None) -> dict[str, str]:
    """The letters a node line takes from its partition (without one: sinfo's
    defaults for a node in none)."""
    if not part:
        return {"a": "up", "l": "infinite", "L": "n/a", "s": _job_size(part), "p": "1",
                "I": "1", "M": "OFF"}
    return {
        "a": (part.state or "UP").lower()[:5].replace("inact", "inact"),
        "l": _sinfo_time(part.max_time_min),
        "L": "n/a" if part.default_time_min < 0 else _sinfo_time(part.default_time_min),
        "s": _job_size(part), "p": str(part.priority_tier),
        "I": str(job_factor(part)), "M": part.preempt_mode or "OFF",
    }


def _reason_values(n: api_pb2.NodeInfo) -> dict[str, str]:
    """-R's letters: why the node is down or drained, by whom and since when."""
    if not n.reason:
        return {"E": "none", "H": "Unknown", "u": "Unknown", "U": "Unknown"}
    return {"E": n.reason, "H": slurm.format_timestamp(n.reason_time),
            "u": n.reason_user or "root", "U": n.reason_user or "root"}


def _job_size(part: api_pb2.PartitionInfo | None) -> str:
    if not part:
        return "1-infinite"
    lo = max(1, part.min_nodes)
    hi = "infinite" if part.max_nodes < 0 else str(part.max_nodes)
    return f"{lo}-{hi}"


def _aggregate(nodes: list[api_pb2.NodeInfo], hosts: bool = True) -> dict[str, str]:
    """The letters of a group of nodes; ``hosts``: with the hostnames and addresses
    (%n, %o: ranged by python-hostlist, 5 ms of sinfo's start where nothing prints them)."""
    a = sum(n.cpus_alloc for n in nodes)
    t = sum(n.cpus for n in nodes)
    o = sum(n.cpus - n.cpus_alloc for n in nodes if _node_other(n))
    na = sum(1 for n in nodes if not _node_other(n) and (n.cpus_alloc or n.state in ("ALLOCATED", "MIXED")))
    no = sum(1 for n in nodes if _node_other(n))
    names = sorted((n.name for n in nodes), key=slurm.natural_key)
    values = {
        "N": slurm.compress_hostlist(names), "D": str(len(nodes)),
        "C": f"{a}/{t - a - o}/{o}/{t}",
        "F": f"{na}/{len(nodes) - na - no}/{no}/{len(nodes)}",
        "A": f"{na}/{len(nodes) - na - no}",
    }
    if hosts:
        values["n"] = slurm.compress_hostlist([n.hostname or n.name for n in nodes])
        values["o"] = slurm.compress_hostlist([(node_port(n)[0]) for n in nodes])
    return values


def sinfo_table(nodes: Sequence[api_pb2.NodeInfo], parts: Sequence[api_pb2.PartitionInfo],
                fmt: str = SINFO_DEFAULT_FORMAT, header: bool = True, node_oriented: bool = False,
                reasons_only: bool = False, partitions: Sequence[str] = (),
                fields_O: list[Field] | None = None,
                order_rows: Callable[[list[dict]], list[dict]] | None = None) -> str:
    """sinfo: one row per group of nodes that print the same (or per node with -N).
    ``fields_O`` (from parse_sinfo_O) replaces ``fmt`` for -O; ``order_rows``
    (sinfo -S) reorders the rows, which carry "_part_index", "_state" and
    "_reason_time" besides their letters."""
    fields, trailer = (fields_O, "") if fields_O is not None else parse_format(fmt)
    letters = {f.letter for f in fields}
    # %n and %o only where printed or maybe sorted on (-S)
    hosts = bool(letters & {"n", "o"}) or order_rows is not None
    by_part = bool(letters & set("PRalLshgkpSBIM")) or node_oriented
    order = [p.name for p in parts]
    if partitions:
        order = [p for p in order if p in partitions]
    node_list = sorted(nodes, key=lambda n: slurm.natural_key(n.name))
    if reasons_only:
        node_list = [n for n in node_list if n.reason or _node_other(n)]
    members = _members(node_list, parts, order, by_part, bool(partitions))
    if node_oriented:
        rows = []
        for n, p in members:
            v = sinfo_node_values(n, p)
            v.update(_aggregate([n], hosts))
            v.update(_hidden(n, p, order))
            rows.append(v)
    else:
        rows = _grouped_rows(members, letters, order, hosts)

    if order_rows is not None:
        rows = order_rows(rows)
    widths = {}
    for f in fields:
        if f.computed:
            longest = max((len(r.get(f.letter, "")) for r in rows), default=0)
            widths[f.letter] = max(MIN_FIELD_SIZE, longest)
    return render_rows(fields, trailer, rows, SINFO_HEADERS if header else None, widths)


def _members(node_list: list, parts: Sequence[api_pb2.PartitionInfo], order: list[str],
             by_part: bool, filtered: bool) -> list[tuple]:
    """(node, partition) pairs to print: each node once per partition shown
    when a partition letter is printed (or -N), else each node once."""
    if by_part:
        part_by_name = {p.name: p for p in parts}
        return [(n, part_by_name[pname]) for pname in order for n in node_list
                if pname in n.partitions]
    wanted = set(order)
    return [(n, None) for n in node_list if not filtered or wanted & set(n.partitions)]


def _hidden(n: api_pb2.NodeInfo, p: api_pb2.PartitionInfo | None, order: list[str]) -> dict:
    """What sinfo -S sorts on besides the letters."""
    return {"_part_index": order.index(p.name) if p else 0,
            "_state": _NODE_STATE_NUMBER.get(n.state, 4), "_reason_time": n.reason_time}


def _grouped_rows(members: list[tuple], letters: set[str], order: list[str],
                  hosts: bool) -> list[dict[str, str]]:
    """One row per group of nodes that print the same non-aggregate letters,
    in partition order, then by state (MIXED, ALLOCATED, ... as Slurm)."""
    groups: dict[tuple, list] = {}
    keys_in_order = []
    for n, p in members:
        v = sinfo_node_values(n, p)
        key = (p.name if p else "",) + tuple(v.get(l, "") for l in sorted(letters - _SINFO_AGGREGATE))
        if key not in groups:
            v.update(_hidden(n, p, order))
            groups[key] = [v, [], order.index(p.name) if p else 0,
                           _STATE_RANK.get(n.state, 9) + (10 if _node_other(n) else 0)]
            keys_in_order.append(key)
        groups[key][1].append(n)
    rows = []
    for key in sorted(keys_in_order, key=lambda k: (groups[k][2], groups[k][3])):
        v, ns, _, _ = groups[key]
        v = dict(v)
        v.update(_aggregate(ns, hosts))
        rows.append(v)
    return rows

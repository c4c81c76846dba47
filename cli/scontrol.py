"""scontrol: show and change the state of jobs, nodes, partitions.

    scontrol [-o] show job [ID] | node [NAME] | partition [NAME] | config
    scontrol show hostnames EXPR | hostlist LIST
    scontrol ping
    scontrol update NodeName=X State=DRAIN|RESUME|UNDRAIN|DOWN|IDLE [Reason=...]
    scontrol update JobId=N TimeLimit=|Partition=|NumNodes=|Name=|Comment=|
                            Dependency=|Nice=|Priority=|StartTime=|Deadline=...
    scontrol hold|uhold|release|requeue|requeuehold ID[,ID...] [ID...]
    scontrol token [lifespan=SECONDS]
    scontrol top ID[,ID...]

Each show subcommand imports its output family (cli.formats.show_job,
show_node, show_cluster) where it prints: start-up that ping, update and the
job controls do without (bench/README.md).
"""
from __future__ import annotations

import os
import sys
import time
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import TextIO

from cli.common import (CONNECT_FAILURE, CommandError, controller_errors, current_user, details,
                        make_api, parse_array_selectors, parse_options, refusals, run)
from lingjun.options import NO, VERSION, Opt
from lingjun import slurm
from lingjun import messages
from lingjun.endpoints import ControllerUnreachable, controller_address

PROG = "scontrol"
OPTIONS = [
    Opt("all", ("all",), "a", NO), Opt("details", ("details",), "d", NO),
    Opt("help", ("help",), "h", NO), Opt("hide", ("hide",), "", NO),
    Opt("oneliner", ("oneliner",), "o", NO), Opt("quiet", ("quiet",), "Q", NO),
    Opt("verbose", ("verbose",), "v", NO), Opt("version", ("version",), "V", NO),
    Opt("usage", ("usage",), "u", NO), Opt("future", ("future",), "F", NO),
    Opt("local", ("local",), "", NO),
]
NODE_STATES = ("DRAIN", "RESUME", "UNDRAIN", "DOWN", "IDLE")
REASON_REQUIRED = "You must specify a reason when DOWNING or DRAINING a node. Request denied"


def ping_line(host: str, up: bool) -> str:
    return f"Slurmctld(primary) at {host} is {'UP' if up else 'DOWN'}\n"


def _match(word: str, choices: tuple[str, ...], minimum: int = 1) -> str | None:
    """scontrol accepts abbreviations: "sho" -> "show", "part" -> "partition"."""
    w = word.lower()
    hits = [c for c in choices if c.startswith(w) and len(w) >= minimum]
    exact = [c for c in choices if c == w]
    if exact:
        return exact[0]
    return hits[0] if len(hits) == 1 else None


# --- scontrol update job: Key=Value pairs and what each changes ---------------------------


def _update_words(args: list[str]):
    """(word, key, value) per pair: "Key=Value", "Key Value", or a bare "Nice"
    (value None: Nice=100)."""
    i = 0
    while i < len(args):
        word = args[i]
        tag, eq, val = word.partition("=")
        i += 1
        if not eq:
            if _job_key(tag) == "nice":
                yield word, "nice", None
                continue
            if i >= len(args):
                raise CommandError(f"Invalid input: {word}\nRequest aborted")
            val = args[i]                   # "TimeLimit 10" also works
            word = f"{tag}={val}"
            i += 1
        yield word, _job_key(tag), val


def _num_nodes(req: messages.UpdateJobRequest, val: str, err: TextIO) -> None:
    try:
        lo, _, hi = val.partition("-")
        req.min_nodes = int(lo)
        req.max_nodes = int(hi) if hi else 0
        if req.min_nodes < 1 or (hi and req.max_nodes < req.min_nodes):
            raise ValueError
    except ValueError:
        raise CommandError(f"scontrol: error: Invalid node count specified: {val}") from None


def _nice(req: messages.UpdateJobRequest, val: str | None, err: TextIO) -> None:
    if val is None:
        req.nice = 100          # a bare "Nice" means Nice=100
        return
    try:
        nice = int(val)
    except ValueError:
        nice = 0                # strtoll: garbage reads as 0
    if abs(nice) > NICE_MAX:
        raise CommandError(f"scontrol: error: Nice value out of range (+/- {NICE_MAX})."
                           " Value ignored")
    req.nice = nice


def _priority(req: messages.UpdateJobRequest, val: str, err: TextIO) -> None:
    if not val.isdigit() or int(val) > 0xFFFFFFFF:     # parse_uint32
        raise CommandError(f"scontrol: error: Invalid Priority value: {val}")
    req.priority = int(val)


def _moment(field: str):
    """StartTime=, Deadline=: a Slurm time. One Slurm cannot read is reported
    and changes nothing of this key (often: "No changes")."""
    def apply(req: messages.UpdateJobRequest, val: str, err: TextIO) -> None:
        try:
            when = slurm.parse_time(val, time.time())
        except ValueError as e:
            print(e, file=err)
            return
        if when:
            setattr(req, field, when)
    return apply


def _into(field: str):
    return lambda req, val, err: setattr(req, field, val)


_JOB_UPDATES = {
    "partition": _into("partition"), "name": _into("name"), "comment": _into("comment"),
    "dependency": _into("dependency"), "numnodes": _num_nodes, "nice": _nice,
    "priority": _priority, "starttime": _moment("begin_time"), "deadline": _moment("deadline"),
}



class Scontrol:
    def __init__(self, api, out: TextIO, err: TextIO, oneliner: bool, details: bool = False):
        self._api = api
        self.out, self.err, self.oneliner = out, err, oneliner
        self.details = details          # -d: show job's per-node allocation lines

    @property
    def api(self):
        if self._api is None:
            self._api = make_api()
        return self._api

    # --- show ----------------------------------------------------------------
    def show(self, args: list[str]) -> int:
        if not args:
            raise CommandError("scontrol: error: too few arguments for keyword:show")
        what = _match(args[0], ("job", "jobs", "node", "nodes", "partition", "partitions",
                                "config", "hostnames", "hostlist", "hostlistsorted", "daemons",
                                "topology"))
        rest = args[1:]
        if what is None:
            raise CommandError(f"scontrol: error: invalid entity:{args[0]} for keyword:show")
        if what.startswith("job"):
            return self.show_job(rest[0] if rest else None)
        if what.startswith("node"):
            return self.show_node(rest[0] if rest else None)
        if what.startswith("partition"):
            return self.show_partition(rest[0] if rest else None)
        if what == "config":
            return self.show_config()
        if what == "topology":
            return self.show_topology(rest[0] if rest else None)
        if what == "hostnames":
            expr = rest[0] if rest else os.environ.get("SLURM_JOB_NODELIST", "")
            if not expr:
                raise CommandError("scontrol: error: host list is empty")
            try:
                names = slurm.expand_hostlist(expr)
            except ValueError:
                raise CommandError(f"scontrol: error: Invalid hostlist: {expr}") from None
            self.out.write("".join(n + "\n" for n in names))
            return 0
        if what in ("hostlist", "hostlistsorted"):
            if not rest:
                raise CommandError("scontrol: error: host list is empty")
            names = [n for part in rest[0].split(",") for n in slurm.expand_hostlist(part)]
            if what == "hostlist":
                self.out.write(_ordered_hostlist(names) + "\n")
            else:
                self.out.write(slurm.compress_hostlist(names) + "\n")
            return 0
        self.out.write(f"{controller_address()}: slurmctld\n")
        return 0

    def show_job(self, ident: str | None) -> int:
        ids: list[int] = []
        tasks: frozenset[int] | None = None
        if ident is not None:
            try:
                [(job_id, tasks)] = parse_array_selectors("scontrol", ident)
            except (CommandError, ValueError):
                raise CommandError("slurm_load_jobs error: Invalid job id specified") from None
            ids = [job_id]
        with controller_errors("slurm_load_jobs error: ",
                               not_found="slurm_load_jobs error: Invalid job id specified"):
            reply = self.api.call("GetJobs", messages.GetJobsRequest(job_ids=ids, all_states=True))
        # "show job 12": every row of array 12; "show job 12_2": task 2's own row,
        # or while it is pending the array's remainder that holds it (as Slurm)
        jobs = [j for j in reply.jobs if not ids or ids[0] in (j.job_id, j.array_job_id)]
        if tasks is not None:
            jobs = [j for j in jobs if j.array_job_id and (
                j.array_task_id in tasks
                or tasks & set(slurm.unfold_indices(j.array_task_str)))]
        if ids and not jobs:
            raise CommandError("slurm_load_jobs error: Invalid job id specified")
        if not jobs:
            self.out.write("No jobs in the system\n")
            return 0
        for j in jobs:
            if not j.now:
                j.now = reply.now
        mem = self._default_mem(jobs)
        from cli.formats.show_job import scontrol_show_job  # here: each show loads only its family
        for j in sorted(jobs, key=lambda j: j.job_id):
            self.out.write(scontrol_show_job([j], self.oneliner, mem.get(j.partition, 0),
                                             details=self.details))
        return 0

    def _default_mem(self, jobs) -> dict[str, int]:
        """Per-node memory a pending job without --mem is counted for in TRES."""
        if not any(j.state == slurm.PENDING or not j.nodes for j in jobs):
            return {}
        try:
            parts = self.api.call("GetPartitions", messages.GetPartitionsRequest()).partitions
        except (ControllerUnreachable, *refusals()):
            return {}
        return {p.name: p.total_memory_mb // p.total_nodes for p in parts if p.total_nodes}

    def show_node(self, name: str | None) -> int:
        names = slurm.expand_hostlist(name) if name else []
        with controller_errors("slurm_load_node error: ", not_found=f"Node {name} not found"):
            reply = self.api.call("GetNodes", messages.GetNodesRequest(names=names))
        nodes = sorted(reply.nodes, key=lambda n: slurm.natural_key(n.name))
        if names:
            nodes = [n for n in nodes if n.name in names]
            if not nodes:
                raise CommandError(f"Node {name} not found")
        elif not nodes:
            self.out.write("No nodes in the system\n")
            return 0
        from cli.formats.show_node import scontrol_show_node  # here: each show loads only its family
        self.out.write(scontrol_show_node(nodes, self.oneliner, self.details))
        return 0

    def show_partition(self, name: str | None) -> int:
        with controller_errors("slurm_load_partitions error: ",
                               not_found=f"Partition {name} not found"):
            reply = self.api.call("GetPartitions",
                                  messages.GetPartitionsRequest(names=[name] if name else []))
        parts = [p for p in reply.partitions if not name or p.name == name]
        if not parts:
            if name:
                raise CommandError(f"Partition {name} not found")
            self.out.write("No partitions in the system\n")
            return 0
        from cli.formats.show_cluster import scontrol_show_partition  # here: each show loads only its family
        self.out.write(scontrol_show_partition(parts, self.oneliner))
        return 0

    def show_topology(self, name: str | None) -> int:
        """Every switch; or the one named; or those above a node, lowest first (Slurm's
        scontrol_print_topo). Slurm says what it cannot find and exits 0."""
        with controller_errors("slurm_load_topo error: "):
            conf = self.api.call("GetConfig", messages.GetConfigRequest())
        switches = list(conf.topology)
        if name is None:
            if not switches:
                print("scontrol: error: No topology information available", file=self.err)
            from cli.formats.show_cluster import scontrol_show_topology  # here: each show loads only its family
            self.out.write(scontrol_show_topology(switches))
            return 0
        picked = [s for s in switches if s.name == name]
        if not picked:
            try:
                names = set(slurm.expand_hostlist(name))
            except ValueError:
                names = {name}
            picked = sorted((s for s in switches
                             if names & set(slurm.expand_hostlist(s.nodes))),
                            key=lambda s: s.level)
        if not picked:
            print("scontrol: error: Topology information contains no switch or node named "
                  f"{name}", file=self.err)
            return 0
        from cli.formats.show_cluster import scontrol_show_topology  # here: each show loads only its family
        self.out.write(scontrol_show_topology(picked))
        return 0

    def show_config(self) -> int:
        with controller_errors("slurm_load_ctl_conf error: "):
            conf = self.api.call("GetConfig", messages.GetConfigRequest())
            ping = self.api.call("Ping", messages.PingRequest())
        from cli.formats.show_cluster import scontrol_show_config  # here: each show loads only its family
        self.out.write(scontrol_show_config(dict(conf.settings), ping.now or int(time.time())))
        self.out.write("\n" + ping_line(ping.controller_host or "localhost", True))
        return 0

    # --- ping ----------------------------------------------------------------
    def ping(self) -> int:
        try:
            reply = self.api.call("Ping", messages.PingRequest())
        except (ControllerUnreachable, *refusals()):
            host = controller_address().rsplit(":", 1)[0]
            self.out.write(ping_line(host, False))
            return 1
        self.out.write(ping_line(reply.controller_host or "localhost", True))
        return 0

    # --- update --------------------------------------------------------------
    def update(self, args: list[str]) -> int:
        if any(_job_key(w.partition("=")[0]) == "jobid" for w in args):
            return self.update_job(args)
        pairs: dict[str, str] = {}
        for word in args:
            key, eq, value = word.partition("=")
            if not eq:
                raise CommandError(f"scontrol: error: Invalid input: {word}\n"
                                    "Request aborted")
            pairs[key.lower()] = value
        if "nodename" in pairs:
            return self.update_node(pairs)
        if "jobid" in pairs or "job" in pairs:
            raise CommandError("scontrol: error: job updates are not supported yet")
        if "partitionname" in pairs:
            raise CommandError("scontrol: error: partition updates are not supported yet")
        raise CommandError("scontrol: error: No valid entity in update command\n"
                            'Input line must include "NodeName", "PartitionName", '
                            '"Reservation/ReservationName", "JobId", "SuspendExcNodes", '
                            '"SuspendExcParts" or "SuspendExcStates"')

    def update_node(self, pairs: dict[str, str]) -> int:
        try:
            names = slurm.expand_hostlist(pairs["nodename"])
        except ValueError:
            raise CommandError("slurm_update error: Invalid node name specified") from None
        state = pairs.get("state", "").upper()
        reason = pairs.get("reason", "")
        if not state and not reason:
            raise CommandError("scontrol: error: No changes specified for the node")
        if state and state not in NODE_STATES:
            raise CommandError(f"scontrol: error: Invalid node state specified: {pairs['state']}")
        if state in ("DRAIN", "DOWN") and not reason:
            raise CommandError(REASON_REQUIRED)
        user = current_user()[0]
        req = messages.UpdateNodeRequest(names=names, state=state, reason=reason,
                                        requester_uid=os.getuid(), requester=user)
        with controller_errors("slurm_update error: "):
            self.api.call("UpdateNode", req)
        return 0

    # --- jobs: update, hold, release, requeue -------------------------------------
    def update_job(self, args: list[str]) -> int:
        """scontrol update JobId=N Key=Value...: Slurm's update_job.c words."""
        req = messages.UpdateJobRequest(requester_uid=os.getuid())
        job_id = ""
        time_limit: str | None = None
        for word, key, val in _update_words(args):
            if key == "jobid":
                job_id = val
            elif key == "timelimit":
                time_limit = val        # read once the job id is known: "+10" needs the job
            elif key in _JOB_UPDATES:
                _JOB_UPDATES[key](req, val, self.err)
            else:
                raise CommandError(f"Update of this parameter is not supported: {word}\n"
                                   "Request aborted")
        if not job_id:
            raise CommandError("scontrol: error: No job ID specified")
        if not slurm.is_job_id(job_id):
            raise CommandError(f"Invalid job id specified for job {job_id}")
        req.job_id = int(job_id)
        if time_limit is not None:
            req.time_limit_min = self._time_limit(req.job_id, time_limit)
        if not [f for f, _ in req.ListFields() if f.name not in ("job_id", "requester_uid")]:
            raise CommandError("No changes specified")
        try:
            self.api.call("UpdateJob", req)
        except ControllerUnreachable:
            raise CommandError("slurm_update error: " + CONNECT_FAILURE) from None
        except refusals() as e:
            raise CommandError(f"{details(e)} for job {job_id}") from None
        return 0

    def _time_limit(self, job_id: int, text: str) -> int:
        """TimeLimit=10, =UNLIMITED, =+5, =-5 (relative to the job's limit now)."""
        sign = text[0] if text[:1] in "+-" and text[1:2].isdigit() else ""
        try:
            minutes = slurm.parse_time_limit(text[1:] if sign else text)
        except ValueError:
            raise CommandError("scontrol: error: Invalid TimeLimit value") from None
        if not sign:
            return minutes
        with controller_errors("slurm_load_jobs error: ",
                               not_found="slurm_load_jobs error: Invalid job id specified"):
            reply = self.api.call("GetJobs", messages.GetJobsRequest(job_ids=[job_id], all_states=True))
        current = next((j.time_limit_min for j in reply.jobs if j.job_id == job_id), slurm.UNLIMITED)
        if current == slurm.UNLIMITED:
            return current
        if sign == "+":
            return current + minutes
        if minutes > current:
            raise CommandError("scontrol: error: TimeLimit decrement larger than current time limit "
                               f"({minutes} > {current})")
        return current - minutes

    def job_control(self, cmd: str, args: list[str]) -> int:
        """hold, uhold, release, requeue, requeuehold: one request for all ids;
        each failure reads "<error> for job <id>", as update_job.c prints it."""
        words = [w for a in args for w in a.split(",") if w]
        if not words:
            raise CommandError(f"scontrol: error: too few arguments for keyword:{cmd}")
        ids: list[int] = []
        bad: list[str] = []
        for w in words:
            for prefix in ("jobid=", "job="):
                if w.lower().startswith(prefix):
                    w = w[len(prefix):]
            (ids if slurm.is_job_id(w) else bad).append(int(w) if slurm.is_job_id(w) else w)
        uid = os.getuid()
        if cmd in ("requeue", "requeuehold"):
            method, req = "RequeueJobs", messages.RequeueJobsRequest(
                job_ids=ids, hold=cmd == "requeuehold", requester_uid=uid)
        else:
            action = {"hold": messages.HoldJobsRequest.HOLD, "uhold": messages.HoldJobsRequest.USER_HOLD,
                      "release": messages.HoldJobsRequest.RELEASE}[cmd]
            method, req = "HoldJobs", messages.HoldJobsRequest(job_ids=ids, action=action,
                                                             requester_uid=uid)
        lines = [f"Invalid job id specified for job {w}" for w in bad]
        if ids:
            with controller_errors("slurm_update error: "):
                reply = self.api.call(method, req)
            lines += [f"{r.error} for job {r.job_id}" for r in reply.results if not r.ok]
        if lines:
            raise CommandError("\n".join(lines))
        return 0

    def top(self, args: list[str]) -> int:
        """scontrol top JOBID[,JOBID...]: one argument, a comma list; any failure
        reads "<error> for job <the argument>", as scontrol_top_job prints it."""
        if not args:
            raise CommandError("too few arguments for keyword:top")
        if len(args) > 1:
            raise CommandError("too many arguments for keyword:top")
        words = args[0].split(",")
        if not all(slurm.is_job_id(w) for w in words):
            raise CommandError(f"Invalid job id specified for job {args[0]}")
        req = messages.TopJobsRequest(job_ids=[int(w) for w in words], requester_uid=os.getuid())
        try:
            self.api.call("TopJobs", req)
        except ControllerUnreachable:
            raise CommandError("slurm_top_job error: " + CONNECT_FAILURE) from None
        except refusals() as e:
            raise CommandError(f"{details(e)} for job {args[0]}") from None
        return 0

    # -- scontrol write batch_script JOB [FILE] ---------------------------
    def write(self, args: list[str]) -> int:
        """Write a job's batch script to FILE (default slurm-JOB.sh; "-" is
        stdout), as scontrol/info_job.c does. The controller answers the
        job's owner and operators only; the file is opened by this process,
        so it lands only where the caller may write."""
        if not args or _match(args[0], ("batch_script",), minimum=1) is None:
            what = args[0] if args else ""
            raise CommandError(f"scontrol: error: invalid write argument:{what}" if what
                               else "scontrol: error: too few arguments for keyword:write")
        if len(args) < 2:
            raise CommandError("scontrol: error: too few arguments for keyword:write")
        word = args[1]
        if not slurm.is_job_id(word):
            raise CommandError("job script retrieval failed: Invalid job id specified")
        job_id = int(word)
        filename = args[2] if len(args) > 2 else f"slurm-{job_id}.sh"
        req = messages.GetBatchScriptRequest(job_id=job_id, requester_uid=os.getuid())
        with controller_errors("job script retrieval failed: "):
            reply = self.api.call("GetBatchScript", req)
        if filename == "-":
            self.out.write(reply.script)
            return 0
        try:
            with open(filename, "w") as f:
                f.write(reply.script)
        except OSError as e:
            raise CommandError(f"failed to open file `{filename}`: {e.strerror}") from None
        self.out.write(f"batch script for job {job_id} written to {filename}\n")
        return 0


# scontrol's update_job.c keys we act on, each with the shortest prefix it
# accepts (strncasecmp with MAX(len, n)), in update_job.c's order.
_JOB_KEYS = (("jobid", "JobId", 3), ("comment", "Comment", 3), ("timelimit", "TimeLimit", 5),
             ("nice", "Nice", 2), ("numnodes", "NumNodes", 8), ("numnodes", "ReqNodes", 8),
             ("partition", "Partition", 2), ("name", "Name", 2), ("name", "JobName", 4),
             ("dependency", "Dependency", 1), ("starttime", "EligibleTime", 2),
             ("starttime", "StartTime", 2), ("deadline", "Deadline", 3),
             ("priority", "Priority", 2))
NICE_MAX = 2**31 - 3          # NICE_OFFSET - 3


def _job_key(tag: str) -> str | None:
    t = tag.lower()
    for key, word, shortest in _JOB_KEYS:
        if len(t) >= shortest and word.lower().startswith(t):
            return key
    return None


def _ordered_hostlist(names: list[str]) -> str:
    """scontrol show hostlist keeps the given order: node3,node1,node2 -> node[3,1-2]."""
    import re
    groups: list[tuple[str, list[tuple[int, int, int]]]] = []   # prefix, [(lo, hi, width)]
    for n in names:
        m = re.fullmatch(r"(.*?)(\d+)", n)
        if not m:
            groups.append((n, []))
            continue
        prefix, digits = m.group(1), m.group(2)
        num, width = int(digits), len(digits)
        if groups and groups[-1][0] == prefix and groups[-1][1]:
            ranges = groups[-1][1]
            lo, hi, w = ranges[-1]
            if num == hi + 1 and w == width:
                ranges[-1] = (lo, num, w)
            else:
                ranges.append((num, num, width))
        else:
            groups.append((prefix, [(num, num, width)]))
    out = []
    for prefix, ranges in groups:
        if not ranges:
            out.append(prefix)
            continue
        parts = [f"{lo:0{w}d}" if lo == hi else f"{lo:0{w}d}-{hi:0{w}d}" for lo, hi, w in ranges]
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            out.append(prefix + parts[0])
        else:
            out.append(f"{prefix}[{','.join(parts)}]")
    return ",".join(out)


def main(argv: list[str] | None = None, api=None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    return run(_scontrol, argv, api, out, err, exit_now=True)


def _scontrol(argv: list[str], api, out: TextIO, err: TextIO) -> int:
    # Options may precede the command; "-o" also comes after "show job".
    opts, words = parse_options(PROG, argv, OPTIONS)
    keys = {k for k, _, _ in opts}
    if "version" in keys:
        out.write(VERSION)
        return 0
    if "help" in keys or "usage" in keys or not words:
        out.write(__doc__.split("\n\n", 1)[1])
        return 0 if words or keys else 1
    tool = Scontrol(api, out, err, "oneliner" in keys, "details" in keys)
    cmd = _match(words[0], ("show", "ping", "update", "version", "hold", "release", "requeue",
                            "suspend", "resume", "uhold", "top", "reconfigure", "shutdown",
                            "abort", "takeover", "listpids", "notify", "wait_job", "create",
                            "delete", "reboot", "write", "token"), minimum=2)
    if cmd == "show":
        return tool.show(words[1:])
    if cmd == "ping":
        return tool.ping()
    if cmd == "update":
        return tool.update(words[1:])
    if cmd == "version":
        out.write(VERSION)
        return 0
    if cmd == "reconfigure":
        # Slurm's reconfigure prints nothing: the controller re-reads its whole file.
        with controller_errors("slurm_reconfigure error: "):
            tool.api.call("NetReconfigure", messages.NetReconfigureRequest(requester_uid=os.getuid()))
        return 0
    if cmd in ("hold", "uhold", "release", "requeue"):
        return tool.job_control(cmd, words[1:])
    if cmd == "top":
        return tool.top(words[1:])
    if cmd == "write":
        return tool.write(words[1:])
    if cmd == "token":
        return token(words[1:], out)
    if cmd is None and words[0].lower() == "requeuehold":
        return tool.job_control("requeuehold", words[1:])
    if cmd is not None:
        raise CommandError(f"scontrol: error: {cmd} is not supported yet")
    raise CommandError(f"invalid keyword: {words[0]}")

def token(words: list[str], out: TextIO) -> int:
    """``scontrol token``: the caller's token as Slurm prints its JWT
    (``SLURM_JWT=...``), for ``X-SLURM-USER-TOKEN`` (lingjun restd). It comes
    from the credential socket, which says who the caller is, and lives the
    site's ``[auth] token_ttl_s``: a ``lifespan=`` longer than that is refused
    rather than silently cut short."""
    import time as _time
    from lingjun import credential  # here: only scontrol token needs the credential socket
    from lingjun.endpoints import auth_socket  # here: only scontrol token needs it
    lifespan = 0
    for w in words:
        key, _, value = w.partition("=")
        if key.lower() == "lifespan":
            if not value.isdigit() or int(value) <= 0:
                raise CommandError(f"scontrol: error: Invalid lifespan value: {value}")
            lifespan = int(value)
        elif key.lower() == "username":
            raise CommandError("scontrol: error: slurm_request_jwt: Access/permission denied")
        else:
            raise CommandError(f"scontrol: error: Invalid parameter {w}")
    try:
        jwt = credential.fetch_token(auth_socket())
    except credential.CredentialUnavailable as e:
        raise CommandError(f"scontrol: error: slurm_request_jwt: {e}") from None
    left = credential._expiry(jwt) - _time.time()
    if lifespan and lifespan > left + 1:
        raise CommandError(f"scontrol: error: lifespan={lifespan} exceeds this site's "
                           f"token lifetime ({int(left + 1)} s)")
    out.write(f"SLURM_JWT={jwt}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

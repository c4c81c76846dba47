"""``--json`` and ``--yaml`` for squeue, sinfo and sacct: the shapes of Slurm
22.05's data_parser (openapi v0.0.38 for squeue/sinfo, dbv0.0.38 for sacct).

Tools written against Slurm parse this text, so the key names, their order
and the value types are Slurm's: integers stay integers, "not set" is
``null`` (Slurm's NO_VAL), a wait status is the raw status (exit 3 -> 768).
Each entity has one mapping function from its api_pb2 message to a plain
dict (``job_dict``, ``node_dict``, ``partition_dict``, ``sacct_job_dict``,
``sacct_step_dict``); ``dump_json``/``dump_yaml`` then write the dict the way
Slurm's serializers lay it out (json-c's pretty printer escapes ``/`` and
ends without a newline; libyaml tags every scalar):

    >>> print(dump_json({"a": "/x", "b": [], "c": None}))
    {
      "a": "\\/x",
      "b": [
      ],
      "c": null
    }

Like the text renderers, nothing here reads the clock or talks to the
controller.
"""
from __future__ import annotations

import json
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any, Sequence

from cli.formats.jobs import step_order, tres_per_node
from cli.formats.show_node import node_port, node_tres
from lingjun import slurm
if TYPE_CHECKING:     # hints only: the commands read our messages or protobuf's alike
    from lingjun.v1 import api_pb2

SLURM_VERSION = (22, 5, 8)
RELEASE = "22.05.8"
YEAR_S = 365 * 86400   # a running job without a limit "ends" a year after it started


def meta(plugin: str = "openapi/v0.0.38", name: str = "Slurm OpenAPI v0.0.38") -> dict:
    major, minor, micro = SLURM_VERSION
    return {"plugin": {"type": plugin, "name": name},
            "Slurm": {"version": {"major": major, "micro": micro, "minor": minor},
                      "release": RELEASE}}


def _status(code: int, sig: int) -> int:
    """The wait status Slurm stores: exit code in the high byte, signal low."""
    return ((code & 0xFF) << 8) | (sig & 0x7F)


def _started(job: api_pb2.JobInfo) -> bool:
    return bool(job.start_time) and job.state != slurm.PENDING and bool(job.nodes)


def _tres(cpus: int, mem_mb: int, nodes: int) -> str:
    parts = [f"cpu={cpus}"]
    if mem_mb > 0:
        parts.append(f"mem={mem_mb * max(1, nodes)}M")
    parts += [f"node={max(1, nodes)}", f"billing={cpus}"]
    return ",".join(parts)


def _job_resources(job: api_pb2.JobInfo) -> dict:
    """Which cores the job holds on each node. We count CPUs, not core ids:
    the ids are the first N of socket 0."""
    names = list(job.node_names) or slurm.expand_hostlist(job.nodes)
    per_node = job.cpus_per_node or max(1, job.num_cpus // max(1, len(names)))
    return {
        "nodes": job.nodes, "allocated_cores": job.num_cpus, "allocated_hosts": len(names),
        "allocated_nodes": [
            {"sockets": {"0": {"cores": {str(i): "allocated" for i in range(per_node)}}},
             "nodename": n, "cpus_used": 0, "memory_used": 0, "memory_allocated": 0}
            for n in names],
    }


def job_dict(job: api_pb2.JobInfo, cluster: str = "") -> dict[str, Any]:
    """One squeue --json job (slurmctld's view), keys in Slurm's order."""
    state = job.state or slurm.PENDING
    started = _started(job)
    d = _job_keys_to_id(job, cluster, state, started)
    if started:
        d["job_resources"] = _job_resources(job)
    d.update(_job_keys_from_state(job, state, started))
    return d


def _job_keys_to_id(job: api_pb2.JobInfo, cluster: str, state: str,
                    started: bool) -> dict[str, Any]:
    """job_dict's keys from "account" to "job_id"."""
    end = job.end_time
    if not end and state == slurm.RUNNING and job.start_time:
        end = job.start_time + (job.time_limit_min * 60 if job.time_limit_min > 0 else YEAR_S)
    task_id = job.array_task_id if job.array_job_id and job.array_task_id >= 0 else None
    return {
        "account": job.account, "accrue_time": job.eligible_time, "admin_comment": "",
        "array_job_id": job.array_job_id, "array_task_id": task_id,
        "array_max_tasks": job.array_max_running, "array_task_string": job.array_task_str,
        "association_id": 0, "batch_features": "", "batch_flag": job.batch,
        "batch_host": job.batch_host if started else "",
        "flags": ["JOB_WAS_RUNNING"] if state == slurm.RUNNING else [],
        "burst_buffer": "", "burst_buffer_state": "", "cluster": cluster,
        "cluster_features": "", "command": job.command, "comment": job.comment,
        "container": "", "contiguous": False, "core_spec": None, "thread_spec": None,
        "cores_per_socket": None, "billable_tres": float(job.num_cpus) if started else None,
        "cpus_per_task": job.cpus_per_task if job.cpus_per_task > 1 else None,
        "cpu_frequency_minimum": None, "cpu_frequency_maximum": None,
        "cpu_frequency_governor": None, "cpus_per_tres": "", "deadline": 0, "delay_boot": 0,
        "dependency": "",
        "derived_exit_code": _status(job.derived_exit_code, job.derived_exit_signal),
        "eligible_time": job.eligible_time, "end_time": end, "excluded_nodes": "",
        "exit_code": _status(job.exit_code, job.exit_signal), "features": "",
        "federation_origin": "", "federation_siblings_active": "",
        "federation_siblings_viable": "", "gres_detail": [], "group_id": job.gid,
        "group_name": job.group, "job_id": job.job_id,
    }


def _job_keys_from_state(job: api_pb2.JobInfo, state: str, started: bool) -> dict[str, Any]:
    """job_dict's keys from "job_state" to the end (after job_resources)."""
    pending = state == slurm.PENDING
    return {
        "job_state": state,
        "last_sched_evaluation": job.start_time or job.eligible_time or job.submit_time,
        "licenses": "", "max_cpus": 0, "max_nodes": job.max_nodes if pending else 0,
        "mcs_label": "", "memory_per_tres": "", "name": job.name, "nodes": job.nodes,
        "nice": job.nice or None, "tasks_per_core": None, "tasks_per_node": job.ntasks_per_node,
        "tasks_per_socket": None, "tasks_per_board": 0, "cpus": job.num_cpus,
        "node_count": job.num_nodes, "tasks": job.num_tasks or 1, "het_job_id": 0,
        "het_job_id_set": "", "het_job_offset": 0, "partition": job.partition, "prefer": "",
        "memory_per_node": job.mem_per_node_mb if job.mem_per_node_mb > 0 else None,
        "memory_per_cpu": None,
        "minimum_cpus_per_node": max(1, job.cpus_per_task or 1) * max(1, job.ntasks_per_node or 1),
        "minimum_tmp_disk_per_node": 0, "preempt_time": 0, "pre_sus_time": 0,
        "priority": job.priority, "profile": None, "qos": job.qos, "reboot": False,
        "required_nodes": "", "requeue": job.requeue, "resize_time": 0,
        "restart_cnt": job.restarts, "resv_name": "",
        "shared": "none" if job.exclusive else None,
        "show_flags": ["SHOW_ALL", "SHOW_DETAIL", "SHOW_LOCAL"], "sockets_per_board": 0,
        "sockets_per_node": None, "start_time": job.start_time, "state_description": "",
        "state_reason": job.reason or slurm.REASON_NONE, "standard_error": job.stderr_path,
        "standard_input": job.stdin_path or "/dev/null", "standard_output": job.stdout_path,
        "submit_time": job.submit_time, "suspend_time": 0, "system_comment": "",
        "time_limit": job.time_limit_min if job.time_limit_min >= 0 else None,
        "time_minimum": 0, "threads_per_core": None, "tres_bind": "", "tres_freq": "",
        "tres_per_job": f"gres:gpu:{job.gpus}" if job.gpus and not job.gpus_per_node else "",
        "tres_per_node": (f"gres:gpu:{job.gpus_per_node}" if job.gpus_per_node else
                          tres_per_node(job) if job.shards_per_node or job.mps_per_node else ""),
        "tres_per_socket": "", "tres_per_task": "",
        "tres_req_str": _tres(job.num_cpus, job.mem_per_node_mb, job.num_nodes),
        "tres_alloc_str": _tres(job.num_cpus, job.mem_per_node_mb, job.num_nodes)
        if started else "",
        "user_id": job.uid, "user_name": job.user, "wckey": "",
        "current_working_directory": job.work_dir,
    }


def squeue_document(jobs: Sequence[api_pb2.JobInfo], cluster: str = "") -> dict:
    """squeue --json: every job slurmctld returned, in its (job id) order."""
    return {"meta": meta(), "errors": [],
            "jobs": [job_dict(j, cluster) for j in sorted(jobs, key=lambda j: j.job_id)]}


# --- sinfo -------------------------------------------------------------------------


def _node_state_words(n: api_pb2.NodeInfo) -> tuple[str, list[str]]:
    base = slurm.node_state_long(n.state, False, False, False).split("+")[0]
    flags = []
    if n.drain:
        flags.append("DRAIN")
    if n.completing:
        flags.append("COMPLETING")
    if n.not_responding:
        flags.append("NOT_RESPONDING")
    return base, flags


def node_dict(n: api_pb2.NodeInfo) -> dict[str, Any]:
    """One node as sinfo --json (openapi v0.0.38 node) shows it."""
    threads = n.threads_per_core or 1
    sockets = n.sockets or 1
    cores = n.cores_per_socket or max(1, n.cpus // (sockets * threads))
    state, flags = _node_state_words(n)
    host, port = node_port(n)
    tres, used = node_tres(n)
    return {
        "architecture": n.arch or "x86_64", "burstbuffer_network_address": "", "boards": 1,
        "boot_time": n.boot_time, "comment": "", "cores": cores, "cpu_binding": 0,
        "cpu_load": int(n.cpu_load * 100), "extra": "", "free_memory": n.free_memory_mb,
        "cpus": n.cpus, "last_busy": n.last_busy_time, "features": ",".join(n.features),
        "active_features": ",".join(n.features), "gres": f"gpu:{n.gpus}" if n.gpus else "",
        "gres_drained": "N/A", "gres_used": f"gpu:{n.gpus_alloc}" if n.gpus else "",
        "mcs_label": "", "name": n.name, "next_state_after_reboot": "invalid",
        "address": host, "hostname": n.hostname or n.name, "state": state.lower(),
        "state_flags": flags, "next_state_after_reboot_flags": [],
        "operating_system": n.os, "owner": None, "partitions": list(n.partitions),
        "port": int(port), "real_memory": n.real_memory_mb, "reason": n.reason,
        "reason_changed_at": n.reason_time if n.reason else 0,
        "reason_set_by_user": (n.reason_user or "root") if n.reason else None,
        "slurmd_start_time": n.agent_start_time, "sockets": sockets, "threads": threads,
        "temporary_disk": n.tmp_disk_mb, "weight": n.weight or 1, "tres": tres,
        "slurmd_version": n.version or RELEASE, "alloc_memory": n.alloc_memory_mb,
        "alloc_cpus": n.cpus_alloc, "idle_cpus": n.cpus - n.cpus_alloc,
        "tres_used": used or None, "tres_weighted": float(n.cpus_alloc),
    }


def partition_dict(p: api_pb2.PartitionInfo) -> dict[str, Any]:
    """One partition as sinfo --json (openapi v0.0.38 partition) shows it."""
    tres = [f"cpu={p.total_cpus}"]
    if p.total_memory_mb:
        tres.append(f"mem={p.total_memory_mb}M")
    tres += [f"node={p.total_nodes}", f"billing={p.total_cpus}"]
    return {
        "flags": ["default"] if p.default else [],
        "preemption_mode": [(p.preempt_mode or "OFF").lower()
                            if p.preempt_mode not in ("", "OFF") else "disabled"],
        "allowed_allocation_nodes": "", "allowed_accounts": "", "allowed_groups": "",
        "allowed_qos": "", "alternative": "", "billing_weights": "",
        "default_memory_per_cpu": None, "default_time_limit":
            p.default_time_min if p.default_time_min >= 0 else None,
        "denied_accounts": "", "denied_qos": "", "preemption_grace_time": p.grace_time_s,
        "maximum_cpus_per_node": -1, "maximum_memory_per_node": None,
        "maximum_nodes_per_job": p.max_nodes if p.max_nodes >= 0 else -1,
        "max_time_limit": p.max_time_min if p.max_time_min >= 0 else -1,
        "min nodes per job": p.min_nodes, "name": p.name,
        "nodes": slurm.compress_hostlist(list(p.node_names)), "over_time_limit": None,
        "priority_job_factor": 1, "priority_tier": p.priority_tier or 1, "qos": "",
        "state": p.state or "UP", "total_cpus": p.total_cpus, "total_nodes": p.total_nodes,
        "tres": ",".join(tres),
    }


def sinfo_document(nodes: Sequence[api_pb2.NodeInfo],
                   parts: Sequence[api_pb2.PartitionInfo]) -> dict:
    return {"meta": meta(), "errors": [],
            "nodes": [node_dict(n) for n in sorted(nodes, key=lambda n: slurm.natural_key(n.name))],
            "partitions": [partition_dict(p) for p in parts]}


# --- sacct (slurmdbd's view, dbv0.0.38) ------------------------------------------------


def _exit_obj(code: int, sig: int) -> dict:
    if sig:
        return {"status": "SIGNALED", "return_code": 0,
                "signal": {"signal_id": sig, "name": _signal_name(sig)}}
    return {"status": "SUCCESS" if code == 0 else "FAILED", "return_code": code}


def _signal_name(sig: int) -> str:
    import signal as _signal
    try:
        return _signal.Signals(sig).name.removeprefix("SIG")
    except ValueError:
        return str(sig)


def _cpu_obj(ms: int) -> dict:
    return {"seconds": ms // 1000, "microseconds": (ms % 1000) * 1000}


def _tres_list(cpus: int, mem_mb: int, nodes: int) -> list[dict]:
    out = [{"type": "cpu", "name": "", "id": 1, "count": cpus}]
    if mem_mb > 0:
        out.append({"type": "mem", "name": "", "id": 2, "count": mem_mb * max(1, nodes)})
    out += [{"type": "node", "name": "", "id": 4, "count": max(1, nodes)},
            {"type": "billing", "name": "", "id": 5, "count": cpus}]
    return out


def _elapsed(start: int, end: int, now: int) -> int:
    if not start:
        return 0
    return max(0, (end or now) - start)


def sacct_step_dict(job: api_pb2.JobInfo, st: api_pb2.StepInfo, now: int) -> dict[str, Any]:
    names = slurm.expand_hostlist(st.nodes) if st.nodes else []
    mem_used = [{"type": "mem", "name": "", "id": 2, "count": st.max_rss_kb * 1024,
                 "node": st.max_rss_node, "task": st.max_rss_task}] if st.max_rss_kb else []
    ave = [{"type": "mem", "name": "", "id": 2, "count": st.ave_rss_kb * 1024}] \
        if st.ave_rss_kb else []
    total_ms = st.user_cpu_ms + st.system_cpu_ms
    return {
        "nodes": {"count": len(names), "range": st.nodes, "list": names},
        "tres": {"requested": {"max": mem_used, "min": mem_used, "average": ave, "total": ave},
                 "consumed": {"max": [], "min": [], "average": [], "total": []},
                 "allocated": _tres_list(st.num_cpus, 0, len(names))},
        "time": {"elapsed": _elapsed(st.start_time, st.end_time, now), "end": st.end_time,
                 "start": st.start_time, "suspended": 0, "system": _cpu_obj(st.system_cpu_ms),
                 "total": _cpu_obj(total_ms), "user": _cpu_obj(st.user_cpu_ms)},
        "exit_code": _exit_obj(st.exit_code, st.exit_signal),
        "pid": None, "state": st.state,
        "statistics": {"CPU": {"actual_frequency": 0}, "energy": {"consumed": 0}},
        "step": {"job_id": job.job_id, "het": {"component": None},
                 "id": f"{job.job_id}.{st.step_id}", "name": st.name},
        "task": {"distribution": "Unknown" if st.step_id == "batch" else "Block"},
        "tasks": {"count": st.num_tasks},
        "CPU": {"requested_frequency": {"min": 0, "max": 0}, "governor": []},
    }


def sacct_job_dict(job: api_pb2.JobInfo, cluster: str = "", now: int | None = None,
                   with_steps: bool = True) -> dict[str, Any]:
    """One sacct --json job, its steps inside it."""
    now = now if now is not None else job.now
    started = _started(job)
    total_u = sum(s.user_cpu_ms for s in job.steps)
    total_s = sum(s.system_cpu_ms for s in job.steps)
    steps = [sacct_step_dict(job, s, now) for s in step_order(job.steps)] if with_steps else []
    task_id = job.array_task_id if job.array_job_id and job.array_task_id >= 0 else None
    return {
        "account": job.account,
        "comment": {"administrator": "", "job": job.comment, "system": ""},
        "allocation_nodes": job.num_nodes if started else 0,
        "array": {"job_id": job.array_job_id,
                  "limits": {"max": {"running": {"tasks": job.array_max_running}}},
                  "task": job.array_task_str, "task_id": task_id},
        "association": {"account": job.account, "cluster": cluster,
                        "partition": job.partition, "user": job.user},
        "cluster": cluster, "constraints": "", "container": "",
        "derived_exit_code": _exit_obj(job.derived_exit_code, job.derived_exit_signal),
        "time": {"elapsed": _elapsed(job.start_time, job.end_time, now) if started else 0,
                 "eligible": job.eligible_time, "end": job.end_time, "start": job.start_time,
                 "submission": job.submit_time, "suspended": 0, "system": _cpu_obj(total_s),
                 "limit": job.time_limit_min if job.time_limit_min >= 0 else None,
                 "total": _cpu_obj(total_u + total_s), "user": _cpu_obj(total_u)},
        "exit_code": _exit_obj(job.exit_code, job.exit_signal),
        "flags": ["STARTED_ON_SCHEDULE"] if started else [],
        "group": job.group, "het": {"job_id": 0, "job_offset": None},
        "job_id": job.job_id, "name": job.name, "mcs": {"label": ""},
        "nodes": job.nodes or "None assigned", "partition": job.partition,
        "priority": job.priority, "qos": job.qos,
        "required": {"CPUs": job.num_cpus,
                     "memory": job.mem_per_node_mb if job.mem_per_node_mb > 0 else 0},
        "kill_request_user": job.cancelled_by and _user_of(job) or None,
        "reservation": {"id": 0, "name": ""},
        "state": {"current": job.state, "reason": job.reason or slurm.REASON_NONE},
        "steps": steps,
        "tres": {"allocated": _tres_list(job.num_cpus, job.mem_per_node_mb, job.num_nodes)
                 if started else [],
                 "requested": _tres_list(job.num_cpus, job.mem_per_node_mb, job.num_nodes)},
        "user": job.user, "wckey": {"wckey": "", "flags": []},
        "working_directory": job.work_dir,
    }


def _user_of(job: api_pb2.JobInfo) -> str:
    """kill_request_user is a name; cancelled_by holds a uid."""
    import pwd
    try:
        return pwd.getpwuid(int(job.cancelled_by)).pw_name
    except (KeyError, ValueError):
        return job.cancelled_by


def sacct_document(jobs: Sequence[api_pb2.JobInfo], cluster: str = "",
                   now: int | None = None, with_steps: bool = True) -> dict:
    return {"meta": meta("openapi/dbv0.0.38", "Slurm OpenAPI DB v0.0.38"), "errors": [],
            "jobs": [sacct_job_dict(j, cluster, now, with_steps)
                     for j in sorted(jobs, key=lambda j: j.job_id)]}


# --- serializers -------------------------------------------------------------------


def dump_json(obj: Any) -> str:
    """json-c's JSON_C_TO_STRING_PRETTY: two-space indent, '/' escaped, empty
    containers opened and closed on their own lines, no final newline."""
    lines: list[str] = []

    def scalar(v: Any) -> str:
        if isinstance(v, float):
            return repr(v) if v != int(v) else f"{v:.1f}"
        return json.dumps(v).replace("/", "\\/")

    def walk(v: Any, indent: str, lead: str, tail: str) -> None:
        inner = indent + "  "
        if isinstance(v, dict):
            lines.append(f"{indent}{lead}{{")
            items = list(v.items())
            for i, (k, x) in enumerate(items):
                walk(x, inner, f"{scalar(k)}: ", "," if i < len(items) - 1 else "")
            lines.append(f"{indent}}}{tail}")
        elif isinstance(v, list):
            lines.append(f"{indent}{lead}[")
            for i, x in enumerate(v):
                walk(x, inner, "", "," if i < len(v) - 1 else "")
            lines.append(f"{indent}]{tail}")
        else:
            lines.append(f"{indent}{lead}{scalar(v)}{tail}")

    walk(obj, "", "", "")
    return "\n".join(lines)


_TAG = "tag:yaml.org,2002:"


def dump_yaml(obj: Any) -> str:
    """libyaml as Slurm drives it: a %YAML 1.1 document with every node tagged;
    "" is written as null, as Slurm's data_t keeps unset strings.

    Written through PyYAML's binding to libyaml, the emitter Slurm itself
    uses, so quoting and escaping (a tab, a newline, a leading dash, "null"
    as a name) are libyaml's own: the document reads back as it was meant.
    Imported here, not at the top: only --yaml pays for it."""
    import yaml

    def scalar(tag: str, value: str):
        return yaml.ScalarEvent(None, _TAG + tag, (False, False), value)

    def node(v: Any):
        if isinstance(v, dict):
            yield yaml.MappingStartEvent(None, _TAG + "map", False, flow_style=not v or None)
            for k, x in v.items():
                yield scalar("str", str(k))
                yield from node(x)
            yield yaml.MappingEndEvent()
        elif isinstance(v, list):
            yield yaml.SequenceStartEvent(None, _TAG + "seq", False, flow_style=not v or None)
            for x in v:
                yield from node(x)
            yield yaml.SequenceEndEvent()
        elif v is None or v == "":
            yield scalar("null", "null")
        elif isinstance(v, bool):
            yield scalar("bool", "true" if v else "false")
        elif isinstance(v, int):
            yield scalar("int", str(v))
        elif isinstance(v, float):
            yield scalar("float", f"{v:f}")
        else:
            yield scalar("str", str(v))

    def events():
        yield yaml.StreamStartEvent()
        yield yaml.DocumentStartEvent(explicit=True, version=(1, 1))
        yield from node(obj)
        yield yaml.DocumentEndEvent(explicit=True)
        yield yaml.StreamEndEvent()

    dumper = getattr(yaml, "CDumper", yaml.Dumper)
    return yaml.emit(events(), Dumper=dumper, allow_unicode=True)

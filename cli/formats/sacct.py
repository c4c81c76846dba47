"""sacct's lines: --format's fields with their widths, -l and -b, -p/-P, the
job, batch, extern and numbered step lines, and the usage a step gathered;
from Slurm 22.05's src/sacct/print.c (print_fields) and sacct.c
(the default and long field lists).
"""
from __future__ import annotations

TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Iterator, Sequence

from lingjun import slurm
from cli.formats.fields import FormatError
from cli.formats.units import format_cpu_time, format_mem_mb, format_rss
from cli.formats.jobs import step_order
if TYPE_CHECKING:     # hints only: the commands read our messages or protobuf's alike
    from lingjun.v1 import api_pb2


def _sacct_job_exit(job) -> str:
    """The allocation row's ExitCode: Slurm's accounting keeps the script's exit
    status but not the signal it sent itself when it cancelled or timed the job
    out (golden sacct_cancelled_running / sacct_timeout: job 0:0, batch 0:15),
    while scontrol still shows 0:15."""
    if job.state in ("CANCELLED", "TIMEOUT") and not job.exit_code:
        return slurm.format_exit_code(0, 0)
    return slurm.format_exit_code(job.exit_code, job.exit_signal)


SACCT_DEFAULT_FIELDS = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
SACCT_BRIEF_FIELDS = "JobID,State,ExitCode"
# name -> default width; negative = left-justified (sacct's fields[] table)
SACCT_WIDTHS = {
    "account": 10, "alloccpus": 10, "allocnodes": 10, "alloctres": -10, "cluster": 10,
    "comment": 14, "cputime": 10, "cputimeraw": 10, "derivedexitcode": 15, "elapsed": 10,
    "elapsedraw": 10, "eligible": 19, "end": 19, "exitcode": 8, "gid": 6, "group": 9,
    "jobid": -12, "jobidraw": -12, "jobname": 10, "maxrss": 10, "maxvmsize": 10,
    "ncpus": 10, "nnodes": 8, "nodelist": -15, "ntasks": 8, "partition": 10,
    "priority": 10, "qos": 10, "reason": 20, "reqcpus": 8, "reqmem": 10, "reqnodes": 8,
    "reqtres": -10, "restarts": 8, "start": 19, "state": 10, "submit": 19,
    "submitline": -20, "timelimit": 10, "timelimitraw": 10, "uid": 6, "user": 9,
    "workdir": -20, "stdout": -20, "stderr": -20, "stdin": -20, "batchhost": 10,
    "flags": 6, "suspended": 10, "totalcpu": 10, "usercpu": 10, "systemcpu": 10,
    "planned": 10, "reserved": 10, "averss": 10, "maxrssnode": 10, "maxrsstask": 10,
    "avecpu": 10, "mincpu": 10, "reqcpufreq": 13,
}
SACCT_NAMES = {
    "account": "Account", "alloccpus": "AllocCPUS", "allocnodes": "AllocNodes",
    "alloctres": "AllocTRES", "cluster": "Cluster", "comment": "Comment",
    "cputime": "CPUTime", "cputimeraw": "CPUTimeRAW", "derivedexitcode": "DerivedExitCode",
    "elapsed": "Elapsed", "elapsedraw": "ElapsedRaw", "eligible": "Eligible", "end": "End",
    "exitcode": "ExitCode", "gid": "GID", "group": "Group", "jobid": "JobID",
    "jobidraw": "JobIDRaw", "jobname": "JobName", "maxrss": "MaxRSS", "maxvmsize": "MaxVMSize",
    "ncpus": "NCPUS", "nnodes": "NNodes", "nodelist": "NodeList", "ntasks": "NTasks",
    "partition": "Partition", "priority": "Priority", "qos": "QOS", "reason": "Reason",
    "reqcpus": "ReqCPUS", "reqmem": "ReqMem", "reqnodes": "ReqNodes", "reqtres": "ReqTRES",
    "restarts": "Restarts", "start": "Start", "state": "State", "submit": "Submit",
    "submitline": "SubmitLine", "timelimit": "Timelimit", "timelimitraw": "TimelimitRaw",
    "uid": "UID", "user": "User", "workdir": "WorkDir", "stdout": "StdOut", "stderr": "StdErr",
    "stdin": "StdIn", "batchhost": "BatchHost", "flags": "Flags", "suspended": "Suspended",
    "totalcpu": "TotalCPU", "usercpu": "UserCPU", "systemcpu": "SystemCPU",
    "planned": "Planned", "reserved": "Reserved", "averss": "AveRSS",
    "maxrssnode": "MaxRSSNode", "maxrsstask": "MaxRSSTask", "avecpu": "AveCPU",
    "mincpu": "MinCPU", "reqcpufreq": "ReqCPUFreq",
}

# The step statistics sacct -l shows that no Lingjun agent gathers (virtual
# memory, pages, disk I/O, energy, CPU frequency): each reads as Slurm prints
# an unmeasured figure on a step that has statistics, blank on the allocation.
# name -> (header, default width, kind): kind "size" -> "0", "node" -> the
# step's first node, "task" -> "0", "freq" -> "Unknown", "num" -> "0".
_UNGATHERED = {
    "maxvmsize": ("MaxVMSize", 10, "size"), "maxvmsizenode": ("MaxVMSizeNode", 13, "node"),
    "maxvmsizetask": ("MaxVMSizeTask", 13, "task"), "avevmsize": ("AveVMSize", 10, "size"),
    "maxpages": ("MaxPages", 8, "size"), "maxpagesnode": ("MaxPagesNode", 12, "node"),
    "maxpagestask": ("MaxPagesTask", 12, "task"), "avepages": ("AvePages", 10, "size"),
    "mincpunode": ("MinCPUNode", 10, "node"), "mincputask": ("MinCPUTask", 10, "task"),
    "avecpufreq": ("AveCPUFreq", 12, "num"), "reqcpufreqmin": ("ReqCPUFreqMin", 13, "freq"),
    "reqcpufreqmax": ("ReqCPUFreqMax", 13, "freq"), "reqcpufreqgov": ("ReqCPUFreqGov", 13, "freq"),
    "consumedenergy": ("ConsumedEnergy", 14, "num"),
    "consumedenergyraw": ("ConsumedEnergyRaw", 17, "num"),
    "maxdiskread": ("MaxDiskRead", 13, "size"), "maxdiskreadnode": ("MaxDiskReadNode", 15, "node"),
    "maxdiskreadtask": ("MaxDiskReadTask", 15, "task"), "avediskread": ("AveDiskRead", 14, "size"),
    "maxdiskwrite": ("MaxDiskWrite", 14, "size"),
    "maxdiskwritenode": ("MaxDiskWriteNode", 16, "node"),
    "maxdiskwritetask": ("MaxDiskWriteTask", 16, "task"),
    "avediskwrite": ("AveDiskWrite", 15, "size"),
}
# TRES usage strings, built from what we do gather (CPU time, RSS).
_TRES_USAGE = {
    "tresusageinave": ("TRESUsageInAve", -14), "tresusageinmax": ("TRESUsageInMax", -14),
    "tresusageinmaxnode": ("TRESUsageInMaxNode", -18),
    "tresusageinmaxtask": ("TRESUsageInMaxTask", -18),
    "tresusageinmin": ("TRESUsageInMin", -14), "tresusageinminnode": ("TRESUsageInMinNode", -18),
    "tresusageinmintask": ("TRESUsageInMinTask", -18), "tresusageintot": ("TRESUsageInTot", -14),
    "tresusageoutave": ("TRESUsageOutAve", -15), "tresusageoutmax": ("TRESUsageOutMax", -15),
    "tresusageoutmaxnode": ("TRESUsageOutMaxNode", -19),
    "tresusageoutmaxtask": ("TRESUsageOutMaxTask", -19),
    "tresusageoutmin": ("TRESUsageOutMin", -15),
    "tresusageoutminnode": ("TRESUsageOutMinNode", -19),
    "tresusageoutmintask": ("TRESUsageOutMinTask", -19), "tresusageouttot": ("TRESUsageOutTot", -15),
}

for _k, (_name, _w, _kind) in _UNGATHERED.items():
    SACCT_WIDTHS[_k], SACCT_NAMES[_k] = _w, _name

for _k, (_name, _w) in _TRES_USAGE.items():
    SACCT_WIDTHS[_k], SACCT_NAMES[_k] = _w, _name
# sacct -l (LONG_FIELDS of Slurm 22.05's sacct.h), abbreviations resolved.
SACCT_LONG_FIELDS = (
    "JobID,JobIDRaw,JobName,Partition,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,"
    "MaxRSS,MaxRSSNode,MaxRSSTask,AveRSS,MaxPages,MaxPagesNode,MaxPagesTask,AvePages,"
    "MinCPU,MinCPUNode,MinCPUTask,AveCPU,NTasks,AllocCPUS,Elapsed,State,ExitCode,"
    "AveCPUFreq,ReqCPUFreqMin,ReqCPUFreqMax,ReqCPUFreqGov,ReqMem,ConsumedEnergy,"
    "MaxDiskRead,MaxDiskReadNode,MaxDiskReadTask,AveDiskRead,MaxDiskWrite,"
    "MaxDiskWriteNode,MaxDiskWriteTask,AveDiskWrite,ReqTRES,AllocTRES,TRESUsageInAve,"
    "TRESUsageInMax,TRESUsageInMaxNode,TRESUsageInMaxTask,TRESUsageInMin,"
    "TRESUsageInMinNode,TRESUsageInMinTask,TRESUsageInTot,TRESUsageOutMax,"
    "TRESUsageOutMaxNode,TRESUsageOutMaxTask,TRESUsageOutAve,TRESUsageOutTot")


def _sacct_key(name: str) -> str | None:
    """A field name as sacct matches it: exactly, else as the start of a field
    name (sacct compares only as many letters as given: "jobn" is JobName),
    the first in alphabetical order winning, as in sacct's fields[] table."""
    key = name.lower()
    if key in SACCT_WIDTHS:
        return key
    for cand in sorted(SACCT_WIDTHS):
        if key and cand.startswith(key):
            return cand
    return None


def parse_sacct_fields(spec: str) -> list[tuple[str, int]]:
    """"JobID,JobName%30" -> [("jobid", -12), ("jobname", 30)]. FormatError when unknown."""
    out = []
    for token in (t.strip() for t in spec.split(",") if t.strip()):
        name, _, width = token.partition("%")
        key = _sacct_key(name)
        if key is None:
            raise FormatError(f'Invalid field requested: "{name}"')
        w = SACCT_WIDTHS[key]
        if width:
            try:
                n = int(width)
            except ValueError:
                raise FormatError(f'Invalid field requested: "{token}"') from None
            w = -n if w < 0 else n
        out.append((key, w))
    return out


def _sacct_state(state: str, cancelled_by: str) -> str:
    if state == slurm.CANCELLED and cancelled_by:
        return f"CANCELLED by {cancelled_by}"
    return state


def _sacct_start(job: api_pb2.JobInfo) -> str:
    """Start as sacct shows it: "Unknown" while the job may still start, "None"
    once it ended without ever starting (cancelled while pending: the controller
    records it started and ended then, as slurmctld does, but Slurm's
    accounting shows no start), else when it started."""
    if job.state in slurm.FINISHED_STATES and not job.nodes:
        return "None"
    return slurm.format_timestamp(job.start_time)


def _run_submit_time(job: api_pb2.JobInfo) -> int:
    """A requeued (or restarted) job's run is submitted again when the run
    before it ended, as in Slurm's accounting; the first run at submission."""
    return job.attempts[-1].end_time if job.attempts else job.submit_time


def _elapsed(start: int, end: int, state: str, now: int) -> int:
    if not start:
        return 0
    if end:
        return max(0, end - start)
    if state in (slurm.RUNNING, slurm.COMPLETING):
        return max(0, now - start)
    return 0


_STAT_KEYS = ("maxrss", "averss", "maxrssnode", "maxrsstask", "avecpu", "mincpu",
              *_UNGATHERED, *_TRES_USAGE)


def _step_usage(st: api_pb2.StepInfo, el: int) -> dict[str, str]:
    """The usage columns of a step row. A step that ran has statistics (0 is
    printed as "0"); one that never started has none (blank), as in Slurm."""
    if not st.start_time:
        return {k: "" for k in _STAT_KEYS}
    total = st.user_cpu_ms + st.system_cpu_ms
    per_task = total // max(1, st.num_tasks)
    first = slurm.expand_hostlist(st.nodes)[0] if st.nodes else ""
    node = st.max_rss_node or first
    cpu = slurm.format_duration(per_task // 1000)
    out = {
        "maxrss": format_rss(st.max_rss_kb), "averss": format_rss(st.ave_rss_kb),
        "maxrssnode": node, "maxrsstask": str(st.max_rss_task), "avecpu": cpu, "mincpu": cpu,
    }
    for key, (_, _, kind) in _UNGATHERED.items():
        out[key] = {"size": "0", "node": first, "task": "0", "freq": "Unknown",
                    "num": "0"}[kind]

    # GPU usage the agent sampled through NVML (Slurm 24's gres/gpumem and
    # gres/gpuutil TRES), on a step that held GPUs
    gpu = st.gpus > 0

    def tres_in(cpu_text: str, mem: str, gpumem_kb: int = 0, gpuutil: int = 0) -> str:
        g = f"gres/gpumem={format_rss(gpumem_kb)},gres/gpuutil={gpuutil}," if gpu else ""
        return f"cpu={cpu_text},energy=0,fs/disk=0,{g}mem={mem},pages=0,vmem=0"

    def same(text: str) -> str:
        names = ("cpu", "energy", "fs/disk", *(("gres/gpumem", "gres/gpuutil") if gpu else ()),
                 "mem", "pages", "vmem")
        return ",".join(f"{t}={text}" for t in names)
    out.update({
        "tresusageinave": tres_in(cpu, format_rss(st.ave_rss_kb), st.gpu_mem_ave_kb,
                                  st.gpu_util_ave),
        "tresusageinmax": tres_in(cpu, format_rss(st.max_rss_kb), st.gpu_mem_max_kb,
                                  st.gpu_util_max),
        "tresusageinmaxnode": same(node), "tresusageinmaxtask": same(str(st.max_rss_task)),
        "tresusageinmin": tres_in(cpu, format_rss(st.ave_rss_kb), st.gpu_mem_ave_kb,
                                  st.gpu_util_ave),
        "tresusageinminnode": same(first), "tresusageinmintask": same("0"),
        "tresusageintot": tres_in(slurm.format_duration(total // 1000),
                                  format_rss(st.ave_rss_kb * max(1, st.num_tasks)),
                                  st.gpu_mem_ave_kb, st.gpu_util_ave),
        "tresusageoutave": "energy=0,fs/disk=0", "tresusageoutmax": "energy=0,fs/disk=0",
        "tresusageoutmaxnode": f"energy={first},fs/disk={first}",
        "tresusageoutmaxtask": "energy=0,fs/disk=0", "tresusageoutmin": "energy=0,fs/disk=0",
        "tresusageoutminnode": f"energy={first},fs/disk={first}",
        "tresusageoutmintask": "energy=0,fs/disk=0", "tresusageouttot": "energy=0,fs/disk=0",
    })
    return out


def sacct_job_id(job: api_pb2.JobInfo) -> str:
    """sacct's JobID: "12" plain, "12_3" one array task, "12_[1-3]" the tasks that
    never started (sacct shows no %N throttle there, golden sacct_array_cancelled_task)."""
    if not job.array_job_id:
        return str(job.job_id)
    if job.array_task_str:
        return f"{job.array_job_id}_[{job.array_task_str.partition('%')[0]}]"
    return f"{job.array_job_id}_{job.array_task_id}"


def fold_unstarted_array_tasks(jobs: Sequence[api_pb2.JobInfo]) -> list[api_pb2.JobInfo]:
    """Tasks split off an array only to be cancelled before they started fold back
    into the array's never-started row, as in Slurm's accounting: after
    "scancel 13_2" and then "scancel 13", sacct shows one row 13_[1-3]."""
    metas = {j.job_id: j for j in jobs if j.array_job_id and j.array_task_str}
    folded: dict[int, set[int]] = {}
    out = []
    for j in jobs:
        if (j.array_job_id in metas and j.job_id != j.array_job_id and j.array_task_id >= 0
                and not j.nodes):
            folded.setdefault(j.array_job_id, set()).add(j.array_task_id)
            continue
        out.append(j)
    for array_id, tasks in folded.items():
        meta = metas[array_id]
        merged = type(meta)()
        merged.CopyFrom(meta)
        pending, _, throttle = meta.array_task_str.partition("%")
        merged.array_task_str = slurm.fold_indices(set(slurm.unfold_indices(pending)) | tasks)
        out[out.index(meta)] = merged
    return out


def sacct_rows(job: api_pb2.JobInfo, allocations_only: bool = False,
               now: int | None = None) -> list[dict[str, str]]:
    """The job's row and, unless -X, one row per step (ID.batch, ID.0, ...)."""
    now = now if now is not None else job.now
    ts = slurm.format_timestamp
    job_elapsed = _elapsed(job.start_time, job.end_time, job.state, now)
    req_mem = slurm.format_size_mb(job.mem_per_node_mb) if job.mem_per_node_mb > 0 else "0"
    base = {
        "account": job.account, "cluster": "", "comment": job.comment,
        "gid": str(job.gid), "group": job.group, "uid": str(job.uid), "user": job.user,
        "partition": job.partition, "priority": str(job.priority), "qos": job.qos,
        "reqcpus": str(job.num_cpus), "reqmem": req_mem, "reqnodes": str(job.num_nodes),
        "restarts": str(job.restarts), "submit": ts(_run_submit_time(job)),
        "eligible": ts(job.eligible_time),
        "timelimit": slurm.format_time_limit(job.time_limit_min, "scontrol"),
        "timelimitraw": "UNLIMITED" if job.time_limit_min < 0 else str(job.time_limit_min),
        "workdir": job.work_dir, "stdout": job.stdout_path,
        "stderr": job.stderr_path or job.stdout_path, "stdin": job.stdin_path or "/dev/null",
        "batchhost": job.batch_host, "reason": job.reason or slurm.REASON_NONE,
        "submitline": "", "flags": "", "suspended": "00:00:00", "planned": "",
        "reserved": "",
    }
    alloc_cpus = job.num_cpus if job.start_time or job.nodes else 0
    cpus = alloc_cpus or (job.num_cpus if job.state != slurm.PENDING else 0)
    row = dict(base)
    shown_id = sacct_job_id(job)
    row.update({
        "jobid": shown_id, "jobidraw": str(job.job_id), "jobname": job.name,
        "state": _sacct_state(job.state, job.cancelled_by),
        "exitcode": _sacct_job_exit(job),
        "derivedexitcode": slurm.format_exit_code(job.derived_exit_code, job.derived_exit_signal),
        "nodelist": job.nodes or "None assigned",
        "nnodes": str(job.num_nodes), "allocnodes": str(job.num_nodes if job.nodes else 0),
        "ntasks": "", "alloccpus": str(cpus), "ncpus": str(cpus),
        "alloctres": sacct_tres(cpus, _job_mem_mb(job, cpus), job.num_nodes, job_gpus(job),
                                job.gpu_type) if job.nodes else "",
        "reqtres": sacct_tres(job.num_cpus, _job_mem_mb(job, job.num_cpus), job.num_nodes,
                              job_gpus(job), job.gpu_type),
        "elapsed": slurm.format_duration(job_elapsed), "elapsedraw": str(job_elapsed),
        "cputime": slurm.format_duration(job_elapsed * cpus),
        "cputimeraw": str(job_elapsed * cpus),
        "start": _sacct_start(job), "end": ts(job.end_time),
        "maxrss": "", "maxvmsize": "",
        # the allocation's CPU time is what its steps used
        "totalcpu": format_cpu_time(sum(s.user_cpu_ms + s.system_cpu_ms for s in job.steps)),
        "usercpu": format_cpu_time(sum(s.user_cpu_ms for s in job.steps)),
        "systemcpu": format_cpu_time(sum(s.system_cpu_ms for s in job.steps)),
        "averss": "", "maxrssnode": "", "maxrsstask": "", "avecpu": "", "mincpu": "",
        "reqcpufreq": "Unknown",
    })
    rows = [row]
    if allocations_only:
        return rows
    for st in step_order(job.steps):
        el = _elapsed(st.start_time, st.end_time, st.state, now)
        r = dict(base)
        nn = len(slurm.expand_hostlist(st.nodes)) if st.nodes else 0
        r.update({
            "jobid": f"{shown_id}.{st.step_id}", "jobidraw": f"{job.job_id}.{st.step_id}",
            "jobname": st.name, "state": st.state,
            "exitcode": slurm.format_exit_code(st.exit_code, st.exit_signal),
            "derivedexitcode": "", "nodelist": st.nodes, "nnodes": str(nn),
            "allocnodes": str(nn), "ntasks": str(st.num_tasks), "alloccpus": str(st.num_cpus),
            "ncpus": str(st.num_cpus), "reqtres": "",
            "alloctres": sacct_tres(
                st.num_cpus, st.mem_mb or (max(job.mem_per_node_mb, 0) * nn), nn, st.gpus,
                job.gpu_type, billing=False) if nn else "",
            "elapsed": slurm.format_duration(el), "elapsedraw": str(el),
            "cputime": slurm.format_duration(el * st.num_cpus), "cputimeraw": str(el * st.num_cpus),
            "start": ts(st.start_time), "end": ts(st.end_time),
            "maxvmsize": "", "partition": "", "user": "", "uid": "", "group": "", "gid": "",
            # a step is submitted, eligible and started at once, as Slurm records it
            "submit": ts(st.start_time), "eligible": ts(st.start_time),
            "timelimit": "", "timelimitraw": "", "qos": "",
            "priority": "", "reqmem": req_mem, "reason": "", "restarts": "", "workdir": "",
            "stdout": "", "stderr": "", "stdin": "", "comment": "", "batchhost": "",
            "totalcpu": format_cpu_time(st.user_cpu_ms + st.system_cpu_ms),
            "usercpu": format_cpu_time(st.user_cpu_ms),
            "systemcpu": format_cpu_time(st.system_cpu_ms), "reqcpufreq": "Unknown",
        })
        r.update(_step_usage(st, el))
        rows.append(r)
    return rows


def sacct_tres(cpus: int, mem_mb: int, nodes: int, gpus: int = 0, gpu_type: str = "",
               billing: bool = True) -> str:
    """sacct's AllocTRES/ReqTRES: Slurm's TRES names in its order (by name),
    the typed GPU count before the plain one, as real sacct prints them:

    >>> sacct_tres(8, 49152, 1, gpus=1, gpu_type="a100")
    'billing=8,cpu=8,gres/gpu:a100=1,gres/gpu=1,mem=48G,node=1'
    >>> sacct_tres(1, 100, 1, billing=False)
    'cpu=1,mem=100M,node=1'

    ``mem_mb`` is the memory of all nodes together (0: none to show);
    steps carry no billing."""
    parts = [f"billing={cpus}"] if billing else []
    parts.append(f"cpu={cpus}")
    if gpus > 0:
        if gpu_type:
            parts.append(f"gres/gpu:{gpu_type}={gpus}")
        parts.append(f"gres/gpu={gpus}")
    if mem_mb > 0:
        parts.append(f"mem={format_mem_mb(mem_mb)}")
    parts.append(f"node={max(1, nodes)}")
    return ",".join(parts)


def job_gpus(job: api_pb2.JobInfo) -> int:
    """The GPUs a job holds (or asks for) on all its nodes together."""
    held = sum(len(a.gpu_ids) for a in job.node_allocs)
    return held or job.gpus or job.gpus_per_node * max(1, job.num_nodes)


def _job_mem_mb(job: api_pb2.JobInfo, cpus: int) -> int:
    if job.mem_per_cpu_mb:
        return job.mem_per_cpu_mb * cpus
    return job.mem_per_node_mb * max(1, job.num_nodes) if job.mem_per_node_mb > 0 else 0


def _sacct_cell(value: str, width: int) -> str:
    """print_fields_str: a value too wide is cut to width-1 and marked with '+'."""
    w = abs(width)
    if len(value) > w:
        value = value[:w - 1] + "+"
    return value.ljust(w) if width < 0 else value.rjust(w)


def sacct_table(jobs: Sequence[api_pb2.JobInfo], fields: str = SACCT_DEFAULT_FIELDS,
                header: bool = True, parsable: str = "", allocations_only: bool = False,
                now: int | None = None) -> str:
    """sacct. parsable: "" (columns), "parsable" (trailing '|'), "parsable2" (none)."""
    return "".join(sacct_lines(jobs, fields, header, parsable, allocations_only, now))


def sacct_lines(jobs: Sequence[api_pb2.JobInfo], fields: str = SACCT_DEFAULT_FIELDS,
                header: bool = True, parsable: str = "", allocations_only: bool = False,
                now: int | None = None) -> Iterator[str]:
    """sacct_table one line at a time (each ending in a newline), so that a
    million jobs are printed without holding every row's text at once."""
    cols = parse_sacct_fields(fields)
    end = "|" if parsable == "parsable" else ""
    if header:
        if parsable:
            yield "|".join(SACCT_NAMES[k] for k, _ in cols) + end + "\n"
        else:
            yield "".join(_sacct_cell(SACCT_NAMES[k], w) + " " for k, w in cols) + "\n"
            yield "".join("-" * abs(w) + " " for _, w in cols) + "\n"
    # an array's rows together, in task order (golden sacct_array: 12_1, 12_2, 12_3,
    # though 12_3 kept the array's id 12 and the others got later ids)
    for job in sorted(fold_unstarted_array_tasks(jobs),
                      key=lambda j: (j.array_job_id or j.job_id, j.array_task_id)):
        for r in sacct_rows(job, allocations_only, now):
            if parsable:
                yield "|".join(r.get(k, "") for k, _ in cols) + end + "\n"
            else:
                yield "".join(_sacct_cell(r.get(k, ""), w) + " " for k, w in cols) + "\n"

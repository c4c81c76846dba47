"""scontrol show job: the "Key=Value" lines of one job, its allocation lines
with -d, and the one-liner (-o); from Slurm 22.05's src/api/job_info.c
(slurm_sprint_job_info), token for token and in its order.
"""
from __future__ import annotations

TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Sequence

from lingjun import slurm
from cli.formats.jobs import (array_task_field, gres_gpu, gres_shared, job_used_seconds,
                              min_cpus, tres_per_node)
if TYPE_CHECKING:     # hints only: the commands read our messages or protobuf's alike
    from lingjun.v1 import api_pb2


def _null(s: str) -> str:
    return s if s else "(null)"


def _array_tokens(job: api_pb2.JobInfo) -> list[str]:
    """ArrayJobId=12 ArrayTaskId=1-3 [ArrayTaskThrottle=2] (golden scontrol_show_job_array)."""
    if not job.array_job_id:
        return []
    out = [f"ArrayJobId={job.array_job_id}", f"ArrayTaskId={array_task_field(job)}"]
    if job.array_max_running and job.array_task_str:
        out.append(f"ArrayTaskThrottle={job.array_max_running}")
    return out


def scontrol_job_tokens(job: api_pb2.JobInfo, default_mem_mb: int = 0,
                        now: int | None = None) -> list[list[str]]:
    """scontrol show job as lines of Name=value tokens (the one-liner joins them all).

    ``default_mem_mb`` is the memory a pending job without --mem would get on
    each node (Slurm counts it in TRES while the job waits).
    """
    state = job.state or slurm.PENDING
    pending = state == slurm.PENDING
    now = now if now is not None else job.now
    lines = (_identity_lines(job, state, job_used_seconds(job, now))
             + _time_lines(job, state, pending) + _node_lines(job, pending)
             + _resource_lines(job, state, pending, default_mem_mb))
    if job.comment:
        lines.append([f"Comment={job.comment}"])
    return lines + _io_lines(job)


def _identity_lines(job: api_pb2.JobInfo, state: str, used: int) -> list[list[str]]:
    """JobId= to TimeMin=: who, what state and how long."""
    return [
        [f"JobId={job.job_id}", *_array_tokens(job), f"JobName={job.name}"],
        [f"UserId={job.user}({job.uid})", f"GroupId={job.group}({job.gid})", "MCS_label=N/A"],
        [f"Priority={job.priority}", f"Nice={job.nice}", f"Account={_null(job.account)}",
         f"QOS={_null(job.qos)}"],
        # Slurm writes white space in a reason as "_" so the line stays Name=value tokens.
        [f"JobState={state}", f"Reason={(job.reason or slurm.REASON_NONE).replace(' ', '_')}",
         f"Dependency={job.dependency or '(null)'}"],
        [f"Requeue={int(job.requeue)}", f"Restarts={job.restarts}", f"BatchFlag={int(job.batch)}",
         "Reboot=0", f"ExitCode={slurm.format_exit_code(job.exit_code, job.exit_signal)}"],
        [f"RunTime={slurm.format_duration(used)}",
         f"TimeLimit={slurm.format_time_limit(job.time_limit_min, 'scontrol')}", "TimeMin=N/A"],
    ]


def _time_lines(job: api_pb2.JobInfo, state: str, pending: bool) -> list[list[str]]:
    """SubmitTime= to Scheduler=: the job's moments."""
    ts = slurm.format_timestamp
    start, end = _start_end(job, state, pending)
    sched_eval = job.start_time or job.eligible_time or job.submit_time
    return [
        [f"SubmitTime={ts(job.submit_time)}", f"EligibleTime={ts(job.eligible_time)}"],
        [f"AccrueTime={ts(job.eligible_time)}"],
        [f"StartTime={ts(start)}", f"EndTime={ts(end)}",
         f"Deadline={ts(job.deadline) if job.deadline else 'N/A'}"],
        # Slurm prints this line only for a job that may be preempted (preemptable_time
        # set); we print it too for one that was, so its PreemptTime stays visible.
        *([[f"PreemptEligibleTime={ts(job.preempt_eligible_time)}",
            f"PreemptTime={ts(job.preempt_time) if job.preempt_time else 'None'}"]]
          if job.preempt_eligible_time or job.preempt_time else []),
        ["SuspendTime=None", "SecsPreSuspend=0", f"LastSchedEval={ts(sched_eval)}",
         "Scheduler=Main"],
    ]


def _node_lines(job: api_pb2.JobInfo, pending: bool) -> list[list[str]]:
    """Partition= to BatchHost=: where it was asked to run and where it runs."""
    sid = getattr(job, "alloc_sid", 0)
    lines = [
        [f"Partition={job.partition}", f"AllocNode:Sid={job.submit_host or 'localhost'}:{sid}"],
        [f"ReqNodeList={_null(job.req_nodes)}", f"ExcNodeList={_null(job.exc_nodes)}"],
        [f"NodeList={job.nodes}",
         *([f"SchedNodeList={job.sched_nodes}"] if pending and job.sched_nodes else [])],
    ]
    started = job.start_time if not pending else 0
    if job.batch_host and started:
        lines.append([f"BatchHost={job.batch_host}"])
    return lines


def _resource_lines(job: api_pb2.JobInfo, state: str, pending: bool,
                    default_mem_mb: int) -> list[list[str]]:
    """NumNodes= to WorkDir=: what it asked for and holds."""
    nodes_txt = str(job.num_nodes)
    if pending and job.max_nodes:
        nodes_txt = f"{job.num_nodes}-{job.max_nodes}"
    never_ran = state == slurm.CANCELLED and not job.nodes
    ntasks = "N/A" if never_ran else str(job.num_tasks or 1)
    cpus = job.num_cpus or 1
    mem_node = job.mem_per_node_mb if job.mem_per_node_mb > 0 else 0
    tres = _tres(job, cpus, mem_node or (default_mem_mb if pending or never_ran else 0))
    return [
        [f"NumNodes={nodes_txt}", f"NumCPUs={cpus}", f"NumTasks={ntasks}",
         f"CPUs/Task={job.cpus_per_task or 1}", "ReqB:S:C:T=0:0:*:*"],
        [f"TRES={','.join(tres)}"],
        ["Socks/Node=*", f"NtasksPerN:B:S:C={job.ntasks_per_node}:0:*:*", "CoreSpec=*"],
        [f"MinCPUsNode={min_cpus(job)}",
         f"MinMemoryCPU={slurm.format_size_mb(job.mem_per_cpu_mb)}" if job.mem_per_cpu_mb else
         f"MinMemoryNode={slurm.format_size_mb(mem_node) if mem_node else 0}",
         "MinTmpDiskNode=0"],
        [f"Features={_null(job.features)}", "DelayBoot=00:00:00"],
        [f"OverSubscribe={'NO' if job.exclusive else 'OK'}", "Contiguous=0",
         "Licenses=(null)", "Network=(null)"],
        [f"Command={_null(job.command)}"],
        [f"WorkDir={job.work_dir}"],
    ]


def _start_end(job: api_pb2.JobInfo, state: str, pending: bool) -> tuple[int, int]:
    """StartTime and EndTime: a running job ends at its time limit; a pending
    one shows backfill's expected start, as Slurm does."""
    end = job.end_time
    if not end and state == slurm.RUNNING and job.start_time and job.time_limit_min > 0:
        end = job.start_time + job.time_limit_min * 60
    start = job.start_time
    if pending and job.sched_start_time:      # backfill's expected start, as Slurm shows it
        start = job.sched_start_time
        end = start + job.time_limit_min * 60 if job.time_limit_min > 0 else 0
    return start, end


def _tres(job: api_pb2.JobInfo, cpus: int, mem_mb: int) -> list[str]:
    """TRES=: cpu, mem (per CPU, else per node times nodes), node, billing, GPUs, shards/MPS."""
    tres = [f"cpu={cpus}"]
    if job.mem_per_cpu_mb:
        tres.append(f"mem={job.mem_per_cpu_mb * cpus}M")
    elif mem_mb:
        tres.append(f"mem={mem_mb * max(1, job.num_nodes)}M")
    tres.append(f"node={max(1, job.num_nodes)}")
    tres.append(f"billing={cpus}")
    if job.gpus_per_node or job.gpus:
        tres.append(f"gres/gpu={job.gpus or job.gpus_per_node * max(1, job.num_nodes)}")
    shared_kind, shared_n = gres_shared(job)
    if shared_n:
        tres.append(f"gres/{shared_kind}={shared_n * max(1, job.num_nodes)}")
    return tres


def _io_lines(job: api_pb2.JobInfo) -> list[list[str]]:
    """The last lines: the job's files, then TresPerNode/TresPerJob and mail before Power=."""
    lines = [
        [f"StdErr={job.stderr_path or job.stdout_path}"],
        [f"StdIn={job.stdin_path or '/dev/null'}"],
        [f"StdOut={job.stdout_path}"],
    ]
    if job.gpus_per_node or gres_shared(job)[1]:
        lines.append([f"TresPerNode={tres_per_node(job)}"])
    elif job.gpus:
        lines.append([f"TresPerJob={gres_gpu(job.gpus, job.gpu_type)}"])
    if job.mail_type and job.mail_user:
        lines.append([f"MailUser={job.mail_user}", f"MailType={job.mail_type}"])
    return lines + [["Power="]]


def _gres_idx(gpu_ids, gpu_type: str, shared: tuple[str, int] = ("", 0)) -> str:
    """Slurm's per-node GRES detail: "gpu:2(IDX:0-1)", "gpu:a100:1(IDX:3)"; for a
    shard or MPS job its count on the GPU it shares, "shard:2(IDX:0)"; "" for none."""
    if not gpu_ids:
        return ""
    if shared[1]:
        return f"{shared[0]}:{shared[1]}(IDX:{slurm.fold_indices(gpu_ids)})"
    kind = f"gpu:{gpu_type}" if gpu_type else "gpu"
    return f"{kind}:{len(gpu_ids)}(IDX:{slurm.fold_indices(gpu_ids)})"


def job_alloc_lines(job: api_pb2.JobInfo) -> list[list[str]]:
    """scontrol -d's allocation detail: JOB_GRES=, then one "  Nodes=... CPU_IDs=...
    Mem=... GRES=..." line per run of nodes with the same allocation (Slurm groups
    them). CPU_IDs=N/A: CPUs are counted, not yet bound to ids."""
    total: dict[str, int] = {}
    shared = gres_shared(job)
    for a in job.node_allocs:
        if a.gpu_ids and shared[1]:
            total[shared[0]] = total.get(shared[0], 0) + shared[1]
        elif a.gpu_ids:
            kind = f"gpu:{a.gpu_type}" if a.gpu_type else "gpu"
            total[kind] = total.get(kind, 0) + len(a.gpu_ids)
    lines = [[f"JOB_GRES={','.join(f'{k}:{n}' for k, n in total.items()) or '(null)'}"]]
    groups: list[tuple[tuple, list[str]]] = []
    for a in job.node_allocs:
        key = (a.mem_mb, _gres_idx(a.gpu_ids, a.gpu_type, shared))
        if groups and groups[-1][0] == key:
            groups[-1][1].append(a.node)
        else:
            groups.append((key, [a.node]))
    for (mem, gres), nodes in groups:
        lines.append([f"  Nodes={slurm.compress_hostlist(nodes)}", "CPU_IDs=N/A",
                      f"Mem={mem}", f"GRES={gres}"])
    return lines


def scontrol_show_job(jobs: Sequence[api_pb2.JobInfo], oneliner: bool = False,
                      default_mem_mb: int = 0, details: bool = False) -> str:
    out = []
    for job in jobs:
        lines = scontrol_job_tokens(job, default_mem_mb)
        if details and job.node_allocs:
            at = next(i for i, line in enumerate(lines) if line[0].startswith("Socks/Node="))
            lines[at + 1:at + 1] = job_alloc_lines(job)
        if oneliner:
            out.append(" ".join(t for line in lines for t in line) + " \n")
        else:
            out.append("\n".join("   " * (i > 0) + " ".join(line) for i, line in enumerate(lines))
                       + "\n   \n\n")
    return "".join(out)

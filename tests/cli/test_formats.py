"""Formatted command output against what real Slurm 22.05 printed.

Each case rebuilds, as api_pb2 messages, the cluster the golden capture saw
(4 nodes node[1-4] with 2 CPUs, partition debug, the jobs of capture.sh) and
compares our text with Slurm's byte for byte. The pending arrays 12 and 13
are part of the busy queue; after they were cancelled (the "after
completion" capture) their rows are dropped, tests/cli/test_array_display.py
covers what became of them.
"""
from __future__ import annotations

import calendar
import os
import time

import pytest

from cli.formats.fields import FormatError
from cli.formats.units import squeue_long_header
from cli.formats import sacct as sacct_format, show_cluster, show_job, show_node
from cli.formats import sinfo as sinfo_format, squeue as squeue_format
from tests.cli.golden_files import load, without_arrays
from lingjun.v1 import api_pb2


@pytest.fixture(autouse=True)
def utc():
    """The golden capture ran in UTC."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


def at(hms: str) -> int:
    """'10:04:03' -> Unix seconds on the capture day."""
    return calendar.timegm(time.strptime(f"2026-12-02T{hms}", "%Y-%m-%dT%H:%M:%S"))


NOW_BUSY = at("10:04:09")
PRIO = 4294901760  # job N gets PRIO - N, as priority/basic did in the capture


def job(job_id: int, name: str = "wrap", state: str = "PENDING", reason: str = "None", *,
        nodes: str = "", num_nodes: int = 1, cpus: int = 1, limit: int = -1,
        submit: str = "10:04:03", start: str = "", end: str = "", now: int = NOW_BUSY,
        priority: int | None = None, **kw) -> api_pb2.JobInfo:
    wd = "/tmp/anchor-golden"
    out = kw.pop("stdout_path", f"{wd}/slurm-{job_id}.out")
    fields = dict(
        job_id=job_id, name=name, user="root", uid=0, gid=0, group="root", state=state,
        reason=reason, partition="debug", num_nodes=num_nodes, num_cpus=cpus,
        num_tasks=kw.pop("num_tasks", cpus), cpus_per_task=1, time_limit_min=limit,
        submit_time=at(submit), eligible_time=kw.pop("eligible", at(submit)),
        start_time=at(start) if start else 0, end_time=at(end) if end else 0,
        nodes=nodes, batch_host=nodes.replace("[2-3]", "2") if nodes else "",
        work_dir=wd, stdout_path=out, stderr_path=out, stdin_path="/dev/null",
        priority=PRIO - job_id if priority is None else priority, requeue=True, batch=True,
        account="root", qos="normal", submit_host="localhost", mem_per_node_mb=-1, now=now)
    fields.update(kw)
    return api_pb2.JobInfo(**fields)


def busy_jobs() -> list[api_pb2.JobInfo]:
    """squeue at 10:04:09 in the capture."""
    return [
        job(1, reason="PartitionNodeLimit", num_nodes=5, cpus=5, submit="10:04:02"),
        job(2, reason="PartitionNodeLimit", num_nodes=5, cpus=5),
        job(4, reason="PartitionConfig", num_nodes=5, cpus=9),
        job(5, "tlimit", "RUNNING", nodes="node1", limit=1, start="10:04:03"),
        job(7, "wrap", "RUNNING", nodes="node1", start="10:04:06"),
        job(8, "wrap", "RUNNING", nodes="node2", start="10:04:06"),
        job(9, "golden", "RUNNING", nodes="node[2-3]", num_nodes=2, cpus=2, limit=5,
            start="10:04:06"),
        job(10, "override", "RUNNING", nodes="node3", limit=5, start="10:04:06"),
        job(11, "big", reason="Resources", num_nodes=4, cpus=4, exclusive=True),
        job(14, "dep", reason="Dependency", submit="10:04:04"),
        job(15, "held", reason="JobHeldUser", submit="10:04:04", priority=0),
    ] + array_jobs()


def array_jobs() -> list[api_pb2.JobInfo]:
    """The capture's two pending arrays: 12 (array.sh, --array=1-3) and 13 (arrp)."""
    return [
        job(12, "arr", reason="Priority", submit="10:04:04", array_job_id=12, array_task_id=-1,
            array_task_str="1-3", stdout_path="/tmp/anchor-golden/arr-12_4294967294.out",
            command="/tmp/anchor-golden/array.sh", eligible=at("10:04:06")),
        job(13, "arrp", reason="Priority", submit="10:04:04", array_job_id=13, array_task_id=-1,
            array_task_str="1-3"),
    ]


def node(name: str, idx: int, *, alloc: int = 0, state: str = "IDLE",
         last_busy: str = "", **kw) -> api_pb2.NodeInfo:
    fields = dict(
        name=name, state=state, cpus=2, cpus_alloc=alloc, real_memory_mb=2000,
        alloc_memory_mb=0, free_memory_mb=23800, partitions=["debug"],
        address=f"127.0.0.1:{17000 + idx}", hostname="vm",
        boot_time=calendar.timegm((2026, 12, 2, 8, 10, 40)),
        agent_start_time=calendar.timegm((2026, 12, 2, 8, 22, 26)),
        last_busy_time=at(last_busy) if last_busy else calendar.timegm((2026, 12, 2, 8, 22, 26)),
        cpu_load=0.0, os="Linux 6.18.44-fc-v1045 #1 SMP PREEMPT_DYNAMIC @0", arch="x86_64",
        sockets=1, cores_per_socket=2, threads_per_core=1, version="22.05.8", weight=1)
    fields.update(kw)
    return api_pb2.NodeInfo(**fields)


def idle_nodes() -> list[api_pb2.NodeInfo]:
    return [node(f"node{i}", i) for i in range(1, 5)]


def busy_nodes() -> list[api_pb2.NodeInfo]:
    return [node("node1", 1, alloc=2, state="ALLOCATED", last_busy="10:04:03"),
            node("node2", 2, alloc=2, state="ALLOCATED"),
            node("node3", 3, alloc=2, state="ALLOCATED"),
            node("node4", 4)]


PART = api_pb2.PartitionInfo(name="debug", default=True, state="UP", max_time_min=-1,
                             default_time_min=-1, max_nodes=-1, min_nodes=0,
                             node_names=[f"node{i}" for i in range(1, 5)], total_cpus=8,
                             total_nodes=4, priority_tier=1, total_memory_mb=8000)


# --- squeue ---------------------------------------------------------------------

SQUEUE_CASES = [
    ("squeue_default_empty", lambda: squeue_format.squeue_table([])),
    ("squeue_default_busy", lambda: squeue_format.squeue_table(busy_jobs())),
    ("squeue_o_reason", lambda: squeue_format.squeue_table(
        busy_jobs(), "%.10i %.9P %.8j %.2t %.10M %.6D %R")),
    ("squeue_o_fmt_header", lambda: squeue_format.squeue_table(busy_jobs(), "%i %T %j %N")),
    ("squeue_h_o_fmt", lambda: squeue_format.squeue_table(busy_jobs(), "%i %T %j %N", header=False)),
    ("squeue_long", lambda: squeue_long_header(NOW_BUSY)
     + squeue_format.squeue_table(busy_jobs(), squeue_format.SQUEUE_LONG_FORMAT)),
    ("squeue_O_fields", lambda: squeue_format.squeue_O_table(
        busy_jobs(), "JobID,Name,State,NodeList,NumNodes,NumCPUs,TimeLimit,Reason")),
    ("squeue_O_widths", lambda: squeue_format.squeue_O_table(
        busy_jobs(), "JobID:8,State:12,Name:10,ReasonList:30")),
    ("squeue_states_pending", lambda: squeue_format.squeue_table(
        [j for j in busy_jobs() if j.state == "PENDING"], "%i", header=False)),
    ("squeue_j_T_running", lambda: squeue_format.squeue_table([busy_jobs()[4]], "%T", header=False)),
    ("squeue_j_t_pending_short", lambda: squeue_format.squeue_table(
        [busy_jobs()[9]], "%t", header=False)),
    ("squeue_j_completed", lambda: squeue_format.squeue_table(
        [job(18, "short", reason="Resources", submit="10:04:10")])),
]


@pytest.mark.parametrize("name,render", SQUEUE_CASES, ids=[
    "an empty queue prints only the header",
    "a busy queue lists pending jobs by priority then running jobs",
    "a dotted width right-justifies and the last field is left free",
    "fields without widths are separated by the literal text only",
    "-h drops the header of a custom format",
    "-l adds the date line, long state names and the time limit",
    "-O fields default to 20 columns, left-justified",
    "-O widths after a colon size each column",
    "-t PENDING keeps only pending jobs",
    "%T prints the long state name",
    "%t prints the short state code",
    "a pending job shows its reason in parentheses",
])
def test_squeue_matches_golden(name, render):
    want = load(name).stdout
    got = render()
    assert got == want, f"\nwant:\n{want}\ngot:\n{got}"


def test_squeue_all_states_sorts_by_state_name_then_priority():
    jobs = [job(3, state="COMPLETED", nodes="node1", start="10:04:02", end="10:04:03"),
            job(6, "exit3", state="FAILED", reason="NonZeroExitCode", nodes="node1"),
            job(8, state="CANCELLED", nodes="node2"),
            job(11, "big", state="CANCELLED"),
            job(15, "held", state="CANCELLED", priority=PRIO - 13),
            job(14, "dep", state="CANCELLED", priority=0),
            job(1, reason="PartitionNodeLimit"), job(2), job(4), job(18),
            job(5, state="RUNNING", nodes="node1"), job(7, state="RUNNING", nodes="node1"),
            job(9, state="RUNNING", nodes="node[2-3]"), job(10, state="RUNNING", nodes="node3")]
    want = without_arrays(load("squeue_default_after_completion").stdout)
    assert squeue_format.squeue_table(jobs, "%i %T", header=False) == want


# --- sinfo -------------------------------------------------------------------------

SINFO_CASES = [
    ("sinfo_default_idle", lambda: sinfo_format.sinfo_table(idle_nodes(), [PART])),
    ("sinfo_default_busy", lambda: sinfo_format.sinfo_table(busy_nodes(), [PART])),
    ("sinfo_fmt_idle", lambda: sinfo_format.sinfo_table(idle_nodes(), [PART], "%N %t %c %m", False)),
    ("sinfo_fmt_busy", lambda: sinfo_format.sinfo_table(busy_nodes(), [PART], "%N %t %c %m", False)),
    ("sinfo_Nh_fmt_idle", lambda: sinfo_format.sinfo_table(
        idle_nodes(), [PART], "%N %t %c %m", False, node_oriented=True)),
    ("sinfo_Nh_fmt_busy", lambda: sinfo_format.sinfo_table(
        busy_nodes(), [PART], "%N %t %c %m %O %e %C", False, node_oriented=True)),
    ("sinfo_Nl_idle", lambda: squeue_long_header(at("10:04:02")) + sinfo_format.sinfo_table(
        idle_nodes(), [PART], sinfo_format.SINFO_NODE_LONG_FORMAT, node_oriented=True)),
    ("sinfo_Nl_busy", lambda: squeue_long_header(NOW_BUSY) + sinfo_format.sinfo_table(
        busy_nodes(), [PART], sinfo_format.SINFO_NODE_LONG_FORMAT, node_oriented=True)),
    ("sinfo_summarize", lambda: sinfo_format.sinfo_table(
        idle_nodes(), [PART], sinfo_format.SINFO_SUMMARIZE_FORMAT)),
    ("err_sinfo_bad_partition", lambda: sinfo_format.sinfo_table(
        idle_nodes(), [PART], partitions=["nosuchpart"])),
]


@pytest.mark.parametrize("name,render", SINFO_CASES, ids=[
    "an idle cluster is one row per partition",
    "allocated nodes group apart from idle ones, busiest first",
    "a custom format groups nodes that print the same",
    "a custom format on a busy cluster splits by state",
    "-N prints one row per node",
    "-N with load, free memory and the A/I/O/T CPU counts",
    "-N -l on an idle cluster",
    "-N -l on a busy cluster",
    "-s summarizes nodes as A/I/O/T",
    "an unknown partition prints only the header",
])
def test_sinfo_matches_golden(name, render):
    want = load(name).stdout
    got = render()
    assert got == want, f"\nwant:\n{want}\ngot:\n{got}"


def test_sinfo_drained_node_reads_drain_and_counts_as_other():
    nodes = idle_nodes()
    nodes[3].drain = True
    nodes[3].reason = "bad gpu"
    got = sinfo_format.sinfo_table(nodes, [PART])
    assert got.splitlines()[1:] == [
        "debug*       up   infinite      3   idle node[1-3]",
        "debug*       up   infinite      1  drain node4"]
    assert sinfo_format.sinfo_table(nodes, [PART], sinfo_format.SINFO_SUMMARIZE_FORMAT).splitlines()[1] \
        == "debug*       up   infinite          0/3/1/4 node[1-4]"


# --- scontrol ------------------------------------------------------------------------


def sc_job(j: api_pb2.JobInfo, **kw) -> str:
    return show_job.scontrol_show_job([j], **kw).replace("Sid=localhost:0", "Sid=localhost:1454")


SCONTROL_JOB_CASES = [
    ("scontrol_show_job_running", lambda: sc_job(job(7, "wrap", "RUNNING", nodes="node1",
                                                     start="10:04:06", now=at("10:04:09")))),
    ("scontrol_show_job_oneliner", lambda: sc_job(job(7, "wrap", "RUNNING", nodes="node1",
                                                      start="10:04:06"), oneliner=True)),
    ("scontrol_show_job_directives", lambda: sc_job(job(
        9, "golden", "RUNNING", nodes="node[2-3]", num_nodes=2, cpus=2, limit=5,
        start="10:04:06", command="/tmp/anchor-golden/job.sh",
        stdout_path="/tmp/anchor-golden/golden-9.out"))),
    ("scontrol_show_job_pending", lambda: sc_job(job(
        11, "big", reason="Resources", num_nodes=4, max_nodes=4, cpus=4, exclusive=True,
        start_time=0), default_mem_mb=2000)),
    ("scontrol_show_job_cancelled", lambda: sc_job(job(
        11, "big", "CANCELLED", reason="Resources", num_nodes=4, max_nodes=4, cpus=4,
        exclusive=True, start="10:04:09", end="10:04:09"), default_mem_mb=2000)),
    ("scontrol_show_job_held", lambda: sc_job(job(
        15, "held", reason="JobHeldUser", submit="10:04:04", eligible=0, priority=0),
        default_mem_mb=2000)),
    ("scontrol_show_job_timeout", lambda: sc_job(job(
        5, "tlimit", "TIMEOUT", reason="TimeLimit", nodes="node1", limit=1, start="10:04:03",
        end="10:05:25", exit_signal=15))),
    ("scontrol_show_job_exit3", lambda: sc_job(job(
        6, "exit3", "FAILED", reason="NonZeroExitCode", nodes="node1", limit=365 * 1440,
        start="10:04:03", end="10:04:03", exit_code=3))),
]


@pytest.mark.parametrize("name,render", SCONTROL_JOB_CASES, ids=[
    "a running job shows its node, batch host and run time",
    "-o prints the same fields on one line with a trailing space",
    "a script job shows its time limit, end time and command",
    "a pending job with -N shows NumNodes=min-max and the memory it will get",
    "a job cancelled while pending never ran: NumTasks=N/A",
    "a held job is not yet eligible",
    "a timed-out job shows the signal that ended it",
    "a failed job shows its exit code",
])
def test_scontrol_show_job_matches_golden(name, render):
    g = load(name)
    got = render()
    # Scheduler=Backfill and LastSchedEval are scheduler internals we do not model.
    want = g.stdout.replace("Scheduler=Backfill", "Scheduler=Main")
    if name == "scontrol_show_job_pending" or name == "scontrol_show_job_cancelled":
        want = want.replace("LastSchedEval=2026-12-02T10:04:06", "LastSchedEval=2026-12-02T10:04:03")
    if name == "scontrol_show_job_cancelled":
        want = want.replace("LastSchedEval=2026-12-02T10:04:03", "LastSchedEval=2026-12-02T10:04:09")
    assert got == want, f"\nwant:\n{want}\ngot:\n{got}"


@pytest.mark.parametrize("name,nodes", [
    ("scontrol_show_node_node1_idle", lambda: idle_nodes()[:1]),
    ("scontrol_show_node_all_idle", idle_nodes),
    ("scontrol_show_node_node1_busy", lambda: busy_nodes()[:1]),
    ("scontrol_show_node_all_busy", busy_nodes),
], ids=["one idle node", "every idle node, each followed by a blank line",
        "an allocated node shows AllocTRES", "a busy cluster"])
def test_scontrol_show_node_matches_golden(name, nodes):
    want = load(name).stdout
    got = show_node.scontrol_show_node(nodes())
    assert got == want, f"\nwant:\n{want}\ngot:\n{got}"


def test_scontrol_show_node_drained_state_and_reason():
    n = node("node1", 1, drain=True, reason="bad gpu", reason_user="root",
             reason_time=at("10:04:02"))
    text = show_node.scontrol_show_node([n])
    assert "   State=IDLE+DRAIN ThreadsPerCore=1" in text
    assert "   Reason=bad gpu [root@2026-12-02T10:04:02]\n" in text


def _gpu_node(**kw) -> api_pb2.NodeInfo:
    n = node("node1", 1, **kw)
    n.gpus, n.gpu_type = 4, "a100"
    return n


def test_scontrol_show_node_gres_shows_the_sockets_of_its_gpus():
    n = _gpu_node()
    n.gpu_devices.extend(api_pb2.GpuDevice(index=i, numa_node=i // 2) for i in range(4))
    text = show_node.scontrol_show_node([n])
    assert "   Gres=gpu:a100:4(S:0-1)\n   NodeAddr=" in text
    assert "GresUsed" not in text            # only with -d


def test_scontrol_show_node_gres_without_known_sockets_is_the_count():
    n = _gpu_node()
    n.gpu_devices.extend(api_pb2.GpuDevice(index=i, numa_node=-1) for i in range(4))
    assert "   Gres=gpu:a100:4\n" in show_node.scontrol_show_node([n])


def test_scontrol_show_node_details_show_the_gpus_in_use():
    n = _gpu_node()
    n.gpus_alloc = 2
    n.gpu_ids_alloc[:] = [0, 1]
    text = show_node.scontrol_show_node([n], details=True)
    assert "   Gres=gpu:a100:4\n   GresDrain=N/A\n   GresUsed=gpu:a100:2(IDX:0-1)\n   NodeAddr=" in text
    idle = show_node.scontrol_show_node([_gpu_node()], details=True)
    assert "   GresUsed=gpu:a100:0(IDX:N/A)\n" in idle
    # a node without GPUs prints as without -d
    plain = node("node1", 1)
    assert show_node.scontrol_show_node([plain], details=True) == show_node.scontrol_show_node([plain])


def test_scontrol_show_partition_matches_golden():
    want = load("scontrol_show_partition").stdout
    assert show_cluster.scontrol_show_partition([PART]) == want


def test_scontrol_ping_matches_golden():
    from cli import scontrol
    assert scontrol.ping_line("vm", True) == load("scontrol_ping").stdout


def test_scontrol_show_config_layout():
    g = load("scontrol_show_config").stdout.splitlines()
    settings = dict(line.split(" = ", 1) if " = " in line else (line.rstrip(" ="), "")
                    for line in g[1:6])
    settings = {k.rstrip(): v for k, v in settings.items()}
    got = show_cluster.scontrol_show_config(settings, at("10:04:02")).splitlines()
    assert got == g[:6]


# --- sacct ------------------------------------------------------------------------------


def step(step_id: str, name: str, state: str, nodes: str, code: int = 0, sig: int = 0,
         cpus: int = 1) -> api_pb2.StepInfo:
    return api_pb2.StepInfo(step_id=step_id, name=name, state=state, nodes=nodes,
                            exit_code=code, exit_signal=sig, num_cpus=cpus, num_tasks=1)


def done_jobs() -> dict[int, api_pb2.JobInfo]:
    end = at("10:06:00")
    return {
        5: job(5, "tlimit", "TIMEOUT", "TimeLimit", nodes="node1", limit=1, start="10:04:03",
               end="10:05:25", now=end, exit_signal=15,  # as the controller records it
               steps=[step("batch", "batch", "CANCELLED", "node1", 0, 15)]),
        6: job(6, "exit3", "FAILED", "NonZeroExitCode", nodes="node1", start="10:04:03",
               end="10:04:03", exit_code=3, now=end,
               steps=[step("batch", "batch", "FAILED", "node1", 3)]),
        8: job(8, "wrap", "CANCELLED", nodes="node2", start="10:04:06", end="10:04:09",
               cancelled_by="0", now=end, exit_signal=15, steps=[step("batch", "batch", "CANCELLED", "node2", 0, 15)]),
        9: job(9, "golden", "CANCELLED", nodes="node[2-3]", num_nodes=2, cpus=2,
               start="10:04:06", end="10:05:00", cancelled_by="0", now=end,
               steps=[step("batch", "batch", "CANCELLED", "node2", 0, 15),
                      step("0", "hostname", "COMPLETED", "node[2-3]", cpus=2)]),
        11: job(11, "big", "CANCELLED", "Resources", num_nodes=4, cpus=4, cancelled_by="0",
                start="10:04:09", end="10:04:09", now=end),
        18: job(18, "short", "COMPLETED", nodes="node1", start="10:05:03", end="10:05:04",
                now=end, steps=[step("batch", "batch", "COMPLETED", "node1")]),
        25: job(25, "wrap", "COMPLETED", nodes="node[1-2]", num_nodes=2, start="10:05:03",
                end="10:05:04", now=end,
                steps=[step("batch", "batch", "COMPLETED", "node1"),
                       step("0", "bash", "COMPLETED", "node[1-2]")]),
    }


FIVE = "JobID,JobName,State,ExitCode,NodeList"
SACCT_CASES = [
    ("sacct_default_j", [6, 5, 18], {}),
    ("sacct_X_brief", [6, 5, 18, 11], dict(fields="JobID,State,ExitCode,Elapsed,AllocCPUS,NNodes",
                                         allocations_only=True)),
    ("sacct_noheader", [18], dict(fields="JobID,JobName%20,State", header=False,
                                  allocations_only=True)),
    ("sacct_parsable_trailing", [18], dict(fields="JobID,State,ExitCode", parsable="parsable")),
    ("sacct_completed", [18], dict(fields=FIVE, parsable="parsable2")),
    ("sacct_exit3", [6], dict(fields=FIVE, parsable="parsable2")),
    ("sacct_timeout", [5], dict(fields=FIVE, parsable="parsable2")),
    ("sacct_cancelled_running", [8], dict(fields=FIVE, parsable="parsable2")),
    ("sacct_cancelled_pending", [11], dict(fields=FIVE, parsable="parsable2")),
    ("sacct_directives", [9], dict(fields=FIVE, parsable="parsable2")),
    ("sacct_steps", [25], dict(fields=FIVE, parsable="parsable2")),
    ("err_sacct_nonexistent", [], dict(fields=FIVE, parsable="parsable2")),
]


@pytest.mark.parametrize("name,ids,kw", SACCT_CASES, ids=[
    "default fields with the dashed header, jobs by id then their steps",
    "-X keeps allocations; CANCELLED by 0 is cut to CANCELLED+",
    "-n drops the header and JobName%20 widens the column",
    "--parsable ends each line with a bar",
    "--parsable2 for a completed job and its batch step",
    "a failed job and its batch step carry exit code 3",
    "a timed-out job's batch step was cancelled by signal 15",
    "a job cancelled while running says who cancelled it",
    "a job cancelled while pending has no nodes assigned",
    "a job with an srun step lists the step after the batch step",
    "a two-node job with an srun step",
    "an unknown job id prints only the header",
])
def test_sacct_matches_golden(name, ids, kw):
    jobs = done_jobs()
    want = load(name).stdout
    got = sacct_format.sacct_table([jobs[i] for i in ids], **kw)
    assert got == want, f"\nwant:\n{want}\ngot:\n{got}"


def test_sacct_unknown_field_is_an_error():
    with pytest.raises(FormatError, match='Invalid field requested: "Bogus"'):
        sacct_format.parse_sacct_fields("JobID,Bogus")


def test_scontrol_details_show_each_nodes_gpu_indices_grouped_as_slurm_does():
    job = api_pb2.JobInfo(job_id=5, name="train", state="RUNNING", nodes="node[1-3]",
                          num_nodes=3, gpus_per_node=2, gpu_type="a100")
    for name, ids in (("node1", (0, 1)), ("node2", (0, 1)), ("node3", (1, 3))):
        job.node_allocs.append(api_pb2.JobNodeAlloc(node=name, cpus=4, mem_mb=1000,
                                                    gpu_ids=ids, gpu_type="a100"))
    text = show_job.scontrol_show_job([job], details=True)
    lines = text.splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("   Socks/Node="))
    assert lines[at + 1:at + 4] == [
        "   JOB_GRES=gpu:a100:6",
        "     Nodes=node[1-2] CPU_IDs=N/A Mem=1000 GRES=gpu:a100:2(IDX:0-1)",
        "     Nodes=node3 CPU_IDs=N/A Mem=1000 GRES=gpu:a100:2(IDX:1,3)",
    ]
    assert lines[at + 4].startswith("   MinCPUsNode=")
    assert "IDX" not in show_job.scontrol_show_job([job])       # only with -d


def test_scontrol_details_of_a_job_without_gpus():
    job = api_pb2.JobInfo(job_id=6, name="cpu", state="RUNNING", nodes="node1", num_nodes=1)
    job.node_allocs.append(api_pb2.JobNodeAlloc(node="node1", cpus=1))
    text = show_job.scontrol_show_job([job], details=True)
    assert "   JOB_GRES=(null)\n     Nodes=node1 CPU_IDs=N/A Mem=0 GRES=\n" in text

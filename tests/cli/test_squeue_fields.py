"""squeue asks the controller for the JobInfo fields its format shows, and
formats a column at a time: neither may change a byte of what it prints."""
from __future__ import annotations

import pytest

from cli.formats import squeue as squeue_format
from lingjun.v1 import api_pb2

NOW = 1_700_000_500


def _jobs() -> list[api_pb2.JobInfo]:
    """A queue with one of each kind of row squeue prints differently."""
    common = dict(user="alice", uid=1000, gid=1000, group="staff", account="phys", qos="high",
                  work_dir="/home/alice", command="/home/alice/run.sh", submit_host="login1",
                  submit_time=NOW - 400, eligible_time=NOW - 390, now=NOW)
    return [
        api_pb2.JobInfo(job_id=7, name="train", state="RUNNING", reason="None", partition="gpu",
                        num_nodes=2, num_cpus=16, num_tasks=8, cpus_per_task=2,
                        ntasks_per_node=4, mem_per_node_mb=64000, gpus_per_node=4,
                        gpu_type="a100", time_limit_min=90, start_time=NOW - 3725,
                        nodes="gpu[1-2]", batch_host="gpu1", priority=4294901753, nice=5,
                        exclusive=True, features="ib", req_nodes="gpu[1-2]", exc_nodes="gpu9",
                        comment="first try", stdout_path="/home/alice/o", stderr_path="/home/alice/e",
                        requeue=True, restarts=1, batch=True, max_nodes=2, **common),
        api_pb2.JobInfo(job_id=8, name="a-very-long-job-name", state="PENDING", reason="Priority",
                        partition="batch", num_nodes=1, num_cpus=1, time_limit_min=-1,
                        priority=4294901752, dependency="afterok:7(unfulfilled)", gpus=2,
                        mem_per_node_mb=-1, **common),
        api_pb2.JobInfo(job_id=9, name="held", state="PENDING", reason="JobHeldUser",
                        partition="batch", num_nodes=3, num_cpus=3, time_limit_min=2880,
                        priority=0, hold=True, **common),
        api_pb2.JobInfo(job_id=12, array_job_id=12, array_task_id=-1, array_task_str="4-9%2",
                        array_max_running=2, name="arr", state="PENDING", reason="None",
                        partition="batch", num_nodes=1, num_cpus=1, time_limit_min=10,
                        priority=4294901748, **common),
        api_pb2.JobInfo(job_id=15, array_job_id=12, array_task_id=3, name="arr", state="RUNNING",
                        partition="batch", num_nodes=1, num_cpus=1, time_limit_min=10,
                        start_time=NOW - 59, nodes="node3", batch_host="node3",
                        priority=4294901748, **common),
        api_pb2.JobInfo(job_id=16, name="ending", state="COMPLETING", reason="None",
                        partition="batch", num_nodes=1, num_cpus=2, time_limit_min=5,
                        start_time=NOW - 100, end_time=NOW - 10, nodes="node4",
                        exit_code=1, derived_exit_code=2, priority=4294901744, **common),
        api_pb2.JobInfo(job_id=17, name="oom", state="OUT_OF_MEMORY", reason="OutOfMemory",
                        partition="batch", num_nodes=1, num_cpus=2, time_limit_min=5,
                        start_time=NOW - 200, end_time=NOW - 100, nodes="node5", exit_code=0,
                        exit_signal=9, priority=4294901743, **common),
    ]


def _cut(job: api_pb2.JobInfo, fields: set[str]) -> api_pb2.JobInfo:
    """The job as the controller sends it for ``fields``: those only, no clock."""
    return api_pb2.JobInfo(**{f: getattr(job, f) for f in fields if f != "now"})


LETTERS = sorted(squeue_format.SQUEUE_HEADERS)


@pytest.mark.parametrize("letter", LETTERS)
def test_each_letter_prints_the_same_from_the_fields_squeue_asks_for(letter):
    for fmt in (f"%{letter}", f"%.12{letter}", f"%5{letter}|%{letter}"):
        fields = squeue_format.squeue_format_fields(fmt) | set(squeue_format.SQUEUE_BASE_FIELDS)
        full = squeue_format.squeue_table(_jobs(), fmt, now=NOW)
        cut = squeue_format.squeue_table([_cut(j, fields) for j in _jobs()], fmt, now=NOW)
        assert cut == full, fmt


@pytest.mark.parametrize("name", sorted(squeue_format.SQUEUE_O_FIELDS))
def test_each_O_field_prints_the_same_from_the_fields_squeue_asks_for(name):
    for spec in (name, f"{name}:0,jobid:6", f"{name}:.9|"):
        fields = squeue_format.squeue_O_fields(spec) | set(squeue_format.SQUEUE_BASE_FIELDS)
        cut = [_cut(j, fields) for j in _jobs()]
        if "now" in fields:         # as squeue sets it from the reply's clock
            for j in cut:
                j.now = NOW
        assert squeue_format.squeue_O_table(cut, spec, now=NOW) == \
            squeue_format.squeue_O_table(_jobs(), spec, now=NOW), spec


@pytest.mark.parametrize("letter", LETTERS + ["%", "-"])
def test_a_column_at_a_time_is_each_jobs_own_text(letter):
    # the row-by-row letter table is the reference the columns must agree with
    jobs = squeue_format.sort_jobs(_jobs())
    for now in (NOW, None):
        expected = [squeue_format.squeue_values(j, now).get(letter, "") for j in jobs]
        assert squeue_format.squeue_column(jobs, letter, now) == expected


def test_the_default_format_keeps_its_layout_and_order():
    assert squeue_format.squeue_table(_jobs(), now=NOW) == (
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
        "                16     batch   ending    alice CG       1:30      1 node4\n"
        "                17     batch      oom    alice OO       1:40      1 (OutOfMemory)\n"
        "                 8     batch a-very-l    alice PD       0:00      1 (Priority)\n"
        "        12_[4-9%2]     batch      arr    alice PD       0:00      1 (None)\n"
        "                 9     batch     held    alice PD       0:00      3 (JobHeldUser)\n"
        "              12_3     batch      arr    alice  R       0:59      1 node3\n"
        "                 7       gpu    train    alice  R    1:02:05      2 gpu[1-2]\n")


def test_literal_braces_and_unknown_letters_print_as_typed():
    fmt = "{%i} %5X %.3j%%"
    assert squeue_format.squeue_table(_jobs()[:1], fmt, header=False, now=NOW) == "{7} N/A   tra%\n"
    assert squeue_format.squeue_table(_jobs()[:1], "%i %-4j", header=False, now=NOW) == "7 %-4j\n"

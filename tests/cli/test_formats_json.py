"""--json/--yaml documents against Slurm 22.05's (golden squeue_json/yaml),
and the sacct usage columns (MaxRSS, AveRSS, TotalCPU ...) unit by unit."""
from __future__ import annotations

import copy
import json

import pytest

from cli import formats_json
from cli.formats.fields import FormatError
from cli.formats.units import format_cpu_time, format_rss
from cli.formats import squeue as squeue_format, sinfo as sinfo_format, sacct as sacct_format
from lingjun.v1 import api_pb2
from tests.cli.golden_files import load
from tests.cli.test_formats import at, busy_jobs, done_jobs, job, utc  # noqa: F401 (fixture)


def golden_doc(name: str) -> dict:
    return json.loads(load(name).stdout)


# --- the serializers --------------------------------------------------------------


def test_json_serializer_writes_the_golden_text_byte_for_byte():
    text = load("squeue_json").stdout
    got = formats_json.dump_json(json.loads(text))
    assert got == text, "dump_json(parse(golden)) differs from golden"


def test_yaml_serializer_writes_the_golden_text_byte_for_byte():
    want = load("squeue_yaml").stdout
    got = formats_json.dump_yaml(golden_doc("squeue_json"))
    assert got == want, "dump_yaml(parse(golden json)) differs from golden yaml"


@pytest.mark.parametrize("value,want", [
    ({}, "{\n}"), ([], "[\n]"), ({"a": 1.5}, '{\n  "a": 1.5\n}'),
    ({"a": 2.0}, '{\n  "a": 2.0\n}'), ({"p": "a/b"}, '{\n  "p": "a\\/b"\n}'),
    ([None, True], "[\n  null,\n  true\n]"),
], ids=["an empty object", "an empty array", "a float keeps its fraction",
        "a whole float keeps one decimal", "a slash is escaped as json-c does",
        "null and booleans are literals"])
def test_json_scalars_and_empty_containers(value, want):
    assert formats_json.dump_json(value) == want


@pytest.mark.parametrize("value,want", [
    ({"s": ""}, "!!str s: !!null null"), ({"s": "- x"}, "!!str s: !!str '- x'"),
    ({"s": "a: b"}, "!!str s: !!str 'a: b'"), ({"m": {}}, "!!str m: !!map {}"),
    ({"f": 1.0}, "!!str f: !!float 1.000000"),
], ids=["an empty string is null, as Slurm's data_t keeps it",
        "a leading dash is quoted", "a colon-space is quoted", "an empty map",
        "floats print six decimals"])
def test_yaml_scalars(value, want):
    assert formats_json.dump_yaml(value).splitlines()[2] == want


# --- squeue --json against the capture ----------------------------------------------

# What the golden holds that the modelled cluster cannot know or that another
# part of Lingjun owns: the accounting association, the output paths as typed
# (we keep them resolved), DefMemPerNode in the requested TRES, the core ids.
UNMODELLED = ("association_id", "standard_output", "standard_error", "tres_req_str",
              "dependency", "last_sched_evaluation")


def capture_jobs() -> list[api_pb2.JobInfo]:
    """Every job slurmctld held at the squeue --json capture, arrays included."""
    jobs = busy_jobs()
    for j in jobs:
        if j.job_id in (1, 2):
            j.max_nodes = 5
        if j.job_id == 11:
            j.max_nodes = 4
        if j.job_id in (14, 15):
            j.eligible_time = 0
        if j.job_id in (9, 10):
            j.command = "/tmp/anchor-golden/job.sh"
    jobs += [
        job(3, state="COMPLETED", nodes="node1", start="10:04:03", end="10:04:03"),
        job(6, "exit3", state="FAILED", reason="NonZeroExitCode", nodes="node1",
            start="10:04:03", end="10:04:03", limit=525600, exit_code=3),
        job(12, "arr", reason="Priority", submit="10:04:04", eligible=at("10:04:06"),
            command="/tmp/anchor-golden/array.sh", array_job_id=12, array_task_id=-1,
            array_task_str="1-3"),
        job(13, "arr2", reason="Priority", submit="10:04:04", array_job_id=13,
            array_task_id=-1, array_task_str="1-3"),
    ]
    return jobs


def masked(job: dict) -> dict:
    out = copy.deepcopy(job)
    for k in UNMODELLED:
        out.pop(k, None)
    for n in out.get("job_resources", {}).get("allocated_nodes", []):
        n["sockets"] = "(core ids)"
    return out


def test_squeue_json_jobs_have_slurms_keys_in_slurms_order_with_slurms_types():
    want = {j["job_id"]: j for j in golden_doc("squeue_json")["jobs"]}
    got = {j["job_id"]: j for j in formats_json.squeue_document(capture_jobs(), "anchor")["jobs"]}
    for jid in (1, 3, 5, 6, 9, 11, 12, 15):
        w, g = want[jid], got[jid]
        assert list(g) == list(w), f"job {jid}: key order\nwant {list(w)}\ngot  {list(g)}"
        types = {k: (type(w[k]).__name__, type(g[k]).__name__) for k in w
                 if type(w[k]) is not type(g[k]) and k not in UNMODELLED}
        assert not types, f"job {jid}: (want, got) types differ: {types}"


@pytest.mark.parametrize("jid", [1, 3, 4, 5, 6, 7, 9, 10, 11, 14, 15], ids=lambda j: f"job {j}")
def test_squeue_json_values_match_the_capture(jid):
    want = {j["job_id"]: j for j in golden_doc("squeue_json")["jobs"]}[jid]
    got = {j["job_id"]: j for j in formats_json.squeue_document(
        capture_jobs(), "anchor")["jobs"]}[jid]
    if jid == 14:
        want = dict(want, dependency="")  # dependencies belong to the deps work
    w, g = masked(want), masked(got)
    diff = {k: (w[k], g.get(k)) for k in w if w[k] != g.get(k)}
    assert not diff, f"job {jid}: (want, got): {diff}"


@pytest.mark.parametrize("jid,want", [
    (12, {"array_job_id": 12, "array_task_id": None, "array_task_string": "1-3"}),
    (5, {"array_job_id": 0, "array_task_id": None, "array_task_string": ""}),
], ids=["the pending remainder of an array names its tasks", "a plain job is no task"])
def test_squeue_json_array_keys(jid, want):
    got = {j["job_id"]: j for j in formats_json.squeue_document(capture_jobs())["jobs"]}[jid]
    assert {k: got[k] for k in want} == want


def test_squeue_json_array_task_has_its_index():
    t = job(16, state="RUNNING", nodes="node4", start="10:04:06", array_job_id=12,
            array_task_id=2)
    d = formats_json.job_dict(t)
    assert (d["array_job_id"], d["array_task_id"]) == (12, 2)


def test_squeue_json_meta_is_slurms():
    assert formats_json.squeue_document([])["meta"] == golden_doc("squeue_json")["meta"]


# --- sacct --json ----------------------------------------------------------------------


def test_sacct_json_nests_steps_and_reports_exit_codes_as_objects():
    jobs = done_jobs()
    doc = formats_json.sacct_document([jobs[6], jobs[5], jobs[25]], "anchor")
    assert [j["job_id"] for j in doc["jobs"]] == [5, 6, 25]
    failed = doc["jobs"][1]
    assert failed["exit_code"] == {"status": "FAILED", "return_code": 3}
    assert failed["state"] == {"current": "FAILED", "reason": "NonZeroExitCode"}
    timeout = doc["jobs"][0]
    assert timeout["steps"][0]["exit_code"] == {
        "status": "SIGNALED", "return_code": 0, "signal": {"signal_id": 15, "name": "TERM"}}
    two = doc["jobs"][2]
    assert [s["step"]["id"] for s in two["steps"]] == ["25.batch", "25.0"]
    assert two["steps"][1]["nodes"] == {"count": 2, "range": "node[1-2]",
                                        "list": ["node1", "node2"]}
    assert two["time"]["elapsed"] == 1 and two["time"]["limit"] is None
    assert doc["meta"]["plugin"] == {"type": "openapi/dbv0.0.38",
                                     "name": "Slurm OpenAPI DB v0.0.38"}


def test_sacct_json_without_steps_for_allocations_only():
    doc = formats_json.sacct_document([done_jobs()[25]], with_steps=False)
    assert doc["jobs"][0]["steps"] == []


# --- sacct usage columns ---------------------------------------------------------------


@pytest.mark.parametrize("kb,want", [
    (0, "0"), (1368, "1368K"), (205464, "205464K"), (204800, "200M"), (1024, "1M"),
    (3 * 1024 * 1024, "3G"), (1536, "1536K"),
], ids=["nothing measured", "a small peak in K", "a page-granular peak stays in K",
        "an exact 200 MiB reads 200M", "exactly one MiB", "exact gibibytes",
        "not a whole MiB stays in K"])
def test_maxrss_scales_only_when_exact(kb, want):
    assert format_rss(kb) == want


@pytest.mark.parametrize("ms,want", [
    (0, "00:00:00"), (3, "00:00.003"), (61_250, "01:01.250"), (3_600_000, "01:00:00"),
    (90_061_000, "1-01:01:01"), (5_000, "00:00:05"),
], ids=["no CPU time", "milliseconds show as MM:SS.mmm", "a minute and a fraction",
        "an hour drops the fraction", "a day and more", "whole seconds"])
def test_cpu_time_format(ms, want):
    assert format_cpu_time(ms) == want


def usage_job() -> api_pb2.JobInfo:
    j = done_jobs()[25]
    del j.steps[:]
    j.steps.extend([
        api_pb2.StepInfo(step_id="0", name="python", state="COMPLETED", nodes="node[1-2]",
                         num_tasks=2, num_cpus=2, start_time=at("10:05:03"),
                         end_time=at("10:05:04"), max_rss_kb=215692, ave_rss_kb=150000,
                         max_rss_node="node2", max_rss_task=1, user_cpu_ms=1500,
                         system_cpu_ms=250),
        api_pb2.StepInfo(step_id="batch", name="batch", state="COMPLETED", nodes="node1",
                         num_tasks=1, num_cpus=1, start_time=at("10:05:03"),
                         end_time=at("10:05:04"), max_rss_kb=4096, ave_rss_kb=2048,
                         max_rss_node="node1", user_cpu_ms=20, system_cpu_ms=10),
    ])
    return j


def test_sacct_usage_columns_per_step_and_summed_cpu_on_the_allocation():
    got = sacct_format.sacct_table([usage_job()], "JobID,MaxRSS,AveRSS,MaxRSSNode,MaxRSSTask,"
                              "TotalCPU,UserCPU,SystemCPU", parsable="parsable2")
    assert got.splitlines() == [
        "JobID|MaxRSS|AveRSS|MaxRSSNode|MaxRSSTask|TotalCPU|UserCPU|SystemCPU",
        "25|||||00:01.780|00:01.520|00:00.260",
        "25.batch|4M|2M|node1|0|00:00.030|00:00.020|00:00.010",
        "25.0|215692K|150000K|node2|1|00:01.750|00:01.500|00:00.250",
    ]


def test_sacct_usage_columns_in_fixed_width_layout():
    got = sacct_format.sacct_table([usage_job()], "JobID,MaxRSS,MaxRSSNode", header=True)
    assert got.splitlines() == [
        "JobID            MaxRSS MaxRSSNode ",
        "------------ ---------- ---------- ",
        "25                                 ",
        "25.batch             4M      node1 ",
        "25.0            215692K      node2 ",
    ]


# --- sacct -l and field names --------------------------------------------------------------


def test_sacct_long_has_slurms_54_columns_and_stats_only_on_steps():
    got = sacct_format.sacct_table([usage_job()], sacct_format.SACCT_LONG_FIELDS, parsable="parsable2")
    header, alloc, batch, step0 = (line.split("|") for line in got.splitlines())
    assert len(header) == 54 and header[:4] == ["JobID", "JobIDRaw", "JobName", "Partition"]
    assert header[-1] == "TRESUsageOutTot"
    col = dict(zip(header, step0))
    assert (col["MaxRSS"], col["MaxRSSNode"], col["MaxRSSTask"], col["AveRSS"]) == \
        ("215692K", "node2", "1", "150000K")
    assert col["TRESUsageInMax"] == "cpu=00:00:00,energy=0,fs/disk=0,mem=215692K,pages=0,vmem=0"
    assert dict(zip(header, alloc))["MaxRSS"] == ""
    assert dict(zip(header, batch))["ReqCPUFreqMin"] == "Unknown"


@pytest.mark.parametrize("spec,want", [
    ("jobn", [("jobname", 10)]), ("alloc", [("alloccpus", 10)]),
    ("TRESUsageInMaxN", [("tresusageinmaxnode", -18)]), ("MaxRSS%20", [("maxrss", 20)]),
    ("NodeList%30", [("nodelist", -30)]),
], ids=["a prefix names the field it starts", "the first field in alphabetical order wins",
        "sacct -l's own abbreviations resolve", "%N widens a right-justified column",
        "%N widens a left-justified column and keeps it left"])
def test_sacct_field_names(spec, want):
    assert sacct_format.parse_sacct_fields(spec) == want


def test_sacct_unknown_field_names_the_field():
    with pytest.raises(FormatError, match='^Invalid field requested: "Bogus"$'):
        sacct_format.parse_sacct_fields("JobID,Bogus")


# --- squeue letters and -O fields ----------------------------------------------------------


def array_task() -> api_pb2.JobInfo:
    return job(16, "arr", "RUNNING", nodes="node4", start="10:04:06", array_job_id=12,
               array_task_id=2)


@pytest.mark.parametrize("j,fmt,want", [
    (lambda: busy_jobs()[4], "%F|%K|%A", "7|N/A|7"),
    (array_task, "%F|%K|%A", "12|2|16"),
    (lambda: job(12, "arr", array_job_id=12, array_task_id=-1, array_task_str="1-3"),
     "%F|%K", "12|1-3"),
], ids=["a plain job is its own array id and no task",
        "an array task shows its array's id and its index",
        "the pending remainder shows the tasks it still holds"])
def test_squeue_array_letters(j, fmt, want):
    assert squeue_format.squeue_table([j()], fmt, header=False) == want + "\n"


@pytest.mark.parametrize("spec,want", [
    ("ArrayJobID:6,ArrayTaskID:.6", "ARRAY_ARRAY_\n12         2\n"),
    ("BatchFlag:11,DerivedEC:11", "BATCH_FLAG DERIVED_EC \n1          0:0        \n"),
    ("NTPerNode:.16", " NTASKS_PER_NODE\n               0\n"),
    ("tres-alloc:30", "TRES_ALLOC                    \ncpu=1,node=1                  \n"),
], ids=["array fields, right-justified with :.N", "flags and the derived exit code",
        "a right-justified count", "the allocated TRES"])
def test_squeue_more_O_fields(spec, want):
    assert squeue_format.squeue_O_table([array_task()], spec) == want


def test_every_squeue_O_field_renders_for_pending_and_running_jobs():
    spec = ",".join(squeue_format.SQUEUE_O_FIELDS)
    lines = squeue_format.squeue_O_table(busy_jobs(), spec).splitlines()
    assert len(lines) == 1 + len(busy_jobs())
    assert all(len(line) == 20 * len(squeue_format.SQUEUE_O_FIELDS) for line in lines)


def test_squeue_O_unknown_field_is_slurms_error():
    with pytest.raises(FormatError, match="^Invalid job format specification: bogus$"):
        squeue_format.parse_squeue_O("JobID,bogus")


# --- sinfo letters and -O fields -------------------------------------------------------------

from tests.cli.test_formats import PART, busy_nodes, idle_nodes  # noqa: E402


@pytest.mark.parametrize("fmt,want", [
    ("%R %A", ["PARTITION NODES(A/I)", "debug 3/1"]),
    ("%P %I %M %v", ["PARTITION PRIO_JOB_FACTOR PREEMPT_MODE VERSION", "debug* 1 OFF 22.05.8"]),
], ids=["%A counts allocated and idle nodes", "%I %M %v: job factor, preempt mode, version"])
def test_sinfo_more_letters(fmt, want):
    assert sinfo_format.sinfo_table(busy_nodes(), [PART], fmt).splitlines() == want


@pytest.mark.parametrize("spec,nodes,want", [
    ("PartitionName:10,NodeAIOT:.16,NodeList:12", idle_nodes,
     ["PARTITION   NODES(A/I/O/T)NODELIST    ", "debug              0/4/0/4node[1-4]   "]),
    ("StateLong:10,Nodes:6,CPUsState:14", busy_nodes,
     ["STATE     NODES CPUS(A/I/O/T) ", "allocated 3     6/0/0/6       ",
      "idle      1     0/2/0/2       "]),
    ("NodeHost,Memory:7", idle_nodes, ["HOSTNAMES           MEMORY ", "vm                  2000   "]),
], ids=["partition rows with A/I/O/T counts", "nodes grouped by state",
        "fields default to 20 columns"])
def test_sinfo_O_fields(spec, nodes, want):
    got = sinfo_format.sinfo_table(nodes(), [PART], fields_O=sinfo_format.parse_sinfo_O(spec))
    assert got.splitlines() == want


def test_sinfo_O_unknown_field_is_an_error():
    with pytest.raises(FormatError, match="^Invalid job format specification: bogus$"):
        sinfo_format.parse_sinfo_O("NodeList,bogus")


@pytest.mark.parametrize("spec,want", [
    ("JobID:4|,bogus:3|,Name:0", ["JOBI||NAME", "5   ||tlimit"]),
    ("JobID,Nonsense", ["JOBID               ", "5                   "]),
], ids=["an unknown field prints only its suffix; :0 is the value's own width",
        "an unknown field without a suffix prints nothing"])
def test_squeue_O_unknown_field_leaves_an_empty_column(spec, want):
    assert squeue_format.squeue_O_table([busy_jobs()[3]], spec).splitlines() == want


def test_squeue_O_suffix_and_natural_width():
    got = squeue_format.squeue_O_table([busy_jobs()[3]], "JobID:0|,State:.8|,Name:0")
    assert got.splitlines() == ["JOBID|   STATE|NAME", "5| RUNNING|tlimit"]


def test_sinfo_O_suffix_and_unknown_field():
    fields = sinfo_format.parse_sinfo_O("NodeList:0|,Bogus:0|,StateLong:0", strict=False)
    got = sinfo_format.sinfo_table(idle_nodes(), [PART], fields_O=fields)
    assert got.splitlines() == ["NODELIST||STATE", "node[1-4]||idle"]


@pytest.mark.parametrize("name", [
    "a\ttab", "two\nlines", "- dash", "key: value", "# hash", "null", "true", "1.5", "0x10",
    "'quoted'", '"double"', "trailing ", " leading", "ünïcödé 训练", "[list]", "{map}", "*alias",
    "&anchor", "!tag", "%percent", "@at", "`tick`", "a\\back", "\x07bell",
], ids=repr)
def test_yaml_reads_back_every_hostile_job_name(name):
    import yaml
    doc = formats_json.dump_yaml({"jobs": [{"name": name, "id": 7}]})
    assert yaml.safe_load(doc) == {"jobs": [{"name": name, "id": 7}]}, doc

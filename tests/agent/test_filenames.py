"""Slurm's filename patterns, case by case (slurmstepd's fname.c rules)."""
import pytest

from lingjun.filenames import default_stdout, expand_pattern, resolve_path

JOB = dict(job_id=128, job_name="train", user="alice", node="node3")

CASES = [
    ("the default output name carries the job id", "slurm-%j.out", {}, "slurm-128.out"),
    ("a number zero-pads the job id", "job%4j.out", {}, "job0128.out"),
    ("padding narrower than the value changes nothing", "job%2j.out", {}, "job128.out"),
    ("padding is capped at ten digits", "%12j", {}, "0000000128"),
    ("%J is job.step inside a step", "job%J.out", dict(step_id=0), "job128.0.out"),
    ("%J is the job id alone for the batch script", "job%J.out", {}, "job128.out"),
    ("%J pads the job part only", "%5J", dict(step_id=3), "00128.3"),
    ("%s is the step id", "s%s", dict(step_id=7), "s7"),
    ("%s pads a numeric step", "s%3s", dict(step_id=7), "s007"),
    ("%s of the batch script reads batch", "s%s", {}, "sbatch"),
    ("task rank and padding", "job%j-%2t.out", dict(task_id=1), "job128-01.out"),
    ("task rank defaults to 0", "t%t", {}, "t0"),
    ("node index", "n%n", dict(node_index=2), "n2"),
    ("node name, padding ignored for text", "%x-%5N.log", {}, "train-node3.log"),
    ("user name", "%u.out", {}, "alice.out"),
    ("array master id and index", "slurm-%A_%a.out",
     dict(array_job_id=100, array_task_id=7), "slurm-100_7.out"),
    ("array index zero-padded", "%A_%3a", dict(array_job_id=100, array_task_id=7),
     "100_007"),
    ("%A outside an array is the job id", "%A", {}, "128"),
    ("%a outside an array is Slurm's NO_VAL", "%a", {}, "4294967294"),
    ("%% is one percent sign", "100%%.out", {}, "100%.out"),
    ("%%%j is a percent sign then the job id", "%%%j", {}, "%128"),
    ("%%j is a literal %j", "%%j", {}, "%j"),
    ("an unknown letter is left as it is", "a%qb", {}, "a%qb"),
    ("an unknown letter after digits keeps only the last digit", "a%14qb", {}, "a4qb"),
    ("digits then a new percent start a new field", "%4%j", {}, "4128"),
    ("a trailing percent stays", "out%", {}, "out%"),
    ("trailing digits keep only the last", "out%12", {}, "out2"),
    ("a backslash disables every substitution", "a\\%j", {}, "a%j"),
    ("backslashes vanish even far from a percent", "x\\y-%j", {}, "xy-%j"),
    ("a doubled backslash becomes one", "a\\\\b%j", {}, "a\\b%j"),
    ("plain names pass through", "/abs/path/out.txt", {}, "/abs/path/out.txt"),
]


@pytest.mark.parametrize("pattern,extra,want", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_expand_pattern(pattern, extra, want):
    got = expand_pattern(pattern, **{**JOB, **extra})
    assert got == want, f"pattern {pattern!r}: want {want!r}, got {got!r}"


@pytest.mark.parametrize("array,want", [(False, "slurm-%j.out"), (True, "slurm-%A_%a.out")],
                         ids=["plain job", "array job"])
def test_default_stdout(array, want):
    assert default_stdout(array) == want


@pytest.mark.parametrize("name,work_dir,want", [
    ("slurm-1.out", "/home/a/run", "/home/a/run/slurm-1.out"),
    ("sub/o.txt", "/w/", "/w/sub/o.txt"),
    ("/abs/o.txt", "/w", "/abs/o.txt"),
], ids=["relative names live in the work dir", "subdirectories too",
        "absolute names stay"])
def test_resolve_path(name, work_dir, want):
    assert resolve_path(name, work_dir) == want

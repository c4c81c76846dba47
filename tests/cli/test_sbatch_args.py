"""sbatch option parsing: argv + script + environment -> SubmitJobRequest.

No server: build_request is pure, and main() takes an injectable api so we
can see that nothing is submitted on a client-side error.
"""
from __future__ import annotations

import io
import os

import grpc
import pytest

from cli import sbatch
from lingjun import sbatch_options
from tests.cli.fakes import RpcFailure
from tests.cli.golden_files import load
from lingjun.client import ControllerUnreachable
from lingjun.v1 import api_pb2

UMASK = f"{os.umask(0o022):04o}"       # this process's umask, as sbatch records it
os.umask(int(UMASK, 8))
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/u", "SLURM_CONF": "/etc/slurm.conf", "FOO": "1"}

JOB_SH = """#!/bin/bash
#SBATCH --job-name=golden
#SBATCH --nodes=2
#SBATCH --ntasks=2
#SBATCH --output=%x-%j.out
#SBATCH --time=00:05:00
#SBATCH --partition=debug
echo "hello from $SLURM_JOB_ID on $SLURM_JOB_NODELIST"
#SBATCH --job-name=too-late
srun -l hostname
"""


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "job.sh").write_text(JOB_SH)
    (tmp_path / "noshebang.sh").write_text("hostname\n")
    return tmp_path


def spec_of(argv, workdir, stdin=None, env=ENV):
    return sbatch_options.build_request(argv, stdin, env, str(workdir)).spec


class FakeApi:
    """Records submissions; fails with the given errors first."""

    def __init__(self, *failures):
        self.failures = list(failures)
        self.requests = []

    def call(self, method, request, **kw):
        assert method == "SubmitJob"
        self.requests.append(request)
        if self.failures:
            raise self.failures.pop(0)
        return api_pb2.SubmitJobResponse(job_id=42)


def run(argv, workdir, api=None, stdin=None, env=ENV):
    out, err = io.StringIO(), io.StringIO()
    api = api if api is not None else FakeApi()
    rc = sbatch.main(argv, api=api, stdin=stdin, env=env, cwd=str(workdir), out=out, err=err,
                     sleep=lambda s: None)
    return rc, out.getvalue(), err.getvalue(), api


# --- what gets asked for -------------------------------------------------------

SPEC_CASES = [
    (["--wrap", "sleep 300"], dict(name="wrap", script="#!/bin/sh\n# This script was created by "
                                   "sbatch --wrap.\n\nsleep 300\n", command="")),
    (["job.sh"], dict(name="golden", min_nodes=2, max_nodes=2, num_tasks=2,
                      stdout_pattern="%x-%j.out", time_limit_min=5, partition="debug")),
    (["--job-name=override", "-N", "1", "-n", "1", "job.sh"],
     dict(name="override", min_nodes=1, max_nodes=1, num_tasks=1, time_limit_min=5)),
    (["-N2-4", "--wrap=true"], dict(min_nodes=2, max_nodes=4)),
    (["--nodes", "3", "--wrap", "x"], dict(min_nodes=3, max_nodes=3)),
    (["--pars", "--part=gpu", "--wrap=x"], dict(partition="gpu")),
    (["-c", "4", "--ntasks-per-node=2", "--wrap=x"], dict(cpus_per_task=4, ntasks_per_node=2)),
    (["--mem=4G", "--wrap=x"], dict(mem_per_node_mb=4096)),
    (["--mem", "500", "--wrap=x"], dict(mem_per_node_mb=500)),
    (["--gres=gpu:a100:2", "--wrap=x"], dict(gpus_per_node=2)),
    (["--gres=gpu", "--wrap=x"], dict(gpus_per_node=1)),
    (["-G", "8", "--gpus-per-node=h100:4", "--wrap=x"], dict(gpus=8, gpus_per_node=4)),
    (["-t", "1-02:03:04", "--wrap=x"], dict(time_limit_min=1564)),
    (["-t", "1:30", "--wrap=x"], dict(time_limit_min=2)),
    (["-t", "0", "--wrap=x"], dict(time_limit_min=-1)),
    (["--time=UNLIMITED", "--wrap=x"], dict(time_limit_min=-1)),
    (["-o", "out-%j.txt", "-e", "err.txt", "-i", "in.txt", "--wrap=x"],
     dict(stdout_pattern="out-%j.txt", stderr_pattern="err.txt", stdin_path="in.txt")),
    (["-D", "sub", "--wrap=x"], dict(work_dir="{wd}/sub")),
    (["--exclusive", "-H", "--requeue", "--comment=hi", "-A", "proj", "-q", "high",
      "--nice=5", "--open-mode=append", "--wrap=x"],
     dict(exclusive=True, hold=True, requeue=True, comment="hi", account="proj", qos="high",
          nice=5, open_mode="append")),
    (["--nice", "--wrap=x"], dict(nice=100)),
    (["-HJname", "--wrap=x"], dict(hold=True, name="name")),
    (["job.sh", "a", "--flag"], dict(argv=["a", "--flag"], command="{wd}/job.sh")),
]


@pytest.mark.parametrize("argv,want", SPEC_CASES, ids=[
    "--wrap builds a /bin/sh script named wrap",
    "#SBATCH lines before the first command set the job",
    "command-line options win over #SBATCH lines",
    "-N min-max, attached to the letter",
    "a long option's value may be the next word",
    "unambiguous prefixes of long options are accepted",
    "cpus per task and tasks per node",
    "--mem takes a unit suffix",
    "--mem defaults to megabytes",
    "--gres=gpu:type:N asks for N GPUs per node",
    "--gres=gpu asks for one GPU",
    "--gpus is per job and --gpus-per-node per node",
    "-t days-hours:minutes:seconds in minutes",
    "-t minutes:seconds rounds up",
    "-t 0 means no limit",
    "-t UNLIMITED",
    "output, error and input paths are kept as patterns",
    "-D relative to the submit directory",
    "flags and strings",
    "--nice without a value is 100",
    "short options cluster, the last takes the rest as argument",
    "words after the script are its arguments, even if they look like options",
])
def test_options_reach_the_spec(argv, want, workdir):
    spec = spec_of(argv, workdir)
    for key, value in want.items():
        if isinstance(value, str):
            value = value.replace("{wd}", str(workdir))
        got = getattr(spec, key)
        if key == "argv":
            got = list(got)
        assert got == value, f"{key}: want {value!r}, got {got!r}"


def test_caller_and_submit_context(workdir):
    spec = spec_of(["--wrap=x"], workdir)
    assert spec.submit_dir == str(workdir) and spec.work_dir == str(workdir)
    assert spec.batch and spec.user and spec.submit_host and "." not in spec.submit_host
    assert spec.export_spec == "ALL" and dict(spec.environment) == {**ENV, "SLURM_UMASK": UMASK}


def test_the_submitters_umask_goes_along_as_slurm_umask(workdir):
    import os
    old = os.umask(0o027)
    try:
        assert spec_of(["--wrap=x"], workdir).environment["SLURM_UMASK"] == "0027"
        assert spec_of(["--export=NONE", "--wrap=x"], workdir).environment["SLURM_UMASK"] == "0027"
    finally:
        os.umask(old)
    env = {**ENV, "SLURM_UMASK": "0077"}       # already set (srun inside a job): kept
    assert spec_of(["--wrap=x"], workdir, env=env).environment["SLURM_UMASK"] == "0077"


def test_no_mem_leaves_memory_unset(workdir):
    assert not spec_of(["--wrap=x"], workdir).HasField("mem_per_node_mb")
    assert spec_of(["--mem=0", "--wrap=x"], workdir).HasField("mem_per_node_mb")


@pytest.mark.parametrize("export,want", [
    ("ALL", ENV),
    ("NONE", {"SLURM_CONF": "/etc/slurm.conf"}),
    ("FOO,BAR=2", {"SLURM_CONF": "/etc/slurm.conf", "FOO": "1", "BAR": "2"}),
    ("ALL,BAR=2", {**ENV, "BAR": "2"}),
], ids=["ALL exports everything", "NONE exports only SLURM_*",
        "a list exports the named variables and SLURM_*", "ALL plus a setting"])
def test_export(export, want, workdir):
    spec = spec_of([f"--export={export}", "--wrap=x"], workdir)
    assert dict(spec.environment) == {**want, "SLURM_UMASK": UMASK}
    assert spec.export_spec == export


def test_environment_beats_script_and_command_line_beats_environment(workdir):
    env = {**ENV, "SBATCH_PARTITION": "envpart", "SBATCH_TIMELIMIT": "7"}
    assert spec_of(["job.sh"], workdir, env=env).partition == "envpart"
    assert spec_of(["-p", "cli", "job.sh"], workdir, env=env).partition == "cli"
    assert spec_of(["job.sh"], workdir, env=env).time_limit_min == 7


def test_script_from_stdin(workdir):
    spec = spec_of([], workdir, stdin=io.StringIO("#!/bin/sh\n#SBATCH -J fromstdin\nhostname\n"))
    assert spec.name == "fromstdin" and spec.script.startswith("#!/bin/sh")


def test_directives_stop_at_first_command_and_allow_comments(workdir):
    script = "#!/bin/sh\n\n# a comment\n#SBATCH -n 3 # three tasks\n#SBATCHX -n 9\nhostname\n#SBATCH -n 5\n"
    assert sbatch_options.script_directives(script) == ["-n", "3"]


def test_each_invocation_has_a_fresh_client_token(workdir):
    a = sbatch_options.build_request(["--wrap=x"], None, ENV, str(workdir))
    b = sbatch_options.build_request(["--wrap=x"], None, ENV, str(workdir))
    assert a.client_token and b.client_token and a.client_token != b.client_token


# --- errors, exactly as Slurm ------------------------------------------------------

GOLDEN_ERRORS = [
    ("err_sbatch_unknown_option", ["--bogus-option", "--wrap", "true"]),
    ("err_sbatch_bad_time", ["--time=abc", "--wrap", "true"]),
    ("err_sbatch_missing_script", ["/nonexistent/script.sh"]),
    ("err_sbatch_no_shebang", ["noshebang.sh"]),
]


@pytest.mark.parametrize("name,argv", GOLDEN_ERRORS, ids=[
    "an unknown option is refused with getopt's words and rc 255",
    "a bad --time is refused with rc 255",
    "a missing script cannot be opened",
    "a script without #! is not a batch script",
])
def test_errors_match_golden(name, argv, workdir):
    g = load(name)
    rc, out, err, api = run(argv, workdir)
    assert (rc, out, err) == (g.rc, g.stdout, g.stderr)
    assert api.requests == [], "nothing may be submitted on a client-side error"


def test_stdin_without_shebang_matches_golden(workdir):
    g = load("err_sbatch_stdin_no_shebang")
    rc, out, err, api = run([], workdir, stdin=io.StringIO("hostname\n"))
    assert (rc, out, err) == (g.rc, g.stdout, g.stderr) and api.requests == []


@pytest.mark.parametrize("argv,err_text,rc", [
    (["-Z"], "sbatch: invalid option -- 'Z'\nTry \"sbatch --help\" for more information\n", 255),
    (["--pa=x", "--wrap=x"], "sbatch: option '--pa' is ambiguous; possibilities: '--parsable' "
     "'--partition'\nTry \"sbatch --help\" for more information\n", 255),
    (["--hold=yes", "--wrap=x"], "sbatch: option '--hold' doesn't allow an argument\n"
     "Try \"sbatch --help\" for more information\n", 255),
    (["--wrap=x", "-J"], "sbatch: option requires an argument -- 'J'\n"
     "Try \"sbatch --help\" for more information\n", 255),
    (["--wrap=x", "--job-name"], "sbatch: option '--job-name' requires an argument\n"
     "Try \"sbatch --help\" for more information\n", 255),
    (["-n", "abc", "--wrap=x"], 'sbatch: error: Invalid numeric value "abc" for --ntasks.\n', 1),
    (["-N", "x", "--wrap=x"], 'sbatch: error: "x" is not a valid node count\n', 255),
    (["--mem=lots", "--wrap=x"], "sbatch: error: Invalid --mem specification\n", 255),
    (["--wrap=x", "job.sh"], "sbatch: error: Script arguments not permitted with --wrap option\n", 1),
    (["--gres=fpga:1", "--wrap=x"], "sbatch: error: Batch job submission failed: "
     "Invalid generic resource (gres) specification\n", 1),
    (["--bb=x", "--wrap=x"], "sbatch: error: --bb is not supported by this cluster yet\n", 1),
], ids=["an unknown short option", "an ambiguous prefix lists the candidates",
        "a flag given a value", "a short option missing its argument",
        "a long option missing its argument", "a non-numeric task count",
        "a bad node count", "a bad memory size", "--wrap with a script",
        "a generic resource other than gpu", "an option not supported yet"])
def test_client_side_errors(argv, err_text, rc, workdir):
    got_rc, out, err, api = run(argv, workdir)
    assert (got_rc, out, err) == (rc, "", err_text)
    assert api.requests == []


def test_dos_line_breaks_are_refused(workdir):
    (workdir / "dos.sh").write_text("#!/bin/sh\r\nhostname\r\n")
    rc, _, err, api = run(["dos.sh"], workdir)
    assert rc == 1 and "DOS line breaks" in err and api.requests == []


# --- submitting -----------------------------------------------------------------------


def test_submit_prints_like_slurm(workdir):
    rc, out, err, _ = run(["--wrap", "sleep 300"], workdir)
    assert (rc, out, err) == (0, "Submitted batch job 42\n", "")
    rc, out, err, _ = run(["--parsable", "--wrap", "sleep 300"], workdir)
    assert (rc, out, err) == (0, "42\n", "")


def test_unreachable_controller_is_retried_with_the_same_token(workdir):
    api = FakeApi(ControllerUnreachable("down"), ControllerUnreachable("down"))
    rc, out, _, _ = run(["--wrap=x"], workdir, api=api)
    assert rc == 0 and out == "Submitted batch job 42\n"
    assert len(api.requests) == 3 and len({r.client_token for r in api.requests}) == 1


def test_controller_down_for_good(workdir):
    api = FakeApi(*[ControllerUnreachable("down")] * 10)
    rc, out, err, _ = run(["--wrap=x"], workdir, api=api)
    assert (rc, out) == (1, "")
    assert err == ("sbatch: error: Batch job submission failed: Unable to contact slurm "
                   "controller (connect failure)\n")


def test_invalid_partition_matches_golden(workdir):
    g = load("err_sbatch_invalid_partition")
    api = FakeApi(RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, "Invalid partition name specified"))
    rc, out, err, _ = run(["-p", "nosuchpart", "--wrap", "true"], workdir, api=api)
    assert (rc, out, err) == (g.rc, g.stdout, g.stderr)


def test_other_server_errors_are_printed_with_slurms_words(workdir):
    api = FakeApi(RpcFailure(grpc.StatusCode.INVALID_ARGUMENT,
                             "Requested node configuration is not available"))
    rc, out, err, _ = run(["-N", "99", "--wrap", "true"], workdir, api=api)
    assert (rc, out) == (1, "")
    assert err == ("sbatch: error: Batch job submission failed: Requested node configuration "
                   "is not available\n")


# --- placement and signalling options -------------------------------------------------

SBOPTS_CASES = [
    (["-w", "node[1-3]"], dict(req_nodes="node[1-3]")),
    (["--nodelist=node2,node1"], dict(req_nodes="node[1-2]")),
    (["-x", "node1"], dict(exc_nodes="node1")),
    (["--exclude", "node[3-4],node1"], dict(exc_nodes="node[1,3-4]")),
    (["-C", "fast&ib"], dict(constraint="fast&ib")),
    (["--constraint=a|b"], dict(constraint="a|b")),
    (["--mem-per-cpu=2G"], dict(mem_per_cpu_mb=2048)),
    (["--signal=B:USR1@50"], dict(signal=10, signal_time_s=50, signal_flags="B")),
    (["--signal", "USR2"], dict(signal=12, signal_time_s=60, signal_flags="")),
    (["--mail-type=end,fail", "--mail-user=me@example.org"],
     dict(mail_type="END,FAIL", mail_user="me@example.org")),
    (["--gres=gpu:a100:2"], dict(gpus_per_node=2, gpu_type="a100")),
    (["--gres=gpu:x"], dict(gpus_per_node=1, gpu_type="x")),
    (["--gres=gpu:3"], dict(gpus_per_node=3, gpu_type="")),
    (["-G", "a100:4"], dict(gpus=4, gpu_type="a100")),
    (["--gpus-per-node=2"], dict(gpus_per_node=2, gpu_type="")),
    (["-W"], dict()),
    (["-n4", "--gpus-per-task=a100:1"], dict(num_tasks=4, gpus_per_task=1, gpu_type="a100")),
    (["--gres=gpu:2", "--cpus-per-gpu=4", "--mem-per-gpu=1G"],
     dict(gpus_per_node=2, cpus_per_gpu=4, mem_per_gpu_mb=1024)),
    (["--gres=shard:2"], dict(shards_per_node=2, gpus_per_node=0, mps_per_node=0)),
    (["--gres=mps:50,gpumem:8G"], dict(mps_per_node=50, gpu_mem_limit_mb=8192, gpus_per_node=0)),
]


@pytest.mark.parametrize("argv,want", SBOPTS_CASES, ids=[
    "-w takes a hostlist expression, kept compressed",
    "--nodelist with a comma list is sorted and compressed",
    "-x one node",
    "--exclude a mixed list",
    "-C keeps the expression as given",
    "--constraint with OR",
    "--mem-per-cpu takes a unit suffix",
    "--signal B:name@time",
    "--signal alone defaults to 60 seconds",
    "--mail-type is kept in Slurm's words with --mail-user",
    "--gres=gpu:TYPE:N sets the type and the count",
    "--gres=gpu:x is one GPU of type x, as Slurm reads it",
    "--gres=gpu:N is untyped",
    "-G TYPE:N is per job and typed",
    "--gpus-per-node N is untyped",
    "-W is --wait",
    "--gpus-per-task, typed",
    "CPUs and memory per GPU",
    "--gres=shard:N asks N shards of one GPU per node",
    "--gres=mps:P with a GPU memory cap",
])
def test_placement_and_signal_options_reach_the_spec(argv, want, workdir):
    spec = spec_of([*argv, "--wrap=x"], workdir)
    for key, value in want.items():
        assert getattr(spec, key) == value, f"{key}: want {value!r}, got {getattr(spec, key)!r}"


def test_mem_and_mem_per_cpu_exclude_each_other(workdir):
    (workdir / "mem.sh").write_text("#!/bin/sh\n#SBATCH --mem=1G\ntrue\n")
    spec = spec_of(["--mem-per-cpu=100", "mem.sh"], workdir)
    assert spec.mem_per_cpu_mb == 100 and not spec.HasField("mem_per_node_mb"), \
        "--mem-per-cpu on the command line drops the script's --mem"
    spec = spec_of(["mem.sh"], workdir, env={**ENV, "SBATCH_MEM_PER_CPU": "200"})
    assert spec.mem_per_cpu_mb == 200 and not spec.HasField("mem_per_node_mb"), \
        "the environment beats the script; the later of the two wins"


@pytest.mark.parametrize("argv,env,err_text,rc", [
    (["--signal=FOO"], {}, "sbatch: error: Invalid --signal specification\n", 255),
    (["--signal=USR1@soon"], {}, "sbatch: error: Invalid --signal specification\n", 255),
    (["--mail-type=sometimes"], {}, "sbatch: error: --mail-type=sometimes invalid\n", 255),
    (["--mem=1G", "--mem-per-cpu=1G"], {},
     "sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.\n", 1),
    (["--mem-per-gpu=1G", "--mem-per-cpu=1G"], {},
     "sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.\n", 1),
    ([], {"SBATCH_MEM_PER_CPU": "1", "SBATCH_MEM_PER_NODE": "1"},
     "sbatch: fatal: SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are "
     "mutually exclusive.\n", 1),
    (["--mem-per-cpu=lots"], {}, "sbatch: error: Invalid --mem-per-cpu specification\n", 255),
    (["-C", "fast&"], {},
     "sbatch: error: Batch job submission failed: Invalid feature specification\n", 1),
    (["-w", "node[1-"], {},
     "sbatch: error: Batch job submission failed: Invalid node name specified\n", 1),
    (["--gres=gpu:a100:two"], {},
     "sbatch: error: Batch job submission failed: Invalid generic resource (gres) "
     "specification\n", 1),
    (["--gres=gpu:a100:1,gpu:v100:1"], {},
     "sbatch: error: Batch job submission failed: Invalid generic resource (gres) "
     "specification\n", 1),
    (["--gres=shard:2,mps:50"], {},
     "sbatch: error: Batch job submission failed: Invalid generic resource (gres) "
     "specification\n", 1),
    (["--gres=gpu:1,shard:1"], {},
     "sbatch: error: Batch job submission failed: Invalid generic resource (gres) "
     "specification\n", 1),
    (["--gres=shard:two"], {},
     "sbatch: error: Batch job submission failed: Invalid generic resource (gres) "
     "specification\n", 1),
    (["--gres=shard:1,gpumem:1G"], {},
     "sbatch: error: Batch job submission failed: Invalid generic resource (gres) "
     "specification\n", 1),
    (["--gpus=a:b:1"], {}, "sbatch: error: Invalid --gpus specification\n", 255),
    ([], {"SBATCH_SIGNAL": "NOPE"}, "sbatch: error: Invalid --signal specification\n", 255),
], ids=["an unknown signal", "a signal time that is not a number", "an unknown mail type",
        "--mem with --mem-per-cpu on the command line", "--mem-per-gpu with --mem-per-cpu",
        "both memory variables in the environment", "a bad memory size per CPU",
        "a constraint that does not parse", "a hostlist that does not parse",
        "a GPU count that is not a number", "two GPU types in one job",
        "shards with MPS", "shards beside whole GPUs", "a shard count that is not a number",
        "a GPU memory cap without MPS",
        "--gpus with two types", "a bad SBATCH_SIGNAL"])
def test_placement_and_signal_option_errors(argv, env, err_text, rc, workdir):
    got_rc, out, err, api = run([*argv, "--wrap=x"], workdir, env={**ENV, **env})
    assert (got_rc, out, err) == (rc, "", err_text)
    assert api.requests == []


@pytest.mark.parametrize("var,value,key,want", [
    ("SBATCH_CONSTRAINT", "fast", "constraint", "fast"),
    ("SBATCH_SIGNAL", "B:USR1@30", "signal_time_s", 30),
    ("SBATCH_MEM_PER_CPU", "1G", "mem_per_cpu_mb", 1024),
    ("SBATCH_REQUEUE", "1", "requeue", True),
    ("SBATCH_NO_REQUEUE", "", "requeue", False),
    ("SBATCH_GRES", "gpu:a100:1", "gpu_type", "a100"),
    ("SBATCH_EXCLUSIVE", "", "exclusive", True),
    ("SBATCH_OPEN_MODE", "append", "open_mode", "append"),
], ids=["SBATCH_CONSTRAINT is -C", "SBATCH_SIGNAL is --signal",
        "SBATCH_MEM_PER_CPU is --mem-per-cpu", "SBATCH_REQUEUE is --requeue",
        "SBATCH_NO_REQUEUE set to anything is --no-requeue", "SBATCH_GRES is --gres",
        "SBATCH_EXCLUSIVE empty is plain --exclusive", "SBATCH_OPEN_MODE"])
def test_input_environment_variables(var, value, key, want, workdir):
    assert getattr(spec_of(["--wrap=x"], workdir, env={**ENV, var: value}), key) == want


def test_ignored_option_from_the_environment_warns(workdir):
    rc, _, err, api = run(["--wrap=x"], workdir, env={**ENV, "SBATCH_WCKEY": "w"})
    assert rc == 0 and err == "sbatch: warning: SBATCH_WCKEY is not supported yet; ignored\n"
    assert len(api.requests) == 1


def test_every_env_variable_names_an_option_we_know():
    names = {o.long[0] for o in sbatch_options.ALL_OPTIONS}
    unknown = {v: n for v, n in sbatch_options.ENV_OPTIONS.items() if n not in names}
    assert unknown == {}


TRICKY_SCRIPTS = [
    ("#!/bin/sh\n  #SBATCH -N 2\n#SBATCH -n 3\ntrue\n", ["-n", "3"]),
    ("#!/bin/sh\n#SBATCH -n 1\ncat <<EOF\n#SBATCH -N 9\nEOF\n", ["-n", "1"]),
    ("#!/bin/sh\n#SBATCH -J name # the job's name\n#SBATCH -t 5#five\ntrue\n",
     ["-J", "name", "-t", "5"]),
    ("#!/bin/sh\n#SBATCH --comment=\"a b  c\" -J 'x y'\ntrue\n", ["--comment=a b  c", "-J", "x y"]),
    ("#!/bin/sh\n#SBATCH --comment=a\\ b --wrap=\"say \\\"hi\\\"\"\n",
     ["--comment=a", "b", '--wrap=say "hi"']),
    ("#!/bin/sh\n#SBATCH --comment='#not a comment'\n", ["--comment=#not a comment"]),
    ("#!/bin/sh\n\n# plain comment\n\t\n#SBATCH\t-N\t2\n", ["-N", "2"]),
    ("#!/bin/sh\n#SBATCHX -N 9\n#SBATCH -N 1\n", ["-N", "1"]),
    ("#!/bin/sh\n   echo hi\n#SBATCH -N 1\n", []),
    ("#!/bin/sh\n#SLURM -N 4\n", ["-N", "4"]),
]


@pytest.mark.parametrize("script,want", TRICKY_SCRIPTS, ids=[
    "an indented #SBATCH is a comment and does not stop the scan",
    "#SBATCH in a heredoc after a command is never read",
    "a # outside quotes ends the directive, even inside a word",
    "double and single quotes group words with spaces",
    "a backslash escapes a quote (inside quotes too) but cannot join words",
    "a # inside quotes is kept",
    "blank lines, plain comments and tabs are fine",
    "#SBATCHX is not a directive",
    "an indented command ends the directives",
    "the old #SLURM word is still read",
])
def test_directives_like_sbatch(script, want):
    assert sbatch_options.script_directives(script) == want


def test_unmatched_quote_in_a_directive_is_fatal(workdir):
    (workdir / "q.sh").write_text("#!/bin/sh\n#SBATCH -J \"open\ntrue\n")
    rc, out, err, api = run(["q.sh"], workdir)
    assert (rc, out, err) == (1, "", "sbatch: fatal: q.sh: line 2: Unmatched `\"` in "
                                     "[\"open]\n")
    assert api.requests == []


def test_slurm_magic_word_warns(workdir):
    (workdir / "old.sh").write_text("#!/bin/sh\n#SLURM -J old\ntrue\n")
    rc, out, err, api = run(["old.sh"], workdir)
    assert rc == 0 and api.requests[0].spec.name == "old"
    assert err == ("sbatch: error: Change from #SLURM to #SBATCH in your script and verify "
                   "the options are valid in sbatch\n")


def test_precedence_command_line_then_environment_then_script(workdir):
    (workdir / "p.sh").write_text("#!/bin/sh\n#SBATCH -C script --signal=USR1\ntrue\n")
    env = {**ENV, "SBATCH_CONSTRAINT": "env", "SBATCH_SIGNAL": "USR2@5"}
    assert spec_of(["p.sh"], workdir).constraint == "script"
    assert spec_of(["p.sh"], workdir, env=env).constraint == "env"
    assert spec_of(["-C", "cli", "p.sh"], workdir, env=env).constraint == "cli"
    assert spec_of(["p.sh"], workdir, env=env).signal == 12


class WillRunApi(FakeApi):
    def call(self, method, request, **kw):
        self.requests.append(request)
        return api_pb2.SubmitJobResponse(job_id=7, test_start_time=1796205842, test_cpus=4,
                                         test_nodes="node[1-2]", test_partition="debug")


def test_test_only_prints_the_controllers_estimate(workdir):
    from lingjun import slurm
    rc, out, err, api = run(["--test-only", "-N2", "--wrap=x"], workdir, api=WillRunApi())
    assert (rc, out) == (0, "")
    assert err == (f"sbatch: Job 7 to start at {slurm.format_timestamp(1796205842)} using 4 "
                   "processors on nodes node[1-2] in partition debug\n")
    assert api.requests[0].test_only


@pytest.mark.parametrize("argv, script, env, want", [
    (["--array=0-15:4%2", "--wrap=x"], None, {}, "0-15:4%2"),
    (["-a", "1,3,5", "--wrap=x"], None, {}, "1,3,5"),
    (["arr.sh"], "#!/bin/sh\n#SBATCH --array=1-3\ntrue\n", {}, "1-3"),
    (["arr.sh"], "#!/bin/sh\n#SBATCH --array=1-3\ntrue\n", {"SBATCH_ARRAY_INX": "4-9%2"}, "4-9%2"),
    (["--array=7", "arr.sh"], "#!/bin/sh\n#SBATCH --array=1-3\ntrue\n",
     {"SBATCH_ARRAY_INX": "4-9"}, "7"),
], ids=["--array with step and throttle goes as given", "-a with a list",
        "#SBATCH --array in the script", "SBATCH_ARRAY_INX beats the script",
        "the command line beats SBATCH_ARRAY_INX"])
def test_array_reaches_the_spec(argv, script, env, want, workdir):
    if script:
        (workdir / "arr.sh").write_text(script)
    assert spec_of(argv, workdir, env={**ENV, **env}).array == want


def test_bad_array_matches_golden(workdir):
    g = load("err_sbatch_bad_array")
    api = FakeApi(RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, "Invalid job array specification"))
    rc, out, err, _ = run(["--array=1-1001", "--wrap", "true"], workdir, api=api)
    assert (rc, out, err) == (g.rc, g.stdout, g.stderr)


@pytest.mark.parametrize("args, env, want", [
    (["--requeue=expedite"], {}, (True, True)),
    (["--requeue"], {}, (True, False)),
    ([], {"SBATCH_REQUEUE": "expedite"}, (True, True)),
], ids=["--requeue=expedite asks for an expedited restart",
        "a bare --requeue does not", "SBATCH_REQUEUE=expedite does"])
def test_requeue_expedite(args, env, want, workdir):
    spec = spec_of([*args, "--wrap=x"], workdir, env={**ENV, **env})
    assert (spec.requeue, spec.requeue_expedite) == want


def test_a_requeue_mode_other_than_expedite_is_refused(workdir):
    rc, _, err, api = run(["--requeue=later", "--wrap=x"], workdir)
    assert rc != 0 and err == "sbatch: error: Invalid --requeue specification: later\n", err
    assert api.requests == [], "nothing is submitted"

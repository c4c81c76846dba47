"""The options sbatch, srun and salloc share read alike in all three: the same
value, Slurm's same words and exit status (each checked against Slurm 22.05's
sbatch, srun and salloc side by side), and each command's input variable."""
from __future__ import annotations

import pytest

from lingjun import sbatch_options
from cli.common import CommandError
from lingjun.job_options import JOB_OPTIONS, SHARED
from cli.srun_options import (SALLOC_ENV, SALLOC_OPTIONS, SRUN_ENV, SRUN_OPTIONS, parse_salloc,
                              parse_srun)
from lingjun import slurm

COMMANDS = ("sbatch", "srun", "salloc")


def _parse(prog: str, argv: list[str], env: dict | None = None):
    """What ``prog`` asks for, as JobSpec field -> value."""
    env = env or {}
    if prog == "sbatch":
        spec = sbatch_options.build_request([*argv, "--wrap", "true"], None, env, "/tmp").spec
        return {"time_limit_min": spec.time_limit_min, "num_tasks": spec.num_tasks,
                "min_nodes": spec.min_nodes, "max_nodes": spec.max_nodes,
                "cpus_per_task": spec.cpus_per_task, "partition": spec.partition,
                "account": spec.account, "qos": spec.qos, "exclusive": spec.exclusive,
                "mem_per_node_mb": spec.mem_per_node_mb if spec.HasField("mem_per_node_mb")
                else None,
                "mem_per_cpu_mb": spec.mem_per_cpu_mb if spec.HasField("mem_per_cpu_mb")
                else None}
    o = (parse_srun if prog == "srun" else parse_salloc)([*argv, "true"], env)
    return {"time_limit_min": o.time_limit_min, "num_tasks": o.ntasks, "min_nodes": o.min_nodes,
            "max_nodes": o.max_nodes, "cpus_per_task": o.cpus_per_task,
            "partition": o.partition, "account": o.account, "qos": o.qos,
            "exclusive": o.exclusive, "mem_per_node_mb": o.mem_mb,
            "mem_per_cpu_mb": o.mem_per_cpu_mb}


@pytest.mark.parametrize("prog", COMMANDS)
@pytest.mark.parametrize("argv,want", [
    (["-t", "0"], {"time_limit_min": slurm.UNLIMITED}),
    (["-t", "90"], {"time_limit_min": 90}),
    (["-t", "1-00:00:30"], {"time_limit_min": 1441}),
    (["--time=UNLIMITED"], {"time_limit_min": slurm.UNLIMITED}),
    (["-N", "2-3"], {"min_nodes": 2, "max_nodes": 3}),
    (["-n", "4", "-c", "2"], {"num_tasks": 4, "cpus_per_task": 2}),
    (["--mem=2G"], {"mem_per_node_mb": 2048, "mem_per_cpu_mb": None}),
    (["--mem-per-cpu=512"], {"mem_per_cpu_mb": 512, "mem_per_node_mb": None}),
    (["--mem=0"], {"mem_per_node_mb": 0}),
    (["-p", "gpu", "-A", "proj", "-q", "high", "--exclusive"],
     {"partition": "gpu", "account": "proj", "qos": "high", "exclusive": True}),
], ids=["-t 0 is no limit", "minutes", "days-hours:minutes:seconds round up", "UNLIMITED",
        "a node range", "tasks and CPUs", "--mem", "--mem-per-cpu", "--mem=0: all of it",
        "names"])
def test_each_command_reads_a_shared_option_alike(prog, argv, want):
    got = _parse(prog, argv)
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize("prog", COMMANDS)
@pytest.mark.parametrize("argv,words,rc", [
    (["-t", "soon"], "error: Invalid --time specification", 255),
    (["-N", "x"], 'error: "x" is not a valid node count', 255),
    (["--nodes=2-1"], "error: Maximum node count 1 is less than minimum node count 2", 255),
    (["-n", "x"], 'error: Invalid numeric value "x" for --ntasks.', 1),
    (["-c", "0"], 'error: Invalid numeric value "0" for --cpus-per-task.', 1),
    (["--ntasks-per-node=0"], 'error: Invalid numeric value "0" for --ntasks-per-node.', 1),
    (["--cpus-per-gpu=0"], 'error: Invalid numeric value "0" for --cpus-per-gpu.', 1),
    (["--mem=abc"], "error: Invalid --mem specification", 255),
    (["--mem-per-cpu=abc"], "error: Invalid --mem-per-cpu specification", 255),
    (["--mem-per-gpu=abc"], "error: Invalid --mem-per-gpu specification", 255),
    (["--mem=1G", "--mem-per-cpu=1G"],
     "fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.", 1),
    (["--exclusive=bad"], "error: Invalid --exclusive specification", 255),
], ids=["time", "node count", "node range upside down", "task count", "zero CPUs per task",
        "zero tasks per node", "zero CPUs per GPU", "--mem", "--mem-per-cpu", "--mem-per-gpu",
        "two memory options", "--exclusive"])
def test_each_command_refuses_a_bad_value_in_slurms_words(prog, argv, words, rc):
    with pytest.raises(CommandError) as e:
        _parse(prog, argv)
    assert (e.value.message, e.value.rc) == (f"{prog}: {words}", rc)


def test_every_shared_option_is_in_every_commands_table():
    tables = {"sbatch": sbatch_options.OPTIONS, "srun": SRUN_OPTIONS, "salloc": SALLOC_OPTIONS}
    for prog, table in tables.items():
        keys = {o.key: o for o in table}
        for shared in SHARED:
            assert keys.get(shared.key) == shared.opt(*(("workdir",) if prog == "sbatch"
                                                        and shared.key == "chdir" else ())), \
                (prog, shared.key)


@pytest.mark.parametrize("prog,variables", [
    ("sbatch", sbatch_options.ENV_OPTIONS), ("srun", SRUN_ENV), ("salloc", SALLOC_ENV)])
def test_each_command_reads_its_own_input_variables(prog, variables):
    """SBATCH_TIMELIMIT, SLURM_TIMELIMIT (srun's), SALLOC_TIMELIMIT: each command
    reads the time limit (and every shared option) from its own variable, and
    the command line wins over it."""
    var = JOB_OPTIONS["time"].env[prog]
    assert variables[var] == "time"
    assert _parse(prog, [], {var: "0"})["time_limit_min"] == slurm.UNLIMITED
    assert _parse(prog, ["-t", "5"], {var: "0"})["time_limit_min"] == 5
    part = JOB_OPTIONS["partition"].env[prog]
    assert _parse(prog, [], {part: "gpu"})["partition"] == "gpu"
    mem = JOB_OPTIONS["mem-per-cpu"].env[prog]
    assert _parse(prog, [], {mem: "100"})["mem_per_cpu_mb"] == 100
    assert _parse(prog, ["--mem=1G"], {mem: "100"})["mem_per_node_mb"] == 1024


def test_srun_reads_the_job_shape_sbatch_hands_on():
    """Inside a job: SLURM_NTASKS, SLURM_NNODES, SLURM_NTASKS_PER_NODE,
    SLURM_MEM_PER_NODE, SLURM_GPUS_PER_TASK, SLURM_CPUS_PER_GPU are srun's input;
    SLURM_CPUS_PER_TASK is not (22.05: SRUN_CPUS_PER_TASK is), nor the job's name."""
    job = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4", "SLURM_NPROCS": "4", "SLURM_NNODES": "2",
           "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS_PER_NODE": "2",
           "SLURM_MEM_PER_NODE": "1000", "SLURM_GPUS_PER_TASK": "1", "SLURM_CPUS_PER_GPU": "2",
           "SLURM_CPUS_PER_TASK": "3", "SLURM_JOB_NAME": "train", "SLURM_TIMELIMIT": "30"}
    o = parse_srun(["hostname"], job)
    assert (o.ntasks, o.min_nodes, o.max_nodes, o.ntasks_per_node) == (4, 2, 2, 2)
    assert (o.mem_mb, o.gpus_per_task, o.gpus_given, o.cpus_per_gpu) == (1000, 1, True, 2)
    assert (o.cpus_per_task, o.job_name, o.time_limit_min) == (0, "", 30)
    assert parse_srun(["hostname"], {**job, "SRUN_CPUS_PER_TASK": "3",
                                     "SLURM_CPUS_PER_GPU": ""}).cpus_per_task == 3
    # a shape on the command line is taken whole; so are memory and GPUs
    o = parse_srun(["-N1", "--mem-per-cpu=10", "--gres=none", "hostname"], job)
    assert (o.ntasks, o.min_nodes, o.ntasks_per_node) == (0, 1, 0)
    assert (o.mem_mb, o.mem_per_cpu_mb, o.gpus_per_task) == (None, 10, 0)
    # outside a job SLURM_JOB_NAME names srun's own allocation
    assert parse_srun(["hostname"], {"SLURM_JOB_NAME": "mine"}).job_name == "mine"


def test_an_input_variable_for_an_option_not_supported_is_refused():
    with pytest.raises(CommandError) as e:
        parse_srun(["true"], {"SLURM_DEPENDENCY": "afterok:1"})
    assert e.value.message == "srun: error: SLURM_DEPENDENCY is not supported yet"


def test_sbatch_reads_every_input_variable_of_sbatch_1():
    """SBATCH_OUTPUT, SBATCH_ERROR, SBATCH_INPUT set what their options set; one for an
    option refused here is refused in the same words, nothing submitted."""
    spec = sbatch_options.build_request(["--wrap", "true"], None, {
        "SBATCH_OUTPUT": "o-%j.txt", "SBATCH_ERROR": "e-%j.txt", "SBATCH_INPUT": "in.txt"},
        "/tmp").spec
    assert (spec.stdout_pattern, spec.stderr_pattern, spec.stdin_path) == (
        "o-%j.txt", "e-%j.txt", "in.txt")
    with pytest.raises(CommandError) as e:
        sbatch_options.build_request(["--wrap", "true"], None, {"SBATCH_RESERVATION": "r"}, "/tmp")
    assert (e.value.message, e.value.rc) == (
        "sbatch: error: --reservation is not supported by this cluster yet", 1)

"""srun's and salloc's command lines: Slurm 22.05's options, parsed once into
frozen values, with Slurm's words for bad input.

    >>> o = parse_srun(["-N2", "-l", "--export=NONE", "hostname"])
    >>> (o.min_nodes, o.label, o.export, o.command)
    (2, True, 'NONE', ('hostname',))

The options they share with sbatch are lingjun/job_options.py's (one reader, one
set of words for all three); each command also reads its input variables
(srun: SLURM_*, SRUN_CPUS_PER_TASK; salloc: SALLOC_*), the command line over them.

Both commands stop at the first word that is not an option (getopt's "+"):
what follows is the command and its own arguments. Options real srun knows
that would change what runs, and that we do not model, are refused ("is not
supported yet") rather than dropped; a few hints that change nothing a task
can observe here are accepted (IGNORED).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from cli.common import CommandError, Reply, parse_options
from lingjun.job_options import (JOB_OPTIONS, MEMORY_FIELDS, SHARED, env_variables,
                             memory_conflict)
from lingjun.sbatch_options import parse_gres
from lingjun.options import NO, OPTIONAL, REQUIRED, VERSION, Opt, env_options
from lingjun import slurm

USAGE_RC = 255      # glibc getopt errors: Slurm's commands exit -1
MPI_TYPES = ("none", "pmi2")

_O = Opt
# The options srun and salloc share with sbatch (lingjun/job_options.py), then theirs.
_COMMON = [o.opt() for o in SHARED] + [
    _O("usage", ("usage",), "", NO),
    _O("gpu-bind", ("gpu-bind",), "", REQUIRED),
    # hints with no effect here (no CPU binding, no mail): Slurm with task/none accepts them too
    _O("ignore", ("cpu-bind", "mail-type", "mail-user", "hint"), "", REQUIRED),
    # would change what runs, not modelled yet: refused rather than dropped
    _O("unsupported", ("constraint", "dependency", "distribution", "exclude",
                       "het-group", "pty", "x11", "signal", "no-kill", "reservation", "begin",
                       "hold", "requeue"), "", OPTIONAL),
    _O("unsupported", (), "CdmWx", REQUIRED),
    _O("nice", ("nice",), "", OPTIONAL),
]

SRUN_OPTIONS = _COMMON + [
    _O("error", ("error",), "e", REQUIRED),
    _O("export", ("export",), "", REQUIRED),
    _O("input", ("input",), "i", REQUIRED),
    _O("jobid", ("jobid",), "", REQUIRED),
    _O("kill-on-bad-exit", ("kill-on-bad-exit",), "K", OPTIONAL),
    _O("label", ("label",), "l", NO),
    _O("mpi", ("mpi",), "", REQUIRED),
    _O("nodelist", ("nodelist",), "w", REQUIRED),
    _O("output", ("output",), "o", REQUIRED),
    _O("overlap", ("overlap",), "", NO),
    _O("unbuffered", ("unbuffered",), "u", NO),
]

# -w for a new allocation needs the job to ask for nodes by name (JobSpec has no
# such field yet): refused until it does, as srun -w outside an allocation is.
SALLOC_OPTIONS = _COMMON + [
    _O("unsupported", ("nodelist",), "w", REQUIRED),
]

# Input variables (srun.1 and salloc.1 INPUT ENVIRONMENT VARIABLES, 22.05) -> option:
# the shared options' from lingjun/job_options.py, then each command's own. A job's
# SLURM_NTASKS, SLURM_NNODES, SLURM_MEM_PER_NODE, SLURM_GPUS_PER_TASK... (what sbatch,
# salloc and srun hand on through the environment) are srun's input here.
SRUN_ENV = env_variables("srun", {
    "SLURM_JOB_NUM_NODES": "nodes", "SLURM_NPROCS": "ntasks",
    "SLURM_KILL_BAD_EXIT": "kill-on-bad-exit", "SLURM_LABELIO": "label",
    "SLURM_MPI_TYPE": "mpi", "SLURM_OVERLAP": "overlap", "SLURM_UNBUFFEREDIO": "unbuffered",
    "SLURM_STDOUTMODE": "output", "SLURM_STDERRMODE": "error", "SLURM_STDINMODE": "input",
    "SLURM_EXPORT_ENV": "export", "SRUN_EXPORT_ENV": "export", "SLURM_GPU_BIND": "gpu-bind",
    "SLURM_CPU_BIND": "cpu-bind", "SLURM_HINT": "hint", "SLURM_CONSTRAINT": "constraint",
    "SLURM_DEPENDENCY": "dependency", "SLURM_SIGNAL": "signal", "SLURM_NO_KILL": "no-kill",
    "SLURM_RESERVATION": "reservation",
})
SALLOC_ENV = env_variables("salloc", {
    "SALLOC_GPU_BIND": "gpu-bind", "SALLOC_HINT": "hint", "SALLOC_CONSTRAINT": "constraint",
    "SALLOC_SIGNAL": "signal", "SALLOC_NO_KILL": "no-kill", "SALLOC_RESERVATION": "reservation",
})
# Options that shape one thing together: the command line giving any of a group
# leaves the group's variables out (a job's SLURM_NTASKS does not meet an srun -N1,
# nor its SLURM_MEM_PER_NODE an srun --mem-per-cpu).
_ENV_GROUPS = (("nodes", "ntasks", "ntasks-per-node", "nodelist"),
               tuple(MEMORY_FIELDS),
               ("gres", "gpus", "gpus-per-node", "gpus-per-task"),
               ("cpus-per-task", "cpus-per-gpu"))

SRUN_USAGE = """Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]] [ : [OPTIONS(N)...]] executable(N) [args(N)...]

Parallel run options:
  -c, --cpus-per-task=ncpus   number of cpus required per task
      --cpus-per-gpu=n        number of CPUs required per allocated GPU
  -D, --chdir=path            change remote current working directory
  -e, --error=err             location of stderr redirection
      --exclusive             allocate CPUs for the step alone (--exact)
      --export=env_vars|NONE  environment passed to the tasks
  -G, --gpus=n                count of GPUs required for the job (or step)
      --gpu-bind=...          task to gpu binding options
                              (closest, single:N, map_gpu:LIST, per_task:N, none)
      --gpus-per-node=n       number of GPUs required per allocated node
      --gpus-per-task=n       number of GPUs required per spawned task
      --gres=list             required generic resources (gpu[:type][:N], none)
  -i, --input=in              location of stdin redirection (none)
  -J, --job-name=jobname      name of job
      --jobid=id              run under already allocated job
  -K, --kill-on-bad-exit      kill the job if any task terminates with a
                              non-zero exit code
  -l, --label                 prepend task number to lines of stdout/err
      --mem=MB                minimum amount of real memory
      --mem-per-cpu=MB        maximum amount of real memory per allocated cpu
      --mem-per-gpu=MB        real memory required per allocated GPU
      --mpi=type              type of MPI being used (none, pmi2)
      --nice[=value]          decrease scheduling priority by value
  -N, --nodes=N               number of nodes on which to run (N = min[-max])
  -n, --ntasks=ntasks         number of tasks to run
      --ntasks-per-node=n     number of tasks to invoke on each node
  -o, --output=out            location of stdout redirection
      --overlap               share the step's resources with other steps
  -p, --partition=partition   partition requested
  -Q, --quiet                 quiet mode (suppress informational messages)
      --segment=N             topology/block: nodes in groups of N, each within a block
      --switches=max-switches{@max-time-to-wait}
                              Optimum switches and max time to wait for optimum
  -t, --time=minutes          time limit
  -u, --unbuffered            do not line-buffer stdout/err
  -w, --nodelist=hosts...     request a specific list of hosts

Help options:
  -h, --help                  show this help message
      --usage                 display brief usage message
"""

SALLOC_USAGE = """Usage: salloc [OPTIONS(0)...] [ : [OPTIONS(N)...]] [command(0) [args(0)...]]

Parallel run options:
  -c, --cpus-per-task=ncpus   number of cpus required per task
      --cpus-per-gpu=n        number of CPUs required per allocated GPU
  -D, --chdir=path            change working directory
      --exclusive             allocate nodes in exclusive mode
  -G, --gpus=n                count of GPUs required for the job
      --gpus-per-node=n       number of GPUs required per allocated node
      --gpus-per-task=n       number of GPUs required per spawned task
      --gres=list             required generic resources
  -J, --job-name=jobname      name of job
      --mem=MB                minimum amount of real memory
      --mem-per-cpu=MB        maximum amount of real memory per allocated cpu
      --mem-per-gpu=MB        real memory required per allocated GPU
      --nice[=value]          decrease scheduling priority by value
  -N, --nodes=N               number of nodes on which to run (N = min[-max])
  -n, --ntasks=N              number of processors required
      --ntasks-per-node=n     number of tasks to invoke on each node
  -p, --partition=partition   partition requested
  -Q, --quiet                 quiet mode (suppress informational messages)
      --segment=N             topology/block: nodes in groups of N, each within a block
      --switches=max-switches{@max-time-to-wait}
                              Optimum switches and max time to wait for optimum
  -t, --time=minutes          time limit

Help options:
  -h, --help                  show this help message
      --usage                 display brief usage message
"""


@dataclass(frozen=True)
class RunOptions:
    """What srun or salloc was asked, after parsing (0 / "" / None = not given)."""
    command: tuple[str, ...] = ()
    min_nodes: int = 0
    max_nodes: int = 0
    ntasks: int = 0
    ntasks_per_node: int = 0
    cpus_per_task: int = 0
    job_name: str = ""
    chdir: str = ""
    partition: str = ""
    account: str = ""
    qos: str = ""
    comment: str = ""
    time_limit_min: int = 0
    exclusive: bool = False
    quiet: bool = False
    nodelist: tuple[str, ...] = ()
    # srun only
    label: bool = False
    unbuffered: bool = False
    kill_on_bad_exit: bool | None = None
    export: str = ""
    output: str = ""
    error: str = ""
    jobid: int = 0
    overlap: bool = False
    mpi: str = ""
    nice: int = 0                   # --nice[=N] (a bare --nice is 100); a new allocation's
    ignored: tuple[str, ...] = ()
    # GPUs and memory (0 / "" / None = not given)
    gpus_given: bool = False        # any GPU option, --gres=none included
    gpus: int = 0                   # -G: per job (or per step)
    gpus_per_node: int = 0          # --gres=gpu:N / --gpus-per-node
    shards_per_node: int = 0        # --gres=shard:N (an allocation's, not a step's)
    mps_per_node: int = 0           # --gres=mps:P
    gpu_mem_mb: int = 0             # --gres=mps:P,gpumem:SIZE
    gpus_per_task: int = 0
    gpu_type: str = ""
    gpu_bind: str = ""
    cpus_per_gpu: int = 0
    mem_mb: int | None = None       # --mem (0 = all of the node's)
    mem_per_cpu_mb: int | None = None
    mem_per_gpu_mb: int | None = None
    # network topology: --switches=N[@max-time], --segment=N (0 / None = not given)
    switches: int = 0
    switch_wait_s: int | None = None
    segment: int = 0


def _err(prog: str, text: str, rc: int = 1) -> CommandError:
    return CommandError(f"{prog}: error: {text}", rc)


def _env_options(prog: str, table: list[Opt], variables: dict[str, str],
                 cli: list, env: Mapping[str, str]) -> list:
    """The input variables of ``prog`` as options, before the command line's."""
    given = {k for k, _, _ in cli}
    for group in _ENV_GROUPS:
        if given & set(group):
            given |= set(group)
    if prog == "srun" and (env.get("SLURM_JOB_ID") or "jobid" in given):
        given.add("job-name")      # srun.1: a job's name is not its steps' names
    opts = env_options(env, variables, table, given)
    on = {k for k, _, _ in opts}
    if len(on & set(MEMORY_FIELDS)) > 1:
        raise CommandError(f"{prog}: fatal: SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and "
                           "SLURM_MEM_PER_NODE are mutually exclusive.", 1)
    return opts


# JobSpec's names for what RunOptions calls otherwise.
_RUN_FIELDS = {"num_tasks": "ntasks", "name": "job_name", "work_dir": "chdir",
               "mem_per_node_mb": "mem_mb"}


def _parse(prog: str, argv: list[str], table: list[Opt], usage: str,
           variables: dict[str, str], env: Mapping[str, str]) -> RunOptions:
    cli, rest = parse_options(prog, argv, table, rc=USAGE_RC, stop_at_positional=True)
    opts = _env_options(prog, table, variables, cli, env) + cli
    v: dict = {"command": tuple(rest)}
    ignored = []
    mem_keys: set[str] = set()
    for key, value, spelled in opts:
        if key == "unsupported":
            raise _err(prog, f"{spelled} is not supported yet")
        if key in ("help", "usage"):
            raise Reply(usage)
        if key == "version":
            raise Reply(VERSION)
        shared = JOB_OPTIONS.get(key)
        if shared is not None and shared.reader is not None:
            if key in MEMORY_FIELDS:
                mem_keys.add(key)
            for name, val in shared.read(prog, value).items():
                v[_RUN_FIELDS.get(name, name)] = val
            continue
        if key == "ignore":
            ignored.append(spelled)
        elif key in _RUN_OPTIONS:
            _RUN_OPTIONS[key](prog, key, value, v)
        elif key != "verbose":  # plain strings: export, output, error
            v[key.replace("-", "_")] = value
    if ignored:
        v["ignored"] = tuple(ignored)
    if len(mem_keys) > 1:
        raise memory_conflict(prog)
    if v.get("cpus_per_gpu") and v.get("cpus_per_task"):
        raise _err(prog, "--cpus-per-gpu is mutually exclusive with --cpus-per-task")
    return RunOptions(**v)


# --- srun's and salloc's own options: what each sets in RunOptions' fields (v) ------------


def _nodelist(prog: str, key: str, value: str, v: dict) -> None:
    try:
        v["nodelist"] = tuple(slurm.expand_hostlist(value))
    except Exception:  # noqa: BLE001 - python-hostlist's BadHostlist and friends
        raise _err(prog, f"Invalid node name specified: {value}") from None


def _kill_on_bad_exit(prog: str, key: str, value: str | None, v: dict) -> None:
    if value not in (None, "0", "1"):
        raise _err(prog, f'Invalid numeric value "{value}" for --kill-on-bad-exit.')
    v["kill_on_bad_exit"] = value != "0"


def _input(prog: str, key: str, value: str, v: dict) -> None:
    if value.lower() != "none":
        raise _err(prog, f"--input={value} is not supported yet (only none)")


def _mpi(prog: str, key: str, value: str, v: dict) -> None:
    if value == "list":
        raise Reply("MPI plugin types are...\n" + "".join(f"\t{t}\n" for t in MPI_TYPES))
    if value not in MPI_TYPES:
        raise _err(prog, f"Invalid MPI type '{value}', --mpi=list for acceptable types")
    v["mpi"] = value


def _jobid(prog: str, key: str, value: str, v: dict) -> None:
    head = value.split(".")[0].strip()
    if not slurm.is_job_id(head) or int(head) < 1:
        raise _err(prog, f'Invalid numeric value "{value}" for --jobid.')
    v["jobid"] = int(head)


def _gpus(prog: str, key: str, value: str, v: dict) -> None:
    v.update(_gpu_option(prog, key, value, v.get("gpu_type", "")))
    v["gpus_given"] = True


def _gpu_bind(prog: str, key: str, value: str, v: dict) -> None:
    v["gpu_bind"] = parse_gpu_bind(prog, value)


def _nice(prog: str, key: str, value: str | None, v: dict) -> None:
    try:
        v["nice"] = int(value) if value not in (None, "") else 100
    except ValueError:
        raise _err(prog, "Invalid --nice value") from None


def _flag(prog: str, key: str, value: None, v: dict) -> None:
    v[key] = True


_RUN_OPTIONS = {
    "nodelist": _nodelist, "kill-on-bad-exit": _kill_on_bad_exit, "input": _input,
    "mpi": _mpi, "jobid": _jobid, "gpu-bind": _gpu_bind, "nice": _nice,
    **{k: _gpus for k in ("gres", "gpus", "gpus-per-node", "gpus-per-task")},
    **{k: _flag for k in ("label", "unbuffered", "overlap", "quiet")},
}


GPU_BIND_KINDS = ("closest", "none", "single", "map_gpu", "per_task")


def _gpu_option(prog: str, key: str, value: str, gpu_type: str) -> dict:
    """One of --gres/-G/--gpus-per-node/--gpus-per-task as RunOptions fields."""
    text = value.strip()
    if key == "gres":
        if text == "none":     # the step asks for no GPUs (it sees none)
            return {"gpus_per_node": 0, "gpus": 0, "gpus_per_task": 0}
        try:
            g = parse_gres(text)
        except CommandError:
            raise _err(prog, "Invalid generic resource (gres) specification") from None
        if g.shards or g.mps:
            return {"shards_per_node": g.shards, "mps_per_node": g.mps, "gpu_mem_mb": g.gpu_mem_mb}
        return {"gpus_per_node": g.gpus, "gpu_type": g.gpu_type or gpu_type}
    t, _, count = text.rpartition(":")
    if not count.isdigit() or ":" in t:
        raise _err(prog, "Invalid generic resource (gres) specification")
    field = {"gpus": "gpus", "gpus-per-node": "gpus_per_node", "gpus-per-task": "gpus_per_task"}[key]
    return {field: int(count), "gpu_type": t or gpu_type}


def parse_gpu_bind(prog: str, value: str) -> str:
    """--gpu-bind: closest | none | single:N | map_gpu:I[,I...] | per_task:N
    (an optional "verbose," first is dropped). Returns the normalised text."""
    text = value.strip()
    if text.startswith("verbose,"):
        text = text[len("verbose,"):]
    kind, sep, arg = text.partition(":")
    ok = kind in GPU_BIND_KINDS and bool(sep) == (kind in ("single", "map_gpu", "per_task"))
    if ok and kind in ("single", "per_task"):
        ok = arg.isdigit() and int(arg) > 0
    if ok and kind == "map_gpu":
        ok = all(_gpu_id(x) is not None for x in arg.split(","))
    if not ok:      # Slurm reads it as the "gpu:" binding, and names it so
        raise _err(prog, f"Invalid --gpu-bind argument: gpu:{value}", USAGE_RC)
    return text


def _gpu_id(text: str) -> int | None:
    """One map_gpu entry: decimal, or hexadecimal with 0x, with an optional "*N" repeat."""
    head, star, times = text.partition("*")
    try:
        n = int(head, 16) if head.lower().startswith("0x") else int(head)
        if star and int(times) < 1:
            return None
    except ValueError:
        return None
    return n if n >= 0 else None


def parse_srun(argv: list[str], env: Mapping[str, str] = {}) -> RunOptions:
    """srun's options from argv and its input variables in ``env``."""
    return _parse("srun", argv, SRUN_OPTIONS, SRUN_USAGE, SRUN_ENV, env)


def parse_salloc(argv: list[str], env: Mapping[str, str] = {}) -> RunOptions:
    """salloc's options from argv and its input variables (SALLOC_*) in ``env``."""
    return _parse("salloc", argv, SALLOC_OPTIONS, SALLOC_USAGE, SALLOC_ENV, env)

"""The options sbatch, srun and salloc share, each defined once: its
spellings, what it reads (and Slurm's words and exit status when it cannot),
the JobSpec fields it sets, and the input environment variable each of the
three commands reads it from (sbatch.1, srun.1, salloc.1 INPUT ENVIRONMENT
VARIABLES, Slurm 22.05).

    >>> TIME.read("srun", "0")
    {'time_limit_min': -1}
    >>> JOB_OPTIONS["time"].env
    {'sbatch': 'SBATCH_TIMELIMIT', 'srun': 'SLURM_TIMELIMIT', 'salloc': 'SALLOC_TIMELIMIT'}

The three commands agree because they call the same reader: "-t 0" is no
limit for each (Slurm's arg_set_time), a memory size none of them can read
is "Invalid --mem-per-cpu specification" with exit 255 from each. The GPU
options (--gres, -G, --gpus-per-node, --gpus-per-task) are named here with
their variables; their values are read by lingjun/sbatch_options.py's GPU
parsers, which both commands call.

On the ground floor (``lingjun/``) because the commands are not its only
readers: the SDK's ``Client.submit`` and ``lingjun restd`` take sbatch's
options too, through ``sbatch_options``, and import nothing of ``cli/``.
"""
from __future__ import annotations

import re
from collections import namedtuple

TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Callable, Mapping

from lingjun.options import NO, OPTIONAL, REQUIRED, CommandError, Opt
from lingjun import slurm

USAGE_RC = 255              # Slurm's error() and exit(-1) in its option readers
INT32_MAX = 2 ** 31 - 1

# What each command says before the controller's words for a request it refuses.
SUBMIT_FAILED = {"sbatch": "Batch job submission failed: ",
                 "srun": "Unable to allocate resources: ",
                 "salloc": "Job submit/allocate failed: "}


class BadValue(Exception):
    """An option value the command refuses: ``text`` after "<prog>: error: ",
    exit ``rc``; ``submit`` puts the command's submission-failed words first."""

    def __init__(self, text: str, rc: int = USAGE_RC, submit: bool = False):
        super().__init__(text)
        self.text, self.rc, self.submit = text, rc, submit


def _count(text: str, option: str, minimum: int = 1) -> int:
    """A positive count as Slurm's parse_int reads it (rc 1 on anything else)."""
    try:
        n = int(text.strip())
    except (ValueError, AttributeError):
        raise BadValue(f'Invalid numeric value "{text}" for {option}.', 1) from None
    if n < minimum or n > INT32_MAX:
        raise BadValue(f'Invalid numeric value "{text}" for {option}.', 1)
    return n


_NODE_COUNT_RE = r"(\d+)([kKmM]?)"


def _node_count(text: str) -> int:
    m = re.fullmatch(_NODE_COUNT_RE, text.strip())
    if not m:
        raise ValueError(text)
    return int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]


def read_nodes(text: str) -> dict:
    """-N "2" -> 2..2; "2-4" -> 2..4; "2k" -> 2048 (Slurm's verify_node_count)."""
    lo, sep, hi = text.partition("-")
    try:
        a = _node_count(lo)
        b = _node_count(hi) if sep and hi else a
    except ValueError:
        raise BadValue(f'"{text}" is not a valid node count') from None
    if b < a:
        raise BadValue(f"Maximum node count {b} is less than minimum node count {a}")
    if a < 1:
        raise BadValue("Node count specification invalid", 1, submit=True)
    return {"min_nodes": a, "max_nodes": b}


def read_time(text: str) -> dict:
    """-t: Slurm's time forms; 0 is no limit, as in Slurm's arg_set_time."""
    try:
        minutes = slurm.parse_time_limit(text)
    except ValueError:
        raise BadValue("Invalid --time specification") from None
    return {"time_limit_min": slurm.UNLIMITED if minutes == 0 else minutes}


def _memory(field_name: str, option: str) -> Callable[[str], dict]:
    def read(text: str) -> dict:
        try:
            return {field_name: slurm.parse_size_mb(text)}
        except ValueError:
            raise BadValue(f"Invalid {option} specification") from None
    read.__doc__ = f"{option}: a size (MB by default; K, G, T suffixes)."
    return read


def read_exclusive(text: str | None) -> dict:
    if text not in (None, "", "user", "mcs"):
        raise BadValue("Invalid --exclusive specification")
    return {"exclusive": True}


def read_switches(text: str) -> dict:
    """--switches=COUNT[@MAX-TIME] (Slurm's arg_set_switches): the most leaf switches,
    and how long to wait for them (Slurm's time forms, [[DD-]HH:]MM:SS or minutes)."""
    count, at, wait = text.partition("@")
    out = {"switches": _count(count, "--switches")}
    if at:
        try:
            secs = slurm.parse_time_seconds(wait)
        except ValueError:
            return out
        out["switch_wait_s"] = INT32_MAX if secs < 0 else min(secs, INT32_MAX)
    return out


def _text(field_name: str) -> Callable[[str], dict]:
    return lambda text: {field_name: text}


def _positive(field_name: str, option: str) -> Callable[[str], dict]:
    return lambda text: {field_name: _count(text, option)}


class JobOption(namedtuple("JobOption", "key short arg reader env aliases",
                           defaults=("", REQUIRED, None, {}, ()))):
    """One shared option. ``reader`` turns its value into JobSpec fields (None:
    the command reads it itself); ``env`` is each command's input variable
    (read only: the default ``{}`` is shared). A named tuple, not a dataclass:
    ``dataclasses`` brings ``inspect`` and costs every command 6 ms to start."""
    __slots__ = ()

    def opt(self, *aliases: str) -> Opt:
        """Its getopt entry (``aliases``: a command's own further long names)."""
        return Opt(self.key, (self.key, *self.aliases, *aliases), self.short, self.arg)

    def read(self, prog: str, value: str | None) -> dict:
        """The JobSpec fields for ``value``; CommandError in Slurm's words."""
        try:
            return self.reader(value)
        except BadValue as e:
            prefix = SUBMIT_FAILED[prog] if e.submit else ""
            raise CommandError(f"{prog}: error: {prefix}{e.text}", e.rc) from None


def _env(sbatch: str = "", srun: str = "", salloc: str = "") -> dict[str, str]:
    return {k: v for k, v in (("sbatch", sbatch), ("srun", srun), ("salloc", salloc)) if v}


def _same(name: str) -> dict[str, str]:
    """SBATCH_X, SLURM_X (srun's), SALLOC_X."""
    return _env(f"SBATCH_{name}", f"SLURM_{name}", f"SALLOC_{name}")


_J = JobOption
TIME = _J("time", "t", REQUIRED, read_time, _same("TIMELIMIT"))
SHARED = [
    _J("account", "A", REQUIRED, _text("account"), _same("ACCOUNT")),
    _J("chdir", "D", REQUIRED, _text("work_dir"), _env(srun="SLURM_WORKING_DIR")),
    _J("comment", "", REQUIRED, _text("comment")),
    _J("cpus-per-task", "c", REQUIRED, _positive("cpus_per_task", "--cpus-per-task"),
       _env(srun="SRUN_CPUS_PER_TASK")),
    _J("cpus-per-gpu", "", REQUIRED, _positive("cpus_per_gpu", "--cpus-per-gpu"),
       _same("CPUS_PER_GPU")),
    _J("exclusive", "", OPTIONAL, read_exclusive, _same("EXCLUSIVE")),
    _J("job-name", "J", REQUIRED, _text("name"), _env("SBATCH_JOB_NAME", "SLURM_JOB_NAME")),
    _J("nodes", "N", REQUIRED, read_nodes, _env(srun="SLURM_NNODES")),
    _J("ntasks", "n", REQUIRED, _positive("num_tasks", "--ntasks"), _env(srun="SLURM_NTASKS")),
    _J("ntasks-per-node", "", REQUIRED, _positive("ntasks_per_node", "--ntasks-per-node"),
       _env(srun="SLURM_NTASKS_PER_NODE")),
    _J("partition", "p", REQUIRED, _text("partition"), _same("PARTITION")),
    _J("qos", "q", REQUIRED, _text("qos"), _same("QOS")),
    TIME,
    _J("mem", "", REQUIRED, _memory("mem_per_node_mb", "--mem"), _same("MEM_PER_NODE")),
    _J("mem-per-cpu", "", REQUIRED, _memory("mem_per_cpu_mb", "--mem-per-cpu"),
       _same("MEM_PER_CPU")),
    _J("mem-per-gpu", "", REQUIRED, _memory("mem_per_gpu_mb", "--mem-per-gpu"),
       _same("MEM_PER_GPU")),
    # GPUs: read by lingjun/sbatch_options.py's parsers (parse_gres_gpus, parse_gpu_count)
    _J("gres", "", REQUIRED, None, _same("GRES")),
    _J("gpus", "G", REQUIRED, None, _same("GPUS")),
    _J("gpus-per-node", "", REQUIRED, None, _same("GPUS_PER_NODE")),
    _J("gpus-per-task", "", REQUIRED, None, _same("GPUS_PER_TASK")),
    _J("switches", "", REQUIRED, read_switches, _same("REQ_SWITCH")),
    _J("segment", "", REQUIRED, _positive("segment", "--segment")),
    _J("quiet", "Q", NO),
    _J("verbose", "v", NO),
    _J("help", "h", NO),
    _J("version", "V", NO),
]
JOB_OPTIONS: dict[str, JobOption] = {o.key: o for o in SHARED}

# --mem, --mem-per-cpu and --mem-per-gpu, and the JobSpec field each sets: they
# exclude one another (Slurm's words below).
MEMORY_FIELDS = {"mem": "mem_per_node_mb", "mem-per-cpu": "mem_per_cpu_mb",
                 "mem-per-gpu": "mem_per_gpu_mb"}


def memory_conflict(prog: str) -> CommandError:
    return CommandError(f"{prog}: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are "
                        "mutually exclusive.", 1)


def env_variables(prog: str, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """VAR -> option name, for every shared option ``prog`` reads from one,
    and the command's own ``extra``."""
    out = {o.env[prog]: o.key for o in SHARED if prog in o.env}
    out.update(extra)
    return out

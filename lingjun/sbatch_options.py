"""sbatch's options: from a script, the environment and a command line to a submission.

Options come from three places, later ones winning, as in Slurm:
``#SBATCH`` lines of the script (only those before the first line that is
neither blank nor a comment), then ``SBATCH_*`` environment variables, then
the command line. Everything is checked before anything is sent: on any
client-side error nothing is submitted.

    >>> build_request(["-N2", "-t", "10", "--wrap", "srun hostname"], None, {}, "/tmp").spec.min_nodes
    2

Parsing is the pure function ``build_request(argv, stdin, env, cwd)`` (and
``parse_args``, which also says what to print instead: --help, warnings).
The command (``cli/sbatch.py``) submits what it returns. It lives on the
ground floor (``lingjun/``), not beside the command, because it is the one
table of job options: the SDK (``lingjun/sdk.py``: ``Client.submit`` takes
sbatch's long options as keywords), ``lingjun restd`` (a job's fields as
sbatch options), ``scrontab``, ``srun`` and ``salloc`` read options with it,
and the ground floor imports nothing of ``cli/``.
"""
from __future__ import annotations

import os
import sys
import time
from collections import namedtuple
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Callable, Mapping, TextIO

from lingjun import messages, slurm
from lingjun.job_options import JOB_OPTIONS, MEMORY_FIELDS, env_variables, memory_conflict
from lingjun.options import NO, OPTIONAL, REQUIRED, VERSION, CommandError, Opt, parse_options

PROG = "sbatch"
USAGE_RC = 255

# What we do with each of Slurm 22.05's sbatch options. "ignore": accepted
# with a warning (hints that change nothing a job can observe here);
# "unsupported": refused, since silently dropping it would run the job wrong.
_O = Opt
# In Slurm's order (getopt lists an ambiguous prefix's candidates in it); _S: an
# option sbatch shares with srun and salloc, defined in lingjun/job_options.py.
def _S(key: str, *aliases: str) -> Opt:
    return JOB_OPTIONS[key].opt(*aliases)


OPTIONS = [
    _S("account"),
    _O("array", ("array",), "a", REQUIRED),
    _S("chdir", "workdir"),
    _S("comment"),
    _S("cpus-per-task"),
    _O("error", ("error",), "e", REQUIRED),
    _S("exclusive"),
    _O("export", ("export",), "", REQUIRED),
    _S("gpus"),
    _S("gpus-per-node"),
    _S("gres"),
    _S("help"),
    _O("hold", ("hold",), "H", NO),
    _O("input", ("input",), "i", REQUIRED),
    _S("job-name"),
    _O("launcher", ("launcher",), "", REQUIRED),
    _S("mem"),
    _O("nice", ("nice",), "", OPTIONAL),
    _O("no-requeue", ("no-requeue",), "", NO),
    _S("nodes"),
    _S("ntasks"),
    _S("ntasks-per-node"),
    _O("open-mode", ("open-mode",), "", REQUIRED),
    _O("output", ("output",), "o", REQUIRED),
    _O("parsable", ("parsable",), "", NO),
    _S("partition"),
    _S("qos"),
    _S("quiet"),
    _O("requeue", ("requeue",), "", OPTIONAL),
    _O("test-only", ("test-only",), "", NO),
    _S("time"),
    _O("usage", ("usage",), "u", NO),
    _S("verbose"),
    _S("version"),
    _O("wait", ("wait",), "W", NO),
    _O("wrap", ("wrap",), "", REQUIRED),
    _O("nodelist", ("nodelist",), "w", REQUIRED),
    _O("exclude", ("exclude",), "x", REQUIRED),
    _O("constraint", ("constraint",), "C", REQUIRED),
    _S("mem-per-cpu"),
    _S("mem-per-gpu"),
    _S("cpus-per-gpu"),
    _S("gpus-per-task"),
    _S("switches"),
    _S("segment"),
    _O("signal", ("signal",), "", REQUIRED),
    _O("mail-type", ("mail-type",), "", REQUIRED),
    _O("mail-user", ("mail-user",), "", REQUIRED),
    _O("dependency", ("dependency",), "d", REQUIRED),
    _O("kill-on-invalid-dep", ("kill-on-invalid-dep",), "", REQUIRED),
    _O("begin", ("begin",), "b", REQUIRED),
    _O("deadline", ("deadline",), "", REQUIRED),
    # restart policy and hang detection (lingjund/service/restarts.py)
    _O("max-restarts", ("max-restarts",), "", REQUIRED),
    _O("hang-timeout", ("hang-timeout",), "", REQUIRED),
]

IGNORED = [
    ("acctg-freq", "", REQUIRED), ("contiguous", "", NO), ("cores-per-socket", "", REQUIRED),
    ("cpu-freq", "", REQUIRED), ("delay-boot", "", REQUIRED), ("distribution", "m", REQUIRED),
    ("get-user-env", "", OPTIONAL), ("gpu-bind", "", REQUIRED), ("gpu-freq", "", REQUIRED),
    ("gres-flags", "", REQUIRED), ("hint", "", REQUIRED), ("ignore-pbs", "", NO),
    ("mcs-label", "", REQUIRED), ("mem-bind", "", REQUIRED),
    ("mincpus", "", REQUIRED), ("network", "", REQUIRED), ("no-kill", "k", OPTIONAL),
    ("ntasks-per-core", "", REQUIRED), ("ntasks-per-socket", "", REQUIRED),
    ("overcommit", "O", NO), ("oversubscribe", "s", NO), ("power", "", REQUIRED),
    ("priority", "", REQUIRED), ("profile", "", REQUIRED), ("propagate", "", OPTIONAL),
    ("sockets-per-node", "", REQUIRED), ("spread-job", "", NO),
    ("threads-per-core", "", REQUIRED), ("time-min", "", REQUIRED), ("tmp", "", REQUIRED),
    ("use-min-nodes", "", NO), ("wait-all-nodes", "", REQUIRED), ("wckey", "", REQUIRED),
]
UNSUPPORTED = [
    ("batch", "", REQUIRED), ("bb", "", REQUIRED),
    ("bbf", "", REQUIRED), ("cluster-constraint", "", REQUIRED),
    ("clusters", "M", REQUIRED), ("container", "", REQUIRED),
    ("core-spec", "S", REQUIRED),
    ("export-file", "", REQUIRED),
    ("extra-node-info", "B", REQUIRED), ("gid", "", REQUIRED), ("gpus-per-socket", "", REQUIRED),
    ("licenses", "L", REQUIRED), ("nodefile", "F", REQUIRED),
    ("ntasks-per-gpu", "", REQUIRED), ("prefer", "", REQUIRED), ("reboot", "", NO),
    ("reservation", "", REQUIRED), ("thread-spec", "", REQUIRED),
    ("uid", "", REQUIRED),
]
ALL_OPTIONS = (OPTIONS
               + [Opt("ignore:" + n, (n,), s, a) for n, s, a in IGNORED]
               + [Opt("unsupported:" + n, (n,), s, a) for n, s, a in UNSUPPORTED])

# SBATCH_* input variables (sbatch.1 INPUT ENVIRONMENT VARIABLES, 22.05) -> option
# name, for every option of ours (real or ignored) that Slurm reads from one: the
# shared options' from lingjun/job_options.py, then sbatch's own.
ENV_OPTIONS = env_variables("sbatch", {
    "SBATCH_ACCTG_FREQ": "acctg-freq", "SBATCH_ARRAY_INX": "array",
    "SBATCH_CONSTRAINT": "constraint", "SBATCH_DELAY_BOOT": "delay-boot",
    "SBATCH_DISTRIBUTION": "distribution", "SBATCH_EXPORT": "export",
    "SBATCH_GET_USER_ENV": "get-user-env", "SBATCH_GPU_BIND": "gpu-bind",
    "SBATCH_GPU_FREQ": "gpu-freq", "SBATCH_GRES_FLAGS": "gres-flags", "SBATCH_HINT": "hint",
    "SBATCH_IGNORE_PBS": "ignore-pbs", "SBATCH_LAUNCHER": "launcher",
    "SBATCH_MEM_BIND": "mem-bind", "SBATCH_NETWORK": "network", "SBATCH_NO_KILL": "no-kill",
    "SBATCH_NO_REQUEUE": "no-requeue", "SBATCH_OPEN_MODE": "open-mode",
    "SBATCH_OVERCOMMIT": "overcommit", "SBATCH_POWER": "power", "SBATCH_PROFILE": "profile",
    "SBATCH_REQUEUE": "requeue", "SBATCH_SIGNAL": "signal", "SBATCH_SPREAD_JOB": "spread-job",
    "SBATCH_USE_MIN_NODES": "use-min-nodes", "SBATCH_WAIT": "wait",
    "SBATCH_WAIT_ALL_NODES": "wait-all-nodes", "SBATCH_WCKEY": "wckey",
    "SBATCH_OUTPUT": "output", "SBATCH_ERROR": "error", "SBATCH_INPUT": "input",
    "SBATCH_DEBUG": "verbose", "SBATCH_THREADS_PER_CORE": "threads-per-core",
    # refused as their options are
    "SBATCH_BATCH": "batch", "SBATCH_CLUSTERS": "clusters", "SBATCH_CONTAINER": "container",
    "SBATCH_CORE_SPEC": "core-spec",
    "SBATCH_RESERVATION": "reservation", "SBATCH_THREAD_SPEC": "thread-spec",
})

WRAP_HEADER = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n"
NO_SHEBANG = ("sbatch: error: This does not look like a batch script.  The first\n"
              "sbatch: error: line must start with #! followed by the path to an interpreter.\n"
              "sbatch: error: For instance: #!/bin/sh")

HELP = """Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]

Parallel run options:
  -a, --array=indexes         job array index values
  -A, --account=name          charge job to specified account
  -b, --begin=time            defer job until HH:MM MM/DD/YY
  -c, --cpus-per-task=ncpus   number of cpus required per task
      --comment=name          arbitrary comment
  -C, --constraint=list       specify a list of constraints
  -d, --dependency=type:jobid[:time] defer job until condition on jobid is satisfied
      --deadline=time         remove the job if no ending possible before
                              this deadline (start > (deadline - time[-min]))
  -D, --chdir=directory       set working directory for batch script
  -e, --error=err             file for batch script's standard error
      --export[=names]        specify environment variables to export
  -G, --gpus=n                count of GPUs required for the job
      --gpus-per-node=n       number of GPUs required per allocated node
      --gres=list             required generic resources per node
  -H, --hold                  submit job in held state
  -i, --input=in              file for batch script's standard input
  -J, --job-name=jobname      name of job
      --launcher=name         torchrun|deepspeed|mpi|ray rendezvous environment
      --mail-type=type        notify on state change: BEGIN, END, FAIL or ALL
      --mail-user=user        who to send email notification for job state
                              changes
      --kill-on-invalid-dep=<yes|no> kill job if dependency is invalid
      --mem=MB                minimum amount of real memory
      --mem-per-cpu=MB        maximum amount of real memory per allocated
                              cpu required by the job.
                              --mem >= --mem-per-cpu if --mem is specified.
      --nice[=value]          decrease scheduling priority by value
  -N, --nodes=N               number of nodes on which to run (N = min[-max])
  -n, --ntasks=ntasks         number of tasks to run
      --ntasks-per-node=n     number of tasks to invoke on each node
      --open-mode={append|truncate} output file open mode
  -o, --output=out            file for batch script's standard output
      --parsable              outputs only the jobid and cluster name (if present),
                              separated by semicolon, only on successful submission.
  -p, --partition=partition   partition requested
  -q, --qos=qos               quality of service
  -Q, --quiet                 quiet mode (suppress informational messages)
      --requeue[=expedite], --no-requeue permit (or not) the job to be requeued
                              (expedite: at once, first in line, on spare nodes)
      --max-restarts=N        run again after a failure, a lost node or a hang,
                              at most N times (Lingjun)
      --hang-timeout=time     restart the job when it writes no output for this
                              long (minutes, or min:sec) (Lingjun)
      --signal=[[R][B]:]num[@time] send signal when time limit within time seconds
      --segment=N             topology/block: nodes in groups of N, each within a block
      --switches=max-switches{@max-time-to-wait}
                              Optimum switches and max time to wait for optimum
  -t, --time=minutes          time limit
      --test-only             validate the request without submitting it
  -W, --wait                  wait for completion of submitted job
      --wrap[=command string] wrap command string in a sh script and submit
      --exclusive             allocate nodes in exclusive mode
  -w, --nodelist=hosts...     request a specific list of hosts
  -x, --exclude=hosts...      exclude a specific list of hosts

Help options:
  -h, --help                  show this help message
  -u, --usage                 display brief usage message
"""


def _err(text: str, rc: int = USAGE_RC) -> CommandError:
    return CommandError(f"sbatch: error: {text}", rc)


class Parsed:
    """Everything sbatch decided before talking to the controller (a plain
    class: dataclasses would cost every sbatch its import of inspect)."""

    def __init__(self, request: messages.SubmitJobRequest, parsable: bool = False,
                 quiet: bool = False, wait: bool = False, warnings: list[str] | None = None,
                 info: str = ""):
        self.request = request
        self.parsable, self.quiet, self.wait = parsable, quiet, wait
        self.warnings: list[str] = [] if warnings is None else warnings
        self.info = info              # --help / --usage / --version text to print instead


# --- option values ------------------------------------------------------------


INT32_MAX = 2 ** 31 - 1


def _int(value: str, name: str, minimum: int = 0) -> int:
    try:
        n = int(value.strip())
    except (ValueError, AttributeError):
        raise _err(f'Invalid numeric value "{value}" for {name}.') from None
    if n < minimum or n > INT32_MAX:
        raise _err(f'Invalid numeric value "{value}" for {name}.')
    return n


def parse_gpu_count(value: str, option: str) -> tuple[str, int]:
    """--gpus / --gpus-per-node "[type:]N" -> (type, N); type "" = any."""
    gpu_type, _, count = value.strip().rpartition(":")
    if not count.isdigit() or ":" in gpu_type:
        raise _err(f"Invalid {option} specification")
    return gpu_type, int(count)


_BAD_GRES = CommandError("sbatch: error: Batch job submission failed: "
                         "Invalid generic resource (gres) specification", 1)


class GresRequest(namedtuple("GresRequest", ("gpu_type", "gpus", "shards", "mps", "gpu_mem_mb"),
                             defaults=("", 0, 0, 0, 0))):
    """What --gres asks of each node: whole GPUs (``gpu_type``, ``gpus``), or
    ``shards`` (shard:N) or ``mps`` (mps:P, P of one GPU's MPS count) of one GPU,
    with ``gpu_mem_mb`` (gpumem:SIZE) an MPS job's GPU memory cap (PAI eGPU
    style). A named tuple: a dataclass would cost every sbatch its import."""

    __slots__ = ()


def parse_gres(value: str) -> GresRequest:
    """--gres "gpu[:type][:N]", "shard:N", "mps:P" (with "gpumem:SIZE"), comma separated.

    shard and mps take one count (no type); a GPU memory cap goes only with mps,
    the one sharing the driver can hold to it; gpu beside shard or mps, and shard
    beside mps, are refused as Slurm refuses them."""
    shared: dict[str, int] = {}
    rest = []
    for item in (v for v in value.split(",") if v):
        name, _, count = item.partition(":")
        if name in ("shard", "mps", "gpumem"):
            if name in shared or not count:
                raise _BAD_GRES
            try:
                n = slurm.parse_size_mb(count) if name == "gpumem" else int(count)
            except ValueError:
                raise _BAD_GRES from None
            if not count[:1].isdigit() or n < 1:
                raise _BAD_GRES
            shared[name] = n
        else:
            rest.append(item)
    if not shared:
        gpu_type, gpus = parse_gres_gpus(value)
        return GresRequest(gpu_type=gpu_type, gpus=gpus)
    if rest or ("shard" in shared and "mps" in shared) or ("gpumem" in shared
                                                           and "mps" not in shared):
        raise _BAD_GRES
    return GresRequest(shards=shared.get("shard", 0), mps=shared.get("mps", 0),
                       gpu_mem_mb=shared.get("gpumem", 0))


def parse_gres_gpus(value: str) -> tuple[str, int]:
    """--gres "gpu[:type][:N][,...]" -> (type, GPUs per node); gpu alone (parse_gres
    takes shard and mps too).

    As in Slurm's gres parser, a second field that is not a number is a type
    with a count of one: "gpu:x" asks for one GPU of type "x", which the
    controller refuses when no node has that type.
    """
    total, types = 0, set()
    for item in (v for v in value.split(",") if v):
        parts = item.split(":")
        if parts[0] != "gpu" or len(parts) > 3 or not all(parts):
            raise _BAD_GRES
        gpu_type, n = "", 1
        if len(parts) == 2:
            if parts[1].isdigit():
                n = int(parts[1])
            else:
                gpu_type = parts[1]
        elif len(parts) == 3:
            if not parts[2].isdigit():
                raise _BAD_GRES
            gpu_type, n = parts[1], int(parts[2])
        types.add(gpu_type)
        total += n
    if len(types) > 1:
        raise _BAD_GRES      # one GPU type per job is what the scheduler models
    return (types.pop() if types else ""), total


def _umask_text() -> str:
    """This process's umask as sbatch writes SLURM_UMASK ("0022")."""
    mask = os.umask(0)
    os.umask(mask)
    return f"{mask:04o}"


def build_environment(export: str, env: Mapping[str, str]) -> dict[str, str]:
    """--export: ALL (default), NONE, or a list of NAME / NAME=value (with or without ALL).

    SLURM_* variables always go along, as in Slurm.
    """
    items = [x for x in export.split(",") if x] if export else ["ALL"]
    upper = [x.upper() for x in items]
    if "ALL" in upper:
        out = dict(env)
    else:
        out = {k: v for k, v in env.items() if k.startswith("SLURM_")}
    for item, up in zip(items, upper):
        if up in ("ALL", "NONE", "NIL"):
            continue
        name, eq, value = item.partition("=")
        if eq:
            out[name] = value
        elif name in env:
            out[name] = env[name]
    return out


# --- #SBATCH lines ----------------------------------------------------------------


def _directive_words(rest: str, file: str, lineno: int) -> list[str]:
    """Split what follows "#SBATCH" the way sbatch's _get_argument() does.

    Words are separated by white space; ' and " group (and are removed), a
    backslash takes the next character literally (inside quotes too), and an
    unquoted, unescaped '#' ends the line (a comment, even mid-word). An
    unmatched quote or a word starting with ':' is fatal, as in Slurm.
    """
    words: list[str] = []
    i, n = 0, len(rest)
    while True:
        while i < n and rest[i].isspace():
            i += 1
        if i < n and rest[i] == ":":
            raise CommandError(f"sbatch: fatal: {file}: line {lineno}: Unexpected `:` in "
                               f"[{rest[i:]}]", 1)
        if i >= n:
            return words
        start, word, quote, escaped = i, [], "", False
        while i < n and (quote or not rest[i].isspace()):
            c = rest[i]
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
                i += 1
                continue
            elif quote:
                if c == quote:
                    quote = ""
                    i += 1
                    continue
            elif c in "\"'":
                quote = c
                i += 1
                continue
            elif c == "#":
                break
            word.append(c)
            i += 1
        if quote:
            raise CommandError(f"sbatch: fatal: {file}: line {lineno}: Unmatched `{quote}` in "
                               f"[{rest[start:]}]", 1)
        if not word:             # Slurm stops the line at a comment or an empty word
            return words
        words.append("".join(word))


def script_directives(script: str, file: str = "stdin",
                      warnings: list[str] | None = None) -> list[str]:
    """The option words of the #SBATCH lines before the first command line.

    As sbatch: a directive starts in the first column ("#SBATCH" or the old
    "#SLURM", which warns); any other line whose first non-blank character is
    '#' is a comment (so an indented "#SBATCH" is ignored); a blank line is
    skipped; the first other line is a command and ends the directives, so a
    "#SBATCH" inside a heredoc after a command is never read.
    """
    words: list[str] = []
    warned = False
    for lineno, line in enumerate(script.split("\n"), start=1):
        if line.startswith("#SBATCH"):
            rest = line[len("#SBATCH"):]
        elif line.startswith("#SLURM"):
            rest = line[len("#SLURM"):]
            if not warned and warnings is not None:
                warnings.append("sbatch: error: Change from #SLURM to #SBATCH in your script "
                                "and verify the options are valid in sbatch")
            warned = True
        else:
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                break
            continue
        if rest and not rest[0].isspace():
            continue             # "#SBATCHX": not a directive of ours
        words.extend(_directive_words(rest, file, lineno))
    return words


def _parse(words: list[str], stop: bool) -> tuple[list[tuple[str, str | None, str]], list[str]]:
    return parse_options(PROG, words, ALL_OPTIONS, rc=USAGE_RC, stop_at_positional=stop)


# --- the request ----------------------------------------------------------------------


def parse_args(argv: list[str], stdin: TextIO | str | None, env: Mapping[str, str],
               cwd: str) -> Parsed:
    """argv (without the program name) -> what to submit. Raises CommandError."""
    cli_opts, positional = _parse(list(argv), stop=True)
    keys = [k for k, _, _ in cli_opts]
    if "help" in keys:
        return Parsed(messages.SubmitJobRequest(), info=HELP)
    if "usage" in keys:
        return Parsed(messages.SubmitJobRequest(),
                      info="Usage: sbatch [-N nnodes] [-n ntasks] [-c ncpus] [-p partition] "
                           "[-t time] [-J jobname] [-o out] [-e err] executable [args...]\n")
    if "version" in keys:
        return Parsed(messages.SubmitJobRequest(), info=VERSION)

    wrap = next((v for k, v, _ in reversed(cli_opts) if k == "wrap"), None)
    script, default_name, script_args, command = _script(wrap, positional, stdin, cwd)

    directive_warnings: list[str] = []
    script_opts, _ = _parse(script_directives(script, positional[0] if positional and wrap is None
                                              else "stdin", directive_warnings), stop=False)
    env_opts = _env_options(env)
    script_opts, env_opts = _one_memory_option(script_opts, env_opts, cli_opts)

    parsed = Parsed(messages.SubmitJobRequest(client_token=os.urandom(16).hex()))
    parsed.warnings.extend(directive_warnings)
    spec = parsed.request.spec
    spec.name = default_name
    spec.script = script
    spec.argv.extend(script_args)
    spec.command = command
    spec.batch = True
    export = ""
    for key, value, spelled in script_opts + env_opts + cli_opts:
        try:
            export = _apply(parsed, spec, key, value, spelled, cwd, export)
        except ValueError:
            # A number too large for the request's field (protobuf refuses it):
            # Slurm's words for a number it cannot take (found by the fuzz).
            raise _err(f'Invalid numeric value "{value}" for {spelled}.') from None

    spec.work_dir = os.path.normpath(os.path.join(cwd, spec.work_dir)) if spec.work_dir else cwd
    spec.export_spec = export or "ALL"
    spec.environment.update(build_environment(export, env))
    # Slurm's sbatch records the submitter's umask; the job's files are created with it.
    spec.environment.setdefault("SLURM_UMASK", env.get("SLURM_UMASK") or _umask_text())
    spec.submit_dir = cwd
    spec.submit_host = os.uname().nodename.split(".")[0]   # gethostname(), without socket
    spec.user, spec.uid, spec.gid, spec.group = slurm.current_user()
    return parsed


def _script(wrap: str | None, positional: list[str], stdin: TextIO | str | None,
            cwd: str) -> tuple[str, str, list[str], str]:
    """The batch script (--wrap's, the file named, or standard input) ->
    (script, default job name, script arguments, command path). Slurm's
    words for a script it would not take."""
    command = ""
    if wrap is not None:
        if positional:
            raise _err("Script arguments not permitted with --wrap option", 1)
        script = WRAP_HEADER + wrap + "\n"
        default_name = "wrap"
        script_args: list[str] = []
    elif positional:
        path = positional[0]
        script_args = positional[1:]
        full = path if os.path.isabs(path) else os.path.join(cwd, path)
        try:
            with open(full, "rb") as f:
                raw = f.read()
        except OSError:
            raise _err(f"Unable to open file {path}", 1) from None
        script = raw.decode("utf-8", errors="surrogateescape")
        default_name = os.path.basename(path)
        command = os.path.normpath(full)
    else:
        if stdin is None:
            stdin = sys.stdin
        script = stdin if isinstance(stdin, str) else stdin.read()
        default_name = "sbatch"
        script_args = []

    if not script:
        raise _err("Batch script is empty!", 1)
    if not script.startswith("#!"):
        raise CommandError(NO_SHEBANG, 1)
    if "\r\n" in script:
        raise CommandError("sbatch: error: Batch script contains DOS line breaks (\\r\\n)\n"
                          "sbatch: error: instead of expected UNIX line breaks (\\n).", 1)
    if "\0" in script:
        raise _err("The SLURM controller does not allow scripts that contain a NULL character '\\0'.", 1)
    return script, default_name, script_args, command


def _env_options(env: Mapping[str, str]) -> list[tuple[str, str | None, str]]:
    """SBATCH_* input variables as options (sbatch.1), under the script's and the command line's."""
    env_opts = []
    by_name = {o.long[0]: o for o in ALL_OPTIONS}
    for var, name in ENV_OPTIONS.items():
        if var in env:
            opt = by_name[name]
            value = env[var] if opt.arg != NO else None
            if name == "requeue" and (value or "").lower() != "expedite":
                value = None            # SBATCH_REQUEUE=1 (any set value) is a plain --requeue
            env_opts.append((opt.key, value or None if opt.arg == OPTIONAL else value, var))
    return env_opts


def _one_memory_option(script_opts, env_opts, cli_opts):
    """--mem and --mem-per-cpu exclude each other, as in Slurm's
    _validate_memory_options(): both on the command line is fatal; one on the
    command line drops the other from the script and environment; both in
    the environment is fatal too."""
    on_cli = {k for k, _, _ in cli_opts if k in MEMORY_FIELDS}
    if len(on_cli) > 1:
        raise memory_conflict("sbatch")
    if on_cli:
        keep = lambda opts: [o for o in opts if o[0] not in MEMORY_FIELDS or o[0] in on_cli]
        return keep(script_opts), keep(env_opts)
    if len({k for k, _, _ in env_opts if k in MEMORY_FIELDS}) > 1:
        raise CommandError("sbatch: fatal: SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and "
                           "SLURM_MEM_PER_NODE are mutually exclusive.", 1)
    return script_opts, env_opts


def _hostlist(value: str) -> str:
    """-w / -x: a hostlist expression, kept compressed; Slurm's words when it is not one."""
    try:
        names = slurm.expand_hostlist(value)
    except ValueError:
        names = []
    if not names:
        # Slurm hands the text to the controller, which refuses it in these words.
        raise CommandError("sbatch: error: Batch job submission failed: "
                           "Invalid node name specified", 1)
    return slurm.compress_hostlist(names)


def _apply(parsed: Parsed, spec: messages.JobSpec, key: str, value: str | None, spelled: str,
           cwd: str, export: str) -> str:
    """Apply one option to the spec; returns the --export value so far."""
    if key.startswith("ignore:"):
        parsed.warnings.append(f"sbatch: warning: {spelled} is not supported yet; ignored")
        return export
    if key.startswith("unsupported:"):
        raise _err(f"--{key.split(':', 1)[1]} is not supported by this cluster yet", 1)
    if key == "export":
        return value
    shared = JOB_OPTIONS.get(key)
    if shared is not None and shared.reader is not None:
        if key in MEMORY_FIELDS:    # the later one wins within one source
            for other in MEMORY_FIELDS.values():
                spec.ClearField(other)
        for name, v in shared.read(PROG, value).items():
            setattr(spec, name, v)
        return export
    apply = _SBATCH_OPTIONS.get(key)
    if apply is not None:
        apply(parsed, spec, value)
    return export


# --- sbatch's own options: what each does to the job (or to sbatch itself) ---------------
# The options srun and salloc share are read by cli.job_options' table; these
# are the rest, one entry each in _SBATCH_OPTIONS below.


def _into(field: str, read: Callable[[str], object] | None = None):
    """An option whose value (read, where a reader is given) goes into one field of the job."""
    if read is None:
        return lambda parsed, spec, value: setattr(spec, field, value)
    return lambda parsed, spec, value: setattr(spec, field, read(value))


def _set(field: str, on: bool):
    return lambda parsed, spec, value: setattr(spec, field, on)


def _tell_sbatch(attr: str):
    """An option that changes what sbatch itself does (--parsable, --wait)."""
    return lambda parsed, spec, value: setattr(parsed, attr, True)


def _gpu_count(field: str, spelled: str):
    """--gpus, --gpus-per-node, --gpus-per-task: "[type:]count"."""
    def apply(parsed: Parsed, spec: messages.JobSpec, value: str) -> None:
        gpu_type, n = parse_gpu_count(value, spelled)
        setattr(spec, field, n)
        spec.gpu_type = gpu_type or spec.gpu_type
    return apply


def _gres(parsed: Parsed, spec: messages.JobSpec, value: str) -> None:
    gres = parse_gres(value)
    spec.gpus_per_node = gres.gpus
    spec.shards_per_node, spec.mps_per_node = gres.shards, gres.mps
    spec.gpu_mem_limit_mb = gres.gpu_mem_mb
    spec.gpu_type = gres.gpu_type or spec.gpu_type


def _nice(parsed: Parsed, spec: messages.JobSpec, value: str | None) -> None:
    try:
        spec.nice = int(value) if value not in (None, "") else 100
    except ValueError:
        raise _err("Invalid --nice value") from None


def _requeue(parsed: Parsed, spec: messages.JobSpec, value: str | None) -> None:
    spec.requeue = True
    if value not in (None, ""):
        if value.lower() != "expedite":        # Slurm 25.11's one mode
            raise _err(f"Invalid --requeue specification: {value}")
        spec.requeue_expedite = True


_OPEN_MODES = {"a": "append", "append": "append", "t": "truncate", "truncate": "truncate"}


def _open_mode(parsed: Parsed, spec: messages.JobSpec, value: str) -> None:
    mode = _OPEN_MODES.get(value.lower())
    if mode is None:
        raise _err(f"Invalid --open-mode argument: {value}")
    spec.open_mode = mode


def _launcher(parsed: Parsed, spec: messages.JobSpec, value: str) -> None:
    from lingjun import launchers    # here: few submissions name one
    if value not in launchers.LAUNCHERS:
        raise _err(f"Invalid --launcher argument: {value} (one of {', '.join(launchers.NAMES)})")
    spec.launcher = value


def _constraint(parsed: Parsed, spec: messages.JobSpec, value: str) -> None:
    try:
        slurm.parse_constraint(value)
    except ValueError:
        raise CommandError("sbatch: error: Batch job submission failed: "
                           "Invalid feature specification", 1) from None
    spec.constraint = value


def _signal(parsed: Parsed, spec: messages.JobSpec, value: str) -> None:
    try:
        spec.signal, spec.signal_time_s, spec.signal_flags = slurm.parse_warn_signal(value)
    except ValueError:
        raise _err("Invalid --signal specification") from None


def _mail_type(parsed: Parsed, spec: messages.JobSpec, value: str) -> None:
    try:
        spec.mail_type = slurm.parse_mail_type(value)
    except ValueError:
        raise _err(f"--mail-type={value} invalid") from None


def _kill_on_invalid_dep(parsed: Parsed, spec: messages.JobSpec, value: str) -> None:
    if value.lower() not in ("yes", "no"):
        raise _err("Invalid --kill-on-invalid-dep specification")
    spec.kill_on_invalid_dep = value.lower() == "yes"


def _hang_timeout(parsed: Parsed, spec: messages.JobSpec, value: str) -> None:
    try:                            # Slurm time syntax, "0:30" = 30 s
        secs = slurm.parse_time_seconds(value)
    except ValueError:
        raise _err("Invalid --hang-timeout specification") from None
    if secs < 0:
        raise _err("Invalid --hang-timeout specification")
    spec.hang_timeout_s = secs


def _moment(field: str, option: str):
    """--begin, --deadline: a Slurm time ("now+1hour", "16:00", an ISO date)."""
    def apply(parsed: Parsed, spec: messages.JobSpec, value: str) -> None:
        try:
            when = slurm.parse_time(value, time.time())
        except ValueError as e:
            raise CommandError(f"{e}\nsbatch: error: Invalid --{option} specification",
                               USAGE_RC) from None
        if not when:
            raise _err(f"Invalid --{option} specification")
        setattr(spec, field, when)
    return apply


_SBATCH_OPTIONS: dict[str, Callable[[Parsed, messages.JobSpec, str | None], None]] = {
    "error": _into("stderr_pattern"), "output": _into("stdout_pattern"),
    "input": _into("stdin_path"),
    "gpus": _gpu_count("gpus", "--gpus"),
    "gpus-per-node": _gpu_count("gpus_per_node", "--gpus-per-node"),
    "gpus-per-task": _gpu_count("gpus_per_task", "--gpus-per-task"),
    "gres": _gres,
    "hold": _set("hold", True),
    "nice": _nice,
    "no-requeue": _set("requeue", False), "requeue": _requeue,
    "open-mode": _open_mode,
    "parsable": _tell_sbatch("parsable"), "quiet": _tell_sbatch("quiet"),
    "wait": _tell_sbatch("wait"),
    "test-only": lambda parsed, spec, value: setattr(parsed.request, "test_only", True),
    "launcher": _launcher,
    "nodelist": _into("req_nodes", _hostlist), "exclude": _into("exc_nodes", _hostlist),
    "constraint": _constraint,
    "signal": _signal,
    "mail-type": _mail_type, "mail-user": _into("mail_user"),
    "array": _into("array"),               # checked by the controller against its MaxArraySize
    "dependency": _into("dependency"),     # the controller judges it ("Job dependency problem")
    "kill-on-invalid-dep": _kill_on_invalid_dep,
    "max-restarts": _into("max_restarts", lambda v: _int(v, "--max-restarts", 0)),
    "hang-timeout": _hang_timeout,
    "begin": _moment("begin_time", "begin"), "deadline": _moment("deadline", "deadline"),
    # --wrap is read before the script is
}


def build_request(argv: list[str], stdin: TextIO | str | None, env: Mapping[str, str],
                  cwd: str) -> messages.SubmitJobRequest:
    """The SubmitJobRequest sbatch would send for argv. Raises CommandError."""
    return parse_args(argv, stdin, env, cwd).request

"""sbatch: submit a batch script.

Options come from three places, later ones winning, as in Slurm:
``#SBATCH`` lines of the script (only those before the first line that is
neither blank nor a comment), then ``SBATCH_*`` environment variables, then
the command line. Everything is checked before anything is sent: on any
client-side error nothing is submitted.

    $ sbatch --parsable -N2 -t 10 --wrap 'srun hostname'
    42

Parsing is the pure function ``build_request(argv, stdin, env, cwd)``; the
submission itself takes an injectable ``api`` so tests run without a server.
"""
from __future__ import annotations

import os
import re
import shlex
import socket
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping, TextIO

import grpc

from cli.common import (CONNECT_FAILURE, CommandError, controller_errors, current_user, details,
                        make_api, parse_options, run)
from cli.options import NO, OPTIONAL, REQUIRED, VERSION, Opt
from lingjun import slurm
from lingjun.client import ControllerUnreachable
from lingjun.v1 import api_pb2

PROG = "sbatch"
USAGE_RC = 255

# What we do with each of Slurm 22.05's sbatch options. "ignore": accepted
# with a warning (hints that change nothing a job can observe here);
# "unsupported": refused, since silently dropping it would run the job wrong.
_O = Opt
OPTIONS = [
    _O("account", ("account",), "A", REQUIRED),
    _O("chdir", ("chdir", "workdir"), "D", REQUIRED),
    _O("comment", ("comment",), "", REQUIRED),
    _O("cpus-per-task", ("cpus-per-task",), "c", REQUIRED),
    _O("error", ("error",), "e", REQUIRED),
    _O("exclusive", ("exclusive",), "", OPTIONAL),
    _O("export", ("export",), "", REQUIRED),
    _O("gpus", ("gpus",), "G", REQUIRED),
    _O("gpus-per-node", ("gpus-per-node",), "", REQUIRED),
    _O("gres", ("gres",), "", REQUIRED),
    _O("help", ("help",), "h", NO),
    _O("hold", ("hold",), "H", NO),
    _O("input", ("input",), "i", REQUIRED),
    _O("job-name", ("job-name",), "J", REQUIRED),
    _O("mem", ("mem",), "", REQUIRED),
    _O("nice", ("nice",), "", OPTIONAL),
    _O("no-requeue", ("no-requeue",), "", NO),
    _O("nodes", ("nodes",), "N", REQUIRED),
    _O("ntasks", ("ntasks",), "n", REQUIRED),
    _O("ntasks-per-node", ("ntasks-per-node",), "", REQUIRED),
    _O("open-mode", ("open-mode",), "", REQUIRED),
    _O("output", ("output",), "o", REQUIRED),
    _O("parsable", ("parsable",), "", NO),
    _O("partition", ("partition",), "p", REQUIRED),
    _O("qos", ("qos",), "q", REQUIRED),
    _O("quiet", ("quiet",), "Q", NO),
    _O("requeue", ("requeue",), "", NO),
    _O("test-only", ("test-only",), "", NO),
    _O("time", ("time",), "t", REQUIRED),
    _O("usage", ("usage",), "u", NO),
    _O("verbose", ("verbose",), "v", NO),
    _O("version", ("version",), "V", NO),
    _O("wait", ("wait",), "W", NO),
    _O("wrap", ("wrap",), "", REQUIRED),
    _O("dependency", ("dependency",), "d", REQUIRED),
    _O("kill-on-invalid-dep", ("kill-on-invalid-dep",), "", REQUIRED),
    _O("begin", ("begin",), "b", REQUIRED),
    _O("deadline", ("deadline",), "", REQUIRED),
]
IGNORED = [
    ("acctg-freq", "", REQUIRED), ("contiguous", "", NO), ("cores-per-socket", "", REQUIRED),
    ("cpu-freq", "", REQUIRED), ("delay-boot", "", REQUIRED), ("distribution", "m", REQUIRED),
    ("get-user-env", "", OPTIONAL), ("gpu-bind", "", REQUIRED), ("gpu-freq", "", REQUIRED),
    ("gres-flags", "", REQUIRED), ("hint", "", REQUIRED), ("ignore-pbs", "", NO),
    ("mail-type", "", REQUIRED),
    ("mail-user", "", REQUIRED), ("mcs-label", "", REQUIRED), ("mem-bind", "", REQUIRED),
    ("mincpus", "", REQUIRED), ("network", "", REQUIRED), ("no-kill", "k", OPTIONAL),
    ("ntasks-per-core", "", REQUIRED), ("ntasks-per-socket", "", REQUIRED),
    ("overcommit", "O", NO), ("oversubscribe", "s", NO), ("power", "", REQUIRED),
    ("priority", "", REQUIRED), ("profile", "", REQUIRED), ("propagate", "", OPTIONAL),
    ("signal", "", REQUIRED), ("sockets-per-node", "", REQUIRED), ("spread-job", "", NO),
    ("threads-per-core", "", REQUIRED), ("time-min", "", REQUIRED), ("tmp", "", REQUIRED),
    ("use-min-nodes", "", NO), ("wait-all-nodes", "", REQUIRED), ("wckey", "", REQUIRED),
]
UNSUPPORTED = [
    ("array", "a", REQUIRED), ("batch", "", REQUIRED), ("bb", "", REQUIRED),
    ("bbf", "", REQUIRED), ("cluster-constraint", "", REQUIRED),
    ("clusters", "M", REQUIRED), ("constraint", "C", REQUIRED), ("container", "", REQUIRED),
    ("core-spec", "S", REQUIRED), ("cpus-per-gpu", "", REQUIRED),
    ("exclude", "x", REQUIRED), ("export-file", "", REQUIRED),
    ("extra-node-info", "B", REQUIRED), ("gid", "", REQUIRED), ("gpus-per-socket", "", REQUIRED),
    ("gpus-per-task", "", REQUIRED), ("licenses", "L", REQUIRED), ("mem-per-cpu", "", REQUIRED),
    ("mem-per-gpu", "", REQUIRED), ("nodefile", "F", REQUIRED), ("nodelist", "w", REQUIRED),
    ("ntasks-per-gpu", "", REQUIRED), ("prefer", "", REQUIRED), ("reboot", "", NO),
    ("reservation", "", REQUIRED), ("switches", "", REQUIRED), ("thread-spec", "", REQUIRED),
    ("uid", "", REQUIRED),
]
ALL_OPTIONS = (OPTIONS
               + [Opt("ignore:" + n, (n,), s, a) for n, s, a in IGNORED]
               + [Opt("unsupported:" + n, (n,), s, a) for n, s, a in UNSUPPORTED])

# SBATCH_* input variables (sbatch.1 INPUT ENVIRONMENT VARIABLES) -> option
ENV_OPTIONS = {
    "SBATCH_ACCOUNT": "account", "SBATCH_EXCLUSIVE": "exclusive", "SBATCH_EXPORT": "export",
    "SBATCH_GPUS": "gpus", "SBATCH_GPUS_PER_NODE": "gpus-per-node", "SBATCH_GRES": "gres",
    "SBATCH_JOB_NAME": "job-name", "SBATCH_MEM_PER_NODE": "mem",
    "SBATCH_NO_REQUEUE": "no-requeue", "SBATCH_OPEN_MODE": "open-mode",
    "SBATCH_PARTITION": "partition", "SBATCH_QOS": "qos", "SBATCH_REQUEUE": "requeue",
    "SBATCH_TIMELIMIT": "time", "SBATCH_WAIT": "wait",
}

WRAP_HEADER = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n"
NO_SHEBANG = ("sbatch: error: This does not look like a batch script.  The first\n"
              "sbatch: error: line must start with #! followed by the path to an interpreter.\n"
              "sbatch: error: For instance: #!/bin/sh")

HELP = """Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]

Parallel run options:
  -A, --account=name          charge job to specified account
  -b, --begin=time            defer job until HH:MM MM/DD/YY
  -c, --cpus-per-task=ncpus   number of cpus required per task
      --comment=name          arbitrary comment
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
      --kill-on-invalid-dep=<yes|no> kill job if dependency is invalid
      --mem=MB                minimum amount of real memory
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
      --requeue, --no-requeue permit (or not) the job to be requeued
  -t, --time=minutes          time limit
      --test-only             validate the request without submitting it
  -W, --wait                  wait for completion of submitted job
      --wrap[=command string] wrap command string in a sh script and submit
      --exclusive             allocate nodes in exclusive mode

Help options:
  -h, --help                  show this help message
  -u, --usage                 display brief usage message
"""


def _err(text: str, rc: int = USAGE_RC) -> CommandError:
    return CommandError(f"sbatch: error: {text}", rc)


@dataclass
class Parsed:
    """Everything sbatch decided before talking to the controller."""
    request: api_pb2.SubmitJobRequest
    parsable: bool = False
    quiet: bool = False
    wait: bool = False
    warnings: list[str] = field(default_factory=list)
    info: str = ""                # --help / --usage / --version text to print instead


# --- option values ------------------------------------------------------------


def _int(value: str, name: str, minimum: int = 0) -> int:
    try:
        n = int(value.strip())
    except (ValueError, AttributeError):
        raise _err(f'Invalid numeric value "{value}" for {name}.') from None
    if n < minimum:
        raise _err(f'Invalid numeric value "{value}" for {name}.')
    return n


def _count(text: str) -> int:
    m = re.fullmatch(r"(\d+)([kKmM]?)", text.strip())
    if not m:
        raise ValueError(text)
    mult = {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]
    return int(m.group(1)) * mult


def parse_nodes(value: str) -> tuple[int, int]:
    """-N "2" -> (2, 2); "2-4" -> (2, 4); "2k" -> (2048, 2048)."""
    lo, sep, hi = value.partition("-")
    try:
        a = _count(lo)
        b = _count(hi) if sep and hi else a
    except ValueError:
        raise _err(f"invalid node count `{value}'") from None
    if a < 1 or b < a:
        raise _err(f"invalid node count `{value}'")
    return a, b


def parse_gpu_count(value: str, option: str) -> int:
    """--gpus / --gpus-per-node "[type:]N" -> N (the type is not modelled yet)."""
    count = value.rsplit(":", 1)[-1]
    if not count.isdigit():
        raise _err(f"Invalid {option} specification")
    return int(count)


def parse_gres_gpus(value: str) -> int:
    """--gres "gpu[:type][:N][,...]" -> GPUs per node; only gpu is a resource here."""
    total = 0
    for item in (v for v in value.split(",") if v):
        parts = item.split(":")
        if parts[0] != "gpu" or len(parts) > 3:
            raise CommandError("sbatch: error: Batch job submission failed: "
                              "Invalid generic resource (gres) specification", 1)
        n = 1
        if len(parts) >= 2 and parts[-1].isdigit():
            n = int(parts[-1])
        elif len(parts) == 3:
            raise CommandError("sbatch: error: Batch job submission failed: "
                              "Invalid generic resource (gres) specification", 1)
        total += n
    return total


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


def script_directives(script: str) -> list[str]:
    """The option words of the #SBATCH lines before the first command line.

    A directive's words split like a shell's; a '#' starting a word ends it.
    """
    words: list[str] = []
    for line in script.splitlines()[1:] if script.startswith("#!") else script.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        if not line.startswith("#SBATCH"):
            continue
        rest = line[len("#SBATCH"):]
        if rest and not rest[0].isspace():
            continue
        lexer = shlex.shlex(rest, posix=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            words.extend(list(lexer))
        except ValueError:
            words.extend(rest.split())
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
        return Parsed(api_pb2.SubmitJobRequest(), info=HELP)
    if "usage" in keys:
        return Parsed(api_pb2.SubmitJobRequest(),
                      info="Usage: sbatch [-N nnodes] [-n ntasks] [-c ncpus] [-p partition] "
                           "[-t time] [-J jobname] [-o out] [-e err] executable [args...]\n")
    if "version" in keys:
        return Parsed(api_pb2.SubmitJobRequest(), info=VERSION)

    wrap = next((v for k, v, _ in reversed(cli_opts) if k == "wrap"), None)
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

    script_opts, _ = _parse(script_directives(script), stop=False)
    env_opts = []
    for var, key in ENV_OPTIONS.items():
        if var in env:
            opt = next(o for o in OPTIONS if o.key == key)
            value = env[var] if opt.arg != NO else None
            env_opts.append((key, value or None if opt.arg == OPTIONAL else value, var))

    parsed = Parsed(api_pb2.SubmitJobRequest(client_token=str(uuid.uuid4())))
    spec = parsed.request.spec
    spec.name = default_name
    spec.script = script
    spec.argv.extend(script_args)
    spec.command = command
    spec.batch = True
    export = ""
    for key, value, spelled in script_opts + env_opts + cli_opts:
        export = _apply(parsed, spec, key, value, spelled, cwd, export)

    spec.work_dir = os.path.normpath(os.path.join(cwd, spec.work_dir)) if spec.work_dir else cwd
    spec.export_spec = export or "ALL"
    spec.environment.update(build_environment(export, env))
    spec.submit_dir = cwd
    spec.submit_host = socket.gethostname().split(".")[0]
    spec.user, spec.uid, spec.gid, spec.group = current_user()
    return parsed


def _apply(parsed: Parsed, spec: api_pb2.JobSpec, key: str, value: str | None, spelled: str,
           cwd: str, export: str) -> str:
    """Apply one option to the spec; returns the --export value so far."""
    if key.startswith("ignore:"):
        parsed.warnings.append(f"sbatch: warning: {spelled} is not supported yet; ignored")
        return export
    if key.startswith("unsupported:"):
        raise _err(f"--{key.split(':', 1)[1]} is not supported by this cluster yet", 1)
    if key == "account":
        spec.account = value
    elif key == "chdir":
        spec.work_dir = value
    elif key == "comment":
        spec.comment = value
    elif key == "cpus-per-task":
        spec.cpus_per_task = _int(value, "--cpus-per-task", 1)
    elif key == "error":
        spec.stderr_pattern = value
    elif key == "exclusive":
        if value not in (None, "", "user", "mcs"):
            raise _err("Invalid --exclusive specification")
        spec.exclusive = True
    elif key == "export":
        export = value
    elif key == "gpus":
        spec.gpus = parse_gpu_count(value, "--gpus")
    elif key == "gpus-per-node":
        spec.gpus_per_node = parse_gpu_count(value, "--gpus-per-node")
    elif key == "gres":
        spec.gpus_per_node = parse_gres_gpus(value)
    elif key == "hold":
        spec.hold = True
    elif key == "input":
        spec.stdin_path = value
    elif key == "job-name":
        spec.name = value
    elif key == "mem":
        try:
            spec.mem_per_node_mb = slurm.parse_size_mb(value)
        except ValueError:
            raise _err("Invalid --mem specification") from None
    elif key == "nice":
        try:
            spec.nice = int(value) if value not in (None, "") else 100
        except ValueError:
            raise _err("Invalid --nice value") from None
    elif key == "no-requeue":
        spec.requeue = False
    elif key == "requeue":
        spec.requeue = True
    elif key == "nodes":
        spec.min_nodes, spec.max_nodes = parse_nodes(value)
    elif key == "ntasks":
        spec.num_tasks = _int(value, "--ntasks", 1)
    elif key == "ntasks-per-node":
        spec.ntasks_per_node = _int(value, "--ntasks-per-node", 1)
    elif key == "open-mode":
        v = value.lower()
        if v in ("a", "append"):
            spec.open_mode = "append"
        elif v in ("t", "truncate"):
            spec.open_mode = "truncate"
        else:
            raise _err(f"Invalid --open-mode argument: {value}")
    elif key == "output":
        spec.stdout_pattern = value
    elif key == "parsable":
        parsed.parsable = True
    elif key == "partition":
        spec.partition = value
    elif key == "qos":
        spec.qos = value
    elif key == "quiet":
        parsed.quiet = True
    elif key == "test-only":
        parsed.request.test_only = True
    elif key == "time":
        try:
            minutes = slurm.parse_time_limit(value)
        except ValueError:
            raise _err("Invalid --time specification") from None
        # Slurm: a time limit of zero requests that no limit be imposed.
        spec.time_limit_min = slurm.UNLIMITED if minutes == 0 else minutes
    elif key == "wait":
        parsed.wait = True
    elif key == "wrap":
        pass  # handled before the script is read
    elif key == "dependency":
        spec.dependency = value   # the controller judges it ("Job dependency problem")
    elif key == "kill-on-invalid-dep":
        if value.lower() not in ("yes", "no"):
            raise _err("Invalid --kill-on-invalid-dep specification")
        spec.kill_on_invalid_dep = value.lower() == "yes"
    elif key in ("begin", "deadline"):
        try:
            when = slurm.parse_begin_time(value, time.time())
        except ValueError:
            raise _err(f"Invalid --{key} specification") from None
        if key == "begin":
            spec.begin_time = when
        else:
            spec.deadline = when
    return export


def build_request(argv: list[str], stdin: TextIO | str | None, env: Mapping[str, str],
                  cwd: str) -> api_pb2.SubmitJobRequest:
    """The SubmitJobRequest sbatch would send for argv. Raises CommandError."""
    return parse_args(argv, stdin, env, cwd).request


# --- submitting ---------------------------------------------------------------------------


def submit(api, request: api_pb2.SubmitJobRequest, attempts: int = 4,
           sleep: Callable[[float], None] = time.sleep) -> api_pb2.SubmitJobResponse:
    """Submit, retrying an unreachable controller with the same client token.

    The token makes a retry of a submission the controller did commit return
    that job instead of creating a second one.
    """
    delay = 0.5
    for attempt in range(attempts):
        try:
            return api.call("SubmitJob", request)
        except ControllerUnreachable:
            if attempt == attempts - 1:
                raise
            sleep(delay)
            delay *= 2
    raise ControllerUnreachable("unreachable")


FINISHED = slurm.FINISHED_STATES


def wait_for(api, job_id: int, sleep: Callable[[float], None] = time.sleep) -> int:
    """--wait: poll until the job ends; its exit code (1 when it did not complete)."""
    while True:
        reply = api.call("GetJobs", api_pb2.GetJobsRequest(job_ids=[job_id], all_states=True))
        jobs = [j for j in reply.jobs if j.job_id == job_id]
        if jobs and jobs[0].state in FINISHED:
            j = jobs[0]
            if j.state == slurm.COMPLETED:
                return j.exit_code
            return j.exit_code or 1
        sleep(2.0)


def main(argv: list[str] | None = None, api=None, stdin: TextIO | None = None,
         env: Mapping[str, str] | None = None, cwd: str | None = None,
         out: TextIO | None = None, err: TextIO | None = None,
         sleep: Callable[[float], None] = time.sleep) -> int:
    return run(_sbatch, argv, api, out, err, stdin=stdin, env=env, cwd=cwd, sleep=sleep)


def _sbatch(argv: list[str], api, out: TextIO, err: TextIO, stdin: TextIO | None,
            env: Mapping[str, str] | None, cwd: str | None,
            sleep: Callable[[float], None]) -> int:
    parsed = parse_args(argv, stdin, os.environ if env is None else env, cwd or os.getcwd())
    if parsed.info:
        out.write(parsed.info)
        return 0
    for w in parsed.warnings:
        if not parsed.quiet:
            print(w, file=err)
    spec = parsed.request.spec
    with controller_errors("sbatch: error: Batch job submission failed: "):
        api = api or make_api()
        try:
            reply = submit(api, parsed.request, sleep=sleep)
        except grpc.RpcError as e:
            # Slurm names the partition on a line of its own before the usual one.
            if details(e) == "Invalid partition name specified":
                print(f"sbatch: error: invalid partition specified: {spec.partition}", file=err)
            raise
    if parsed.request.test_only:
        print(f"sbatch: Job {reply.job_id} to start at {slurm.format_timestamp(int(time.time()))} "
              f"using {max(1, spec.num_tasks)} processors on nodes in partition "
              f"{spec.partition or 'default'}", file=err)
        return 0
    if parsed.parsable:
        print(str(reply.job_id), file=out)
    else:
        print(f"Submitted batch job {reply.job_id}", file=out)
    out.flush()
    if parsed.wait:
        try:
            return wait_for(api, reply.job_id, sleep)
        except ControllerUnreachable:
            print(f"sbatch: error: {CONNECT_FAILURE}", file=err)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

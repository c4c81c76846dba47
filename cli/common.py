"""What every command shares: how it ends (Slurm's message and exit status),
the options every command answers alike, reaching the controller in Slurm's
words, who the caller is.

A command's ``main`` hands its body to ``run``; the body raises
``CommandError`` to stop with a message, and ``Reply`` to stop with text on
stdout (--help, --version), so only the command's own behaviour is left in it:

    def main(argv=None, api=None, out=None, err=None) -> int:
        return run(_squeue, argv, api, out, err)

    def _squeue(argv, api, out, err) -> int:
        opts, positional = parse_options(PROG, argv, OPTIONS)
        for key, value, spelled in own_options(PROG, opts, USAGE):
            ...
        with controller_errors("slurm_load_jobs error: "):
            reply = (api or make_api()).call("GetJobs", request)
"""
from __future__ import annotations

import os
import pwd
import re
import sys
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Callable, Iterable, Iterator, TextIO

import cli
# CommandError and parse_options live with the option tables on the ground floor
# (lingjun/options.py: the SDK and lingjun restd parse with them too); every
# command takes them from here, with the rest of what the commands share.
from lingjun.options import VERSION, CommandError, ParsedOption, parse_options  # noqa: F401
from lingjun.slurm import current_user  # noqa: F401  (the commands' name for it)
from lingjun import slurm
from lingjun.command_socket import CommandApi, ControllerError
from lingjun.endpoints import ControllerUnreachable

CONNECT_FAILURE = "Unable to contact slurm controller (connect failure)"

class Reply(Exception):
    """The command stops early with ``text`` on stdout and exit status 0."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


def run(command: Callable[..., int], argv: list[str] | None, api, out: TextIO | None,
        err: TextIO | None, exit_now: bool = False, **extra) -> int:
    """Call ``command(argv, api, out, err, **extra)`` with the process's argv and
    streams where none are given; a CommandError or Reply it raises ends it.

    ``exit_now``: where the call is the whole process (no argv, api, out or err
    given: the console script's ``sys.exit(main())``), end the process here once
    stdout and stderr are flushed, with ``os._exit``. The interpreter's own
    teardown (modules, their objects, the collector) is 1-2 ms of a command's
    15 ms of CPU and does nothing a command needs: it registers no atexit work
    on its common path. srun and salloc, which run on after ``run``, do not ask."""
    cli.resume_collector()
    rc = _run(command, argv, api, out, err, **extra)
    if exit_now and argv is None and api is None and out is None and err is None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(rc)
    return rc


def _run(command: Callable[..., int], argv: list[str] | None, api, out: TextIO | None,
         err: TextIO | None, **extra) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    argv = sys.argv[1:] if argv is None else argv
    try:
        try:
            rc = command(argv, api, out, err, **extra)
        except CommandError as e:
            print(e.message, file=err)
            rc = e.rc
        except Reply as e:
            out.write(e.text)
            rc = 0
        out.flush()
        return rc
    except BrokenPipeError:
        return _reader_gone(out)


def _reader_gone(out: TextIO) -> int:
    """``squeue | head -1``: the reader left. End quietly, as a C command
    killed by SIGPIPE does (the shell sees 128 + 13); Python would otherwise
    print a traceback, and again when it flushes stdout at exit."""
    if out is sys.stdout:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
    import signal      # here: only a command whose reader left needs it
    return 128 + signal.SIGPIPE


def full_help(name: str) -> Callable[[], str]:
    """The --help text ``cli.helptext.<name>``, read when asked for: the texts
    are laid out at import (0.2 ms), which a command's common path does without."""
    def text() -> str:
        from cli import helptext  # here: read when asked for (see the docstring)
        return getattr(helptext, name)
    return text


def own_options(prog: str, opts: Iterable[ParsedOption], usage: str,
                help: str | Callable[[], str] | None = None) -> Iterator[ParsedOption]:
    """The parsed options a command handles itself, in the order given.

    The ones every command answers alike are answered here, at their place in
    the order (so ``-t bad --help`` is the -t error and ``--help -t bad`` the
    help, as in Slurm): --help and --usage print ``usage``, --version Slurm's
    version, both with exit 0 (--help the full ``help`` where the command has
    one: a text, or a function that returns it); an option keyed "unsupported"
    is refused.
    """
    for key, value, spelled in opts:
        if key == "unsupported":
            raise CommandError(f"{prog}: error: {spelled} is not supported yet")
        if key == "help":
            raise Reply((help() if callable(help) else help) or usage)
        if key == "usage":
            raise Reply(usage)
        if key == "version":
            raise Reply(VERSION)
        yield key, value, spelled


# The two context managers below are classes, not @contextlib.contextmanager
# generators: contextlib (with collections and functools) costs every command
# a millisecond or more to import.

class bad_values:   # noqa: N801 - used as a function: ``with bad_values(PROG):``
    """A ValueError while reading option values (a FormatError among them) ends
    the command with "<prog>: error: <its text>", exit 1."""

    def __init__(self, prog: str):
        self.prog = prog

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, e, tb) -> bool:
        if kind is not None and issubclass(kind, ValueError):
            raise CommandError(f"{self.prog}: error: {e}") from None
        return False


class controller_errors:   # noqa: N801 - used as a function
    """A failed call to the controller ends the command in Slurm's words:
    ``prefix`` and the connect failure, or ``prefix`` and the controller's own
    text; ``not_found``, when given, is the whole message for NOT_FOUND."""

    def __init__(self, prefix: str, not_found: str | None = None):
        self.prefix, self.not_found = prefix, not_found

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, e, tb) -> bool:
        if kind is None:
            return False
        if issubclass(kind, ControllerUnreachable):
            raise CommandError(self.prefix + CONNECT_FAILURE) from None
        if issubclass(kind, refusals()):
            if self.not_found is not None and is_not_found(e):
                raise CommandError(self.not_found) from None
            raise CommandError(self.prefix + details(e)) from None
        return False


def refusals() -> tuple[type[BaseException], ...]:
    """The exceptions a controller's refusal arrives as: ControllerError from
    the command socket, grpc.RpcError from gRPC (only once grpc is loaded:
    a command that never fell back to gRPC need not import it to catch it)."""
    grpc = sys.modules.get("grpc")
    return (ControllerError, grpc.RpcError) if grpc is not None else (ControllerError,)


def cluster_name(api) -> str:
    """The cluster's name for --json/--yaml documents ("" when the controller
    does not say: the document is still complete without it)."""
    from lingjun import messages  # here: only --json/--yaml ask the cluster's name
    try:
        return api.call("Ping", messages.PingRequest()).cluster
    except ControllerUnreachable:
        return ""
    except refusals():
        return ""
    except AttributeError:
        return ""


def make_api() -> CommandApi:
    """The controller through the local command socket, or gRPC where none is served."""
    return CommandApi()


def details(err: BaseException) -> str:
    """Slurm's text of a controller error (the status details)."""
    try:
        return err.details() or str(err.code())
    except Exception:  # noqa: BLE001 - a non-standard RpcError
        return str(err)


def is_not_found(err: BaseException) -> bool:
    return status_name(err) == "NOT_FOUND"


def status_name(err: BaseException) -> str:
    """The status of a refusal by name ("NOT_FOUND"), from either transport."""
    try:
        return err.code().name
    except Exception:  # noqa: BLE001
        return ""


def parse_job_ids(prog: str, text: str) -> list[int]:
    """-j "7,8_1,9.0" -> [7, 8, 9]: the job each id names (array task and step dropped)."""
    ids = []
    for word in text.split(","):
        if not word:
            continue
        head = word.split("_")[0].split(".")[0]
        if not slurm.is_job_id(head):
            raise CommandError(f"{prog}: error: Invalid job id: {word}")
        ids.append(int(head))
    return ids


# "12", "12_3", "12_[1-3,7]", "12.batch": one id of a comma list (commas inside [] kept)
_JOB_WORD_RE = r"[^,\[]*(?:\[[^\]]*\][^,]*)?"


def job_words(text: str) -> list[str]:
    """ "7,8_[1,3],9" -> ["7", "8_[1,3]", "9"]: a comma list whose brackets may hold commas."""
    if "[" not in text:         # the pattern's words then: the split's
        return [w for w in text.split(",") if w]
    return [w for w in re.findall(_JOB_WORD_RE, text) if w]


def parse_array_selectors(prog: str, text: str) -> list[tuple[int, frozenset[int] | None]]:
    """-j "7,8_1,9_[1-3],10.0" -> [(7, None), (8, {1}), (9, {1, 2, 3}), (10, None)]:
    the job each word names and, for "A_T" words, the array tasks it names."""
    out: list[tuple[int, frozenset[int] | None]] = []
    for word in job_words(text):
        head, sep, tail = word.split(".")[0].partition("_")
        if not slurm.is_job_id(head):
            raise CommandError(f"{prog}: error: Invalid job id: {word}")
        tasks = None
        if sep:
            inner = tail[1:-1] if tail.startswith("[") and tail.endswith("]") else tail
            try:
                tasks = frozenset(slurm.unfold_indices(inner))
            except ValueError:
                raise CommandError(f"{prog}: error: Invalid job id: {word}") from None
            if not tasks:
                raise CommandError(f"{prog}: error: Invalid job id: {word}")
        out.append((int(head), tasks))
    return out


def array_pending_tasks(job) -> list:
    """An array's pending remainder as one JobInfo per task ("squeue -r"):
    copies of the meta record, each with its array_task_id and no task list."""
    out = []
    for task in slurm.unfold_indices(job.array_task_str):
        one = type(job)()
        one.CopyFrom(job)
        one.array_task_id, one.array_task_str = task, ""
        out.append(one)
    return out


def select_array_tasks(jobs: Iterable, selectors, unfold: bool = False) -> list:
    """The rows (and pending tasks) that -j selectors name, unfolding the pending
    remainder of an array per task when ``unfold`` or when single tasks are named.

    "12" takes every row of array 12; "12_2" takes task 2 only: its own row once
    it has one, else a one-task copy of the pending remainder (Slurm's
    "squeue -j 12_2" prints "12_2 PENDING").
    """
    whole = {a for a, t in selectors if t is None}
    tasks: dict[int, set[int]] = {}
    for a, t in selectors:
        if t is not None:
            tasks.setdefault(a, set()).update(t)
    out = []
    for j in jobs:
        array_id = j.array_job_id or j.job_id
        remainder = bool(j.array_task_str)
        if not selectors or j.job_id in whole or array_id in whole:
            out.extend(array_pending_tasks(j) if unfold and remainder else [j])
        elif array_id in tasks and j.array_job_id:
            picked = tasks[array_id]
            if remainder:
                out.extend(t for t in array_pending_tasks(j) if t.array_task_id in picked)
            elif j.array_task_id in picked:
                out.append(j)
    return out


def select_jobs(jobs: Iterable, *, job_ids: Iterable[int] = (), users: Iterable[str] = (),
                partitions: Iterable[str] = (), names: Iterable[str] = (),
                accounts: Iterable[str] = (), nodes: set[str] | frozenset[str] = frozenset()
                ) -> list:
    """The jobs that -j, -u, -p, -n, -A and the node list let through (an empty
    one lets all through): squeue and sacct filter what the controller sent alike."""
    job_ids, users, partitions = set(job_ids), set(users), set(partitions)
    names, accounts = set(names), set(accounts)
    return [j for j in jobs
            if (not job_ids or j.job_id in job_ids or getattr(j, "array_job_id", 0) in job_ids)
            and (not users or j.user in users)
            and (not partitions or j.partition in partitions)
            and (not names or j.name in names)
            and (not accounts or j.account in accounts)
            and (not nodes or nodes & set(slurm.expand_hostlist(j.nodes)))]


def resolve_user(name: str) -> str | None:
    """A user name or uid as given to -u -> the user name; None when unknown."""
    try:
        return pwd.getpwnam(name).pw_name
    except KeyError:
        pass
    if name.isdigit():
        try:
            return pwd.getpwuid(int(name)).pw_name
        except KeyError:
            return None
    return None

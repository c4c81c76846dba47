"""scrontab: set, edit, list and remove a user's Slurm-managed crontab.

    scrontab [-u user] file        install ``file`` ("-": standard input)
    scrontab [-u user] -e          edit it with $VISUAL/$EDITOR (vi)
    scrontab [-u user] -l          print it
    scrontab [-u user] -r          remove it (running entries finish their run)

The file, as scrontab.1 has it: blank lines and ``#`` comments; ``NAME=value``
lines, set in the environment of every entry after them; ``#SCRON`` lines,
sbatch options for the next entry only; entries of five cron fields (or an
@keyword: @yearly @annually @monthly @weekly @daily @midnight @hourly) and a
command, run by /bin/sh in the user's home directory. Each entry becomes a
batch job built as ``sbatch [#SCRON options] --wrap COMMAND`` would build it
(the same option table and checks; the job is named "wrap" unless -J says
otherwise), and the controller queues it for its next time
(lingjund/service/crontab.py).

A file with a bad line installs nothing: each bad line is named with its
number, as Slurm's scrontab comments them out with ``#BAD:`` for ``-e``;
``-e`` opens the editor again on the file with those lines marked, as Slurm's
does, until the file is good or the editor leaves it unchanged.
"""
from __future__ import annotations

import os
import pwd
import shlex
import subprocess
import sys
import tempfile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

from lingjun import sbatch_options
from cli.common import CommandError, controller_errors, current_user, make_api, run
from lingjun import cron, messages

PROG = "scrontab"
USAGE = ("Usage: scrontab [-u user] [-e | -l | -r] [file]\n")
HELP = """Usage: scrontab [-u user] [-e | -l | -r] [file]
  file          install this crontab ("-" reads standard input)
  -e            edit the crontab with $VISUAL or $EDITOR
  -l            list the crontab
  -r            remove the crontab (running entries finish)
  -u user       the user whose crontab is used (operators only)
  --help        show this help message
  --usage       display brief usage message
"""
BAD = "#BAD: "


class CrontabError(ValueError):
    """Lines of a crontab that cannot be installed: [(line number, why)]."""

    def __init__(self, bad: list[tuple[int, str]]):
        super().__init__("; ".join(f"line {n}: {why}" for n, why in bad))
        self.bad = bad


def _entry(line: str) -> tuple[str, str] | None:
    """(cron spec, command) of an entry line; None if it is not one."""
    if line.startswith("@"):
        parts = line.split(None, 1)
        if parts[0] not in cron.KEYWORDS or len(parts) < 2:
            return None
        return parts[0], parts[1].strip()
    parts = line.split(None, 5)
    if len(parts) < 6:
        return None
    return " ".join(parts[:5]), parts[5].strip()


def parse(text: str, user: str, home: str) -> list[messages.JobSpec]:
    """The crontab's entries as job specs (their ``cron_spec`` set); CrontabError
    naming every bad line when any is bad."""
    specs: list[messages.JobSpec] = []
    bad: list[tuple[int, str]] = []
    scron: list[str] = []
    variables: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#SCRON"):
            try:
                scron += shlex.split(line[len("#SCRON"):])
            except ValueError as e:
                bad.append((n, f"#SCRON: {e}"))
            continue
        if line.startswith("#"):
            continue
        name, eq, value = line.partition("=")
        if eq and name.strip().isidentifier() and not line.startswith(("@", "*")) \
                and " " not in name.strip():
            variables[name.strip()] = value.strip().strip('"\'')
            continue
        entry = _entry(line)
        if entry is None:
            bad.append((n, "not a crontab entry, #SCRON line, comment or NAME=value"))
            scron = []
            continue
        when, command = entry
        if not cron.valid(when):
            bad.append((n, f"invalid time specification {when!r}"))
            scron = []
            continue
        env = {"HOME": home, "LOGNAME": user, "USER": user, "SHELL": "/bin/sh",
               "PATH": "/usr/local/bin:/usr/bin:/bin", **variables}
        try:
            req = sbatch_options.build_request([*scron, "--wrap", command], None, env, home)
        except CommandError as e:
            first = e.message.splitlines()[0] if e.message else "refused"
            bad.append((n, first.removeprefix("sbatch: error: ").removeprefix("sbatch: ")))
            scron = []
            continue
        spec = req.spec
        spec.cron_spec = when
        spec.environment.clear()
        spec.environment.update(env)
        specs.append(spec)
        scron = []
    if bad:
        raise CrontabError(bad)
    return specs


def _user(name: str) -> tuple[str, str]:
    """(user, home) of ``name`` (the caller when empty)."""
    try:
        pw = pwd.getpwnam(name) if name else pwd.getpwuid(os.getuid())
    except KeyError:
        raise CommandError(f"scrontab: error: Invalid user: {name}", 1) from None
    return pw.pw_name, pw.pw_dir or "/"


def _install(api, user: str, text: str, home: str) -> None:
    specs = parse(text, user, home)
    req = messages.SetCrontabRequest(user=user, text=text, requester_uid=os.getuid(),
                                     requester=current_user()[0])
    req.entries.extend(specs)
    with controller_errors("scrontab: error: "):
        api.call("SetCrontab", req)


def _current(api, user: str) -> str | None:
    with controller_errors("scrontab: error: "):
        reply = api.call("GetCrontab", messages.GetCrontabRequest(
            user=user, requester_uid=os.getuid(), requester=current_user()[0]))
    return reply.text if reply.found else None


def _marked(text: str, bad: list[tuple[int, str]]) -> str:
    lines = text.splitlines()
    for n, _ in bad:
        if not lines[n - 1].startswith(BAD):
            lines[n - 1] = BAD + lines[n - 1]
    return "\n".join(lines) + "\n"


def _edit(api, user: str, home: str, err: TextIO) -> int:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    text = _current(api, user) or ""
    with tempfile.NamedTemporaryFile("w+", prefix="scrontab-", suffix=".txt", delete=False) as f:
        path = f.name
    try:
        while True:
            with open(path, "w") as f:
                f.write(text)
            rc = subprocess.call(shlex.split(editor) + [path])
            if rc != 0:
                print(f"scrontab: error: {editor} exited with status {rc}; crontab unchanged",
                      file=err)
                return 1
            with open(path) as f:
                edited = f.read()
            if edited == text and text:
                print("scrontab: no changes made to crontab", file=err)
                return 0
            try:
                _install(api, user, edited, home)
                return 0
            except CrontabError as e:
                print("There are errors in your crontab.\n"
                      "The failed lines are commented out with #BAD:", file=err)
                for n, why in e.bad:
                    print(f"scrontab: line {n}: {why}", file=err)
                text = _marked(edited, e.bad)
                if edited == text:
                    return 1
    finally:
        os.unlink(path)


def _command_line(argv: list[str], out: TextIO) -> tuple[str, str, list[str]] | None:
    """(user name, action -e/-l/-r, files) as the command line gives them;
    None once --help or --usage has answered."""
    user_name, action, files = "", "", []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-e", "-l", "-r"):
            if action and action != a:
                raise CommandError(f"scrontab: error: {action} and {a} may not be used together\n"
                                   + USAGE.rstrip(), 1)
            action = a
        elif a == "-u":
            if i + 1 >= len(argv):
                raise CommandError("scrontab: option requires an argument -- 'u'\n" + USAGE.rstrip(), 1)
            user_name = argv[i + 1]
            i += 1
        elif a.startswith("-u") and len(a) > 2:
            user_name = a[2:]
        elif a in ("-h", "--help", "--usage"):
            out.write(USAGE if a == "--usage" else HELP)
            return None
        elif a.startswith("-") and a != "-":
            raise CommandError(f"scrontab: invalid option -- '{a.lstrip('-')}'\n" + USAGE.rstrip(), 1)
        else:
            files.append(a)
        i += 1
    if (action and files) or len(files) > 1 or not (action or files):
        raise CommandError(USAGE.rstrip(), 1)
    return user_name, action, files


def _scrontab(argv: list[str], api, out: TextIO, err: TextIO, stdin=None) -> int:
    asked = _command_line(argv, out)
    if asked is None:
        return 0
    user_name, action, files = asked
    user, home = _user(user_name)
    api = api or make_api()
    if action == "-l":
        text = _current(api, user)
        if text is None:
            raise CommandError(f"scrontab: no crontab for {user}", 1)
        out.write(text if text.endswith("\n") or not text else text + "\n")
        return 0
    if action == "-r":
        with controller_errors("scrontab: error: "):
            api.call("SetCrontab", messages.SetCrontabRequest(
                user=user, text="", requester_uid=os.getuid(), requester=current_user()[0]))
        return 0
    if action == "-e":
        return _edit(api, user, home, err)
    path = files[0]
    try:
        if path == "-":
            text = (stdin or sys.stdin).read()
        else:
            with open(path) as f:
                text = f.read()
    except OSError as e:
        raise CommandError(f"scrontab: error: cannot read {path}: {e.strerror}", 1) from None
    try:
        _install(api, user, text, home)
    except CrontabError as e:
        raise CommandError("There are errors in your crontab.\n" + "\n".join(
            f"scrontab: line {n}: {why}" for n, why in e.bad), 1) from None
    return 0


def main(argv: list[str] | None = None, api=None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    return run(_scrontab, argv, api, out, err)


if __name__ == "__main__":
    sys.exit(main())

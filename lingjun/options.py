"""Command-line parsing the way Slurm's commands do it: glibc getopt_long.

Slurm parses with getopt_long, so our commands accept what Slurm accepts and
refuse what it refuses, with glibc's words:

- long options may be abbreviated to any unambiguous prefix (``--par`` is
  ``--parsable``, ``--part`` is ``--partition``); an exact name always wins;
- a required argument comes as ``--opt=value`` or ``--opt value``, an
  optional one only as ``--opt=value``;
- short options cluster (``-HN2``) and take their argument attached or next;
- ``--`` ends the options; ``stop_at_positional`` is the optstring's leading
  ``+`` (sbatch: everything after the script name belongs to the script).

    >>> OPTS = [Opt("parsable", ("parsable",)), Opt("partition", ("partition",), "p", REQUIRED)]
    >>> getopt("sbatch", ["--part=debug", "--pars", "job.sh", "-x"], OPTS, stop_at_positional=True)
    ([('partition', 'debug', '--partition'), ('parsable', None, '--parsable')], ['job.sh', '-x'])

It lives on the ground floor (``lingjun/``) with the job options it reads
(``job_options``, ``sbatch_options``): the commands parse with it, and so do
the SDK (``lingjun/sdk.py``: ``Client.submit`` takes sbatch's options) and
``lingjun restd``, which import nothing of ``cli/``. ``CommandError`` is how
a parser stops with Slurm's words and exit status, whoever called it.
"""
from __future__ import annotations

from collections import namedtuple

NO, REQUIRED, OPTIONAL = 0, 1, 2


class Opt(namedtuple("Opt", ("key", "long", "short", "arg"), defaults=((), "", NO))):
    """One option: what the command calls it (key), its long names without "--",
    its short letters, and whether it takes an argument (NO, REQUIRED, OPTIONAL).
    A named tuple, not a dataclass: every command builds its table at start-up,
    and importing dataclasses (and inspect with it) costs more than the rest."""
    __slots__ = ()


# What every command prints for -V/--version (and scontrol for its "version" word).
VERSION = "slurm 22.05.8\n"


ParsedOption = tuple[str, str | None, str]   # (key, value, the option as spelled)


class CommandError(Exception):
    """The command stops: ``message`` (already in Slurm's words, prefix and all)
    goes to stderr and ``rc`` is the exit status."""

    def __init__(self, message: str, rc: int = 1):
        super().__init__(message)
        self.message = message
        self.rc = rc


class UsageError(Exception):
    """A getopt error: the message is glibc's line, without the "Try --help" line."""


def comma_list(value: str) -> list[str]:
    """An option's comma-separated list, empty items dropped: "a,,b," -> ["a", "b"]."""
    return [w for w in value.split(",") if w]


def env_options(env, variables: dict[str, str], opts: list[Opt], given=()
                ) -> list[tuple[str, str | None, str]]:
    """Input environment variables as parsed options, to come before the
    command line's: ``variables`` maps each to an option's long name; one
    that is unset or empty, or whose option the command line gives
    (``given``: keys), is left out. A flag's variable sets it whatever its
    value, as in Slurm.

        >>> sort = Opt("sort", ("sort",), "S", REQUIRED)
        >>> env_options({"SQUEUE_SORT": "-i"}, {"SQUEUE_SORT": "sort"}, [sort])
        [('sort', '-i', 'SQUEUE_SORT')]
    """
    by_long = {n: o for o in opts for n in o.long}
    skip = set(given)
    out = []
    for var, name in variables.items():
        value = env.get(var, "")
        opt = by_long[name]
        if not value or opt.key in skip:
            continue
        out.append((opt.key, None if opt.arg == NO else value, var))
    return out


def _find_long(prog: str, name: str, opts: list[Opt]) -> tuple[Opt, str]:
    exact = [(o, n) for o in opts for n in o.long if n == name]
    if exact:
        return exact[0]
    cands = [(o, n) for o in opts for n in o.long if n.startswith(name)]
    if not cands:
        raise UsageError(None)
    if len({(o.key, o.arg) for o, _ in cands}) > 1:
        poss = "".join(f" '--{n}'" for _, n in cands)
        raise UsageError(f"{prog}: option '--{name}' is ambiguous; possibilities:{poss}")
    return cands[0]


def getopt(prog: str, argv: list[str], opts: list[Opt], stop_at_positional: bool = False
           ) -> tuple[list[tuple[str, str | None, str]], list[str]]:
    """Parse argv: ([(key, value or None, the option's full name)], positionals)."""
    parsed: list[tuple[str, str | None, str]] = []
    positional: list[str] = []
    shorts = {c: o for o in opts for c in o.short}
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a == "--":
            positional.extend(argv[i:])
            break
        if a.startswith("--"):
            body = a[2:]
            name, eq, value = body.partition("=")
            try:
                opt, full = _find_long(prog, name, opts)
            except UsageError as e:
                if e.args[0] is None:
                    raise UsageError(f"{prog}: unrecognized option '{a}'") from None
                raise
            if opt.arg == NO:
                if eq:
                    raise UsageError(f"{prog}: option '--{full}' doesn't allow an argument")
                parsed.append((opt.key, None, f"--{full}"))
            elif opt.arg == OPTIONAL:
                parsed.append((opt.key, value if eq else None, f"--{full}"))
            else:
                if not eq:
                    if i >= len(argv):
                        raise UsageError(f"{prog}: option '--{full}' requires an argument")
                    value = argv[i]
                    i += 1
                parsed.append((opt.key, value, f"--{full}"))
            continue
        if a.startswith("-") and a != "-":
            j = 1
            while j < len(a):
                c = a[j]
                j += 1
                opt = shorts.get(c)
                if opt is None:
                    raise UsageError(f"{prog}: invalid option -- '{c}'")
                if opt.arg == NO:
                    parsed.append((opt.key, None, f"-{c}"))
                    continue
                rest = a[j:]
                if rest:
                    parsed.append((opt.key, rest, f"-{c}"))
                elif opt.arg == OPTIONAL:
                    parsed.append((opt.key, None, f"-{c}"))
                else:
                    if i >= len(argv):
                        raise UsageError(f"{prog}: option requires an argument -- '{c}'")
                    parsed.append((opt.key, argv[i], f"-{c}"))
                    i += 1
                break
            continue
        if stop_at_positional:
            positional.append(a)
            positional.extend(argv[i:])
            break
        positional.append(a)
    return parsed, positional


def parse_options(prog: str, argv: list[str], opts: list[Opt], rc: int = 1,
                  stop_at_positional: bool = False) -> tuple[list[ParsedOption], list[str]]:
    """getopt; a usage error ends the command with glibc's words, the --help hint, ``rc``."""
    try:
        return getopt(prog, argv, opts, stop_at_positional=stop_at_positional)
    except UsageError as e:
        raise CommandError(f'{e}\nTry "{prog} --help" for more information', rc) from None

"""sshare: fair share and usage of each association, as Slurm 22.05 prints it.

    sshare [-a] [-l] [-A accounts] [-u users] [-P|-p] [-n] [-o fields]

The tree of accounts from root down, each account's users before its
sub-accounts, the Account column indented one space a level. By default
every account and the caller's own user associations; -a: every user's;
-u: the users named; -A: only the accounts named (and, with -a or -u, their
users). The numbers are lingjund's (GetAssociations with usage; Fair Tree,
lingjund/sched/fairshare.py). Layout from /usr/bin/sshare
(tests/cli/golden/sshare/).
"""
from __future__ import annotations

import sys

from cli.common import CommandError, controller_errors, current_user, make_api, run
from lingjun import messages

PROG = "sshare"
# field -> (header, width: negative = left-aligned)
FIELDS = {
    "account": ("Account", -20), "user": ("User", 10), "rawshares": ("RawShares", 10),
    "normshares": ("NormShares", 11), "rawusage": ("RawUsage", 11), "normusage": ("NormUsage", 11),
    "effectvusage": ("EffectvUsage", 13), "fairshare": ("FairShare", 10), "levelfs": ("LevelFS", 10),
    "grptresmins": ("GrpTRESMins", 30), "tresrunmins": ("TRESRunMins", 30),
}
DEFAULT = ("account", "user", "rawshares", "normshares", "rawusage", "effectvusage", "fairshare")
LONG = ("account", "user", "rawshares", "normshares", "rawusage", "normusage", "effectvusage",
        "fairshare", "levelfs", "grptresmins", "tresrunmins")
TRES_RUN_MINS = "cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0"
USAGE = ("Usage: sshare [-a] [-l] [-A accounts] [-u users] [-P|-p] [-n] [-o format]\n")


class Opts:
    def __init__(self):
        self.all = self.long = False
        self.accounts: list[str] = []
        self.users: list[str] = []
        self.parsable: str | None = None
        self.header = True
        self.format: list[str] = []


def _value_of(argv: list[str], i: int, arg: str, short: str, long: str) -> tuple[str | None, int]:
    if arg == short or arg == long:
        if i + 1 >= len(argv):
            raise CommandError(f"{PROG}: option requires an argument -- '{short[1:]}'\n{USAGE}")
        return argv[i + 1], i + 1
    if arg.startswith(long + "="):
        return arg[len(long) + 1:], i
    if arg.startswith(short) and len(arg) > 2 and not arg.startswith("--"):
        return arg[2:], i
    return None, i


def parse(argv: list[str]) -> Opts:
    o = Opts()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-a", "--all"):
            o.all = True
        elif arg in ("-l", "--long"):
            o.long = True
        elif arg in ("-P", "--parsable2"):
            o.parsable = "P"
        elif arg in ("-p", "--parsable"):
            o.parsable = "p"
        elif arg in ("-n", "--noheader"):
            o.header = False
        else:
            for short, long, attr in (("-A", "--accounts", "accounts"), ("-u", "--users", "users"),
                                      ("-o", "--format", "format")):
                v, i = _value_of(argv, i, arg, short, long)
                if v is not None:
                    getattr(o, attr).extend(x.strip() for x in v.split(",") if x.strip())
                    break
            else:
                raise CommandError(f"{PROG}: invalid option -- '{arg.lstrip('-')}'\n{USAGE}")
        i += 1
    for f in o.format:
        if f.split("%")[0].lower() not in FIELDS:
            raise CommandError(f"{PROG}: error: Invalid field requested: \"{f}\"")
    return o


def main(argv=None, api=None, out=None, err=None) -> int:
    return run(_sshare, argv, api, out, err)


def _num(x: float) -> str:
    return f"{x:.6f}"


def rows(r, o: Opts, me: str) -> list[dict[str, str]]:
    """sshare's rows (field -> text) from a GetAssociations reply."""
    accounts = {a.name: a for a in r.accounts}
    by_acc: dict[str, dict[str, object]] = {}
    users: dict[str, list] = {}
    for s in r.assocs:
        if s.user:
            users.setdefault(s.account, []).append(s)
        elif not s.partition:
            by_acc[s.account] = s
    kids: dict[str, list[str]] = {}
    for a in accounts.values():
        if a.parent:
            kids.setdefault(a.parent, []).append(a.name)
    want_users = set(o.users) if o.users else (None if o.all else {me})
    want_acc = set(o.accounts)
    out: list[tuple[int, dict[str, str]]] = []

    def account_row(name: str, s, depth: int) -> None:
        root = name == "root"
        out.append((depth, {
            "account": name, "user": "", "rawshares": "" if root else str(s.shares),
            "normshares": _num(0.0 if root else s.norm_shares), "rawusage": str(int(s.raw_usage)),
            "normusage": "", "effectvusage": _num(1.0 if root else s.effective_usage), "fairshare": "",
            "levelfs": "" if root else _fs(s.level_fs), "grptresmins": "", "tresrunmins": TRES_RUN_MINS}))

    def user_row(s, depth: int) -> None:
        out.append((depth, {
            "account": s.account, "user": s.user, "rawshares": str(s.shares),
            "normshares": _num(s.norm_shares), "rawusage": str(int(s.raw_usage)),
            "normusage": _num(s.norm_usage), "effectvusage": _num(s.effective_usage),
            "fairshare": _num(s.fairshare), "levelfs": _fs(s.level_fs), "grptresmins": "",
            "tresrunmins": TRES_RUN_MINS}))

    seen: set[str] = set()

    def walk(name: str, depth: int) -> None:
        if name in seen:
            return
        seen.add(name)
        s = by_acc.get(name)
        shown = not want_acc or name in want_acc
        if s is not None and shown:
            account_row(name, s, depth)
        if shown and (want_users is None or want_users or want_acc):
            for u in sorted(users.get(name, []), key=lambda x: (x.user, x.partition)):
                if want_users is None or u.user in want_users or (want_acc and o.all):
                    user_row(u, depth + 1)
        for k in sorted(kids.get(name, [])):
            walk(k, depth + 1)

    walk("root", 0)
    if not out:
        return []
    base = min(d for d, _ in out)
    result = []
    for depth, row in out:
        row["account"] = " " * (depth - base) + row["account"]
        result.append(row)
    return result


def _fs(level_fs: float) -> str:
    return "inf" if level_fs < 0 else _num(level_fs)


def _cell(value: str, width: int) -> str:
    w = abs(width)
    if len(value) > w:
        value = value[:w - 1] + "+"
    return value.ljust(w) if width < 0 else value.rjust(w)


def render(fields: list[tuple[str, int]], table: list[dict[str, str]], parsable: str | None,
           header: bool) -> str:
    lines = []
    if parsable is not None:
        end = "|" if parsable == "p" else ""
        if header:
            lines.append("|".join(FIELDS[f][0] for f, _ in fields) + end)
        lines += ["|".join(r[f] for f, _ in fields) + end for r in table]
    else:
        if header:
            lines.append("".join(_cell(FIELDS[f][0], w) + " " for f, w in fields))
            lines.append("".join("-" * abs(w) + " " for f, w in fields))
        lines += ["".join(_cell(r[f], w) + " " for f, w in fields) for r in table]
    return "".join(line + "\n" for line in lines)


def _fields(o: Opts) -> list[tuple[str, int]]:
    if not o.format:
        return [(f, FIELDS[f][1]) for f in (LONG if o.long else DEFAULT)]
    out = []
    for item in o.format:
        name, _, width = item.partition("%")
        f = name.lower()
        w = FIELDS[f][1]
        if width.lstrip("-").isdigit():
            w = int(width)
        out.append((f, w))
    return out


def _sshare(argv, api, out, err) -> int:
    o = parse(argv)
    with controller_errors(f"{PROG}: error: "):
        r = (api or make_api()).call("GetAssociations", messages.GetAssociationsRequest(with_usage=True))
    out.write(render(_fields(o), rows(r, o, current_user()[0]), o.parsable, o.header))
    return 0


if __name__ == "__main__":
    sys.exit(main())

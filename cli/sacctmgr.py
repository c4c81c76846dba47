"""sacctmgr: accounts, users, QOS and associations, in Slurm's words.

    sacctmgr [-i] [-n] [-p|-P] add|create  account|user|qos NAMES [key=value ...]
    sacctmgr [-i] modify|update account|user|qos [where] key=value ... set key=value ...
    sacctmgr [-i] delete|remove account|user|qos [where] key=value ...
    sacctmgr [-n] [-p|-P] show|list account|user|qos|association|cluster [NAMES]
             [where key=value ...] [withassoc] [format=Field%N,...]

The changes go to the controller (AcctMgr), which keeps them in its store;
``show`` reads them back (GetAssociations). Without -i a change is shown
first and Slurm's question asked ("Would you like to commit changes? (You
have 30 seconds to decide)"); only "y" commits. Real sacctmgr, whose stdin
is at its end (no terminal, </dev/null), prints "Y or N please" for ever;
here the end of stdin is a "no", as the 30 seconds without an answer are:
the change is discarded (" Changes Discarded", exit 0). Output, messages and
exit statuses follow /usr/bin/sacctmgr 22.05 (tests/cli/golden/sacctmgr/).
"""
from __future__ import annotations

import os
import select
import sys

from cli.common import CommandError, controller_errors, current_user, make_api, run
from lingjun import messages, slurm

PROG = "sacctmgr"
VERBS = {"add": "add", "create": "add", "modify": "modify", "update": "modify",
         "delete": "delete", "remove": "delete", "show": "show", "list": "show"}
ENTITIES = ("account", "user", "qos", "association", "cluster")
QUESTION = "Would you like to commit changes? (You have 30 seconds to decide)"

# field name (lowercase) -> (header, width, key of the row dict)
COLUMNS = {
    "account": ("Account", 10), "descr": ("Descr", 20), "description": ("Descr", 20),
    "org": ("Org", 20), "organization": ("Org", 20), "cluster": ("Cluster", 10),
    "parentname": ("ParentName", 10), "user": ("User", 10), "share": ("Share", 9),
    "fairshare": ("Share", 9), "priority": ("Priority", 10), "grpjobs": ("GrpJobs", 7),
    "grpnodes": ("GrpNodes", 8), "grpcpus": ("GrpCPUs", 8), "grpmem": ("GrpMem", 7),
    "grpsubmit": ("GrpSubmit", 9), "grpsubmitjobs": ("GrpSubmit", 9), "grpwall": ("GrpWall", 11),
    "grpcpumins": ("GrpCPUMins", 11), "maxjobs": ("MaxJobs", 7), "maxnodes": ("MaxNodes", 8),
    "maxcpus": ("MaxCPUs", 8), "maxsubmit": ("MaxSubmit", 9), "maxsubmitjobs": ("MaxSubmit", 9),
    "maxwall": ("MaxWall", 11), "maxcpumins": ("MaxCPUMins", 11), "qos": ("QOS", 20),
    "defaultqos": ("Def QOS", 9), "defaultaccount": ("Def Acct", 10), "adminlevel": ("Admin", 9),
    "partition": ("Partition", 10), "grptres": ("GrpTRES", 13), "grptresmins": ("GrpTRESMins", 13),
    "maxtres": ("MaxTRES", 13), "maxtresperjob": ("MaxTRES", 13), "maxtrespernode": ("MaxTRESPerNode", 14),
    "maxtresmins": ("MaxTRESMins", 13), "grptresrunmins": ("GrpTRESRunMin", 13),
    "name": ("Name", 10), "gracetime": ("GraceTime", 10), "preempt": ("Preempt", 10),
    "preemptexempttime": ("PreemptExemptTime", 19), "preemptmode": ("PreemptMode", 11),
    "flags": ("Flags", 40), "usagethreshold": ("UsageThres", 10), "usagefactor": ("UsageFactor", 11),
    "maxtrespu": ("MaxTRESPU", 13), "maxtresperuser": ("MaxTRESPU", 13), "maxjobspu": ("MaxJobsPU", 9),
    "maxjobsperuser": ("MaxJobsPU", 9), "maxsubmitpu": ("MaxSubmitPU", 11),
    "maxsubmitjobsperuser": ("MaxSubmitPU", 11), "maxtrespa": ("MaxTRESPA", 13),
    "maxjobspa": ("MaxJobsPA", 9), "maxsubmitpa": ("MaxSubmitPA", 11), "mintres": ("MinTRES", 13),
    "controlhost": ("ControlHost", 15), "controlport": ("ControlPort", 12), "rpc": ("RPC", 5),
    "id": ("ID", 6), "rawusage": ("RawUsage", 11),
}
_ASSOC_LIMIT_FIELDS = ("grpjobs", "grptres", "grpsubmit", "grpwall", "grptresmins", "maxjobs",
                       "maxtres", "maxtrespernode", "maxsubmit", "maxwall", "maxtresmins", "qos",
                       "defaultqos", "grptresrunmins")
DEFAULT_FORMATS = {
    "account": ("account", "descr", "org"),
    "account+": ("account", "descr", "org", "cluster", "parentname", "user", "share", "priority",
                 "grpjobs", "grpnodes", "grpcpus", "grpmem", "grpsubmit", "grpwall", "grpcpumins",
                 "maxjobs", "maxnodes", "maxcpus", "maxsubmit", "maxwall", "maxcpumins", "qos",
                 "defaultqos"),
    "user": ("user", "defaultaccount", "adminlevel"),
    "user+": ("user", "defaultaccount", "adminlevel", "cluster", "account", "partition", "share",
              "priority", "maxjobs", "maxnodes", "maxcpus", "maxsubmit", "maxwall", "maxcpumins",
              "qos", "defaultqos"),
    "association": ("cluster", "account", "user", "partition", "share", "priority", "grpjobs",
                    "grptres", "grpsubmit", "grpwall", "grptresmins", "maxjobs", "maxtres",
                    "maxtrespernode", "maxsubmit", "maxwall", "maxtresmins", "qos", "defaultqos",
                    "grptresrunmins"),
    "qos": ("name", "priority", "gracetime", "preempt", "preemptexempttime", "preemptmode", "flags",
            "usagethreshold", "usagefactor", "grptres", "grptresmins", "grptresrunmins", "grpjobs",
            "grpsubmit", "grpwall", "maxtres", "maxtrespernode", "maxtresmins", "maxwall", "maxtrespu",
            "maxjobspu", "maxsubmitpu", "maxtrespa", "maxjobspa", "maxsubmitpa", "mintres"),
    "cluster": ("cluster", "controlhost", "controlport", "rpc", "share", "grpjobs", "grptres",
                "grpsubmit", "maxjobs", "maxtres", "maxsubmit", "maxwall", "qos", "defaultqos"),
}
# what a user may write for a key (Slurm matches a prefix, case-insensitive)
SET_KEYS = ("account", "accounts", "adminlevel", "cluster", "clusters", "defaultaccount", "defaultqos",
            "description", "fairshare", "flags", "gracetime", "grpjobs", "grpsubmitjobs", "grptres", "maxjobs",
            "maxjobsperuser", "maxjobspu", "maxsubmitjobs", "maxsubmitjobsperuser", "maxsubmitpu",
            "maxtres", "maxtresperjob", "maxtresperuser", "maxtrespu", "maxwall",
            "maxwalldurationperjob", "name", "names", "organization", "parent", "partition",
            "partitions", "preempt", "preemptexempttime", "preemptmode", "priority", "qos", "qoslevel", "shares",
            "usagefactor", "user", "users")
ALIASES = {"defaultaccount": ("defaultaccount", "defacct", "defaultacct"), "description": ("descr",),
           "organization": ("org",), "fairshare": ("share",), "grpsubmitjobs": ("grpsubmit",),
           "maxsubmitjobs": ("maxsubmit",)}


def _key(word: str) -> str | None:
    w = word.lower()
    for canon, names in ALIASES.items():
        if w in names:
            return canon
    if w in SET_KEYS:
        return w
    found = [k for k in SET_KEYS if k.startswith(w)]
    return found[0] if len(w) >= 3 and found else None


def _entity(word: str) -> str | None:
    w = word.lower().rstrip("s") if word.lower() not in ("qos",) else "qos"
    if w in ("assoc", "association"):
        return "association"
    return next((e for e in ENTITIES if len(w) >= 3 and e.startswith(w)), None)


# -- values as sacctmgr prints them -------------------------------------------------
def _limit(v: int) -> str:
    return "" if v < 0 else str(v)


def _wall(minutes: int) -> str:
    return "" if minutes < 0 else slurm.format_time_limit(minutes, "scontrol")


def _assoc_values(a, cluster: str) -> dict[str, str]:
    return {"cluster": a.cluster or cluster, "account": a.account, "user": a.user,
            "partition": a.partition, "share": str(a.shares), "fairshare": str(a.shares),
            "priority": "", "grpjobs": _limit(a.grp_jobs), "grptres": a.grp_tres,
            "grpsubmit": _limit(a.grp_submit_jobs), "grpsubmitjobs": _limit(a.grp_submit_jobs),
            "maxjobs": _limit(a.max_jobs), "maxtres": a.max_tres_per_job,
            "maxtresperjob": a.max_tres_per_job, "maxsubmit": _limit(a.max_submit_jobs),
            "maxsubmitjobs": _limit(a.max_submit_jobs), "maxwall": _wall(a.max_wall_min),
            "qos": a.qos, "defaultqos": a.default_qos, "id": str(a.id),
            "rawusage": str(int(a.raw_usage))}


def _qos_values(q) -> dict[str, str]:
    return {"name": q.name, "description": q.description, "descr": q.description,
            "priority": str(q.priority), "gracetime": slurm.format_duration(q.grace_time),
            "preemptexempttime": (slurm.format_duration(q.preempt_exempt_time)
                                  if q.preempt_exempt_time >= 0 else ""),
            "preempt": q.preempt,
            "preemptmode": q.preempt_mode or "cluster", "flags": q.flags,
            "usagefactor": f"{q.usage_factor:.6f}", "grptres": q.grp_tres,
            "maxtres": q.max_tres_per_job, "maxtresperjob": q.max_tres_per_job,
            "maxwall": _wall(q.max_wall_min), "maxtrespu": q.max_tres_per_user,
            "maxtresperuser": q.max_tres_per_user, "maxjobspu": _limit(q.max_jobs_per_user),
            "maxjobsperuser": _limit(q.max_jobs_per_user),
            "maxsubmitpu": _limit(q.max_submit_jobs_per_user),
            "maxsubmitjobsperuser": _limit(q.max_submit_jobs_per_user)}


def cell(value: str, width: int) -> str:
    """A value in a column of ``width`` (negative: left-aligned), cut with "+" as Slurm."""
    w = abs(width)
    if len(value) > w:
        value = value[:w - 1] + "+"
    return value.ljust(w) if width < 0 else value.rjust(w)


def render(fields: list[tuple[str, int]], rows: list[dict[str, str]], parsable: str | None,
           header: bool) -> str:
    """Rows as sacctmgr prints them: columns, "-p" (a|b|) or "-P" (a|b)."""
    lines = []
    if parsable is not None:
        end = "|" if parsable == "p" else ""
        if header:
            lines.append("|".join(COLUMNS[f][0] for f, _ in fields) + end)
        lines += ["|".join(r.get(f, "") for f, _ in fields) + end for r in rows]
    else:
        if header:
            lines.append("".join(cell(COLUMNS[f][0], w) + " " for f, w in fields))
            lines.append("".join("-" * abs(w) + " " for f, w in fields))
        lines += ["".join(cell(r.get(f, ""), w) + " " for f, w in fields) for r in rows]
    return "".join(line + "\n" for line in lines)


def parse_format(spec: str) -> list[tuple[str, int]]:
    out = []
    for item in filter(None, spec.split(",")):
        name, _, width = item.partition("%")
        key = name.lower()
        if key not in COLUMNS:
            found = [k for k in COLUMNS if k.startswith(key)]
            if not found:
                raise CommandError(f" Unknown field '{name}'")
            key = found[0]
        w = COLUMNS[key][1]
        if width:
            try:
                w = int(width)
            except ValueError:
                raise CommandError(f" Unknown field '{item}'") from None
            w = -abs(w) if width.startswith("-") else abs(w)
        out.append((key, w))
    return out


# -- the command -------------------------------------------------------------------
class Args:
    def __init__(self):
        self.immediate = False
        self.parsable: str | None = None
        self.header = True
        self.verb = self.entity = ""
        self.names: list[str] = []
        self.where: dict[str, str] = {}
        self.set: dict[str, str] = {}
        self.withassoc = False
        self.format = ""


# sacctmgr's options: what each sets on Args (None: accepted, no effect here)
_FLAGS = {
    "-i": ("immediate", True), "--immediate": ("immediate", True),
    "-P": ("parsable", "P"), "--parsable2": ("parsable", "P"),
    "-p": ("parsable", "p"), "--parsable": ("parsable", "p"),
    "-n": ("header", False), "--noheader": ("header", False),
    "-Q": None, "--quiet": None, "-v": None, "--verbose": None,
}


def parse(argv: list[str]) -> Args:
    a = Args()
    rest = []
    for arg in argv:
        if arg in _FLAGS:
            if _FLAGS[arg] is not None:
                setattr(a, *_FLAGS[arg])
        elif arg.startswith("-") and not rest:
            raise CommandError(f"{PROG}: invalid option -- '{arg.lstrip('-')}'")
        else:
            rest.append(arg)      # options may come after the command too, as Slurm's
    if not rest:
        raise CommandError("No command given")
    verb = VERBS.get(rest[0].lower())
    if verb is None:
        raise CommandError(f"invalid keyword: {rest[0]}")
    a.verb = verb
    if len(rest) < 2 or _entity(rest[1]) is None:
        raise CommandError(f" Unknown command: {' '.join(rest[1:2]) or rest[0]}")
    a.entity = _entity(rest[1])
    _read_words(a, rest[2:])
    return a


def _read_words(a: Args, words: list[str]) -> None:
    """The words after the entity: names, format=, withassoc, and key=value
    pairs that go to WHERE or SET by the last of those keywords seen (add's
    always to SET)."""
    mode = "where" if a.verb in ("modify", "delete", "show") else "set"
    set_mode = a.verb == "add"
    for word in words:
        low = word.lower()
        if low in ("where", "set"):
            mode = low
            continue
        if low in ("withassoc", "withassocs"):
            a.withassoc = True
            continue
        key, eq, value = word.partition("=")
        if not eq:
            a.names += [n for n in word.split(",") if n]
            continue
        if key.lower() in ("format", "formats"):
            a.format = value
            continue
        k = _key(key)
        if k is None:
            if mode == "where":
                raise CommandError(f" Unknown condition: {word}\n Use keyword 'set' to modify value")
            raise CommandError(f" Unknown option: {word}\n Use keyword 'where' to modify condition")
        if set_mode or mode == "set":
            a.set[k] = value
        else:
            a.where[k] = value


def main(argv=None, api=None, out=None, err=None, stdin=None) -> int:
    return run(_sacctmgr, argv, api, out, err, stdin=stdin)


def _sacctmgr(argv, api, out, err, stdin=None) -> int:
    a = parse(argv)
    api = api or make_api()
    if a.verb == "show":
        return _show(a, api, out)
    return _change(a, api, out, err, stdin or sys.stdin)


def _request(a: Args, dry_run: bool):
    user = current_user()[0]
    return messages.AcctMgrRequest(verb=a.verb, entity=a.entity, names=a.names, where=a.where,
                                   set=a.set, dry_run=dry_run, requester_uid=os.getuid(),
                                   requester=user)


_PROBLEM = {"add": " Problem adding {}s: ", "modify": " Problem modifying {}s: ",
            "delete": " Problem deleting {}s: "}


def _change(a: Args, api, out, err, stdin) -> int:
    if a.entity in ("association", "cluster"):
        raise CommandError(f" Unknown command: {a.entity}")
    if a.verb == "add" and a.entity == "user" and not (a.set.get("account") or a.set.get("accounts")
                                                       or a.set.get("defaultaccount")):
        raise CommandError(" Need name of account to add user to.")
    if a.verb != "add" and a.verb == "modify" and not a.set:
        raise CommandError(" You didn't give me anything to set")
    problem = _PROBLEM[a.verb].format("QOS" if a.entity == "qos" else a.entity)
    reply = _call(api, _request(a, dry_run=not a.immediate), problem)
    text = _said(a, reply, cluster=_cluster_of(reply))
    if not text:
        out.write({"add": " Nothing new added.\n", "modify": " Nothing modified\n",
                   "delete": " Nothing deleted\n"}[a.verb])
        return 1
    out.write(text)
    if a.immediate:
        return 0
    out.write(QUESTION + "\n(N/y): ")
    out.flush()
    answer = _answer(stdin)
    out.write("\n")
    if answer is None:
        out.write("timeout\n")
    if answer is None or not answer.lower().startswith("y"):
        out.write(" Changes Discarded\n")
        return 0
    _call(api, _request(a, dry_run=False), problem)
    return 0


def _call(api, request, problem: str):
    """AcctMgr; a refusal in Slurm's words: what does not exist on its own line,
    anything else after ``problem`` (" Problem adding accounts: ...")."""
    try:
        with controller_errors(problem):
            return api.call("AcctMgr", request)
    except CommandError as e:
        said = e.message[len(problem):] if e.message.startswith(problem) else ""
        if "doesn't exist" in said or said.startswith(("Unknown ", "Bad Preempt Mode", "Bad PreemptExemptTime")):
            raise CommandError(" " + said) from None
        if said.startswith("sacctmgr: error: "):      # Slurm says these as its own errors
            raise CommandError(said) from None
        raise


def _answer(stdin, timeout: float = 30.0) -> str | None:
    """The first line typed within ``timeout`` seconds ("" at the end of stdin,
    which is a no); None when nothing came."""
    try:
        ready, _, _ = select.select([stdin], [], [], timeout)
    except (ValueError, OSError, TypeError):
        ready = [stdin]           # not a file (a test's StringIO): read it
    if not ready:
        return None
    return stdin.readline().strip()


def _cluster_of(reply) -> str:
    for k in reply.assocs:
        if k.cluster:
            return k.cluster
    return ""


def _assoc_line(k, with_user_first: bool) -> str:
    if with_user_first:
        line = f"  U = {k.user:<9.9s} A = {k.account:<10.10s} C = {k.cluster:<10.10s}"
        if k.partition:
            line += f" P = {k.partition:<10.10s}"
        return line
    return f"  A = {k.account:<10.10s} C = {k.cluster:<10.10s}"


def _settings_lines(settings: dict[str, str]) -> list[str]:
    labels = {"fairshare": "Fairshare", "shares": "Fairshare", "grpjobs": "GrpJobs",
              "grpsubmitjobs": "GrpSubmitJobs", "grptres": "GrpTRES", "maxjobs": "MaxJobs",
              "maxsubmitjobs": "MaxSubmitJobs", "maxtres": "MaxTRES", "maxtresperjob": "MaxTRES",
              "maxwall": "MaxWall", "maxwalldurationperjob": "MaxWall", "qos": "QOS",
              "qoslevel": "QOS", "defaultqos": "DefQOS"}
    out = []
    for k in sorted(settings, key=lambda k: labels.get(k, k)):
        if k not in labels:
            continue
        v = settings[k]
        if labels[k] == "MaxWall":
            try:
                v = _wall(slurm.parse_time_limit(v))
            except ValueError:
                pass
        out.append(f"  {labels[k]:<14}= {v}")
    return out


def _said(a: Args, reply, cluster: str) -> str:
    """What sacctmgr says of a change (empty: nothing changed)."""
    added = _ADDED.get(a.entity) if a.verb == "add" else None
    if added is not None:
        lines = added(a.set, reply)
    elif a.verb == "modify":
        lines = _modified(a.entity, reply)
    else:
        lines = _deleted(a.entity, reply)
    return "".join(line + "\n" for line in lines)


def _added_account(s: dict[str, str], reply) -> list[str]:
    if not reply.names:
        return []
    lines = [" Adding Account(s)"] + [f"  {n}" for n in reply.names]
    lines += [" Settings", f"  {'Description':<16}= {s.get('description') or 'Account Name'}",
              f"  {'Organization':<16}= {s.get('organization') or 'Parent/Account Name'}"]
    lines += [" Associations"] + [_assoc_line(k, False) for k in reply.assocs]
    parent = s.get("parent", "root") or "root"
    if set(s) - {"cluster", "clusters", "name", "names"}:      # Slurm says nothing more otherwise
        lines += [" Settings"] + _settings_lines(s) + [f"  {'Parent':<14}= {parent}"]
    return lines


def _added_user(s: dict[str, str], reply) -> list[str]:
    if not reply.new_users and not reply.assocs:
        return []
    lines: list[str] = []
    if reply.new_users:
        lines += [" Adding User(s)"] + [f"  {n}" for n in reply.new_users]
        extra = []
        if s.get("defaultaccount"):
            extra.append(f"  {'Default Account':<16}= {s['defaultaccount']}")
        if s.get("adminlevel"):
            level = next((x for x in ("None", "Operator", "Administrator")
                          if x.lower().startswith(s["adminlevel"].lower())), s["adminlevel"])
            extra.append(f"  {'Admin Level':<16}= {level}")
        if extra:
            lines += [" Settings ="] + extra
    lines += [" Associations ="] + [_assoc_line(k, True) for k in reply.assocs]
    lines += [" Non Default Settings"] + _settings_lines(s)
    return lines


# sacctmgr add qos: the settings it echoes, by the names it accepts for them
_QOS_LABELS = {
    "maxtrespu": "MaxTRESPerUser", "maxtresperuser": "MaxTRESPerUser",
    "maxwall": "MaxWall", "priority": "Priority", "usagefactor": "UsageFactor",
    "maxjobspu": "MaxJobsPerUser", "maxjobsperuser": "MaxJobsPerUser",
    "maxsubmitpu": "MaxSubmitJobsPerUser", "maxsubmitjobsperuser": "MaxSubmitJobsPerUser",
    "maxtres": "MaxTRESPerJob", "maxtresperjob": "MaxTRESPerJob", "grptres": "GrpTRES",
    "preempt": "Preempt", "preemptmode": "PreemptMode", "flags": "Flags",
    "gracetime": "GraceTime", "preemptexempttime": "PreemptExemptTime"}
# ... and how it writes the ones it does not echo as given
_QOS_SHOWN = {
    "MaxWall": lambda v: _wall(slurm.parse_time_limit(v)),
    "PreemptMode": str.upper,
    "PreemptExemptTime": lambda v: slurm.format_duration(slurm.parse_time_seconds(v)),
}


def _added_qos(s: dict[str, str], reply) -> list[str]:
    if not reply.names:
        return []
    lines = [" Adding QOS(s)"] + [f"  {n}" for n in reply.names]
    lines += [" Settings", f"  {'Description':<15}= {s.get('description') or reply.names[0]}"]
    for k in sorted((k for k in s if k in _QOS_LABELS), key=lambda k: _QOS_LABELS[k]):
        label = _QOS_LABELS[k]
        shown = _QOS_SHOWN.get(label)
        lines.append(f"  {label:<25}= {shown(s[k]) if shown else s[k]}")
    return lines


_ADDED = {"account": _added_account, "user": _added_user, "qos": _added_qos}


def _modified(entity: str, reply) -> list[str]:
    if not reply.names and not reply.assocs:
        return []
    lines: list[str] = []
    if reply.names:
        what = {"account": "accounts", "user": "users", "qos": "qos"}[entity]
        lines += [f" Modified {what}..."] + [f"  {n}" for n in reply.names]
    if reply.assocs:
        lines.append(f" Modified {entity} associations...")
        for k in reply.assocs:
            if not k.user:
                lines.append(f"  C = {k.cluster:<10.10s} A = {k.account} of {k.parent}")
            else:
                lines.append(f"  C = {k.cluster:<10.10s} A = {k.account:<20.20s} U = {k.user:<9.9s}")
    return lines


def _deleted(entity: str, reply) -> list[str]:
    if reply.assocs:
        return [f" Deleting {entity} associations..."] + [
            f"  C = {k.cluster:<10.10s} A = {k.account:<10.10s} U = {k.user:<9.9s}"
            for k in reply.assocs]
    if reply.names:
        what = {"account": "accounts", "user": "users", "qos": "QOS(s)"}[entity]
        return [f" Deleting {what}..."] + [f"  {n}" for n in reply.names]
    return []


# -- show ---------------------------------------------------------------------------
def _tree_order(accounts: dict, assocs: list) -> list:
    """Associations as Slurm lists them: each account's own, its users, then its
    sub-accounts (by name), from root down."""
    by_acc: dict[str, list] = {}
    for x in assocs:
        by_acc.setdefault(x.account, []).append(x)
    kids: dict[str, list[str]] = {}
    for name, acc in accounts.items():
        if acc.parent:
            kids.setdefault(acc.parent, []).append(name)
    out, seen = [], set()

    def walk(acc: str) -> None:
        if acc in seen:
            return
        seen.add(acc)
        mine = by_acc.get(acc, [])
        out.extend(x for x in mine if not x.user)
        out.extend(sorted((x for x in mine if x.user), key=lambda x: (x.user, x.partition)))
        for k in sorted(kids.get(acc, [])):
            walk(k)

    walk("root")
    for acc in sorted(by_acc):       # orphans, if any
        walk(acc)
    return out


def _match(where: dict[str, str], key: str, value: str) -> bool:
    want = where.get(key) or where.get(key + "s")
    return not want or value in want.split(",")


def _show(a: Args, api, out) -> int:
    with controller_errors(" Problem talking to the database: "):
        r = api.call("GetAssociations", messages.GetAssociationsRequest())
    names = a.names + [n for k in ("name", "names") for n in (a.where.get(k) or "").split(",") if n]
    fmt_key, rows = _SHOW.get(a.entity, _cluster_rows)(a, r, names)
    fmt = DEFAULT_FORMATS[fmt_key]
    fields = parse_format(a.format) if a.format else [(f, COLUMNS[f][1]) for f in fmt]
    out.write(render(fields, rows, a.parsable, a.header))
    return 0


# sacctmgr show ENTITY: each entity's rows (name -> value) and its default format.


def _named(a: Args, key: str) -> list[str]:
    """The names a WHERE clause gives for one key (account=a,b or accounts=a,b)."""
    return [n for n in (a.where.get(key) or a.where.get(key + "s") or "").split(",") if n]


def _account_rows(a: Args, r, names: list[str]) -> tuple[str, list[dict[str, str]]]:
    names = names + _named(a, "account")
    accounts = {x.name: x for x in r.accounts}
    rows: list[dict[str, str]] = []
    for acc in sorted(accounts):
        if names and acc not in names:
            continue
        x = accounts[acc]
        base = {"account": x.name, "descr": x.description, "description": x.description,
                "org": x.organization, "organization": x.organization}
        if not a.withassoc:
            rows.append(base)
            continue
        for s in _tree_order(accounts, [y for y in r.assocs if y.account == acc]):
            row = dict(base, **_assoc_values(s, r.cluster))
            row["parentname"] = x.parent if not s.user else ""
            rows.append(row)
    return ("account+" if a.withassoc else "account"), rows


def _user_rows(a: Args, r, names: list[str]) -> tuple[str, list[dict[str, str]]]:
    names = names + _named(a, "user")
    accounts = {x.name: x for x in r.accounts}
    users = {x.name: x for x in r.users}
    rows: list[dict[str, str]] = []
    for name in sorted(users):
        if names and name not in names:
            continue
        x = users[name]
        base = {"user": x.name, "defaultaccount": x.default_account, "adminlevel": x.admin_level}
        if not a.withassoc:
            rows.append(base)
            continue
        for s in [y for y in _tree_order(accounts, list(r.assocs)) if y.user == name]:
            rows.append(dict(_assoc_values(s, r.cluster), **base))
    return ("user+" if a.withassoc else "user"), rows


def _qos_rows(a: Args, r, names: list[str]) -> tuple[str, list[dict[str, str]]]:
    return "qos", [_qos_values(q) for q in r.qos if not names or q.name in names]


def _association_rows(a: Args, r, names: list[str]) -> tuple[str, list[dict[str, str]]]:
    accounts = {x.name: x for x in r.accounts}
    return "association", [
        _assoc_values(s, r.cluster) for s in _tree_order(accounts, list(r.assocs))
        if (_match(a.where, "account", s.account) and _match(a.where, "user", s.user)
            and _match(a.where, "partition", s.partition)
            and _match(a.where, "cluster", s.cluster or r.cluster))]


def _cluster_rows(a: Args, r, names: list[str]) -> tuple[str, list[dict[str, str]]]:
    cluster = r.cluster
    root = next((s for s in r.assocs if s.account == "root" and not s.user), None)
    if names and cluster not in names:
        return "cluster", []
    return "cluster", [{"cluster": cluster, "controlhost": "", "controlport": "", "rpc": "9728",
                        "share": "1", "qos": root.qos if root else "normal"}]


_SHOW = {"account": _account_rows, "user": _user_rows, "qos": _qos_rows,
         "association": _association_rows}


if __name__ == "__main__":
    sys.exit(main())

"""Accounts, users, associations and QOS: sacctmgr's changes, the checks a
submission passes (AccountingStorageEnforce), usage and fair share.

The records live in the store and its memory copy (``ctl.store.assoc``,
lingjund/store/assoc.py); every change here is load -> decide -> commit:
the request is checked against the memory copy, the new records are written
in one transaction (which updates the memory copy), and only then answered.

Only operators change anything: root, ``[authz] operators``, and users whose
AdminLevel is Operator or Administrator (Slurm's rule for sacctmgr); others
get "Access/permission denied".

At submit (``check_submit``, called by jobs.prepare): a job without
--account gets its user's DefaultAccount. With ``[accounting] enforce``
holding "associations" a job whose (account, user, partition) has no
association is refused with Slurm's "Invalid account or account/partition
combination specified"; with "qos" a QOS the association does not allow,
"Invalid qos specification"; with "limits" MaxWall (of the association, up
its tree, and of the QOS), MaxTRESPerJob (the association's, inherited, and
the QOS's: cpu, node, gres/gpu of the least the job takes) and, in the
submit transaction (``check_submit_limits``), MaxSubmitJobs / GrpSubmitJobs /
MaxSubmitJobsPerUser: "Job violates accounting/QOS policy (job submit limit,
user's size and/or time limits)". Nothing is written on a refusal.

With ``[scheduler] lend_idle_quota`` a job held back only by a GrpTRES may
borrow what nobody else can use (lingjund/sched/lending.py); a borrowed job
runs with Reason=Borrowed and ``pass_limits`` counts it as a job but not
for its TRES against the group scopes, so its account's quota stays its own.

In the scheduling pass (with "limits"): ``pass_limits`` gives the core
(``Snapshot.limits``, lingjund/sched/limits.py) the QOS GrpTRES,
MaxTRESPerUser and MaxJobsPerUser, each user association's chain (its own
GrpTRES/GrpJobs, MaxJobs inherited through ``effective_association``, then
every account up to root with its GrpTRES/GrpJobs), and what the running jobs
use of each, counted once per pass in O(running jobs); the tables themselves
are rebuilt only when a record changes. The core holds a job that would pass
one with Slurm's reason (QOSGrpGRES, AssocMaxJobsLimit...) and charges what
it starts. Counted: cpu, node and gres/gpu. Not applied: mem and billing
TRES, TRES-minutes, MaxTRESPerNode, per-partition associations' own limits
(the plain association's count), a partition's QOS, DenyOnLimit.

Usage: ``charge_usage`` (every ``[accounting] usage_interval_s``) decays every
association's RawUsage and charges each running job's billing for the time it
ran since the last charge; the result is written to the store (the
``raw_usage``/``usage_time`` columns) in the same step, so a restarted
controller goes on from there, and charges the jobs that kept running while
it was away from the last charge on. ``fairshare_factor(ctl, user, account)``
is the Fair Tree factor (lingjund/sched/fairshare.py) for the priority
plugin.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING

from lingjun import slurm
from lingjun.v1 import api_pb2
from lingjund.sched import fairshare, limits
from lingjund.service import authz, errors
from lingjund.service.resources import gpus_per_node
from lingjund.store.assoc import (UNSET, ADMIN_LEVELS, Account, AcctUser, Association, AssocTables,
                                  Qos)

if TYPE_CHECKING:
    from lingjund.service.context import Controller

log = logging.getLogger("lingjund.associations")


InvalidAccount = errors.InvalidAccount
InvalidQos = errors.InvalidQos


NoSuchAccount = errors.NoSuchAccount
BadOption = errors.UnknownOption


# -- what sacctmgr may set -------------------------------------------------------
# lowercase key (and Slurm's abbreviations handled by the command) -> field
ASSOC_LIMITS = {
    "fairshare": "shares", "shares": "shares",
    "grptres": "grp_tres", "grpjobs": "grp_jobs", "grpsubmitjobs": "grp_submit_jobs",
    "grpsubmit": "grp_submit_jobs",
    "maxtres": "max_tres_per_job", "maxtresperjob": "max_tres_per_job",
    "maxjobs": "max_jobs", "maxsubmitjobs": "max_submit_jobs", "maxsubmit": "max_submit_jobs",
    "maxwall": "max_wall_min", "maxwalldurationperjob": "max_wall_min",
    "qos": "qos", "qoslevel": "qos", "defaultqos": "default_qos",
}
QOS_FIELDS = {
    "description": "description", "priority": "priority", "usagefactor": "usage_factor",
    "grptres": "grp_tres", "maxtrespu": "max_tres_per_user", "maxtresperuser": "max_tres_per_user",
    "maxtres": "max_tres_per_job", "maxtresperjob": "max_tres_per_job",
    "maxjobspu": "max_jobs_per_user", "maxjobsperuser": "max_jobs_per_user",
    "maxsubmitjobspu": "max_submit_jobs_per_user", "maxsubmitjobsperuser": "max_submit_jobs_per_user",
    "maxsubmitpu": "max_submit_jobs_per_user",
    "maxwall": "max_wall_min", "maxwalldurationperjob": "max_wall_min",
    "preempt": "preempt", "preemptmode": "preempt_mode", "flags": "flags",
    "gracetime": "grace_time", "preemptexempttime": "preempt_exempt_time",
}
ACCOUNT_FIELDS = {"description": "description", "organization": "organization", "parent": "parent"}
USER_FIELDS = {"defaultaccount": "default_account", "adminlevel": "admin_level"}
# keys that name what is changed rather than set on it
SELECTORS = {"name", "names", "account", "accounts", "user", "users", "partition", "partitions",
             "cluster", "clusters"}
_INT_FIELDS = {"shares", "grp_jobs", "grp_submit_jobs", "max_jobs", "max_submit_jobs",
               "max_jobs_per_user", "max_submit_jobs_per_user", "priority"}


def _value(field: str, text: str):
    """A setting's value as the record holds it; BadOption when it is not one."""
    text = text.strip()
    if field in _INT_FIELDS:
        if text in ("-1", ""):
            return UNSET if field != "shares" else 1
        if not text.lstrip("-").isdigit():
            raise BadOption()
        return int(text)
    if field == "max_wall_min":
        if text in ("-1", ""):
            return UNSET
        try:
            v = slurm.parse_time_limit(text)
        except ValueError:
            raise BadOption() from None
        return UNSET if v < 0 else v
    if field == "grace_time":
        # seconds. Slurm 22.05 reads the leading digits (GraceTime=1:30 is one
        # second) and adds the QOS even when there are none; a value that is
        # not a whole number is refused here, and nothing changes.
        if text.startswith("-") and text[1:].isdigit():
            return 0
        if not text.isdigit():
            raise BadOption(f"sacctmgr: error: Invalid value for GraceTime ({text})")
        return int(text)
    if field == "preempt_exempt_time":
        if text in ("-1", ""):
            return UNSET
        try:
            v = slurm.parse_time_seconds(text)
        except ValueError:
            raise BadOption(f"Bad PreemptExemptTime format: PreemptExemptTime={text}") from None
        return UNSET if v < 0 else v
    if field == "usage_factor":
        try:
            return float(text)
        except ValueError:
            raise BadOption() from None
    if field == "admin_level":
        match = [lvl for lvl in ADMIN_LEVELS if lvl.lower().startswith(text.lower())]
        if not text or not match:
            raise BadOption()
        return match[0]
    if field in ("grp_tres", "max_tres_per_job", "max_tres_per_user"):
        return ",".join(p.strip().lower() for p in text.split(",") if p.strip())
    return text


def _settings(fields: dict[str, str], allowed: dict[str, str], where: str) -> dict:
    out = {}
    for k, v in fields.items():
        f = allowed.get(k)
        if f is None:
            raise BadOption(f"Unknown option: {k}={v}")
        try:
            out[f] = _value(f, v)
        except BadOption as e:
            said = e.args[0] if e.args and e.args[0] != BadOption.message else ""
            raise BadOption(said or f"Unknown option: {k}={v}") from None
    return out


def _list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _require_admin(ctl: Controller, req) -> None:
    if authz.is_operator(req.requester_uid, ctl.config.authz):
        return
    u = ctl.store.assoc.users.get(req.requester)
    if u is None or u.admin_level == "None":
        raise errors.AccessDenied()


def _key(ctl: Controller, a: Association, parent: str = "") -> api_pb2.AssocKey:
    return api_pb2.AssocKey(cluster=ctl.cluster, account=a.account, user=a.user,
                            partition=a.partition, parent=parent)


# -- sacctmgr add / modify / delete ----------------------------------------------
def acctmgr(ctl: Controller, req: api_pb2.AcctMgrRequest) -> api_pb2.AcctMgrResponse:
    """One sacctmgr change: checked, written in one transaction (unless
    ``dry_run``), and what changed said back (empty: nothing did)."""
    _require_admin(ctl, req)
    op = {("add", "account"): _add_accounts, ("add", "user"): _add_users, ("add", "qos"): _add_qos,
          ("modify", "account"): _modify_accounts, ("modify", "user"): _modify_users,
          ("modify", "qos"): _modify_qos, ("delete", "account"): _delete_accounts,
          ("delete", "user"): _delete_users, ("delete", "qos"): _delete_qos}.get((req.verb, req.entity))
    if op is None:
        raise errors.InvalidRequest(f"Invalid request: {req.verb} {req.entity}")
    st = ctl.store
    tables = st.assoc
    changes: list = []           # ("put", record) / ("delete", record)
    reply = op(ctl, tables, req, changes)
    if not req.dry_run and changes:
        with st.transaction():
            for what, rec in changes:
                if what == "put":
                    st.put_assoc_record(rec)
                else:
                    st.delete_assoc_record(rec)
        ctl.views.forget_requests()       # shares and QOS priorities weigh in every job's priority
        log.info("sacctmgr %s %s by %s: %d change(s)", req.verb, req.entity, req.requester, len(changes))
    return reply


def _add_accounts(ctl, t: AssocTables, req, changes) -> api_pb2.AcctMgrResponse:
    fields = dict(req.set)
    fields.update(req.where)
    names = list(req.names) + _list(fields.pop("name", fields.pop("names", "")))
    fields.pop("cluster", None)
    fields.pop("clusters", None)
    acc = _settings({k: v for k, v in fields.items() if k in ACCOUNT_FIELDS}, ACCOUNT_FIELDS, "account")
    lim = _settings({k: v for k, v in fields.items() if k not in ACCOUNT_FIELDS}, ASSOC_LIMITS, "assoc")
    parent = acc.get("parent", "root") or "root"
    if parent not in t.accounts:
        raise NoSuchAccount(f"The parent account '{parent}' doesn't exist.")
    reply = api_pb2.AcctMgrResponse()
    for name in dict.fromkeys(names):
        if name in t.accounts:
            continue
        org = acc.get("organization") or (parent if parent != "root" else name)
        changes.append(("put", Account(name, acc.get("description") or name, org, parent)))
        a = Association(name, cluster=ctl.cluster, **lim)
        changes.append(("put", a))
        reply.names.append(name)
        reply.assocs.append(_key(ctl, a, parent))
    return reply


def _add_users(ctl, t: AssocTables, req, changes) -> api_pb2.AcctMgrResponse:
    fields = dict(req.set)
    fields.update(req.where)
    names = list(req.names) + _list(fields.pop("name", fields.pop("names", "")))
    accounts = _list(fields.pop("account", fields.pop("accounts", "")))
    parts = _list(fields.pop("partition", fields.pop("partitions", ""))) or [""]
    fields.pop("cluster", None)
    fields.pop("clusters", None)
    usr = _settings({k: v for k, v in fields.items() if k in USER_FIELDS}, USER_FIELDS, "user")
    lim = _settings({k: v for k, v in fields.items() if k not in USER_FIELDS}, ASSOC_LIMITS, "assoc")
    if not accounts and usr.get("default_account"):
        accounts = [usr["default_account"]]
    if not accounts:
        raise NoSuchAccount("Need name of account to add user to.")
    for a in accounts + ([usr["default_account"]] if usr.get("default_account") else []):
        if a not in t.accounts:
            raise NoSuchAccount(f"This account '{a}' doesn't exist.\n"
                                "        Contact your admin to add this account.\n"
                                " No associations or wckeys created.")
    reply = api_pb2.AcctMgrResponse()
    for name in dict.fromkeys(names):
        old = t.users.get(name)
        if old is None:
            changes.append(("put", AcctUser(name, usr.get("default_account", accounts[0]),
                                            usr.get("admin_level", "None"))))
            reply.new_users.append(name)
        for acc in accounts:
            for p in parts:
                if (acc, name, p) in t.assocs:
                    continue
                a = Association(acc, user=name, partition=p, cluster=ctl.cluster, **lim)
                changes.append(("put", a))
                reply.assocs.append(_key(ctl, a, acc))
    return reply


# PreemptMode values a QOS may take (stored as Slurm prints them); SUSPEND and
# GANG are Slurm's too, but no job is ever suspended here, so they are refused.
QOS_PREEMPT_MODES = {"off": "cluster", "cluster": "cluster", "cancel": "cancel",
                     "requeue": "requeue"}


def _qos_preemption(t: AssocTables, q: dict, fields: dict[str, str], names: list[str]) -> dict:
    """``q`` with Preempt= and PreemptMode= checked and as stored, in Slurm's
    words when wrong: an unknown QOS, a QOS that would preempt itself through
    the list (a loop), a mode that is not one."""
    if "preempt_mode" in q:
        mode = QOS_PREEMPT_MODES.get(q["preempt_mode"].lower())
        if mode is None:
            raise BadOption(f"Bad Preempt Mode given: PreemptMode="
                            f"{fields.get('preemptmode', q['preempt_mode'])}")
        q = {**q, "preempt_mode": mode}
    if "preempt" in q:
        wanted = _list(q["preempt"])
        for n in wanted:
            if n not in t.qos:
                raise BadOption(f"sacctmgr: error: You gave a bad qos '{n}'. "
                                f"Valid QOS's are {','.join(t.qos)}")
        preempts = {k: set(_list(v.preempt)) for k, v in t.qos.items()}
        for name in names:
            preempts[name] = set(wanted)
        for name in names:
            seen, todo = set(), list(preempts.get(name, ()))
            while todo:
                n = todo.pop()
                if n == name:
                    raise BadOption("sacctmgr: error: QOS Preemption loop detected\n"
                                    " Error with request: QOS Preemption loop detected")
                if n not in seen:
                    seen.add(n)
                    todo += preempts.get(n, ())
        q = {**q, "preempt": ",".join(n for n in t.qos if n in wanted)}
    return q


def _add_qos(ctl, t: AssocTables, req, changes) -> api_pb2.AcctMgrResponse:
    fields = dict(req.set)
    fields.update(req.where)
    names = list(req.names) + _list(fields.pop("name", fields.pop("names", "")))
    q = _qos_preemption(t, _settings(fields, QOS_FIELDS, "qos"), fields, [])
    reply = api_pb2.AcctMgrResponse()
    for name in dict.fromkeys(names):
        if name in t.qos:
            continue
        changes.append(("put", Qos(name, **{"description": name, **q})))
        reply.names.append(name)
    return reply


def _where_names(req, *keys: str) -> list[str]:
    names = list(req.names)
    for k in keys:
        names += _list(req.where.get(k, ""))
    return names


def _descendants(t: AssocTables, account: str) -> list[str]:
    out, todo = [], [account]
    while todo:
        a = todo.pop()
        out.append(a)
        todo += [c.name for c in t.children(a) if c.name not in out]
    return out


def _modify_accounts(ctl, t: AssocTables, req, changes) -> api_pb2.AcctMgrResponse:
    unknown = set(req.where) - SELECTORS - set(ACCOUNT_FIELDS)
    if unknown:
        k = sorted(unknown)[0]
        raise BadOption(f"Unknown condition: {k}={req.where[k]}")
    names = [n for n in _where_names(req, "name", "names", "account", "accounts") if n in t.accounts]
    acc = _settings({k: v for k, v in req.set.items() if k in ACCOUNT_FIELDS}, ACCOUNT_FIELDS, "account")
    lim = _settings({k: v for k, v in req.set.items() if k not in ACCOUNT_FIELDS}, ASSOC_LIMITS, "assoc")
    if "parent" in acc and acc["parent"] not in t.accounts:
        raise NoSuchAccount(f"The parent account '{acc['parent']}' doesn't exist.")
    reply = api_pb2.AcctMgrResponse()
    for name in names:
        a = t.accounts[name]
        if acc:
            if "parent" in acc and name in _descendants(t, acc["parent"]) and acc["parent"] != a.parent:
                raise errors.InvalidRequest(f"Can't move account {name} under its own child")
            changes.append(("put", dataclasses.replace(a, **acc)))
            reply.names.append(name)
        if lim:
            own = t.assocs.get((name, "", "")) or Association(name, cluster=ctl.cluster)
            changes.append(("put", dataclasses.replace(own, **lim)))
            reply.assocs.append(_key(ctl, own, a.parent))
            if set(lim) - {"shares"}:      # the users below inherit the limit
                for sub in _descendants(t, name):
                    for k, ua in sorted(t.assocs.items()):
                        if k[0] == sub and k[1]:
                            reply.assocs.append(_key(ctl, ua))
    return reply


def _user_assocs(t: AssocTables, req, names: list[str]) -> list[Association]:
    accounts = set(_list(req.where.get("account", "") or req.where.get("accounts", "")))
    parts = set(_list(req.where.get("partition", "") or req.where.get("partitions", "")))
    return [a for n in names for a in t.user_assocs(n)
            if (not accounts or a.account in accounts) and (not parts or a.partition in parts)]


def _modify_users(ctl, t: AssocTables, req, changes) -> api_pb2.AcctMgrResponse:
    unknown = set(req.where) - SELECTORS - set(USER_FIELDS)
    if unknown:
        k = sorted(unknown)[0]
        raise BadOption(f"Unknown condition: {k}={req.where[k]}")
    names = [n for n in _where_names(req, "name", "names", "user", "users") if n in t.users]
    usr = _settings({k: v for k, v in req.set.items() if k in USER_FIELDS}, USER_FIELDS, "user")
    lim = _settings({k: v for k, v in req.set.items() if k not in USER_FIELDS}, ASSOC_LIMITS, "assoc")
    reply = api_pb2.AcctMgrResponse()
    for name in names:
        if usr:
            d = usr.get("default_account")
            if d and (d, name, "") not in t.assocs and not any(a.account == d for a in t.user_assocs(name)):
                raise errors.SlurmError(f"User {name} has no association on account {d}")
            changes.append(("put", dataclasses.replace(t.users[name], **usr)))
            reply.names.append(name)
    if lim:
        for a in _user_assocs(t, req, names):
            changes.append(("put", dataclasses.replace(a, **lim)))
            reply.assocs.append(_key(ctl, a))
    return reply


def _modify_qos(ctl, t: AssocTables, req, changes) -> api_pb2.AcctMgrResponse:
    unknown = set(req.where) - {"name", "names"}
    if unknown:
        k = sorted(unknown)[0]
        raise BadOption(f"Unknown condition: {k}={req.where[k]}")
    q = _qos_preemption(t, _settings(dict(req.set), QOS_FIELDS, "qos"), dict(req.set),
                        [n for n in _where_names(req, "name", "names") if n in t.qos])
    reply = api_pb2.AcctMgrResponse()
    for name in _where_names(req, "name", "names"):
        if name in t.qos and q:
            changes.append(("put", dataclasses.replace(t.qos[name], **q)))
            reply.names.append(name)
    return reply


def _delete_accounts(ctl, t: AssocTables, req, changes) -> api_pb2.AcctMgrResponse:
    names = [n for n in _where_names(req, "name", "names", "account", "accounts")
             if n in t.accounts and n != "root"]
    reply = api_pb2.AcctMgrResponse()
    for name in names:
        for sub in _descendants(t, name):
            for k, a in list(t.assocs.items()):
                if k[0] == sub:
                    changes.append(("delete", a))
            changes.append(("delete", t.accounts[sub]))
        reply.names.append(name)
    _drop_orphan_users(t, changes)
    return reply


def _delete_users(ctl, t: AssocTables, req, changes) -> api_pb2.AcctMgrResponse:
    names = [n for n in _where_names(req, "name", "names", "user", "users") if n in t.users]
    reply = api_pb2.AcctMgrResponse()
    if "account" in req.where or "accounts" in req.where or "partition" in req.where:
        for a in _user_assocs(t, req, names):
            changes.append(("delete", a))
            reply.assocs.append(_key(ctl, a))
        _drop_orphan_users(t, changes)
        return reply
    for name in names:
        for a in t.user_assocs(name):
            changes.append(("delete", a))
        changes.append(("delete", t.users[name]))
        reply.names.append(name)
    return reply


def _drop_orphan_users(t: AssocTables, changes) -> None:
    """A user left without associations goes too (as in Slurm); one whose
    default account went gets another of its accounts."""
    gone = {(r.account, r.user, r.partition) for w, r in changes
            if w == "delete" and isinstance(r, Association)}
    dropped = {r.name for w, r in changes if w == "delete" and isinstance(r, AcctUser)}
    for user in {k[1] for k in gone if k[1]} - dropped:
        left = [a for a in t.user_assocs(user) if a.key not in gone]
        if not left:
            changes.append(("delete", t.users[user]))
        elif t.users[user].default_account not in {a.account for a in left}:
            changes.append(("put", dataclasses.replace(t.users[user], default_account=left[0].account)))


def _delete_qos(ctl, t: AssocTables, req, changes) -> api_pb2.AcctMgrResponse:
    reply = api_pb2.AcctMgrResponse()
    for name in _where_names(req, "name", "names"):
        if name in t.qos and name != "normal":
            changes.append(("delete", t.qos[name]))
            reply.names.append(name)
    return reply


# -- what is stored, for sacctmgr show and sshare ----------------------------------
def effective_association(t: AssocTables, account: str, user: str, partition: str = "") -> Association | None:
    """The association a job of ``user`` in ``account`` (and ``partition``)
    is charged to, with each unset limit (and QOS list) taken from the nearest
    account above that sets it (Slurm's inheritance); None if there is none."""
    a = t.assocs.get((account, user, partition)) or t.assocs.get((account, user, ""))
    if a is None:
        return None
    chain, acc = [a], account
    for _ in range(len(t.accounts) + 1):        # bounded: a loop in the parents ends
        own = t.assocs.get((acc, "", ""))
        if own is not None and own is not a:
            chain.append(own)
        rec = t.accounts.get(acc)
        if rec is None or not rec.parent:
            break
        acc = rec.parent
    fields = {}
    for f in ("grp_tres", "grp_jobs", "grp_submit_jobs", "max_tres_per_job", "max_jobs",
              "max_submit_jobs", "max_wall_min", "qos", "default_qos"):
        for c in chain:
            v = getattr(c, f)
            if v not in (UNSET, ""):
                fields[f] = v
                break
    return dataclasses.replace(a, **fields)


def get_associations(ctl: Controller, req: api_pb2.GetAssociationsRequest) -> api_pb2.GetAssociationsResponse:
    t = ctl.store.assoc
    shares = fair_tree(ctl) if req.with_usage else {}
    out = api_pb2.GetAssociationsResponse(cluster=ctl.cluster)
    for a in t.accounts.values():
        out.accounts.add(name=a.name, description=a.description, organization=a.organization,
                         parent=a.parent)
    for u in t.users.values():
        out.users.add(name=u.name, default_account=u.default_account, admin_level=u.admin_level)
    for k, a in t.assocs.items():
        e = effective_association(t, a.account, a.user, a.partition) or a
        parent = (t.accounts[a.account].parent if a.account in t.accounts else "") if not a.user else a.account
        info = out.assocs.add(
            id=a.id, cluster=a.cluster or ctl.cluster, account=a.account, user=a.user,
            partition=a.partition, parent=parent, shares=a.shares, grp_tres=e.grp_tres,
            grp_jobs=e.grp_jobs, grp_submit_jobs=e.grp_submit_jobs, max_tres_per_job=e.max_tres_per_job,
            max_jobs=e.max_jobs, max_submit_jobs=e.max_submit_jobs, max_wall_min=e.max_wall_min,
            qos=e.qos, default_qos=e.default_qos, raw_usage=a.raw_usage)
        s = shares.get((a.account, a.user))
        if s is not None:
            info.raw_usage = s.raw_usage
            info.norm_shares, info.norm_usage = s.norm_shares, s.norm_usage
            info.effective_usage, info.fairshare = s.effective_usage, s.fairshare
            info.level_fs = -1.0 if s.level_fs == fairshare.INF else s.level_fs
    for q in t.qos.values():
        out.qos.add(**dataclasses.asdict(q))
    return out


# -- fair share ------------------------------------------------------------------
_FS_CACHE: dict[int, tuple[tuple, dict]] = {}


def fair_tree(ctl: Controller) -> dict:
    """The Fair Tree numbers of every association, kept until a record or a usage changes."""
    t = ctl.store.assoc
    stamp = (t.version, t.usage_tick)
    hit = _FS_CACHE.get(id(t))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    users: dict[tuple[str, str], list] = {}
    acc_shares: dict[str, int] = {}
    for (acc, user, _part), a in t.assocs.items():
        if user:
            u = users.setdefault((acc, user), [acc, user, 0, 0.0])
            u[2] = max(u[2], a.shares)
            u[3] += a.raw_usage
        else:
            acc_shares[acc] = a.shares
    result = fairshare.fair_tree({a.name: a.parent for a in t.accounts.values()},
                                 [tuple(u) for u in users.values()], acc_shares)
    _FS_CACHE.clear()
    _FS_CACHE[id(t)] = (stamp, result)
    return result


def fairshare_factor(ctl: Controller, user: str, account: str) -> float:
    """The Fair Tree factor (0..1] of ``user``'s association in ``account``
    (its DefaultAccount when ``account`` is ""); 1.0 when it has none (no
    associations kept: every job counts as having used nothing)."""
    t = ctl.store.assoc
    if not account:
        u = t.users.get(user)
        account = u.default_account if u else ""
    s = fair_tree(ctl).get((account, user))
    return s.fairshare if s is not None else 1.0


# -- submissions -------------------------------------------------------------------
def enforcing(ctl: Controller, what: str) -> bool:
    return what in ctl.config.accounting.enforce


def check_submit(ctl: Controller, spec: api_pb2.JobSpec, partition: str) -> None:
    """Fill in the default account (and QOS) and refuse what the
    association or QOS does not allow (see the module's docstring)."""
    t = ctl.store.assoc
    user = spec.user or str(spec.uid)
    if not spec.account:
        u = t.users.get(user)
        if u is not None and u.default_account:
            spec.account = u.default_account
    if not enforcing(ctl, "associations"):
        return
    if not spec.account:
        raise InvalidAccount()
    a = effective_association(t, spec.account, user, partition)
    if a is None:
        raise InvalidAccount()
    allowed = _list(a.qos) or ["normal"]
    if not spec.qos:
        spec.qos = a.default_qos or ("normal" if "normal" in allowed else allowed[0])
    qos = t.qos.get(spec.qos)
    if qos is None or (enforcing(ctl, "qos") and spec.qos not in allowed):
        raise InvalidQos()
    if enforcing(ctl, "limits"):
        walls = [w for w in (a.max_wall_min, qos.max_wall_min) if w != UNSET]
        if walls:
            wall = min(walls)
            if spec.time_limit_min == -1 or spec.time_limit_min > wall:
                raise authz.SubmitLimit()
            if spec.time_limit_min == 0:
                spec.time_limit_min = wall
        for cap in (a.max_tres_per_job, qos.max_tres_per_job):
            if cap and _over(job_tres(spec), parse_tres(cap)):
                raise authz.SubmitLimit()


def job_tres(spec: api_pb2.JobSpec) -> dict[str, int]:
    """The least cpu, node and gres/gpu a submitted job takes (what MaxTRESPerJob weighs)."""
    nodes = spec.min_nodes or 1
    tasks = spec.num_tasks or (spec.ntasks_per_node or 1) * nodes
    gpus = gpus_per_node(spec, nodes) * nodes
    return {"cpu": max(tasks * (spec.cpus_per_task or 1), gpus * spec.cpus_per_gpu),
            "node": nodes, "gres/gpu": gpus}


def _over(want: dict[str, int], cap: dict[str, int]) -> bool:
    return any(name in cap and n > cap[name] for name, n in want.items())


def check_submit_limits(ctl: Controller, st, spec: api_pb2.JobSpec, new_jobs: int) -> None:
    """MaxSubmitJobs (the association's, inherited), GrpSubmitJobs (its
    account's) and the QOS's MaxSubmitJobsPerUser, inside the submit
    transaction (so racing submissions cannot both slip under)."""
    if not enforcing(ctl, "limits"):
        return
    t = st.assoc
    user = spec.user or str(spec.uid)
    a = effective_association(t, spec.account, user)
    live = st.live
    if a is not None:
        if a.max_submit_jobs != UNSET and \
                live.assoc_active.get((spec.uid, spec.account), 0) + new_jobs > a.max_submit_jobs:
            raise authz.SubmitLimit()
        if a.grp_submit_jobs != UNSET:
            n = sum(v for (uid, acc), v in live.assoc_active.items() if acc == spec.account)
            if n + new_jobs > a.grp_submit_jobs:
                raise authz.SubmitLimit()
    q = t.qos.get(spec.qos)
    if q is not None and q.max_submit_jobs_per_user != UNSET and \
            live.qos_active.get((spec.uid, spec.qos), 0) + new_jobs > q.max_submit_jobs_per_user:
        raise authz.SubmitLimit()


# -- limits in the scheduling pass -------------------------------------------------
def parse_tres(text: str) -> dict[str, int]:
    """A TRES list ("cpu=8,gres/gpu=4,node=2") as {name: count}; parts that are
    not counts (mem=10G, -1) are left out."""
    out = {}
    for part in text.split(","):
        name, _, value = part.strip().lower().partition("=")
        if value.isdigit():
            out[name] = int(value)
    return out


def _tres_args(text: str) -> dict[str, int]:
    t = parse_tres(text)
    return {k: t[n] for k, n in (("cpu", "cpu"), ("node", "node"), ("gpu", "gres/gpu")) if n in t}


def _chain(t: AssocTables, account: str) -> list[str]:
    """``account`` and the accounts above it, up to root."""
    out, acc = [], account
    for _ in range(len(t.accounts) + 1):         # bounded: a loop in the parents ends
        out.append(acc)
        rec = t.accounts.get(acc)
        if rec is None or not rec.parent:
            break
        acc = rec.parent
    return out


_LIMITS_CACHE: dict[int, tuple[int, tuple]] = {}


def _limit_tables(t: AssocTables) -> tuple:
    """(qos_grp, qos_user, assoc checks, assoc chains) of the records, built again
    only when a record changed (``AssocTables.version``)."""
    hit = _LIMITS_CACHE.get(id(t))
    if hit is not None and hit[0] == t.version:
        return hit[1]
    qos_grp, qos_user = {}, {}
    for q in t.qos.values():
        g = limits.qos_grp(**_tres_args(q.grp_tres))
        if g.any:
            qos_grp[q.name] = g
        u = limits.qos_per_user(**_tres_args(q.max_tres_per_user), jobs=q.max_jobs_per_user)
        if u.any:
            qos_user[q.name] = u
    checks, chains = {}, {}
    for (acc, user, part), a in t.assocs.items():
        if not user or part:
            continue            # per-partition associations: the plain one counts
        own = ("assoc", acc, user)
        found = [(own, limits.assoc_grp(**_tres_args(a.grp_tres), jobs=a.grp_jobs))]
        eff = effective_association(t, acc, user)
        if eff is not None and eff.max_jobs != UNSET:
            found.append((own, limits.assoc_max_jobs(eff.max_jobs)))
        keys = [own]
        for name in _chain(t, acc):
            key = ("account", name)
            keys.append(key)
            rec = t.assocs.get((name, "", ""))
            if rec is not None:
                found.append((key, limits.assoc_grp(**_tres_args(rec.grp_tres), jobs=rec.grp_jobs)))
        found = tuple(f for f in found if f[1].any)
        if found:
            checks[(acc, user)] = found
        chains[(acc, user)] = tuple(keys)
    tables = (qos_grp, qos_user, checks, chains)
    _LIMITS_CACHE.clear()
    _LIMITS_CACHE[id(t)] = (t.version, tables)
    return tables


def pass_limits(ctl: Controller, running) -> limits.Limits | None:
    """What a scheduling pass holds pending jobs to (``[accounting] enforce``
    with "limits"; else None), with the usage of the ``running`` job records:
    O(running jobs x depth of their account), the tables kept between passes."""
    if not enforcing(ctl, "limits"):
        return None
    qos_grp, qos_user, checks, chains = _limit_tables(ctl.store.assoc)
    if not (qos_grp or qos_user or checks):
        return None
    usage: dict = {}
    for job in running:
        if job.state != slurm.RUNNING:
            continue
        spec = job.spec
        user = job.user or spec.user or str(spec.uid)
        qos = spec.qos or "normal"
        took = (sum(job.cpus_per_node), len(job.nodes), sum(job.gpus_per_node))
        # a borrowed job (Reason=Borrowed) holds none of its account's own quota
        limits.add_usage(usage, (limits.qos_key(qos), limits.qos_user_key(qos, user),
                                 *chains.get((spec.account or user, user), ())),
                         took, job.reason == slurm.REASON_BORROWED)
    return limits.Limits(qos_grp=qos_grp, qos_user=qos_user, assoc=checks, chain=chains,
                         usage={k: tuple(v) for k, v in usage.items()},
                         lend=ctl.config.scheduler.lend_idle_quota)


# -- usage -------------------------------------------------------------------------
def _half_life_s(ctl: Controller) -> float:
    return max(slurm.parse_time_limit(ctl.config.accounting.priority_decay_half_life), 0) * 60.0


def charge_usage(ctl: Controller, now: float) -> int:
    """Decay every association's usage to ``now`` and charge each job that ran
    since the last charge for its part of the interval; written to the store.
    How many associations changed."""
    st = ctl.store
    t = st.assoc
    last = t.usage_tick or now
    if now <= last:
        return 0
    conf = ctl.config.accounting
    weights = fairshare.parse_billing_weights(conf.tres_billing_weights)
    charges: dict[tuple[str, str, str], float] = {}
    live = st.live
    for state, ids in live.by_state.items():
        if state == slurm.PENDING:
            continue
        for jid in ids:
            job = live.jobs.get(jid)
            if job is None or not job.start_time or not job.nodes:
                continue
            end = job.end_time if job.end_time and state != slurm.RUNNING else now
            ran = min(end, now) - max(job.start_time, last)
            if ran <= 0:
                continue
            a = effective_association(t, job.spec.account, job.user, job.partition)
            if a is None:
                u = t.users.get(job.user)
                if job.spec.account or u is None:
                    continue
                a = effective_association(t, u.default_account, job.user, job.partition)
                if a is None:
                    continue
            q = t.qos.get(job.spec.qos or "normal")
            factor = q.usage_factor if q is not None else 1.0
            bill = fairshare.billing(sum(job.cpus_per_node), sum(job.mem_per_node),
                                     sum(job.gpus_per_node), len(job.nodes), weights)
            charges[a.key] = charges.get(a.key, 0.0) + bill * ran * factor
    half, period = _half_life_s(ctl), conf.priority_usage_reset_period
    usage = {}
    for k, a in t.assocs.items():
        c = charges.get(k, 0.0)
        if a.raw_usage == 0 and c == 0:
            continue
        usage[k] = (fairshare.advance(a.raw_usage, a.usage_time or last, now, c, half, period), now)
    if usage:
        with st.transaction():
            st.save_usage(usage)
    t.usage_tick = now
    return len(usage)


async def usage_loop(ctl: Controller) -> None:
    """Charge usage every ``[accounting] usage_interval_s`` while the controller runs."""
    t = ctl.store.assoc
    if not t.usage_tick:
        t.usage_tick = max((a.usage_time for a in t.assocs.values()), default=0.0) or ctl.clock()
    while True:
        await asyncio.sleep(ctl.config.accounting.usage_interval_s)
        try:
            if charge_usage(ctl, ctl.clock()):
                ctl.views.forget_requests()   # new usage, new fair-share factors for all
        except Exception:
            log.exception("charging usage failed; trying again in %.0f s",
                          ctl.config.accounting.usage_interval_s)

"""Fair share: decayed usage and Slurm 22.05's Fair Tree factor. Pure: no clock, no I/O.

Usage. Every job's association is charged its billing (Slurm's
TRESBillingWeights: ``billing(alloc, weights)``, CPU=1 each by default)
times the seconds it ran times its QOS's UsageFactor; an association's
``RawUsage`` halves every ``half_life`` seconds (PriorityDecayHalfLife,
7 days by default) and starts over at each ``reset_period`` boundary
(PriorityUsageResetPeriod):

    decay(u, dt, half_life) = u * 2 ** (-dt / half_life)      (half_life 0: no decay)

An account's usage is the sum of its children's (its users' and its
sub-accounts'), as slurmctld propagates a job's usage up its tree.

Fair Tree (priority/multifactor with PriorityFlags=FAIR_TREE, the default
since 19.05). Among siblings (the associations under one account), each
gets

    NormShares   S = its RawShares / the sum of its siblings' RawShares
    EffectvUsage U = its RawUsage / its parent's RawUsage   (0 when the parent has none)
    LevelFS        = S / U           (infinite when U = 0, 0 when S = 0)

Then the tree is walked depth first, siblings in descending LevelFS order,
and the users (leaves) are ranked in the order met: with N users in all,
the first gets rank N, the next N-1 and so on; users tied with the one
before them (equal LevelFS at every level of their paths) get its rank.
FairShare = rank / N. So the user who has used least of what its shares
promise, at every level of the tree, comes first (factor 1.0), and a
user's usage can never raise its factor (property tests in
tests/sched/test_fairshare.py).

Worked example: root has accounts a (shares 1) and b (shares 1); a has users
u1, u2 (1 share each), b has u3. Usage: u1=100, u2=0, u3=300.
  root: a U=100/400=.25 LevelFS=.5/.25=2, b U=.75 LevelFS=.667 -> a before b
  a: u2 U=0 LevelFS=inf, u1 U=1 LevelFS=.5 -> u2, u1;   b: u3
  ranks u2=3, u1=2, u3=1 -> FairShare 1.0, .667, .333
"""
from __future__ import annotations

import calendar
import math
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

INF = math.inf

# -- billing ------------------------------------------------------------------------
_UNITS = {"": 1.0, "K": 1 / 1024 / 1024, "M": 1 / 1024, "G": 1.0, "T": 1024.0}


def parse_billing_weights(text: str) -> dict[str, float]:
    """TRESBillingWeights ("CPU=1.0,Mem=0.25G,GRES/gpu=16") -> {"cpu": 1.0,
    "mem": 0.25 per GiB, "gres/gpu": 16.0}. Memory's weight is per GiB with a G
    suffix, per MiB without one (as Slurm's, whose unit is MB unless
    suffixed). ValueError on a malformed entry."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep or not name:
            raise ValueError(part)
        name = name.strip().lower()
        value = value.strip()
        if name == "mem":
            unit = value[-1:].upper() if value[-1:].isalpha() else ""
            if unit not in _UNITS:
                raise ValueError(part)
            number = float(value[:-1] if unit else value)
            out[name] = number * (_UNITS[unit] if unit else 1024.0)    # per GiB
        else:
            out[name] = float(value)
    return out


def billing(cpus: int, mem_mb: int, gpus: int, nodes: int, weights: Mapping[str, float]) -> float:
    """A job's billing TRES: the weighted sum of what it holds (Slurm's
    default without weights: its CPUs)."""
    if not weights:
        return float(cpus)
    return (weights.get("cpu", 0.0) * cpus + weights.get("mem", 0.0) * mem_mb / 1024.0
            + weights.get("gres/gpu", 0.0) * gpus + weights.get("node", 0.0) * nodes)


# -- decay and reset ----------------------------------------------------------------
def decay(usage: float, dt: float, half_life_s: float) -> float:
    if half_life_s <= 0 or dt <= 0:
        return usage
    return usage * 2.0 ** (-dt / half_life_s)


RESET_PERIODS = ("NONE", "NOW", "DAILY", "WEEKLY", "MONTHLY", "QUARTERLY", "YEARLY")


def period_start(now: float, period: str) -> float:
    """The start (UTC) of the reset period holding ``now``; 0 for NONE/NOW."""
    period = period.upper()
    if period in ("NONE", "NOW"):
        return 0.0
    t = time.gmtime(now)
    if period == "DAILY":
        parts = (t.tm_year, t.tm_mon, t.tm_mday)
    elif period == "WEEKLY":
        day0 = calendar.timegm((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0)) - t.tm_wday * 86400
        return float(day0)
    elif period == "MONTHLY":
        parts = (t.tm_year, t.tm_mon, 1)
    elif period == "QUARTERLY":
        parts = (t.tm_year, (t.tm_mon - 1) // 3 * 3 + 1, 1)
    elif period == "YEARLY":
        parts = (t.tm_year, 1, 1)
    else:
        raise ValueError(period)
    return float(calendar.timegm((*parts, 0, 0, 0)))


def advance(usage: float, last: float, now: float, charge: float, half_life_s: float,
            reset_period: str) -> float:
    """An association's usage at ``now`` from its usage at ``last``: decayed
    over the interval, plus ``charge`` (billing-seconds of the interval), or
    started over when a reset boundary fell in between."""
    if last and reset_period.upper() not in ("NONE", "NOW") and \
            period_start(now, reset_period) > last:
        return charge
    return decay(usage, now - last, half_life_s) + charge


# -- Fair Tree ----------------------------------------------------------------------
@dataclass(frozen=True)
class Node:
    """One association in the tree: ``user`` is "" for an account's own."""
    account: str
    user: str
    parent: str            # the parent account ("" for root)
    shares: int
    usage: float           # users: their own; accounts: filled in by tree()


@dataclass(frozen=True)
class Share:
    """sshare's numbers for one association."""
    account: str
    user: str
    parent: str
    shares: int
    norm_shares: float
    raw_usage: float
    norm_usage: float        # of the whole cluster's
    effective_usage: float   # of its parent's
    level_fs: float
    fairshare: float         # users only; 0 for accounts


def _level_fs(shares: int, sibling_shares: int, usage: float, parent_usage: float) -> tuple[float, float, float]:
    s = shares / sibling_shares if sibling_shares else 0.0
    u = usage / parent_usage if parent_usage else 0.0
    if s == 0:
        fs = 0.0
    elif u == 0:
        fs = INF
    else:
        fs = s / u
    return s, u, fs


def fair_tree(accounts: Mapping[str, str], users: Iterable[tuple[str, str, int, float]],
              account_shares: Mapping[str, int]) -> dict[tuple[str, str], Share]:
    """Every association's numbers, keyed (account, user) (user "" for accounts).

    ``accounts``: account -> parent ("" for root); ``users``: (account, user,
    shares, raw usage) of each user association; ``account_shares``: an
    account's RawShares among its siblings (1 when absent)."""
    kids_acc: dict[str, list[str]] = {}
    for acc, parent in accounts.items():
        if parent or acc != "root":
            kids_acc.setdefault(parent or "root", []).append(acc)
    kids_usr: dict[str, list[tuple[str, int, float]]] = {}
    for acc, user, shares, usage in users:
        if acc in accounts:
            kids_usr.setdefault(acc, []).append((user, shares, max(usage, 0.0)))
    # account usage = the sum of its subtree's
    acc_usage: dict[str, float] = {}

    def total(acc: str, depth: int = 0) -> float:
        if depth > len(accounts):       # a loop in the parents: stop it
            return 0.0
        u = sum(x[2] for x in kids_usr.get(acc, ()))
        u += sum(total(c, depth + 1) for c in kids_acc.get(acc, ()) if c != acc)
        acc_usage[acc] = u
        return u

    root_usage = total("root") if "root" in accounts else 0.0
    out: dict[tuple[str, str], Share] = {}
    n_users = sum(len(v) for v in kids_usr.values())
    order: list[tuple[tuple, str, str]] = []      # (path key, account, user)

    def walk(acc: str, path: tuple, depth: int) -> None:
        if depth > len(accounts):
            return
        pu = acc_usage.get(acc, 0.0)
        sibs: list[tuple[str, str, int, float]] = [(acc, u, s, us) for u, s, us in kids_usr.get(acc, ())]
        sibs += [(c, "", int(account_shares.get(c, 1)), acc_usage.get(c, 0.0))
                 for c in kids_acc.get(acc, ()) if c != acc]
        total_shares = sum(s for _, _, s, _ in sibs)
        for a, u, s, us in sibs:
            ns, eu, lfs = _level_fs(s, total_shares, us, pu)
            out[(a, u)] = Share(account=a, user=u, parent=acc, shares=s, norm_shares=ns, raw_usage=us,
                                norm_usage=us / root_usage if root_usage else 0.0,
                                effective_usage=eu, level_fs=lfs, fairshare=0.0)
            key = path + (-lfs,)
            if u:
                order.append((key, a, u))
            else:
                walk(a, key, depth + 1)

    if "root" in accounts:
        out[("root", "")] = Share("root", "", "", 1, 1.0, root_usage, 1.0 if root_usage else 0.0,
                                  1.0 if root_usage else 0.0, INF, 0.0)
        walk("root", (), 0)
    # rank: best (lexicographically smallest key) first; ties share a rank. Keys
    # are padded to one length with -inf, so a shallower user ties with a deeper
    # one whose path is equal as far as it goes and unused below (Slurm carries
    # a tie between accounts down to their first users).
    depth = max((len(k) for k, _, _ in order), default=0)
    order = [((*k, *(-INF,) * (depth - len(k))), a, u) for k, a, u in order]
    order.sort(key=lambda x: x[0])
    rank, prev = n_users, None
    for i, (key, a, u) in enumerate(order):
        if key != prev:
            rank = n_users - i
            prev = key
        out[(a, u)] = _with_factor(out[(a, u)], rank / n_users if n_users else 0.0)
    return out


def _with_factor(s: Share, f: float) -> Share:
    return Share(s.account, s.user, s.parent, s.shares, s.norm_shares, s.raw_usage, s.norm_usage,
                 s.effective_usage, s.level_fs, f)

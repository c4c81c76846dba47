"""Accounts, users, associations and QOS: their records, their SQL, and the
copy of them the controller keeps in memory.

Slurm keeps these in slurmdbd; here they live in the controller's own store
(tables ``accounts``, ``acct_users``, ``associations``, ``qos``: their
migration in schema.py) and, like jobs and nodes, in memory (``AssocTables``): submissions check
them and the fair-share computation reads them without SQL. The store is the
one writer (``Store.put_assoc_record`` / ``delete_assoc_record``): it writes
the row and the memory copy together, and a transaction that rolls back
undoes the memory copy too.

Limits are ``-1`` when unset (Slurm prints them blank); TRES limits are
Slurm's strings ("cpu=4,gres/gpu=2", "" = none). ``qos`` of an association
is the comma-separated list of QOS its jobs may ask for ("" = inherited from
the parent account's association, as Slurm's QOS column).

A fresh store holds what a fresh slurmdbd cluster holds: account ``root``,
user ``root`` (AdminLevel Administrator, default account root), the
associations root/'' and root/root, and QOS ``normal`` (``ensure_defaults``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

UNSET = -1
ADMIN_LEVELS = ("None", "Operator", "Administrator")


@dataclass(frozen=True)
class Account:
    name: str
    description: str = ""
    organization: str = ""
    parent: str = ""          # "" for root only


@dataclass(frozen=True)
class AcctUser:
    name: str
    default_account: str = ""
    admin_level: str = "None"


@dataclass(frozen=True)
class Association:
    account: str
    user: str = ""            # "" = the account's own association
    partition: str = ""
    cluster: str = ""
    id: int = 0
    shares: int = 1
    grp_tres: str = ""
    grp_jobs: int = UNSET
    grp_submit_jobs: int = UNSET
    max_tres_per_job: str = ""
    max_jobs: int = UNSET
    max_submit_jobs: int = UNSET
    max_wall_min: int = UNSET
    qos: str = ""
    default_qos: str = ""
    # decayed usage (TRES-billing-seconds) charged to this association, and
    # when it was last decayed and charged (the store's copy; see
    # lingjund/service/associations.py)
    raw_usage: float = 0.0
    usage_time: float = 0.0

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.account, self.user, self.partition)


@dataclass(frozen=True)
class Qos:
    name: str
    description: str = ""
    priority: int = 0
    usage_factor: float = 1.0
    grp_tres: str = ""
    max_tres_per_user: str = ""
    max_tres_per_job: str = ""
    max_jobs_per_user: int = UNSET
    max_submit_jobs_per_user: int = UNSET
    max_wall_min: int = UNSET
    preempt: str = ""
    preempt_mode: str = "cluster"
    flags: str = ""
    grace_time: int = 0                   # seconds (GraceTime)
    preempt_exempt_time: int = UNSET      # seconds (PreemptExemptTime); UNSET: the cluster's


Record = Account | AcctUser | Association | Qos

# record type -> (table, key columns)
TABLES: dict[type, tuple[str, tuple[str, ...]]] = {
    Account: ("accounts", ("name",)),
    AcctUser: ("acct_users", ("name",)),
    Association: ("associations", ("account", "user", "partition")),
    Qos: ("qos", ("name",)),
}


def record_key(rec: Record) -> tuple:
    table, cols = TABLES[type(rec)]
    return (table, *(getattr(rec, c) for c in cols))


@dataclass
class AssocTables:
    """The memory copy, indexed as submissions and sshare ask."""
    accounts: dict[str, Account] = field(default_factory=dict)
    users: dict[str, AcctUser] = field(default_factory=dict)
    assocs: dict[tuple[str, str, str], Association] = field(default_factory=dict)
    qos: dict[str, Qos] = field(default_factory=dict)
    # user -> its associations' keys (account, user, partition)
    by_user: dict[str, set[tuple[str, str, str]]] = field(default_factory=dict)
    # bumped on every change: whoever caches a computation over the tables
    # (the fair-share factors) knows when to redo it
    version: int = 0
    # when usage was last charged (service/associations.py; 0 = not yet)
    usage_tick: float = 0.0

    def _index(self, table: str) -> dict:
        return {"accounts": self.accounts, "acct_users": self.users,
                "associations": self.assocs, "qos": self.qos}[table]

    def put(self, rec: Record) -> Record | None:
        """Set ``rec``; the record it replaced (None: new)."""
        table, *key = record_key(rec)
        index = self._index(table)
        k = tuple(key) if table == "associations" else key[0]
        old = index.get(k)
        index[k] = rec
        if table == "associations":
            self.by_user.setdefault(rec.user, set()).add(k)
        self.version += 1
        return old

    def remove(self, table: str, key: tuple) -> Record | None:
        index = self._index(table)
        k = tuple(key) if table == "associations" else key[0]
        old = index.pop(k, None)
        if table == "associations" and old is not None:
            keys = self.by_user.get(old.user)
            if keys is not None:
                keys.discard(k)
                if not keys:
                    del self.by_user[old.user]
        self.version += 1
        return old

    def user_assocs(self, user: str) -> list[Association]:
        return [self.assocs[k] for k in sorted(self.by_user.get(user, ()))]

    def children(self, account: str) -> list[Account]:
        return [a for a in self.accounts.values() if a.parent == account]


# -- SQL (the store's; called with its connection inside its transactions) ----------

_CLASSES = {"accounts": Account, "acct_users": AcctUser, "associations": Association, "qos": Qos}


def load(db) -> AssocTables:
    t = AssocTables()
    for table, cls in _CLASSES.items():
        names = {f.name for f in dataclasses.fields(cls)}
        for row in db.query(f"SELECT * FROM {table} ORDER BY rowid"):
            t.put(cls(**{k: v for k, v in dict(row).items() if k in names}))
    t.version = 0
    return t


def write(db, rec: Record) -> Record:
    """Insert or replace ``rec``'s row; the record as stored (an association's id)."""
    table, cols = TABLES[type(rec)]
    row = dataclasses.asdict(rec)
    if isinstance(rec, Association):
        found = db.execute("SELECT id FROM associations WHERE account = ? AND user = ? AND partition = ?",
                           [rec.account, rec.user, rec.partition]).fetchone()
        if found:
            row["id"] = found[0]
        else:
            row.pop("id")
    names = list(row)
    cur = db.execute("INSERT OR REPLACE INTO {} ({}) VALUES ({})".format(
        table, ", ".join(names), ", ".join("?" for _ in names)), list(row.values()))
    if isinstance(rec, Association) and not rec.id:
        rec = dataclasses.replace(rec, id=int(row.get("id") or cur.lastrowid))
    return rec


def delete(db, table: str, key: tuple) -> None:
    cols = next(c for t, c in TABLES.values() if t == table)
    db.execute("DELETE FROM {} WHERE {}".format(table, " AND ".join(f"{c} = ?" for c in cols)),
               list(key))


def save_usage(db, usage: dict[tuple[str, str, str], tuple[float, float]]) -> None:
    """Many associations' (raw usage, as of) at once."""
    db.conn.executemany(
        "UPDATE associations SET raw_usage = ?, usage_time = ? WHERE account = ? AND user = ? "
        "AND partition = ?", [(u, t, *k) for k, (u, t) in usage.items()])


def defaults(cluster: str) -> list[Record]:
    """What a fresh store holds (a fresh slurmdbd cluster's rows)."""
    return [Qos("normal", description="Normal QOS default"),
            Account("root", description="default root account", organization="root"),
            AcctUser("root", default_account="root", admin_level="Administrator"),
            Association("root", cluster=cluster, qos="normal"),
            Association("root", user="root", cluster=cluster)]

"""10,000 associations: loading them, the fair-share tree, sshare, a submission's check.

Builds a store with ``--accounts`` accounts (default 100, under root, every
tenth one with sub-accounts under it) and ``--users`` users in each (default
100: 10,000 user associations), every association with some usage, then
prints the CPU time of each, the best of ``--repeat`` runs:

- open: the store opened again (migrations checked, the associations loaded
  into memory with everything else);
- fair tree: every association's Fair Tree numbers computed afresh
  (lingjund/sched/fairshare.py through the service's cache, cleared);
- GetAssociations: the reply sshare asks for, with usage, built and encoded;
- sshare -a: that reply decoded by the command's messages and laid out;
- check_submit: one submission's association and QOS check (enforcement on);
- charge_usage: one usage interval with every association decayed and saved.

    python bench/assoc_scale.py
    python bench/assoc_scale.py --accounts 200 --users 50 --repeat 5
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from google.protobuf import json_format  # noqa: E402

from cli import sshare  # noqa: E402
from lingjun import config, messages  # noqa: E402
from lingjun.v1 import api_pb2  # noqa: E402
from lingjund.service import associations  # noqa: E402
from lingjund.service.context import Controller  # noqa: E402
from lingjund.store.assoc import Account, AcctUser, Association  # noqa: E402
from lingjund.store.store import Store  # noqa: E402


def best(fn, repeat: int) -> float:
    """The least CPU time of ``repeat`` runs (CPU, not wall: the figure should
    not depend on what else the machine runs)."""
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--accounts", type=int, default=100)
    ap.add_argument("--users", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="assoc-bench-")
    path = os.path.join(d, "db.sqlite")
    store = Store(path, synchronous="OFF")
    t = time.perf_counter()
    n = 0
    with store.transaction():
        for i in range(args.accounts):
            parent = "root" if i % 10 == 0 else f"acct{i - i % 10}"
            store.put_assoc_record(Account(f"acct{i}", parent=parent))
            store.put_assoc_record(Association(f"acct{i}", shares=1 + i % 5))
            for j in range(args.users):
                user = f"user{i}_{j}"
                store.put_assoc_record(AcctUser(user, default_account=f"acct{i}"))
                store.put_assoc_record(Association(f"acct{i}", user=user, shares=1 + j % 3,
                                                   raw_usage=float((i * 7 + j * 13) % 1000),
                                                   usage_time=1.0))
                n += 1
    built = time.perf_counter() - t
    store.close()
    cfg = config.parse('cluster_name = "bench"\n[accounting]\nenforce = ["associations", "limits", "qos"]\n'
                       '[[nodes]]\nnames = "n1"\ncpus = 2\nmemory_mb = 1000\n'
                       '[[partitions]]\nname = "debug"\nnodes = "ALL"\n')
    print(f"{n} user associations under {args.accounts} accounts (built in {built:.2f} s)")

    stores = []

    def reopen():
        stores.append(Store(path, synchronous="OFF"))
    print(f"open (load into memory): {best(reopen, args.repeat) * 1000:8.1f} ms")
    store = stores[-1]
    ctl = Controller(config=cfg, store=store)

    def tree():
        associations._FS_CACHE.clear()
        associations.fair_tree(ctl)
    print(f"fair tree:               {best(tree, args.repeat) * 1000:8.1f} ms")
    reply = None

    def get():
        nonlocal reply
        associations._FS_CACHE.clear()
        reply = associations.get_associations(ctl, api_pb2.GetAssociationsRequest(with_usage=True))
        reply.SerializeToString()
    print(f"GetAssociations (fresh): {best(get, args.repeat) * 1000:8.1f} ms "
          f"({len(reply.SerializeToString()) / 1e6:.1f} MB)")

    def get_cached():
        associations.get_associations(ctl, api_pb2.GetAssociationsRequest(with_usage=True)).SerializeToString()
    print(f"GetAssociations (cached):{best(get_cached, args.repeat) * 1000:8.1f} ms")
    plain = json_format.MessageToDict(reply, preserving_proto_field_name=True)

    def show():
        r = messages.GetAssociationsResponse.from_dict(plain)
        o = sshare.parse(["-a"])
        sshare.render(sshare._fields(o), sshare.rows(r, o, "root"), None, True)
    print(f"sshare -a (lay out):     {best(show, args.repeat) * 1000:8.1f} ms")
    out = io.StringIO()
    rc = sshare.main(["-a", "-P"], api=_Api(reply), out=out, err=io.StringIO())
    print(f"  ({len(out.getvalue().splitlines())} lines, rc {rc})")

    def check():
        for k in range(1000):
            spec = api_pb2.JobSpec(user=f"user{k % args.accounts}_{k % args.users}", uid=1000,
                                   account=f"acct{k % args.accounts}")
            associations.check_submit(ctl, spec, "debug")
    print(f"check_submit:            {best(check, args.repeat) * 1000 / 1000 * 1e3:8.1f} us each")

    def charge():
        store.assoc.usage_tick = store.assoc.usage_tick or 1.0
        associations.charge_usage(ctl, store.assoc.usage_tick + 60)
    print(f"charge_usage:            {best(charge, args.repeat) * 1000:8.1f} ms")
    for s in stores:
        s.close()


class _Api:
    def __init__(self, reply):
        self.plain = json_format.MessageToDict(reply, preserving_proto_field_name=True)

    def call(self, method, request, **kw):
        return messages.GetAssociationsResponse.from_dict(self.plain)


if __name__ == "__main__":
    main()

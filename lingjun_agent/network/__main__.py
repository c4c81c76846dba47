"""Run the reconciler by hand, in this process's network namespace.

    python -m lingjun_agent.network apply PROFILE.json    # one pass, JSON report, rc 2 if refused
    python -m lingjun_agent.network watch PROFILE.json    # stay converged; one JSON line per pass

Operators use it to try a profile on one node (under ``ip netns exec`` to
try it on a copy); the tests use it to run the reconciler inside their
namespaces.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import signal
import sys
import threading

from lingjun import netprofile
from lingjun_agent.network.watcher import REFUSED, NetReconciler, Report


def _json(rep: Report) -> str:
    return json.dumps(dataclasses.asdict(rep))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lingjun_agent.network")
    p.add_argument("cmd", choices=("apply", "watch"))
    p.add_argument("profile", help="profile as JSON ({name, interface: [...], uplink: [...]})")
    p.add_argument("--rdma-root", default="/sys/class/infiniband")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        with open(args.profile) as f:
            prof = netprofile.from_table(json.load(f))
        netprofile.check_static(prof)
    except (OSError, ValueError) as e:
        print(json.dumps({"state": REFUSED, "message": str(e), "changes": []}), flush=True)
        return 2
    if args.cmd == "apply":
        rep, _ = NetReconciler(prof, rdma_root=args.rdma_root).reconcile_once()
        print(_json(rep), flush=True)
        return 2 if rep.state == REFUSED else 0
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    rec = NetReconciler(prof, rdma_root=args.rdma_root,
                        on_report=lambda r: print(_json(r), flush=True))
    rec.start()
    done.wait()
    rec.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

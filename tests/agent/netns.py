"""Throwaway hosts for network tests: namespaces, veth pairs, and the reconciler run inside them.

Every namespace gets a name unique to this test process and is removed (with
every link in it: deleting a namespace deletes its veths, and a veth's peer
goes with it) when the fixture ends, even on failure. Nothing is created in
the root namespace, so the host's own interfaces are never touched.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

PY = sys.executable


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed rc={p.returncode}: {p.stderr.strip()}")
    return p


class Netns:
    """Namespaces named ``ljn<pid>-<short>``; ``name(short)`` gives the full name."""

    def __init__(self) -> None:
        self.made: list[str] = []

    def name(self, short: str) -> str:
        return f"ljn{os.getpid()}-{short}"

    def add(self, short: str) -> str:
        ns = self.name(short)
        sh("ip", "netns", "add", ns)
        self.made.append(ns)
        # IPv4 only: IPv6 link-local addresses appear by themselves a while after
        # a link comes up, which would count as changes nobody made.
        sh("ip", "netns", "exec", ns, "sh", "-c", "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6;"
           " echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        return ns

    def veth(self, a: str, a_if: str, b: str, b_if: str, up_b: bool = True) -> None:
        """A veth pair with one end in each namespace (created inside ``a``)."""
        sh("ip", "-n", a, "link", "add", a_if, "type", "veth", "peer", "name", b_if, "netns", b)
        if up_b:
            sh("ip", "-n", b, "link", "set", b_if, "up")

    def cleanup(self) -> None:
        for ns in self.made:
            sh("ip", "netns", "del", ns, check=False)
        self.made.clear()

    # -- looking at the kernel -----------------------------------------------------
    @staticmethod
    def ip(ns: str, *args: str) -> str:
        return sh("ip", "-n", ns, *args).stdout

    @staticmethod
    def ipj(ns: str, *args: str):
        out = sh("ip", "-n", ns, "-j", *args).stdout
        return json.loads(out) if out.strip() else []

    @staticmethod
    def sysctl(ns: str, ifname: str, key: str) -> int:
        return int(sh("ip", "netns", "exec", ns, "cat", f"/proc/sys/net/ipv4/conf/{ifname}/{key}").stdout)

    @staticmethod
    def counters(ns: str, ifname: str) -> tuple[int, int]:
        """(tx_packets, rx_packets) of a link."""
        link = Netns.ipj(ns, "-s", "link", "show", "dev", ifname)[0]
        return link["stats64"]["tx"]["packets"], link["stats64"]["rx"]["packets"]

    def snapshot(self, ns: str, ifnames: tuple[str, ...] = ()) -> dict:
        """Everything the reconciler could have changed in ``ns`` (or, with
        ``ifnames``, on those links only), for before/after comparisons."""
        def links():
            out = []
            for l in self.ipj(ns, "-d", "link", "show"):
                if ifnames and l["ifname"] not in ifnames:
                    continue
                out.append({k: l.get(k) for k in ("ifname", "flags", "mtu", "address", "operstate")})
            return out
        snap = {
            "links": links(),
            "addrs": [(a["ifname"], [(i["local"], i["prefixlen"]) for i in a["addr_info"]])
                      for a in self.ipj(ns, "-4", "addr", "show") if not ifnames or a["ifname"] in ifnames],
            "routes": [r for r in self.ipj(ns, "-4", "route", "show", "table", "all")
                       if not ifnames or r.get("dev") in ifnames],
            "sysctl": {(i, k): self.sysctl(ns, i, k) for i in (ifnames or ("all",))
                       for k in ("arp_ignore", "arp_announce", "rp_filter",
                                 "ignore_routes_with_linkdown")},
        }
        if not ifnames:
            snap["rules"] = self.ipj(ns, "rule", "show")
        return snap


def write_profile(path: Path, table: dict) -> str:
    path.write_text(json.dumps(table))
    return str(path)


def apply(ns: str, profile: str) -> tuple[int, dict]:
    """One reconcile pass inside ``ns``; (rc, the JSON report)."""
    p = subprocess.run(["ip", "netns", "exec", ns, PY, "-m", "lingjun_agent.network", "apply", profile],
                       capture_output=True, text=True, timeout=60)
    try:
        return p.returncode, json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise AssertionError(f"apply in {ns}: rc={p.returncode}\n{p.stdout}\n{p.stderr}") from None


class Watcher:
    """The reconciler's watcher running inside a namespace; reports are JSON lines."""

    def __init__(self, ns: str, profile: str, log: Path):
        self.log = log
        self.err = open(log.with_suffix(".err"), "w")
        self.out = open(log, "w")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, PY, "-m", "lingjun_agent.network", "watch", profile],
            stdout=self.out, stderr=self.err, text=True)

    def reports(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def wait_report(self, pred, timeout: float = 20, after: int = 0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for r in self.reports()[after:]:
                if pred(r):
                    return r
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no matching report within {timeout}s; got {self.reports()[after:]}\n"
                             f"stderr: {self.log.with_suffix('.err').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.out.close()
        self.err.close()


def wait_for(pred, timeout: float, what: str, step: float = 0.02):
    """Poll ``pred`` until it returns a truthy value; that value, or fail with ``what``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(step)
    raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})")

"""How long one periodic probe pass takes on this machine (issue 5, note).

    .venv/bin/python bench/sanity_pass.py [--passes 50] [--dropins 0]

Runs the agent's real SanityRunner with the default [sanity] probes (cpu,
memory, disk on a spool dir and /tmp, clock, processes, gpu through NVML
(absent here, so it answers "CPU node, fine"), rdma) and optional drop-in
scripts that exit 0; prints the median, p90 and max of the whole pass and
of each probe.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from lingjun.config import SanityConfig
from lingjun_agent.sanity import probes
from lingjun_agent.sanity.runner import SanityRunner


async def main(passes: int, dropins: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "probes.d"
        d.mkdir()
        for i in range(dropins):
            p = d / f"check{i}"
            p.write_text("#!/bin/sh\nexit 0\n")
            p.chmod(0o755)
        cfg = SanityConfig(dropin_dir=str(d) if dropins else "")
        r = SanityRunner(cfg, probes.NodeContext(node="bench", spool=tmp, mark="bench-none"))
        loop = asyncio.get_running_loop()
        phases = {}
        for phase in ("register", "prolog"):
            ts = []
            for _ in range(passes):
                t0 = loop.time()
                await r.run(phase)
                ts.append(loop.time() - t0)
            phases[phase] = ts
        whole, per = [], {}
        for _ in range(passes):
            t0 = loop.time()
            results = await r.run("periodic")
            whole.append(loop.time() - t0)
            for x in results:
                per.setdefault(x.name, []).append(x.duration_s)

    def row(name: str, xs: list[float]) -> str:
        xs = sorted(xs)
        return (f"{name:<16} median {1000 * statistics.median(xs):7.1f} ms  "
                f"p90 {1000 * xs[int(0.9 * (len(xs) - 1))]:7.1f} ms  max {1000 * xs[-1]:7.1f} ms")
    print(f"{passes} passes per phase; periodic runs {len(per)} probes")
    print(row("whole pass", whole))
    for phase, ts in phases.items():
        print(row(f"{phase} pass", ts))
    for name, xs in per.items():
        print(row(name, xs))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--passes", type=int, default=50)
    ap.add_argument("--dropins", type=int, default=0)
    a = ap.parse_args()
    asyncio.run(main(a.passes, a.dropins))

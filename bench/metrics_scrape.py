"""Time a scrape of the controller's /metrics at scale, and the dashboard's
pieces that read the same live state.

    python bench/metrics_scrape.py                         # 10,000 nodes, 100,000 pending
    python bench/metrics_scrape.py --nodes 1000 --pending 10000 --scrapes 20

The controller is the one ``service_pass.py`` builds (a real ``Controller``
over a real SQLite store, read back as after a restart): N registered nodes
of 8 GPUs and 64 CPUs, each running a whole-node job, and P pending 1-GPU
jobs. It prints the median and worst CPU time of rendering the page
(``ControllerMetrics.render``: the live-state collector plus the histograms,
in Prometheus' text format) and its size (the first scrape builds what the
collector keeps between scrapes; it is reported apart), then the same for one utilization
sample (``web/samples.take``, every 5 s) and one dashboard page (``/``: at most
500 queue rows). Each is work on the controller's event loop: a scrape every
15 s costs the loop its median every 15 s.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service_pass import build  # noqa: E402

from lingjun import auth  # noqa: E402
from lingjun.httpdoor import Request  # noqa: E402
from lingjund.daemon import tune_gc  # noqa: E402
from lingjund.metrics import ControllerMetrics, NodeScan  # noqa: E402
from lingjund.web.dashboard import Dashboard  # noqa: E402
from lingjund.web.samples import Ring, take  # noqa: E402


def timed(fn, n: int) -> tuple[list[float], object]:
    out, got = [], None
    for _ in range(n):
        t0 = time.process_time()
        got = fn()
        out.append(time.process_time() - t0)
    return out, got


def line(name: str, times: list[float], extra: str = "") -> None:
    print(f"{name:<22} median {statistics.median(times) * 1000:8.1f} ms  "
          f"max {max(times) * 1000:8.1f} ms{extra}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--pending", type=int, default=100_000)
    ap.add_argument("--scrapes", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        ctl, _ = build(tmp, args.nodes, args.pending, "nothing")
        ctl.store.live.jobs          # loaded
        tune_gc()
        print(f"{args.nodes} nodes, {args.pending} pending, {args.nodes} running "
              f"(built in {time.perf_counter() - t0:.1f} s)")
        metrics = ControllerMetrics(ctl)
        for _ in range(100):
            metrics.observe_pass(0.3)
        times, page = timed(metrics.render, args.scrapes)
        series = sum(1 for ln in page.splitlines() if ln and not ln.startswith(b"#"))
        line("scrape /metrics", times, f"  {len(page) / 1024:.0f} KiB, {series} series "
             f"(the first: {times[0] * 1000:.0f} ms)")
        scan = NodeScan(ctl)
        times, _ = timed(lambda: take(ctl, scan), args.scrapes)
        line("utilization sample", times, "  (the first: " f"{times[0] * 1000:.0f} ms)")
        key = auth.ClusterKey.from_bytes(b"k" * 32)
        token = auth.mint_token(key, 1000, 1000, 300)
        ring = Ring()
        for _ in range(720):
            ring.add(take(ctl, scan))
        dash = Dashboard(ctl, key, metrics, ring)
        req = Request("GET", "/", {}, {"authorization": f"Bearer {token}"})
        times, resp = timed(lambda: dash.overview(req), max(3, args.scrapes // 3))
        line("dashboard /", times, f"  {len(resp.body) / 1024:.0f} KiB")
        ctl.store.close()


if __name__ == "__main__":
    main()

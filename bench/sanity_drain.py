"""Fault -> drain and free -> idle times of the disk probe on a local cluster (issue 5, note).

    .venv/bin/python bench/sanity_drain.py DIR INTERVAL_S      (as root: it mounts a 4 MB tmpfs)

Brings up 4 nodes with node2's scratch on a 4 MB tmpfs and probes every
INTERVAL_S; six times fills the scratch (3 MB), waits until sinfo shows node2
drained, frees it, waits until it is idle. Times include sinfo's own start-up
(~0.1-0.3 s a call on this machine).
"""
import statistics, subprocess, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.e2e.conftest import Cluster
from tests.e2e.test_sanity import _up, _node_line


def main(argv: list[str]) -> None:
    root = Path(argv[0]); interval = float(argv[1])
    c = Cluster(root, nodes=4)
    d = root / "scratch" / "node2"; d.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(d)], check=True)
    try:
        _up(c, f"interval_s={interval}", "jitter=0.1", f"scratch_paths=['{root}/scratch/{{node}}']",
            "disk_min_free_mb=2", "disk_min_free_pct=0", "flap_count=1000", "disabled=['cpu']")
        drains, backs = [], []
        for i in range(6):
            while "|idle|" not in _node_line(c, "node2"): time.sleep(0.05)
            time.sleep(interval * 0.37 * (i % 3))          # fault at different points of the cycle
            t0 = time.monotonic(); (d / "f").write_bytes(b"\0" * (3 << 20))
            while "drain" not in _node_line(c, "node2"): time.sleep(0.05)
            drains.append(time.monotonic() - t0)
            t0 = time.monotonic(); (d / "f").unlink()
            while "|idle|" not in _node_line(c, "node2"): time.sleep(0.05)
            backs.append(time.monotonic() - t0)
        print(f"interval {interval}s: fault->drain median {statistics.median(drains):.2f}s max {max(drains):.2f}s "
              f"{[round(x,2) for x in drains]}; free->idle median {statistics.median(backs):.2f}s max {max(backs):.2f}s")
    finally:
        c.down(); subprocess.run(["umount", str(d)])


if __name__ == "__main__":
    main(sys.argv[1:])

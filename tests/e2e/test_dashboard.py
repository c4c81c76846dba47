"""Must-show: the dashboard in a real headless Chromium (Debian's `chromium`,
which .ci/run installs) shows a running 4-node job, a drained node with its
reason, and a plot; the test reads the DOM Chromium built and checks its
screenshot (a PNG of the window's size, in more than a few colours). The
screenshot is kept at /tmp/lingjun-dashboard.png.

The URL is the one `lingjun web` prints (a token from the credential socket
in ?token=): the page sets it as a cookie and sends Chromium on to the page
without it, so the DOM below is what a signed-in user sees.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from tests.e2e.conftest import Cluster, wait_for

REPO = Path(__file__).resolve().parents[2]
SHOT = Path("/tmp/lingjun-dashboard.png")
WINDOW = (1280, 1400)


@pytest.fixture(scope="module")
def dc(tmp_path_factory):
    root = tmp_path_factory.mktemp("dashboard")
    gpus = root / "gpus.json"          # NVML's stand-in (tests/agent/fake_nvml.py)
    gpus.write_text(json.dumps([{"util": 70, "mem_used": 2 << 30}] * 2))
    c = Cluster(root, nodes=5, cpus=2,
                up_args=("--gpus", "2", "--sanity", "nvml_module=tests.agent.fake_nvml"))
    c.env["PYTHONPATH"] = str(REPO)
    c.env["LINGJUN_FAKE_NVML_GPUS"] = str(gpus)
    yield from c.serving()


def chromium(tmp: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium")
    assert exe, "chromium not found: .ci/run installs Debian's chromium package"
    return subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp / 'profile'}",
         f"--window-size={WINDOW[0]},{WINDOW[1]}", *args, url],
        capture_output=True, text=True, timeout=90)


class Rows(HTMLParser):
    """Each table row's id, class and cell texts; and the <svg>s inside figures."""

    def __init__(self):
        super().__init__()
        self.rows: dict[str, tuple[str, list[str]]] = {}
        self.plots: list[str] = []
        self._row: tuple[str, str, list[str]] | None = None
        self._figure = ""
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and a.get("id"):
            self._row = (a["id"], a.get("class", ""), [])
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "figure":
            self._figure = a.get("id", "")
        elif tag == "svg" and self._figure:
            self.plots.append(self._figure)

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row[2].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows[self._row[0]] = (self._row[1], self._row[2])
            self._row = None
        elif tag == "figure":
            self._figure = ""


def test_the_dashboard_shows_the_job_the_drained_node_and_plots_in_chromium(dc, tmp_path):
    c = dc
    jid = c.sbatch("-N4", "-w", "node[1-4]", "--exclusive", "--gres=gpu:2", "-J", "train",
                   "-t", "10", "-o", "/dev/null", input="#!/bin/bash\nsleep 120\n")
    held = c.sbatch("-H", "-J", "later", "-o", "/dev/null", input="#!/bin/bash\ntrue\n")
    # waits for train's nodes: backfill expects it to start when train's 10 minutes end
    waits = c.sbatch("-N4", "-w", "node[1-4]", "--exclusive", "-J", "next", "-o", "/dev/null",
                     input="#!/bin/bash\ntrue\n")
    try:
        c.wait_state(jid, "RUNNING", timeout=30)
        c.run(["scontrol", "update", "NodeName=node5", "State=DRAIN", "Reason=fan failure"],
              check=True)
        url = c.run(["lingjun", "web"], check=True).stdout.strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w.-]+", url), url
        # two utilization samples (one every 5 s): the plots have a line to draw
        wait_for("a second utilization sample", lambda: _samples(url) >= 2, timeout=20)

        dom = chromium(tmp_path, url, "--dump-dom")
        assert dom.returncode == 0, dom.stderr[-2000:]
        page = Rows()
        page.feed(dom.stdout)
        state, cells = page.rows[f"job-{jid}"]
        assert state == "RUNNING"
        assert cells[1:3] == ["train", "root"] and cells[5] == "RUNNING", cells
        assert cells[7:9] == ["4", "node[1-4]"], cells
        state, cells = page.rows[f"job-{held}"]
        assert (state, cells[5], cells[6]) == ("PENDING", "PENDING", "JobHeldUser"), cells
        assert cells[9] == "N/A", cells
        state, cells = page.rows[f"job-{waits}"]
        assert cells[6] in ("Resources", "Priority") and cells[8] == "node[1-4]", cells
        expected = c.squeue(waits, "%S")             # squeue --start's StartTime
        assert cells[9] == expected != "N/A", (cells, expected)
        state, cells = page.rows["node-node5"]
        assert state == "drained" and cells[:4] == ["node5", "drained", "fan failure", "root"], cells
        for n in range(1, 5):
            assert page.rows[f"node-node{n}"][1][1] == "allocated"
            assert page.rows[f"node-node{n}"][1][5] == "2/2"        # GPUs used
        assert page.rows["node-node5"][1][5] == "0/2"
        assert {"plot-cpus", "plot-gpus", "plot-jobs"} <= set(page.plots), page.plots

        shot = chromium(tmp_path, url, f"--screenshot={tmp_path / 'shot.png'}")
        assert shot.returncode == 0, shot.stderr[-2000:]
        data = (tmp_path / "shot.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        img = Image.open(tmp_path / "shot.png").convert("RGB")
        assert img.size == WINDOW
        colours = img.getcolors(maxcolors=1 << 20) or []
        # white page, table borders and fills, the plots' lines: far from blank
        assert len(colours) > 20, f"{len(colours)} colours"
        big = sorted(colours, reverse=True)
        assert big[0][0] < 0.97 * WINDOW[0] * WINDOW[1], "the screenshot is one colour"
        shutil.copyfile(tmp_path / "shot.png", SHOT)
    finally:
        c.run(["scancel", str(jid), str(held), str(waits)])


def _samples(url: str) -> int:
    base, _, token = url.partition("/?token=")
    req = urllib.request.Request(base + "/", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"<figure class='plot' id='plot-jobs'>.*?</figure>", text, re.S)
    return len(re.findall(r'class="dot ', m.group(0))) // 2 if m else 0


def test_the_dashboard_wants_a_valid_token(dc):
    url = dc.run(["lingjun", "web"], check=True).stdout.strip()
    base, _, token = url.partition("/?token=")
    for headers in ({}, {"Authorization": "Bearer not-a-token"},
                    {"Cookie": "lingjun_token=" + token[:-2] + "xx"}):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(urllib.request.Request(base + "/", headers=headers), timeout=10)
        assert e.value.code == 401, headers
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(base + "/?token=forged", timeout=10)
    assert e.value.code == 401
    # ?token= once: a cookie for the page, and the address without it
    opener = urllib.request.build_opener(_NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as e:
        opener.open(url + "&x=1", timeout=10)
    assert e.value.code == 303 and e.value.headers["Location"] == "/?x=1"
    cookie = e.value.headers["Set-Cookie"]
    assert cookie.startswith(f"lingjun_token={token};") and "HttpOnly" in cookie, cookie
    req = urllib.request.Request(base + "/", headers={"Cookie": cookie.split(";")[0]})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200
        assert "script-src" not in r.headers["Content-Security-Policy"]      # default-src 'none'
        assert "default-src 'none'" in r.headers["Content-Security-Policy"]


def test_a_jobs_history_page_lists_its_moments(dc):
    c = dc
    jid = c.sbatch("-o", "/dev/null", input="#!/bin/bash\ntrue\n")
    c.wait_state(jid, ("COMPLETED",), timeout=30)
    url = c.run(["lingjun", "web"], check=True).stdout.strip()
    base, _, token = url.partition("/?token=")
    auth = {"Authorization": f"Bearer {token}"}
    with urllib.request.urlopen(urllib.request.Request(f"{base}/job?id={jid}", headers=auth),
                                timeout=10) as r:
        text = r.read().decode()
    assert "State=COMPLETED" in text
    kinds = re.findall(r"<tr><td>[^<]*</td><td>(\w+)</td>", text)
    assert kinds == ["submitted", "started", "ended"], kinds
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(f"{base}/job?id=abc", headers=auth), timeout=10)
    assert e.value.code == 400 and b"Invalid job id specified" in e.value.read()
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(f"{base}/job?id=999999", headers=auth),
                               timeout=10)
    assert e.value.code == 404


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None

"""The dashboard: read-only HTML pages of the queue, the nodes, a job's
history and the utilization over time, rendered on the server.

    /               the queue (pending reasons, expected starts from backfill),
                    the nodes (state, reason, GPUs in use), utilization plots
    /job?id=N       one job and its history (what ``lingjun events N`` prints)
    /metrics        Prometheus' page (lingjund/metrics.py), no token needed

The plots are SVG drawn here by pygal (a maintained Python plotting
library): no JavaScript reaches the browser (the pages forbid scripts with
their Content-Security-Policy), nothing is fetched from elsewhere, and a
page is one response a test can read whole.

Authenticated like the API: a user token from the credential socket
(``lingjun web`` prints a URL with one). ``?token=T`` once: the page answers
with a cookie holding it (HttpOnly, SameSite=Strict, kept for [auth]
token_ttl_s, a token's life) and sends the browser to the same page without
it; or the header ``Authorization: Bearer T`` on each request. Any valid
user may read: the queue and the nodes are what squeue and sinfo show every
user.
"""
from __future__ import annotations

import heapq
import html
from collections import Counter
import logging
import time
from http import HTTPStatus
from urllib.parse import urlencode

import pygal
from prometheus_client import CONTENT_TYPE_LATEST
from pygal.style import Style

from lingjun import auth, slurm
from lingjun.httpdoor import Request, Response
from lingjun.v1 import api_pb2
from lingjund.metrics import ControllerMetrics, NodeScan
from lingjund.service import errors, faulttol
from lingjund.service.context import Controller
from lingjund.web.samples import Ring

log = logging.getLogger(__name__)

COOKIE = "lingjun_token"
QUEUE_ROWS = 500           # rows of the queue and node tables; the rest are counted
PLOT_POINTS = 120          # points of a plot: the ring's samples, thinned
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'"
HTML = "text/html; charset=utf-8"

PLOT_STYLE = Style(background="#ffffff", plot_background="#f7f7f7",
                   colors=("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"), font_family="sans-serif")

PAGE_CSS = """
body{font-family:sans-serif;margin:1em 2em;color:#222;background:#fff}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.1em;margin:1em 0 .3em}
table{border-collapse:collapse;font-size:.85em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}
th{background:#e8eef7}tr.RUNNING td{background:#e9f7e9}tr.PENDING td{background:#fff8e1}
tr.drained td,tr.draining td,tr.down td{background:#fde8e8}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plots figure{margin:0}.plot svg{width:520px;height:260px}
"""


class Dashboard:
    def __init__(self, ctl: Controller, key: auth.ClusterKey, metrics: ControllerMetrics,
                 ring: Ring):
        self.ctl = ctl
        self.key = key
        self.metrics = metrics
        self.ring = ring
        self.scan = NodeScan(ctl)
        self._drawn: tuple[float | None, str] = (None, "")

    def routes(self) -> dict:
        return {"/": self.overview, "/job": self.job, "/metrics": self.prometheus}

    # -- authentication ------------------------------------------------------------
    def _identity(self, req: Request) -> auth.Identity | None:
        header = req.headers.get("authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else req.cookie(COOKIE)
        if not token:
            return None
        try:
            return auth.verify_token(self.key, token, now=self.ctl.clock())
        except auth.AuthError:
            return None

    def _guard(self, req: Request) -> Response | None:
        """None when the caller may read; else the answer that says why not (or
        that sets the cookie from ?token= and sends the browser on)."""
        token = req.param("token")
        if token:
            try:
                who = auth.verify_token(self.key, token, now=self.ctl.clock())
            except auth.AuthError as e:
                return _denied(str(e))
            rest = {k: v for k, v in req.query.items() if k != "token"}
            target = req.path + ("?" + urlencode(rest, doseq=True) if rest else "")
            log.info("dashboard: uid %d signed in", who.uid)
            return Response(HTTPStatus.SEE_OTHER, b"", headers=(
                ("Location", target),
                ("Set-Cookie", f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; "
                               f"Max-Age={int(self.ctl.config.auth.token_ttl_s)}")))
        if self._identity(req) is None:
            return _denied("no valid credential: open the URL `lingjun web` prints")
        return None

    # -- pages -------------------------------------------------------------------------
    def prometheus(self, req: Request) -> Response:
        return Response(200, self.metrics.render(), CONTENT_TYPE_LATEST)

    def overview(self, req: Request) -> Response:
        if (no := self._guard(req)) is not None:
            return no
        ctl = self.ctl
        now = ctl.clock()
        body = [f"<h1>Lingjun cluster {_e(ctl.cluster)}</h1>",
                f"<p>{_e(slurm.format_timestamp(int(now)))}</p>",
                "<h2>Utilization</h2>", self._plots(),
                self._queue(now), self._nodes()]
        return _page(f"Lingjun {ctl.cluster}", "".join(body))

    def job(self, req: Request) -> Response:
        if (no := self._guard(req)) is not None:
            return no
        try:
            job_id = slurm.parse_job_id(req.param("id"))
        except ValueError:
            return _page("Invalid job id", f"<p>Invalid job id specified: {_e(req.param('id'))}</p>",
                         HTTPStatus.BAD_REQUEST)
        try:
            reply = faulttol.get_events(self.ctl, api_pb2.GetJobEventsRequest(job_id=job_id))
        except errors.InvalidJobId:
            return _page("Invalid job id", "<p>Invalid job id specified</p>", HTTPStatus.NOT_FOUND)
        job = self.ctl.store.job(job_id)
        # the record's own moments, then what the controller noted (lingjun events)
        history = [(job.submit_time, "submitted", f"to partition {job.partition} by {job.user}")]
        if job.start_time:
            history.append((job.start_time, "started",
                            f"on {slurm.compress_hostlist(list(job.nodes))}"))
        if job.end_time:
            history.append((job.end_time, "ended", job.state))
        history += [(e.time, e.kind, e.text) for e in reply.events]
        history.sort(key=lambda h: int(h[0]))     # stable: within a second, in the order above
        rows = "".join(f"<tr><td>{_e(slurm.format_timestamp(int(t)))}</td><td>{_e(kind)}</td>"
                       f"<td>{_e(text)}</td></tr>" for t, kind, text in history)
        attempts = "".join(f"<tr><td>{a.attempt}</td><td>{_e(a.state)}</td><td>{_e(a.nodes)}</td>"
                           f"<td>{_e(slurm.format_timestamp(a.start_time))}</td>"
                           f"<td>{_e(slurm.format_timestamp(a.end_time))}</td></tr>"
                           for a in reply.attempts)
        body = (f"<h1>Job {job_id} <small>{_e(job.name)}</small></h1>"
                f"<p id='job-state'>State={_e(reply.state)} User={_e(job.user)} "
                f"Partition={_e(job.partition)} Nodes={_e(slurm.compress_hostlist(list(job.nodes)))} "
                f"Restarts={len(reply.attempts)}</p>"
                "<h2>History</h2><table id='events'><tr><th>Time</th><th>Event</th><th>What</th></tr>"
                f"{rows}</table>"
                + (("<h2>Earlier attempts</h2><table id='attempts'><tr><th>#</th><th>State</th>"
                    f"<th>Nodes</th><th>Start</th><th>End</th></tr>{attempts}</table>")
                   if attempts else "")
                + "<p><a href='/'>back</a></p>")
        return _page(f"Job {job_id}", body)

    # -- parts -------------------------------------------------------------------------
    def _queue(self, now: float) -> str:
        live = self.ctl.store.live
        by_state, records = live.by_state, live.jobs
        # running and completing first (by id), then the pending by priority: the
        # first QUEUE_ROWS without sorting 100,000 pending jobs
        shown = sorted(i for s in (slurm.RUNNING, slurm.COMPLETING) for i in by_state.get(s, ()))
        shown = [records[i] for i in shown[:QUEUE_ROWS]]
        pending = by_state.get(slurm.PENDING, ())
        shown += heapq.nsmallest(QUEUE_ROWS - len(shown), (records[i] for i in pending),
                                 key=lambda j: (-j.priority, j.job_id))
        total = sum(len(by_state.get(s, ())) for s in (slurm.RUNNING, slurm.COMPLETING)) + len(pending)
        rows = []
        for j in shown:
            if j.state == slurm.PENDING:
                start = slurm.format_timestamp(int(j.sched_start)) if j.sched_start else "N/A"
                where = slurm.compress_hostlist(list(j.sched_nodes)) if j.sched_nodes else ""
                reason = j.reason or "None"
            else:
                start = slurm.format_timestamp(int(j.start_time))
                where = slurm.compress_hostlist(list(j.nodes))
                reason = ""
            jid = f"{j.array_job_id}_{j.array_task_id}" if j.array_task_id >= 0 else (
                f"{j.job_id}_[{j.array_task_str}]" if j.array_task_str else str(j.job_id))
            rows.append(
                f"<tr class='{j.state}' id='job-{j.job_id}'>"
                f"<td><a href='/job?id={j.job_id}'>{_e(jid)}</a></td>"
                f"<td>{_e(j.name)}</td><td>{_e(j.user)}</td><td>{_e(j.spec.account)}</td>"
                f"<td>{_e(j.partition)}</td><td>{_e(j.state)}</td><td>{_e(reason)}</td>"
                f"<td>{len(j.nodes) or j.spec.min_nodes or 1}</td><td>{_e(where)}</td>"
                f"<td>{_e(start)}</td></tr>")
        more = (f"<p>and {total - len(shown)} more (squeue shows them all)</p>"
                if total > len(shown) else "")
        return ("<h2>Queue</h2><table id='queue'><tr><th>JobID</th><th>Name</th><th>User</th>"
                "<th>Account</th><th>Partition</th><th>State</th><th>Reason</th><th>Nodes</th>"
                "<th>NodeList (expected)</th><th>Start (expected)</th></tr>"
                + "".join(rows) + "</table>" + more)

    def _nodes(self) -> str:
        """Nodes that need a look first (down, drained, draining, not
        responding), then the rest in their natural order."""
        ctl = self.ctl
        s = self.scan.summarize()
        records = ctl.store.live.nodes
        connected = ctl.agents.connected
        names = list(s.states)
        names.sort(key=lambda n: (s.states[n] not in ("down", "drained", "draining", "unknown")
                                  and connected(n)))
        rows = []
        for name in names[:QUEUE_ROWS]:
            state = s.states[name]
            rec = records.get(name)
            cap = self.scan.capacity(name, rec)
            held = self.scan.per_node.get(name)
            responding = "" if connected(name) else "*"
            reason = rec.reason if rec and (rec.drain or rec.down) else ""
            by = ("probe" if rec.drain_by_probe else (rec.reason_user or "")) if reason and rec else ""
            used = min(held[1], cap[2]) if held else 0
            rows.append(f"<tr class='{state}' id='node-{_e(name)}'><td>{_e(name)}</td>"
                        f"<td>{_e(state)}{responding}</td><td class='reason'>{_e(reason)}</td>"
                        f"<td>{_e(by)}</td><td>{cap[0]}</td><td>{used}/{cap[2]}</td></tr>")
        counts = ", ".join(f"{n} {state}" for state, n in sorted(
            Counter(s.states.values()).items()))
        more = (f"<p>and {len(names) - QUEUE_ROWS} more (sinfo shows them all)</p>"
                if len(names) > QUEUE_ROWS else "")
        return (f"<h2>Nodes</h2><p id='node-counts'>{_e(counts)}</p>"
                "<table id='nodes'><tr><th>Node</th><th>State</th><th>Reason</th>"
                "<th>By</th><th>CPUs</th><th>GPUs used</th></tr>" + "".join(rows) + "</table>"
                + more)

    def _plots(self) -> str:
        """The plots, drawn again only when a new sample came (every 5 s)."""
        newest = self.ring.samples[-1].time if self.ring.samples else None
        if self._drawn[0] != newest or newest is None:
            self._drawn = (newest, self._draw())
        return self._drawn[1]

    def _draw(self) -> str:
        samples = list(self.ring.samples)
        samples = samples[::-(-len(samples) // PLOT_POINTS) or 1]
        if not samples:
            return "<p>No samples yet.</p>"
        labels = [time.strftime("%H:%M:%S", time.localtime(s.time)) for s in samples]
        charts = [("CPUs", [("allocated", [s.cpus_allocated for s in samples]),
                            ("total", [s.cpus_total for s in samples])])]
        if any(s.gpus_total for s in samples):
            charts.append(("GPUs", [("allocated", [s.gpus_allocated for s in samples]),
                                    ("total", [s.gpus_total for s in samples])]))
        charts.append(("Jobs", [("running", [s.running for s in samples]),
                                ("pending", [s.pending for s in samples])]))
        out = []
        for title, series in charts:
            chart = pygal.Line(width=520, height=260, js=[], disable_xml_declaration=True,
                               style=PLOT_STYLE, title=title, fill=False, show_dots=len(samples) < 40,
                               x_label_rotation=30, show_minor_x_labels=False,
                               x_labels_major_count=6, include_x_axis=True, legend_at_bottom=True)
            chart.x_labels = labels
            for name, values in series:
                chart.add(name, values)
            out.append(f"<figure class='plot' id='plot-{title.lower()}'>{chart.render(is_unicode=True)}"
                       "</figure>")
        return "<div class='plots'>" + "".join(out) + "</div>"


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: str, status: int = 200) -> Response:
    doc = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
           f"<style>{PAGE_CSS}</style></head><body>{body}</body></html>")
    return Response(status, doc.encode(), HTML, headers=(("Content-Security-Policy", CSP),))


def _denied(why: str) -> Response:
    return _page("Access denied", f"<h1>Access denied</h1><p>{_e(why)}</p>", HTTPStatus.UNAUTHORIZED)

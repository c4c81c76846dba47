"""SLURM_TIME_FORMAT: every command that prints a date prints it in the form
the user chose (standard, relative, or a strftime format), as Slurm's do."""
from __future__ import annotations

import io
import time

import pytest

from cli import sacct, scontrol, squeue
from cli.formats.units import _local_time
from lingjun import slurm
from lingjun.v1 import api_pb2
from tests.cli.test_commands import FakeApi

DAY = 86400


def _at(days: float, hms=(10, 4, 3)) -> int:
    """Local time ``days`` from today at hms."""
    t = time.localtime(time.time() + days * DAY)
    return int(time.mktime((t.tm_year, t.tm_mon, t.tm_mday, *hms, 0, 0, -1)))


@pytest.fixture(autouse=True)
def _fresh_cache():
    _local_time.cache_clear()
    yield
    _local_time.cache_clear()


@pytest.mark.parametrize("setting,when,want", [
    ("", 0, "%Y-%m-%dT10:04:03"),
    ("standard", 0, "%Y-%m-%dT10:04:03"),
    ("relative", 0, "10:04:03"),
    ("relative", -1, "Ystday 10:04"),
    ("relative", 1, "Tomorr 10:04"),
    ("relative", 3, "%a 10:04"),
    ("relative", 20, "%-d %b 10:04"),
    ("relative", -20, "%-d %b 10:04"),
    ("relative", 400, "%-d %b %Y"),
    ("%d/%m %H", 0, "%d/%m 10"),
], ids=["unset is ISO", "standard is ISO", "relative: today, the time", "yesterday",
        "tomorrow", "within the week: the day's name", "later: day and month",
        "earlier: day and month", "a year away: with the year", "a strftime format"])
def test_dates_in_the_chosen_form(monkeypatch, setting, when, want):
    monkeypatch.setenv("SLURM_TIME_FORMAT", setting)
    ts = _at(when)
    assert slurm.format_timestamp(ts) == time.strftime(want, time.localtime(ts))
    assert slurm.format_timestamp(0) == "Unknown"


def test_a_format_without_a_percent_is_refused_once_and_iso_used(monkeypatch, capsys):
    monkeypatch.setenv("SLURM_TIME_FORMAT", "bogus-format")
    ts = _at(0)
    assert slurm.format_timestamp(ts) == time.strftime("%Y-%m-%dT10:04:03", time.localtime(ts))
    assert slurm.format_timestamp(ts + 1).endswith("10:04:04")
    err = capsys.readouterr().err
    assert err.count("error: invalid SLURM_TIME_FORMAT = 'bogus-format'") == 1


def _job(**kw):
    fields = dict(job_id=7, name="wrap", user="root", state="COMPLETED", partition="debug",
                  num_nodes=1, nodes="node1", submit_time=_at(-1, (9, 0, 0)),
                  eligible_time=_at(-1, (9, 0, 0)), start_time=_at(0, (8, 0, 5)),
                  end_time=_at(0, (8, 1, 5)), time_limit_min=-1, now=_at(0, (9, 0, 0)))
    return api_pb2.JobInfo(**{**fields, **kw})


def _run(main, argv, api, **kw):
    out, err = io.StringIO(), io.StringIO()
    rc = main(argv, api=api, out=out, err=err, **kw)
    return rc, out.getvalue(), err.getvalue()


def test_sacct_squeue_scontrol_print_relative_dates(monkeypatch):
    monkeypatch.setenv("SLURM_TIME_FORMAT", "relative")
    api = FakeApi(GetAccounting=[api_pb2.GetJobsResponse(jobs=[_job()])])
    rc, out, err = _run(sacct.main, ["-j", "7", "-X", "-P", "-o", "Submit,Start,End"], api)
    assert (rc, out, err) == (0, "Submit|Start|End\nYstday 09:00|08:00:05|08:01:05\n", "")

    api = FakeApi(GetJobs=api_pb2.GetJobsResponse(jobs=[_job(state="RUNNING", end_time=0)]))
    rc, out, err = _run(squeue.main, ["-h", "-o", "%V|%S"], api)
    assert (rc, out) == (0, "Ystday 09:00|08:00:05\n")

    api = FakeApi(GetJobs=api_pb2.GetJobsResponse(jobs=[_job()]))
    rc, out, err = _run(scontrol.main, ["show", "job", "7"], api)
    assert rc == 0 and "SubmitTime=Ystday 09:00 EligibleTime=Ystday 09:00" in out, out

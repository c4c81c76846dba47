"""One date parser for every command that reads a date (lingjun.slurm.parse_time):
sacct -S/-E look back, sbatch --begin and scontrol StartTime= look ahead, and
each refuses what Slurm 22.05 refuses with its words."""
from __future__ import annotations

import io
import time

import pytest

from cli import sacct
from lingjun import sbatch_options
from lingjun.v1 import api_pb2
from tests.cli.test_commands import FakeApi

# Friday 2026-12-04 02:20 local time, as when these were checked against Slurm 22.05
NOW = time.mktime((2026, 12, 4, 2, 20, 0, 0, 0, -1))


def _local(*ymdhms) -> int:
    return int(time.mktime((*ymdhms, *(0,) * (6 - len(ymdhms)), 0, 0, -1)))


def _sacct(argv):
    api = FakeApi(GetAccounting=[api_pb2.GetJobsResponse()])
    out, err = io.StringIO(), io.StringIO()
    rc = sacct.main(argv, api=api, out=out, err=err, now=NOW)
    return rc, out.getvalue(), err.getvalue(), api.calls


@pytest.mark.parametrize("argv,start,end", [
    (["-S", "1203"], _local(2026, 12, 3), None),
    (["-S", "12/01", "-E", "1203"], _local(2026, 12, 1), _local(2026, 12, 3)),
    (["-S", "2026-11-30T10:00", "-E", "now"], _local(2026, 11, 30, 10), int(NOW)),
    (["-S", "now-2days"], int(NOW) - 2 * 86400, None),
    (["-S", "01:00"], _local(2026, 12, 4, 1), None),
], ids=["MMDD is this year's December 3rd, not 2003's", "MM/DD and MMDD",
        "ISO date and time, and now", "now minus days", "a time of day is today's"])
def test_sacct_window_reads_dates_looking_back(argv, start, end):
    rc, out, err, calls = _sacct(["-X", *argv])
    assert (rc, err) == (0, "")
    req = calls[0][1]
    assert req.window_start == start
    assert (req.window_end if req.HasField("window_end") else None) == end


@pytest.mark.parametrize("argv,want_err", [
    (["-S", "now+1h"], "Invalid time specification (pos=4): now+1h\n"),
    (["-S", "2026-13-01"], "Invalid time specification (pos=5): 2026-13-01\n"),
    (["-S", "1205", "-E", "now"],
     "sacct: error: Start time (2026-12-05T00:00:00) requested is after end time "
     "(2026-12-04T02:20:00).\n"),
], ids=["an hour is no unit for Slurm", "month 13", "a window that ends before it starts"])
def test_sacct_refuses_dates_as_slurm_does(argv, want_err):
    rc, out, err, calls = _sacct(argv)
    assert (rc, out, err, calls) == (1, "", want_err, [])


def _begin(value: str) -> int:
    req = sbatch_options.build_request(["--begin", value, "--wrap", "true"], None, {}, "/tmp")
    return req.spec.begin_time


def test_sbatch_begin_looks_ahead():
    """--begin=MMDD naming yesterday is next year's (sacct's -S would read it as
    this year's), and a time of day already gone is tomorrow's."""
    now = time.time()
    yesterday = time.localtime(now - 86400)
    got = time.localtime(_begin(f"{yesterday.tm_mon:02d}{yesterday.tm_mday:02d}"))
    assert (got.tm_year, got.tm_mon, got.tm_mday) == (
        yesterday.tm_year + 1, yesterday.tm_mon, yesterday.tm_mday)
    assert _begin("now+1hour") - int(now) in range(3599, 3602)
    gone = time.localtime(now - 120)
    assert _begin(f"{gone.tm_hour:02d}:{gone.tm_min:02d}") > now


@pytest.mark.parametrize("value,want", [
    ("now+1h", "Invalid time specification (pos=4): now+1h\n"
               "sbatch: error: Invalid --begin specification"),
    ("", "sbatch: error: Invalid --begin specification"),
], ids=["Slurm's line, then sbatch's", "nothing at all"])
def test_sbatch_refuses_a_begin_time_as_slurm_does(value, want):
    with pytest.raises(sbatch_options.CommandError) as e:
        _begin(value)
    assert (str(e.value), e.value.rc) == (want, 255)

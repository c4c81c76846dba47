"""Cron times of scrontab entries (lingjun/cron.py), in the local zone as cron's."""
from __future__ import annotations

import datetime

import pytest

from lingjun import cron


def at(*args) -> float:
    return datetime.datetime(*args).astimezone().timestamp()


@pytest.mark.parametrize("spec", ["* * * * *", "*/5 1-3 * * mon-fri", "0 0 1 jan *", "@hourly",
                                  "@daily", "@midnight", "@annually", "30 2 * * 0"])
def test_valid(spec):
    assert cron.valid(spec)


@pytest.mark.parametrize("spec", ["61 * * * *", "* * * *", "* * * * * *", "@often", "", "x y z a b"])
def test_invalid(spec):
    assert not cron.valid(spec)


def test_next_times():
    t = at(2026, 12, 4, 8, 20, 30)
    assert cron.next_time("* * * * *", t) == at(2026, 12, 4, 8, 21)
    assert cron.next_time("*/5 * * * *", t) == at(2026, 12, 4, 8, 25)
    assert cron.next_time("@hourly", t) == at(2026, 12, 4, 9, 0)
    assert cron.next_time("@midnight", t) == at(2026, 12, 5, 0, 0)
    # strictly after: a run ending on the minute waits for the next one
    assert cron.next_time("* * * * *", at(2026, 12, 4, 8, 21)) == at(2026, 12, 4, 8, 22)

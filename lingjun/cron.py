"""Cron times of scrontab entries: which are valid, and when an entry runs next.

Shared by the command (``cli/scrontab.py`` checks every line before it
sends anything) and the controller (``lingjund/service/crontab.py`` queues
each entry's job for its next time). croniter does the arithmetic: it is
the cron parser Python schedulers use (APScheduler's, Airflow's), with
ranges, steps, names and @keywords. Times are local, as cron's.
"""
from __future__ import annotations

import datetime

KEYWORDS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_ALIASES = {"@annually": "@yearly", "@midnight": "@daily"}


def valid(spec: str) -> bool:
    """Five cron fields, or one of scrontab's @keywords."""
    from croniter import croniter
    spec = spec.strip()
    if spec.startswith("@"):
        return spec in KEYWORDS
    return len(spec.split()) == 5 and croniter.is_valid(spec)


def next_time(spec: str, after: float) -> float:
    """The entry's first time strictly after ``after`` (epoch seconds)."""
    from croniter import croniter
    spec = _ALIASES.get(spec.strip(), spec.strip())
    start = datetime.datetime.fromtimestamp(after).astimezone()
    return croniter(spec, start).get_next(float)

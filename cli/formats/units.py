"""Times and sizes as every command prints them, kept in one place so squeue,
scontrol, sinfo and sacct agree (Slurm's src/common/parse_time.c:
slurm_make_time_str and secs2time_str; src/common/slurm_protocol_api.c:
convert_num_unit for sizes).

Timestamps are cached per (second, time zone, SLURM_TIME_FORMAT): a queue's
jobs share few distinct seconds and strftime is slow.
"""
from __future__ import annotations

import os
import time
from functools import lru_cache
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)

from lingjun import slurm


def timestamp_or_na(ts: int) -> str:
    # Cached: a queue's jobs share few distinct seconds, and strftime is slow.
    # The zone and SLURM_TIME_FORMAT are part of the key (time.tzset may change it).
    return _local_time(ts, time.timezone, time.altzone, time.daylight, time.tzname,
                       os.environ.get("SLURM_TIME_FORMAT", ""))


@lru_cache(maxsize=65536)
def _local_time(ts: int, *zone) -> str:
    return slurm.format_timestamp(ts, unknown="N/A")


@lru_cache(maxsize=4096)
def time_limit(minutes: int) -> str:
    return slurm.format_time_limit(minutes)


def squeue_long_header(now: int) -> str:
    """The date line squeue -l and sinfo -l print first."""
    return slurm.format_date_line(now) + "\n"


_UNITS = "KMGTP"


def format_rss(kb: int) -> str:
    """A memory figure as sacct prints it (convert_num_unit with sacct's
    CONVERT_NUM_UNIT_EXACT): scaled up only while it divides exactly by 1024,
    so 204800 KiB reads "200M" but 205464 KiB stays "205464K"; 0 is "0"."""
    if kb <= 0:
        return "0"
    unit = 0
    while kb % 1024 == 0 and unit < len(_UNITS) - 1:
        kb //= 1024
        unit += 1
    return f"{kb}{_UNITS[unit]}"


def format_cpu_time(ms: int) -> str:
    """sacct's TotalCPU/UserCPU/SystemCPU (_elapsed_time): [D-]HH:MM:SS once
    an hour is reached, else MM:SS.mmm, or 00:MM:SS without a fraction."""
    secs, msec = divmod(max(0, ms), 1000)
    days, rest = divmod(secs, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"
    if hours:
        return f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if msec:
        return f"{minutes:02d}:{seconds:02d}.{msec:03d}"
    return f"00:{minutes:02d}:{seconds:02d}"


def format_mem_mb(mb: int) -> str:
    """A TRES memory figure as sacct prints it: exact units, 2000M, 4G, 48G."""
    return format_rss(mb * 1024)

"""The probe unit: a name, a severity, a timeout, and a result with a reason.

A probe is a plain function over facts (``facts.py`` gathers them), so each
decision is tested with supplied facts and no hardware (LBNL NHC's checks,
split from their data). Severity says what a failure does on the controller:

    drain  the node is drained with Reason="<probe>: <reason>" (and returns by
           itself when the probe passes again, unless a person drained it)
    warn   the failure is recorded and shown (``lingjun health``), nothing else
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

DRAIN = "drain"
WARN = "warn"
SEVERITIES = (DRAIN, WARN)

# When a pass runs: the node registers, the periodic timer, a job's prolog; and
# a suspect node's extended check (the periodic probes and TCP bandwidth).
REGISTER, PERIODIC, PROLOG, SUSPECT = "register", "periodic", "prolog", "suspect"


@dataclass(frozen=True)
class Verdict:
    """What a check decided: ok, or not with the reason in a person's words."""
    ok: bool
    reason: str = ""


PASS = Verdict(True)


def fail(reason: str) -> Verdict:
    return Verdict(False, reason)


@dataclass(frozen=True)
class Result:
    name: str
    severity: str
    ok: bool
    reason: str
    duration_s: float
    time: float
    phase: str = ""


@dataclass(frozen=True)
class Probe:
    """One check. ``run`` gathers what it needs and decides; it is called in a
    worker thread under ``timeout_s`` (a hung NFS statvfs or NVML call fails
    the probe, it does not stop the pass)."""
    name: str
    severity: str
    run: Callable[[], Verdict]
    timeout_s: float = 10.0
    phases: tuple[str, ...] = (REGISTER, PERIODIC, PROLOG)

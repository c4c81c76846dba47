"""The daemons' logging: journald priorities under systemd, plain lines elsewhere.

systemd connects a service's stderr to the journal and says so in
``JOURNAL_STREAM`` ("device:inode" of that stream). When stderr is that
stream, each line starts with the ``<N>`` priority prefix journald reads
(sd-daemon(3): ``<3>`` error, ``<4>`` warning, ``<6>`` info, ``<7>`` debug)
and carries no timestamp, since the journal adds its own; ``journalctl -p
warning -u lingjund`` then shows only what matters. Anywhere else (a
terminal, the local cluster's log files) lines are plain with a timestamp.

    logs.setup("info", fmt="%(name)s %(levelname)s %(message)s")
"""
from __future__ import annotations

import logging
import os
import sys

LEVELS = ("debug", "info", "warning", "error")

# logging level -> syslog priority (sd-daemon prefixes)
PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3,
            logging.CRITICAL: 2}


def journal_stderr() -> bool:
    """Whether stderr is the journal's stream (JOURNAL_STREAM names it)."""
    want = os.environ.get("JOURNAL_STREAM", "")
    if not want:
        return False
    try:
        st = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError):
        return False
    return want == f"{st.st_dev}:{st.st_ino}"


class JournalFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        prio = PRIORITY.get(record.levelno, 6 if record.levelno < logging.WARNING else 3)
        text = super().format(record)
        # every line of a multi-line message (a traceback) keeps the priority
        return "\n".join(f"<{prio}>{line}" for line in text.split("\n"))


def setup(level: str, fmt: str) -> None:
    """Log at ``level`` (one of LEVELS) to stderr; ``fmt`` without the time."""
    handler = logging.StreamHandler(sys.stderr)
    if journal_stderr():
        handler.setFormatter(JournalFormatter(fmt))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s " + fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())

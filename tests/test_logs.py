"""Daemon log lines carry journald's priority prefix under systemd, and only there."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def run_logging(env_journal: bool, tmp_path) -> str:
    err = tmp_path / "stderr"
    code = textwrap.dedent("""
        import logging, os, sys
        from lingjun import logs
        if os.environ.get("SET_JOURNAL"):
            st = os.fstat(2)
            os.environ["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
        logs.setup("info", "%(name)s %(levelname)s %(message)s")
        log = logging.getLogger("lingjund.test")
        log.debug("hidden")
        log.info("registered")
        log.warning("node1 not responding")
        log.error("two\\nlines")
    """)
    env = dict(os.environ, SET_JOURNAL="1" if env_journal else "")
    env.pop("JOURNAL_STREAM", None)
    with open(err, "w") as f:
        subprocess.run([sys.executable, "-c", code], stderr=f, env=env, check=True, timeout=60)
    return err.read_text()


def test_under_journald_each_line_has_its_priority_and_no_timestamp(tmp_path):
    assert run_logging(True, tmp_path).splitlines() == [
        "<6>lingjund.test INFO registered",
        "<4>lingjund.test WARNING node1 not responding",
        "<3>lingjund.test ERROR two",
        "<3>lines",
    ]


def test_elsewhere_lines_are_plain_with_a_timestamp(tmp_path):
    lines = run_logging(False, tmp_path).splitlines()
    assert len(lines) == 4 and not any(line.startswith("<") for line in lines), lines
    assert lines[0].endswith(" lingjund.test INFO registered") and lines[0][:4].isdigit(), lines


def test_journal_stream_naming_another_file_is_not_taken_for_the_journal(tmp_path):
    err = tmp_path / "stderr"
    env = dict(os.environ, JOURNAL_STREAM="1:2")
    with open(err, "w") as f:
        subprocess.run([sys.executable, "-c", "import logging; from lingjun import logs; "
                        "logs.setup('info', '%(message)s'); logging.getLogger().warning('x')"],
                       stderr=f, env=env, check=True, timeout=60)
    assert not err.read_text().startswith("<"), err.read_text()

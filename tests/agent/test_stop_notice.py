"""A stopped batch job's output gets slurmstepd's line, and only where its owner could write.

The agent (root) writes "slurmstepd-NODE: error: *** JOB N ON NODE CANCELLED
AT TIME [DUE TO CAUSE] ***" into the batch script's stderr when the
controller stops the job; the path is the user's to choose, so a symlink or a
file of someone else's gets nothing."""
from __future__ import annotations

import os
import re

from lingjun import auth
from lingjun_agent.runner import Agent


class _Running:
    pid = 1


def _agent(tmp_path) -> Agent:
    return Agent("n1", "127.0.0.1:1", str(tmp_path / "agent"), cpus=1, memory_mb=100,
                 key=auth.ClusterKey.from_bytes(b"k" * 32))


def _running(a: Agent, jid: int, path, uid: int) -> None:
    a.batches[jid] = _Running()
    a.batch_stderr[jid] = (str(path), uid)


def test_the_line_names_the_job_the_node_and_why(tmp_path):
    a = _agent(tmp_path)
    out = tmp_path / "job.out"
    out.write_text("started\n")
    _running(a, 5, out, os.getuid())
    a._announce(5, "TIME LIMIT")
    a._announce(5, "")
    lines = out.read_text().splitlines()
    assert lines[0] == "started"
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
    assert re.fullmatch(rf"slurmstepd-n1: error: \*\*\* JOB 5 ON n1 CANCELLED AT {stamp} "
                        r"DUE TO TIME LIMIT \*\*\*", lines[1]), lines
    assert re.fullmatch(rf"slurmstepd-n1: error: \*\*\* JOB 5 ON n1 CANCELLED AT {stamp} \*\*\*",
                        lines[2]), lines


def test_nothing_is_written_through_a_symlink_or_into_another_users_file(tmp_path):
    a = _agent(tmp_path)
    victim = tmp_path / "root-owned"
    victim.write_text("precious\n")
    link = tmp_path / "job.out"
    link.symlink_to(victim)
    _running(a, 6, link, os.getuid())
    a._announce(6, "PREEMPTION")
    assert victim.read_text() == "precious\n"
    _running(a, 7, victim, os.getuid() + 4242)          # not the job owner's file
    a._announce(7, "PREEMPTION")
    assert victim.read_text() == "precious\n"


def test_a_job_whose_script_is_not_running_here_gets_no_line(tmp_path):
    a = _agent(tmp_path)
    out = tmp_path / "job.out"
    out.write_text("")
    a.batch_stderr[8] = (str(out), os.getuid())         # its script has ended
    a._announce(8, "")
    assert out.read_text() == ""

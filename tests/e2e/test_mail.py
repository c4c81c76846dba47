"""sbatch --mail-type/--mail-user through the real commands, mailed by a stub MailProg.

A local cluster whose ``[controller] mail_prog`` is a script that records
each call (its arguments, its stdin and its SLURM_* environment). Jobs that
start, end well, fail and are cancelled while pending each mail the
subject Slurm would; a cluster whose MailProg cannot run refuses
``--mail-type`` at submission, saying why, and keeps no job. MailProg runs
as the controller's user: an ordinary user's ``--mail-user`` that a mail
program would read as its option (``--exec=...``, ``-A FILE``) is refused at
submission, and the recipient always follows ``--``.
"""
from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import sys
import time

import pytest

from tests.e2e import users as u
from tests.e2e.conftest import Cluster, wait_for

CAROL = f"ljcarol{os.getpid() % 100000}"


@pytest.fixture(scope="module")
def mailing():
    # world-readable: an ordinary user's commands reach the credential socket
    root = u.world_readable_tmp("lj-mail-")
    log = root / "sent.jsonl"
    prog = root / "mail"
    prog.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    f"with open({str(log)!r}, 'a') as f:\n"
                    "    f.write(json.dumps({'argv': sys.argv[1:], 'stdin': sys.stdin.read(),\n"
                    "        'env': {k: v for k, v in os.environ.items() if k.startswith('SLURM_')}}) + '\\n')\n")
    prog.chmod(0o755)
    c = Cluster(root, nodes=1, up_args=("--mail-prog", str(prog)))
    c.up()
    try:
        c.wait_nodes_up()
        yield c, log
    finally:
        c.down()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def carol(mailing):
    c, _ = mailing
    user = u.add_user(CAROL, c.root / "home" / CAROL)
    (c.root / "home").chmod(0o755)
    bin_dir = u.make_user_python(c.root / "python")
    env = u.user_env(user, bin_dir, c.address, c.state / "auth.sock")
    try:
        yield lambda *argv: u.run_as(user, [str(bin_dir / argv[0]), *argv[1:]], env)
    finally:
        u.remove_user(CAROL)


def mails_of(log, job: int, count: int) -> list[dict]:
    def got():
        lines = log.read_text().splitlines() if log.exists() else []
        mine = [m for m in map(json.loads, lines) if m["env"].get("SLURM_JOB_ID") == str(job)]
        return mine if len(mine) >= count else None
    mine = wait_for(f"{count} mails of job {job}", got, 30)
    time.sleep(0.3)          # and no more than that
    again = got()
    assert len(again) == count, [m["argv"] for m in again]
    return mine


def test_all_mails_began_and_ended_to_the_submitter(mailing):
    c, log = mailing
    job = c.sbatch("--mail-type=ALL", "-J", "hello", "-o", "/dev/null", "--wrap", "sleep 1")
    c.wait_state(job, "COMPLETED")
    began, ended = mails_of(log, job, 2)
    user = getpass.getuser()
    assert began["argv"][0] == "-s" and began["argv"][2:] == ["--", user]
    assert re.fullmatch(rf"Slurm Job_id={job} Name=hello Began, Queued time 00:00:0\d",
                        began["argv"][1]), began["argv"]
    assert re.fullmatch(rf"Slurm Job_id={job} Name=hello Ended, Run time 00:00:0[1-3], "
                        r"COMPLETED, ExitCode 0", ended["argv"][1]), ended["argv"]
    assert ended["argv"][2:] == ["--", user] and ended["stdin"] == ""
    assert ended["env"]["SLURM_JOB_NAME"] == "hello"
    assert ended["env"]["SLURM_JOB_STATE"] == "COMPLETED"
    assert ended["env"]["SLURM_JOB_MAIL_TYPE"] == "Ended"
    assert ended["env"]["SLURM_JOB_USER"] == user


def test_fail_mails_the_mail_user_with_the_exit_code(mailing):
    c, log = mailing
    job = c.sbatch("--mail-type=FAIL", "--mail-user=ops@example.org", "-J", "bad", "-o",
                   "/dev/null", "--wrap", "exit 3")
    c.wait_state(job, "FAILED")
    (failed,) = mails_of(log, job, 1)
    assert failed["argv"][0] == "-s" and failed["argv"][2:] == ["--", "ops@example.org"]
    assert re.fullmatch(rf"Slurm Job_id={job} Name=bad Failed, Run time 00:00:0[0-2], FAILED, "
                        r"ExitCode 3", failed["argv"][1]), failed["argv"]
    assert failed["env"]["SLURM_JOB_EXIT_CODE_MAX"] == "3"


@pytest.mark.parametrize("recipient", ["--exec=!id>/tmp/x", "-A/etc/shadow", "|id"],
                         ids=["mailutils' --exec", "an attachment", "a pipe"])
def test_an_ordinary_users_mail_user_never_becomes_an_option_of_mail_prog(mailing, carol, recipient):
    c, log = mailing
    before = c.run(["squeue", "-h", "-o", "%i"], check=True).stdout
    p = carol("sbatch", "--mail-type=ALL", f"--mail-user={recipient}", "-o", "/dev/null",
              "--wrap", "true")
    assert (p.returncode, p.stdout) == (1, ""), p
    assert p.stderr == (f"sbatch: error: Batch job submission failed: --mail-user={recipient} "
                        "invalid: not a user name or a mail address\n")
    assert c.run(["squeue", "-h", "-o", "%i"], check=True).stdout == before
    job = int(carol("sbatch", "--parsable", "--mail-type=END", "--mail-user=carol.ops@example.org",
                    "-o", "/dev/null", "--wrap", "true").stdout)
    (ended,) = mails_of(log, job, 1)
    assert ended["argv"][2:] == ["--", "carol.ops@example.org"]
    assert ended["env"]["SLURM_JOB_USER"] == CAROL


def test_end_of_a_job_cancelled_while_pending(mailing):
    c, log = mailing
    job = c.sbatch("--mail-type=END", "-H", "-J", "held", "-o", "/dev/null", "--wrap", "true")
    c.run(["scancel", str(job)], check=True)
    (ended,) = mails_of(log, job, 1)
    assert ended["argv"][1] == f"Slurm Job_id={job} Name=held Ended, Run time 00:00:00, CANCELLED, ExitCode 0"


def test_no_mail_without_mail_type(mailing):
    c, log = mailing
    job = c.sbatch("-o", "/dev/null", "--wrap", "true")
    c.wait_state(job, "COMPLETED")
    time.sleep(0.5)
    lines = log.read_text().splitlines() if log.exists() else []
    assert not [m for m in map(json.loads, lines) if m["env"].get("SLURM_JOB_ID") == str(job)]


def test_mail_type_refused_when_mail_prog_cannot_run(mailing):
    c, _ = mailing
    conf = c.state / "lingjun.toml"
    good = conf.read_text()
    assert "mail_prog = " in good
    try:
        conf.write_text(re.sub(r'mail_prog = ".*"', 'mail_prog = "/nonexistent/mail"', good))
        c.run(["scontrol", "reconfigure"], check=True)
        before = c.run(["squeue", "-h", "-o", "%i"], check=True).stdout
        p = c.run(["sbatch", "--mail-type=END", "-o", "/dev/null", "--wrap", "true"])
        assert p.returncode == 1, p
        assert p.stderr == ("sbatch: error: Batch job submission failed: --mail-type is not "
                            "available: MailProg /nonexistent/mail is not an executable file\n")
        assert p.stdout == ""
        assert c.run(["squeue", "-h", "-o", "%i"], check=True).stdout == before
        show = c.run(["scontrol", "show", "config"], check=True).stdout
        assert re.search(r"^MailProg\s+= /nonexistent/mail$", show, re.M), show
        job = c.sbatch("-o", "/dev/null", "--wrap", "true")      # without --mail-type: taken
        c.wait_state(job, "COMPLETED")
    finally:
        conf.write_text(good)
        c.run(["scontrol", "reconfigure"], check=True)


def _array_mails(log, array: int) -> list[dict]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [m for m in map(json.loads, lines) if m["env"].get("SLURM_ARRAY_JOB_ID") == str(array)]


def _array_done(c: Cluster, array: int) -> bool:
    out = c.run(["squeue", "-h", "-r", "-j", str(array), "-o", "%i"]).stdout
    return not out.strip()


def test_an_array_is_mailed_as_one_began_and_ended_with_its_exit_codes(mailing):
    """Without ARRAY_TASKS Slurm mails the array through its master record: one
    BEGIN when the first task starts, one FAIL (END when all went well) after
    the last, with the lowest and highest exit code ("Mixed" when some failed),
    and no per-task mail."""
    c, log = mailing
    array = c.sbatch("--array=1-3", "--mail-type=ALL", "-J", "sweep", "-o", "/dev/null",
                     "--wrap", 'test "$SLURM_ARRAY_TASK_ID" != 2 || exit 2')
    wait_for("the array's end", lambda: _array_done(c, array), 60)
    mails = wait_for("two mails of the array", lambda: (m := _array_mails(log, array))
                     and len(m) >= 2 and m, 30)
    time.sleep(0.5)                                  # and no more than that
    subjects = [m["argv"][1] for m in _array_mails(log, array)]
    assert subjects == [f"Slurm Array Summary Job_id={array}_* ({array}) Name=sweep Began",
                        f"Slurm Array Summary Job_id={array}_* ({array}) Name=sweep Failed, "
                        "Mixed, ExitCode [0-2]"], subjects       # Slurm 22.05's words, captured
    ended = mails[1]["env"]
    assert ended["SLURM_JOB_ID"] == str(array) and "SLURM_ARRAY_TASK_ID" not in ended
    assert (ended["SLURM_JOB_EXIT_CODE_MIN"], ended["SLURM_JOB_EXIT_CODE_MAX"]) == ("0", "2")


def test_array_tasks_mails_each_task(mailing):
    """With ARRAY_TASKS each task is mailed as a job, its start included (a task
    is a row split off the array as it starts: that is its PENDING -> RUNNING)."""
    c, log = mailing
    array = c.sbatch("--array=1-2", "--mail-type=BEGIN,END,ARRAY_TASKS", "-J", "each", "-o",
                     "/dev/null", "--wrap", "true")
    wait_for("the array's end", lambda: _array_done(c, array), 60)
    wait_for("two mails per task", lambda: len(_array_mails(log, array)) >= 4, 30)
    time.sleep(0.5)
    subjects = [m["argv"][1] for m in _array_mails(log, array)]
    assert len(subjects) == 4, subjects
    for task in (1, 2):
        mine = [s for s in subjects if s.startswith(f"Slurm Array Task Job_id={array}_{task} (")]
        assert len(mine) == 2, subjects
        assert re.fullmatch(rf"Slurm Array Task Job_id={array}_{task} \(\d+\) Name=each Began, "
                            r"Queued time 00:00:0\d", mine[0]), subjects
        assert re.fullmatch(rf"Slurm Array Task Job_id={array}_{task} \(\d+\) Name=each Ended, "
                            r"Run time 00:00:0\d, COMPLETED, ExitCode 0", mine[1]), subjects

"""--mail-type: which notice a state change sends, its subject in Slurm's words,
and the Mailer sending it through a stub MailProg that records its arguments.
"""
from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import replace

import pytest

from lingjun import config, slurm
from lingjun.v1 import api_pb2
from lingjund.service import errors, mail
from lingjund.service.context import Controller
from lingjund.store.store import JobRecord, Store


def rec(state: str = slurm.PENDING, *, mail_type: str = "ALL_WORDS", job_id: int = 7,
        name: str = "train", submit: float = 1000.0, start: float = 0.0, end: float = 0.0,
        mail_user: str = "", **fields) -> JobRecord:
    words = "BEGIN,END,FAIL,REQUEUE" if mail_type == "ALL_WORDS" else mail_type
    return JobRecord(job_id=job_id, name=name, user="alice", uid=1000, partition="debug",
                     state=state, reason="", priority=1, submit_time=submit, time_limit_min=10,
                     spec=api_pb2.JobSpec(mail_type=words, mail_user=mail_user, work_dir="/w"),
                     start_time=start, end_time=end, **fields)


PENDING, RUNNING = rec(), rec(slurm.RUNNING, start=1001.0)


@pytest.mark.parametrize("before,after,want", [
    (PENDING, RUNNING, ["BEGIN"]),
    (PENDING, rec(slurm.RUNNING, start=1001.0, mail_type="END"), []),
    (RUNNING, rec(slurm.COMPLETED, start=1001.0, end=1010.0), ["END"]),
    (RUNNING, rec(slurm.CANCELLED, start=1001.0, end=1010.0), ["END"]),
    (RUNNING, rec(slurm.FAILED, start=1001.0, end=1010.0, exit_code=3), ["FAIL"]),
    (RUNNING, rec(slurm.TIMEOUT, start=1001.0, end=1601.0), ["FAIL"]),
    (RUNNING, rec(slurm.NODE_FAIL, start=1001.0, end=1010.0, mail_type="END"), ["END"]),
    (RUNNING, rec(slurm.OUT_OF_MEMORY, start=1001.0, end=1010.0, mail_type="BEGIN"), []),
    (RUNNING, rec(slurm.PENDING, mail_type="REQUEUE"), ["REQUEUE"]),
    (RUNNING, rec(slurm.PENDING, mail_type="END"), []),
    (PENDING, rec(slurm.CANCELLED, end=1005.0), ["END"]),
    (PENDING, rec(slurm.RUNNING, start=1001.0, mail_type=""), []),
], ids=[
    "a start sends BEGIN", "a start sends nothing when only END was asked",
    "COMPLETED sends END", "CANCELLED while running sends END", "FAILED sends FAIL",
    "TIMEOUT is a failure: FAIL", "NODE_FAIL sends END when only END was asked",
    "an end sends nothing when only BEGIN was asked", "back in the queue sends REQUEUE",
    "a requeue sends nothing without REQUEUE", "cancelled while pending sends END",
    "no --mail-type, no notice",
])
def test_notices(before, after, want):
    assert mail.notices(before, after) == want


@pytest.mark.parametrize("job,kind,now,started,want", [
    (rec(slurm.RUNNING, start=1001.0), "BEGIN", 1001.0, 0.0,
     "Slurm Job_id=7 Name=train Began, Queued time 00:00:01"),
    (rec(slurm.COMPLETED, start=1001.0, end=1601.0), "END", 1601.0, 0.0,
     "Slurm Job_id=7 Name=train Ended, Run time 00:10:00, COMPLETED, ExitCode 0"),
    (rec(slurm.FAILED, start=1001.0, end=1005.0, exit_code=1), "FAIL", 1005.0, 0.0,
     "Slurm Job_id=7 Name=train Failed, Run time 00:00:04, FAILED, ExitCode 1"),
    (rec(slurm.CANCELLED, start=1001.0, end=1010.0, exit_signal=15), "END", 1010.0, 0.0,
     "Slurm Job_id=7 Name=train Ended, Run time 00:00:09, CANCELLED"),
    (rec(slurm.CANCELLED, end=1005.0), "END", 1005.0, 0.0,
     "Slurm Job_id=7 Name=train Ended, Run time 00:00:00, CANCELLED, ExitCode 0"),
    (rec(slurm.PENDING), "REQUEUE", 1181.0, 1001.0,
     "Slurm Job_id=7 Name=train Requeued, Run time 00:03:00"),
    (rec(slurm.RUNNING, start=1001.0), "TIME_LIMIT_80", 1481.0, 0.0,
     "Slurm Job_id=7 Name=train Reached 80% of time limit, Run time 00:08:00"),
    (rec(slurm.TIMEOUT, start=1001.0, end=1601.0), "TIME_LIMIT", 1601.0, 0.0,
     "Slurm Job_id=7 Name=train Reached time limit, Run time 00:10:00"),
    (rec(slurm.RUNNING, start=1002.0, job_id=15, name="sweep", array_job_id=12, array_task_id=3),
     "BEGIN", 1002.0, 0.0, "Slurm Array Task Job_id=12_3 (15) Name=sweep Began, Queued time 00:00:02"),
    (rec(slurm.COMPLETED, start=1000.0, end=1000.0 + 86400 + 3661), "END", 0.0, 0.0,
     "Slurm Job_id=7 Name=train Ended, Run time 1-01:01:01, COMPLETED, ExitCode 0"),
], ids=["Began", "Ended", "Failed", "Ended by a signal: no ExitCode",
        "cancelled while pending: run time zero", "Requeued", "80% of the time limit",
        "time limit", "an array task", "a run of more than a day"])
def test_subject_in_slurms_words(job, kind, now, started, want):
    assert mail.subject(job, kind, now, run_started=started) == want


def test_time_limit_notices_are_shares_of_the_run():
    job = rec(slurm.RUNNING, start=1000.0, mail_type="TIME_LIMIT_50,TIME_LIMIT_90,TIME_LIMIT")
    assert mail.time_limit_notices(job) == [(1300.0, "TIME_LIMIT_50"), (1540.0, "TIME_LIMIT_90"),
                                            (1600.0, "TIME_LIMIT")]
    assert mail.time_limit_notices(replace(job, time_limit_min=-1)) == []
    assert mail.time_limit_notices(replace(job, state=slurm.PENDING)) == []


@pytest.mark.parametrize("prog,err", [
    ("", "--mail-type is not available: no MailProg is configured ([controller] mail_prog)"),
    ("/nonexistent/mail", "--mail-type is not available: MailProg /nonexistent/mail is not an executable file"),
    ("{tmp}/mail", "--mail-type is not available: MailProg {tmp}/mail is not an executable file"),
], ids=["none configured", "a missing program", "a file that cannot run"])
def test_mail_type_refused_without_a_mail_prog(prog, err, tmp_path):
    (tmp_path / "mail").write_text("#!/bin/sh\n")
    (tmp_path / "mail").chmod(0o644)
    prog, err = prog.format(tmp=tmp_path), err.format(tmp=tmp_path)
    with pytest.raises(errors.MailUnavailable) as e:
        mail.check_can_mail(prog, "END")
    assert str(e.value) == err
    mail.check_can_mail(prog, "")       # no --mail-type: nothing to refuse


@pytest.mark.parametrize("value,ok", [
    ("alice", True), ("svc-bot.2", True), ("ops@example.org", True), ("a.b+tag@mail.example.co", True),
    ("--exec=!id>/tmp/x", False), ("-a/etc/shadow", False), ("-Aroot", False),
    ("|id", False), ("/etc/passwd", False), ("a b@example.org", False), ("a@b,c@d", False),
    ("host!user", False), ("a@-bad.org", False), (".dot@example.org", False),
    ("x" * 250 + "@example.org", False),
], ids=["a user name", "a name with a dot and a dash", "an address", "an address with a tag",
        "a long option of mailutils' mail", "an attachment option", "a short option with its value",
        "a pipe", "a file", "a space", "two recipients", "a bang path", "a domain beginning with -",
        "a local part beginning with a dot", "longer than an address may be"])
def test_only_a_user_name_or_one_address_may_reach_mail_prog(value, ok):
    assert mail.recipient_ok(value) is ok
    if ok:
        mail.check_mail_user(value)
    else:
        with pytest.raises(errors.InvalidRequest, match="not a user name or a mail address"):
            mail.check_mail_user(value)


# -- the Mailer, over a real store, sending through a stub MailProg ----------------------
def stub_mail_prog(tmp_path):
    log = tmp_path / "sent.jsonl"
    prog = tmp_path / "mail"
    prog.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    f"with open({str(log)!r}, 'a') as f:\n"
                    "    f.write(json.dumps({'argv': sys.argv[1:], 'stdin': sys.stdin.read(),\n"
                    "        'env': {k: v for k, v in os.environ.items() if k.startswith('SLURM_')}}) + '\\n')\n")
    prog.chmod(0o755)
    return prog, log


def sent(log) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_mailer_end_to_end_over_a_store(tmp_path):
    prog, log = stub_mail_prog(tmp_path)
    store = Store(str(tmp_path / "db.sqlite"))
    ctl = Controller(config=config.parse(f'cluster_name = "c1"\n[controller]\nmail_prog = "{prog}"\n'),
                     store=store)

    now = int(time.time())
    submit = now - 40

    def insert(spec: api_pb2.JobSpec) -> int:
        with store.transaction():
            return store.insert_job(name="train", user="alice", uid=1000, partition="debug",
                                    state=slurm.PENDING, reason="", priority=1,
                                    submit_time=submit, time_limit_min=1, spec=spec)

    async def scenario() -> None:
        mailer = mail.Mailer(ctl)
        store.watch_states(mailer.job_changed)
        mailer.start()
        a = insert(api_pb2.JobSpec(mail_type="BEGIN,TIME_LIMIT_50", mail_user="bob@example.org",
                                   work_dir="/w"))
        b = insert(api_pb2.JobSpec(mail_type="FAIL", work_dir="/w"))
        c = insert(api_pb2.JobSpec(work_dir="/w"))                 # no --mail-type
        # stored before recipients were checked at submission: never reaches MailProg
        d = insert(api_pb2.JobSpec(mail_type="BEGIN", mail_user="--exec=!id", work_dir="/w"))
        # a started 29.7 s ago with a 1-minute limit: TIME_LIMIT_50 is due in 0.3 s
        with store.transaction():
            store.update_job(a, state=slurm.RUNNING, start_time=now - 29.7, nodes=("n1",))
            store.update_job(b, state=slurm.RUNNING, start_time=now)
            store.update_job(c, state=slurm.RUNNING, start_time=now)
            store.update_job(d, state=slurm.RUNNING, start_time=now)
        with pytest.raises(KeyError):
            with store.transaction():        # rolled back: tells nobody
                store.update_job(b, state=slurm.COMPLETED, end_time=now)
                raise KeyError("roll back")
        with store.transaction():            # changed twice in one commit: first and last told
            store.update_job(b, state=slurm.COMPLETED, end_time=now + 1)
            store.update_job(b, state=slurm.FAILED, end_time=now + 2, exit_code=3)
        with store.transaction():
            store.update_job(c, state=slurm.COMPLETED, end_time=now + 1)
        for _ in range(100):
            if len(sent(log)) >= 3:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)             # nothing more comes
        await mailer.close()

    try:
        asyncio.run(scenario())
    finally:
        store.close()
    got = sorted(sent(log), key=lambda m: m["argv"][1])
    subjects = [m["argv"][1] for m in got]
    assert len(got) == 3, subjects
    began, half, failed = got
    assert began["argv"][0] == "-s" and began["argv"][2:] == ["--", "bob@example.org"]
    assert began["argv"][1] == "Slurm Job_id=1 Name=train Began, Queued time 00:00:10"
    assert half["argv"][1].startswith("Slurm Job_id=1 Name=train Reached 50% of time limit, Run time 00:00:")
    assert failed["argv"] == ["-s", "Slurm Job_id=2 Name=train Failed, Run time 00:00:02, FAILED, ExitCode 3",
                              "--", "alice"]
    assert failed["stdin"] == ""
    assert failed["env"]["SLURM_JOB_ID"] == "2" and failed["env"]["SLURM_JOB_STATE"] == "FAILED"
    assert failed["env"]["SLURM_JOB_MAIL_TYPE"] == "Failed"
    assert failed["env"]["SLURM_JOB_EXIT_CODE_MAX"] == "3"
    assert failed["env"]["SLURM_CLUSTER_NAME"] == "c1"
    assert began["env"]["SLURM_JOB_NODELIST"] == "n1"

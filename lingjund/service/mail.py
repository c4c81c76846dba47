"""--mail-type notices, sent through the configured MailProg as Slurm sends them.

Slurm runs ``MailProg -s SUBJECT USER`` (stdin empty, the subject says it
all) with the job described in ``SLURM_JOB_*`` variables. Here the recipient
comes after ``--`` (``MailProg -s SUBJECT -- USER``), and ``--mail-user`` must
be a user name or one mail address (``recipient_ok``), checked at submission
and again before each send: the controller runs MailProg, so a recipient
such as ``--exec=!id`` or ``-A/etc/shadow`` would otherwise reach the mail
program as its option (GNU mailutils' ``mail`` runs ``--exec``'s command;
``-A`` attaches a file), and ``|cmd`` or ``/path`` recipients are pipes and
files to some mail programs. A MailProg wrapper must take ``--`` as
getopt-based mail programs (bsd-mailx, mailutils) do. The subjects, as
slurmctld's agent.c writes them:

    Slurm Job_id=7 Name=train Began, Queued time 00:00:01
    Slurm Job_id=7 Name=train Ended, Run time 00:10:00, COMPLETED, ExitCode 0
    Slurm Job_id=7 Name=train Failed, Run time 00:00:04, FAILED, ExitCode 1
    Slurm Job_id=7 Name=train Failed, Run time 00:10:00, TIMEOUT, ExitCode 0
    Slurm Job_id=7 Name=train Ended, Run time 00:00:09, CANCELLED
                                       (killed by a signal: no ExitCode)
    Slurm Job_id=7 Name=train Requeued, Run time 00:03:00
    Slurm Job_id=7 Name=train Reached 80% of time limit, Run time 00:08:00
    Slurm Array Task Job_id=12_3 (15) Name=sweep Began, Queued time 00:00:02

Which notice a state change sends (``notices``), as job_completion_logger
decides: a run that starts BEGIN; an end in COMPLETED or CANCELLED END; any
other end (FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, DEADLINE, PREEMPTED)
FAIL, or END when only END was asked for; a running job back in the queue
REQUEUE. TIME_LIMIT_50/80/90 and TIME_LIMIT are timers from the start
(``time_limit_notices``), sent while the job still runs that run.

The store tells the ``Mailer`` of each committed state change
(``Store.watch_states``); it decides and queues there, and sends from
tasks of its own: MailProg runs as a child process awaited by the event
loop, never inside a transaction or a scheduling pass, at most
``MAX_SENDING`` at once, each given ``MAIL_PROG_TIMEOUT_S`` (Slurm's 120).

Arrays. With ARRAY_TASKS each task is mailed as a job of its own ("Slurm
Array Task Job_id=12_3 (15) ..."). Without it, as slurmctld's mail_job_info
does through the array's master record, the array is mailed as one: BEGIN
when its first task starts, REQUEUE when a task is requeued, and END or FAIL
once every task has ended (none running, none left pending), with the exit
codes of all its tasks:

    Slurm Array Summary Job_id=12_* (12) Name=sweep Began
    Slurm Array Summary Job_id=12_* (12) Name=sweep Ended, COMPLETED, ExitCode [0-0]
    Slurm Array Summary Job_id=12_* (12) Name=sweep Failed, Mixed, ExitCode [0-2]
    Slurm Array Summary Job_id=12_* (12) Name=sweep Ended, Mixed, MaxSignal [9]

FAIL (when asked) once any task failed, else END -- Slurm 22.05 mails
"Failed, Mixed, ExitCode [0-2]" though its master record (the task that
keeps the array's id) COMPLETED; the state word is that record's, or
"Mixed" when some tasks exited 0 and some did not. The ``ArrayBook`` per array (only arrays
that asked for mail) counts its live tasks, so no notice scans the array;
after a controller restart ``start`` rebuilds the books from the store.
"""
from __future__ import annotations

import asyncio
import heapq
import logging
import os
import re
import threading
from dataclasses import dataclass

from lingjun import slurm
from lingjund.service import errors
from lingjund.service.context import Controller
from lingjund.store.records import JobRecord

log = logging.getLogger("lingjund.mail")

MAIL_PROG_TIMEOUT_S = 120.0
MAX_SENDING = 8

BEGIN, END, FAIL, REQUEUE = "BEGIN", "END", "FAIL", "REQUEUE"
TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, TIME_LIMIT_50 = (
    "TIME_LIMIT", "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50")

# Slurm's _mail_type_str
WORDS = {
    BEGIN: "Began", END: "Ended", FAIL: "Failed", REQUEUE: "Requeued",
    TIME_LIMIT: "Reached time limit", TIME_LIMIT_90: "Reached 90% of time limit",
    TIME_LIMIT_80: "Reached 80% of time limit", TIME_LIMIT_50: "Reached 50% of time limit",
}
# The share of its time limit a run has used when each timer's notice goes.
TIME_SHARES = ((TIME_LIMIT_50, 0.5), (TIME_LIMIT_80, 0.8), (TIME_LIMIT_90, 0.9), (TIME_LIMIT, 1.0))
ENDED_WELL = frozenset({slurm.COMPLETED, slurm.CANCELLED})


def summarised(job: JobRecord) -> bool:
    """An array's record mailed as part of the whole array (no ARRAY_TASKS)."""
    return bool(job.array_job_id) and "ARRAY_TASKS" not in asked(job)


def wait_status(job: JobRecord) -> int:
    """The job's end as a wait(2) status: Slurm keeps the array's lowest and highest."""
    return job.exit_signal & 0x7F if job.exit_signal else (job.exit_code & 0xFF) << 8


class ArrayBook:
    """One array's mail so far: whether it began, its tasks still live (running
    or requeued), the lowest and highest wait status of its ended tasks."""
    __slots__ = ("begun", "live", "low", "high", "requeued", "state", "failed")

    def __init__(self) -> None:
        self.begun = False
        self.live: set[int] = set()
        self.low: int | None = None
        self.high: int | None = None
        self.requeued = False
        self.state = ""             # the state of the record that keeps the array's id
        self.failed = False         # a task ended other than COMPLETED/CANCELLED, exit 0

    def ended(self, job: JobRecord) -> None:
        self.live.discard(job.job_id)
        if job.job_id == job.array_job_id:
            self.state = job.state
        if job.array_task_id >= 0:          # a task (not the pending rest, cancelled)
            st = wait_status(job)
            self.low = st if self.low is None else min(self.low, st)
            self.high = st if self.high is None else max(self.high, st)
            if job.state not in ENDED_WELL or st:
                self.failed = True


def summary_subject(job: JobRecord, kind: str, book: ArrayBook) -> str:
    """Slurm's subject for a whole array (its master record's mail)."""
    head = (f"Slurm Array Summary Job_id={job.array_job_id}_* ({job.array_job_id}) "
            f"Name={job.name} {WORDS[kind]}")
    return head + (_summary_end(book)[0] if kind in (END, FAIL) else "")


def _summary_end(book: ArrayBook) -> tuple[str, dict[str, str]]:
    """", STATE, ExitCode [lo-hi]" and its variables, as _set_job_term_info
    summarises an array's tasks."""
    low, high = book.low, book.high
    env: dict[str, str] = {}
    exited = lambda st: st & 0x7F == 0           # noqa: E731  (WIFEXITED)
    if low is None or high is None:
        text, env["SLURM_JOB_EXIT_CODE_MAX"] = f", {book.state}", "0"
    elif exited(low) and exited(high):
        lo, hi = low >> 8, high >> 8
        state = "Mixed" if lo == 0 and hi > 0 else book.state
        text = f", {state}, ExitCode [{lo}-{hi}]"
        env.update(SLURM_JOB_EXIT_CODE_MIN=str(lo), SLURM_JOB_EXIT_CODE_MAX=str(hi))
    elif not exited(high):
        text = f", Mixed, MaxSignal [{high & 0x7F}]"
        env["SLURM_JOB_TERM_SIGNAL_MAX"] = str(high & 0x7F)
    else:
        text = f", Mixed, MaxExitCode [{high >> 8}]"
        env["SLURM_JOB_EXIT_CODE_MAX"] = str(high >> 8)
    if book.requeued:
        text += ", with requeued tasks"
    return text, env


def asked(job: JobRecord) -> frozenset[str]:
    """The --mail-type words of ``job`` ("END,FAIL" -> {END, FAIL})."""
    t = job.spec.mail_type
    return frozenset(t.split(",")) if t else frozenset()


# A user name as useradd takes one, or one address: a local part of letters,
# digits and ._%+=- (not first: - or .) and a domain of dotted labels. Nothing
# a mail program reads as an option, a pipe (|cmd), a file (/path), a second
# recipient or a bang path.
_USER_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}\$?"
_ADDRESS = (r"[A-Za-z0-9_%+=][A-Za-z0-9._%+=-]{0,63}"
            r"@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
_RECIPIENT = re.compile(rf"(?:{_USER_NAME}|{_ADDRESS})")
MAX_RECIPIENT_CHARS = 254


def recipient_ok(value: str) -> bool:
    """Whether ``value`` may be handed to MailProg as its recipient.

    >>> [recipient_ok(v) for v in ("alice", "ops@example.org", "--exec=!id>/tmp/x", "-a/etc/shadow")]
    [True, True, False, False]
    """
    return len(value) <= MAX_RECIPIENT_CHARS and _RECIPIENT.fullmatch(value) is not None


def check_mail_user(mail_user: str) -> None:
    """At submission: a --mail-user that is neither a user name nor an address is refused."""
    if mail_user and not recipient_ok(mail_user):
        raise errors.InvalidRequest(f"--mail-user={mail_user} invalid: "
                                    "not a user name or a mail address")


def check_can_mail(mail_prog: str, mail_type: str) -> None:
    """At submission: --mail-type without a MailProg that can run is refused,
    not accepted and never honoured."""
    if not mail_type:
        return
    if not mail_prog:
        raise errors.MailUnavailable("--mail-type is not available: no MailProg is configured "
                              "([controller] mail_prog)")
    if not (os.path.isfile(mail_prog) and os.access(mail_prog, os.X_OK)):
        raise errors.MailUnavailable(f"--mail-type is not available: MailProg {mail_prog} "
                              "is not an executable file")


def notices(before: JobRecord, after: JobRecord) -> list[str]:
    """The notices a committed state change sends (of those the job asked for)."""
    want = asked(after)
    if not want:
        return []
    if after.state == slurm.RUNNING and before.state != slurm.RUNNING:
        return [BEGIN] if BEGIN in want else []
    if after.state == slurm.PENDING and before.state == slurm.RUNNING:
        return [REQUEUE] if REQUEUE in want else []
    if after.state in slurm.FINISHED_STATES and before.state not in slurm.FINISHED_STATES:
        if after.state in ENDED_WELL:
            return [END] if END in want else []
        if FAIL in want:
            return [FAIL]
        return [END] if END in want else []
    return []


def time_limit_notices(job: JobRecord) -> list[tuple[float, str]]:
    """(when, notice) of the time-limit notices of ``job``'s run, earliest first."""
    want = asked(job)
    if job.state != slurm.RUNNING or not job.start_time or job.time_limit_min <= 0:
        return []
    limit_s = job.time_limit_min * 60
    return [(job.start_time + limit_s * share, kind) for kind, share in TIME_SHARES
            if kind in want]


def subject(job: JobRecord, kind: str, now: float, *, run_started: float = 0.0) -> str:
    """The subject line Slurm writes for notice ``kind`` of ``job``.
    ``run_started``: for REQUEUE, when the run that ended began (the
    requeued record no longer says)."""
    return f"{_who(job)} {WORDS[kind]}{_time_part(job, kind, now, run_started)}{_end_part(job, kind)}"


def _who(job: JobRecord) -> str:
    if job.array_job_id and job.array_task_id >= 0:
        return (f"Slurm Array Task Job_id={job.array_job_id}_{job.array_task_id} ({job.job_id}) "
                f"Name={job.name}")
    if job.array_job_id:       # the pending remainder of an array
        return f"Slurm Array Summary Job_id={job.array_job_id}_* ({job.job_id}) Name={job.name}"
    return f"Slurm Job_id={job.job_id} Name={job.name}"


def _time_part(job: JobRecord, kind: str, now: float, run_started: float) -> str:
    if kind == BEGIN and job.start_time and job.submit_time:
        return ", Queued time " + _seconds(job.start_time, job.submit_time)
    if kind in (END, FAIL) and job.end_time:
        # a job that never ran: Slurm set its start to its end (Run time 00:00:00)
        return ", Run time " + _seconds(job.end_time, job.start_time or job.end_time)
    if kind == REQUEUE and run_started:
        return ", Run time " + _seconds(now, run_started)
    if kind in WORDS and kind.startswith("TIME_LIMIT") and job.start_time:
        return ", Run time " + _seconds(now, job.start_time)
    return ""


def _seconds(later: float, earlier: float) -> str:
    """Whole seconds between two times, as sacct counts them (each time in whole seconds)."""
    return slurm.format_duration(int(later) - int(earlier))


def _end_part(job: JobRecord, kind: str) -> str:
    if kind not in (END, FAIL):
        return ""
    if job.exit_signal:                        # not WIFEXITED: no exit code to say
        return f", {job.state}"
    if job.array_job_id and job.array_task_id < 0:
        return f", {job.state}, ExitCode [{job.exit_code}-{job.exit_code}]"
    return f", {job.state}, ExitCode {job.exit_code}"


def environment(job: JobRecord, kind: str, cluster: str) -> dict[str, str]:
    """The SLURM_* variables Slurm's MailProg sees (job_common_env_vars + the mail's)."""
    spec = job.spec
    env = {
        "SLURM_CLUSTER_NAME": cluster,
        "SLURM_JOB_ID": str(job.job_id),
        "SLURM_JOB_NAME": job.name,
        "SLURM_JOB_USER": job.user,
        "SLURM_JOB_UID": str(job.uid),
        "SLURM_JOB_GID": str(spec.gid),
        "SLURM_JOB_PARTITION": job.partition,
        "SLURM_JOB_ACCOUNT": spec.account or job.user,
        "SLURM_JOB_WORK_DIR": spec.work_dir,
        "SLURM_JOB_STDOUT": job.stdout_path,
        "SLURM_JOB_STDERR": job.stderr_path or job.stdout_path,
        "SLURM_JOB_STDIN": spec.stdin_path or "/dev/null",
        "SLURM_JOB_NODELIST": slurm.compress_hostlist(list(job.nodes)) if job.nodes else "",
        "SLURM_JOB_STATE": job.state,
        "SLURM_JOB_MAIL_TYPE": WORDS[kind],
    }
    if job.array_job_id:
        env["SLURM_ARRAY_JOB_ID"] = str(job.array_job_id)
        if job.array_task_id >= 0:
            env["SLURM_ARRAY_TASK_ID"] = str(job.array_task_id)
    if kind in (END, FAIL):
        env["SLURM_JOB_EXIT_CODE_MAX"] = "0" if job.exit_signal else str(job.exit_code)
    return env


@dataclass(frozen=True)
class Notice:
    job_id: int
    user: str            # whom to mail: --mail-user, else the job's owner
    subject: str
    env: dict


class Mailer:
    """Queues the notices of committed state changes and sends them off the
    hot path. ``start`` on the controller's loop; ``job_changed`` is the
    store's state watcher."""

    def __init__(self, ctl: Controller):
        self.ctl = ctl
        self.loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Notice] = asyncio.Queue()
        self._sending: set[asyncio.Task] = set()
        self._slots = asyncio.Semaphore(MAX_SENDING)
        self._timers: list[tuple[float, int, float, str]] = []   # (due, job, run start, kind)
        self._timers_changed = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._loop_thread = 0
        self._arrays: dict[int, ArrayBook] = {}     # arrays mailed as one, not yet ended

    # -- deciding (on the writer's thread; quick) ---------------------------------
    def job_changed(self, before: JobRecord, after: JobRecord) -> None:
        if not after.spec.mail_type:
            return
        if self.loop is not None and threading.get_ident() != self._loop_thread:
            self.loop.call_soon_threadsafe(self.job_changed, before, after)
            return
        now = self.ctl.clock()
        if summarised(after):
            self._array_changed(before, after)
        else:
            for kind in notices(before, after):
                started = before.start_time if kind == REQUEUE else 0.0
                self._queue_notice(after, kind, subject(after, kind, now, run_started=started))
        if after.state == slurm.RUNNING and before.state != slurm.RUNNING:
            self._add_timers(after, 0.0)        # a new run: every notice of it is to come

    def _array_changed(self, before: JobRecord, after: JobRecord) -> None:
        """A record of an array mailed as one (see the module's docstring)."""
        want = asked(after)
        book = self._arrays.get(after.array_job_id)
        if book is None:
            book = self._arrays[after.array_job_id] = ArrayBook()
        if after.state == slurm.RUNNING and before.state != slurm.RUNNING:
            book.live.add(after.job_id)
            if not book.begun:
                book.begun = True
                if BEGIN in want:
                    self._queue_summary(after, BEGIN, book)
        elif after.state == slurm.PENDING and before.state == slurm.RUNNING:
            book.requeued = True            # still live: it runs again
            if REQUEUE in want:
                self._queue_summary(after, REQUEUE, book)
        elif after.state in slurm.FINISHED_STATES and before.state not in slurm.FINISHED_STATES:
            book.ended(after)
            if book.live or self._rest_pending(after.array_job_id):
                return
            del self._arrays[after.array_job_id]
            book.state = book.state or after.state
            if book.failed:
                kind = FAIL if FAIL in want else END if END in want else None
            else:
                kind = END if END in want else None
            if kind:
                self._queue_summary(after, kind, book)

    def _rest_pending(self, array_job_id: int) -> bool:
        """Tasks of the array still in its meta record, not started yet."""
        meta = self.ctl.store.live.jobs.get(array_job_id)
        return (meta is not None and meta.array_task_id < 0 and meta.state == slurm.PENDING
                and bool(meta.array_task_str))

    def _queue_summary(self, job: JobRecord, kind: str, book: ArrayBook) -> None:
        env = environment(job, kind, self.ctl.cluster)
        env["SLURM_JOB_ID"] = str(job.array_job_id)
        env.pop("SLURM_ARRAY_TASK_ID", None)
        if kind in (END, FAIL):
            env.pop("SLURM_JOB_EXIT_CODE_MAX", None)
            env.update(_summary_end(book)[1])
            env["SLURM_JOB_STATE"] = book.state
        text = summary_subject(job, kind, book)
        user = self._recipient(job)
        if user:
            log.info("array %d: mail %s to %s: %s", job.array_job_id, kind, user, text)
            self._queue.put_nowait(Notice(job.array_job_id, user, text, env))

    def _rebuild_arrays(self) -> None:
        """After a restart: the books of the arrays with tasks still to end."""
        live = self.ctl.store.live
        ids = {j.array_job_id for j in live.in_states([slurm.PENDING, slurm.RUNNING])
               if j.array_job_id and j.spec.mail_type and summarised(j)}
        for aid in ids:
            book = self._arrays[aid] = ArrayBook()
            for j in self.ctl.store.array_jobs(aid):
                if j.start_time or j.state == slurm.RUNNING:
                    book.begun = True
                if j.restarts:
                    book.requeued = True
                if j.state in (slurm.RUNNING, slurm.PENDING) and j.array_task_id >= 0:
                    book.live.add(j.job_id)
                elif j.state in slurm.FINISHED_STATES:
                    book.ended(j)

    def _queue_notice(self, job: JobRecord, kind: str, text: str) -> None:
        user = self._recipient(job)
        if user:
            log.info("job %d: mail %s to %s: %s", job.job_id, kind, user, text)
            self._queue.put_nowait(Notice(job.job_id, user, text,
                                          environment(job, kind, self.ctl.cluster)))

    @staticmethod
    def _recipient(job: JobRecord) -> str:
        """Whom to mail, checked again here: a job stored before submissions
        were checked may carry a recipient MailProg would take as an option."""
        user = job.spec.mail_user or job.user
        if recipient_ok(user):
            return user
        log.error("job %d: mail not sent: recipient %r is not a user name or a mail address",
                  job.job_id, user)
        return ""

    def _add_timers(self, job: JobRecord, not_before: float) -> None:
        """The run's time-limit notices due from ``not_before`` on (a restarted
        controller does not send again what its predecessor had)."""
        for due, kind in time_limit_notices(job):
            if due >= not_before:
                heapq.heappush(self._timers, (due, job.job_id, job.start_time, kind))
                self._timers_changed.set()

    # -- sending (tasks on the loop) ----------------------------------------------
    def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        now = self.ctl.clock()
        self._rebuild_arrays()
        for job in self.ctl.store.live.in_states([slurm.RUNNING]):  # runs a restart found
            if job.spec.mail_type:
                self._add_timers(job, now)
        sending = asyncio.create_task(self._send_loop(), name="mail-send")
        timers = asyncio.create_task(self._timer_loop(), name="mail-timers")
        self._tasks = [sending, timers]

    async def close(self, grace_s: float = 2.0) -> None:
        """Stop; notices already being sent get ``grace_s`` to finish."""
        for t in self._tasks:
            t.cancel()
        if self._sending:
            await asyncio.wait(self._sending, timeout=grace_s)
        for t in self._sending:
            t.cancel()

    async def _send_loop(self) -> None:
        while True:
            notice = await self._queue.get()
            await self._slots.acquire()
            task = asyncio.create_task(self._send(notice))
            self._sending.add(task)
            task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task) -> None:
        self._sending.discard(task)
        self._slots.release()

    async def _send(self, n: Notice) -> None:
        prog = self.ctl.config.controller.mail_prog     # read each time: a reconfigure may change it
        if not prog:
            log.error("job %d: no MailProg configured; mail to %s not sent: %s", n.job_id, n.user, n.subject)
            return
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **n.env}
        try:
            proc = await asyncio.create_subprocess_exec(
                prog, "-s", n.subject, "--", n.user, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
                cwd="/", start_new_session=True)
        except OSError as e:
            log.error("job %d: MailProg %s could not run: %s", n.job_id, prog, e.strerror or e)
            return
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), MAIL_PROG_TIMEOUT_S)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            log.error("job %d: MailProg %s killed after %.0f s", n.job_id, prog, MAIL_PROG_TIMEOUT_S)
            return
        except asyncio.CancelledError:
            proc.kill()
            raise
        if proc.returncode:
            log.error("job %d: MailProg returned error %d, its output was '%s'", n.job_id,
                      proc.returncode, out.decode(errors="replace").strip())

    async def _timer_loop(self) -> None:
        while True:
            self._timers_changed.clear()
            timeout = None
            if self._timers:
                timeout = max(0.0, self._timers[0][0] - self.ctl.clock())
            try:
                await asyncio.wait_for(self._timers_changed.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            now = self.ctl.clock()
            while self._timers and self._timers[0][0] <= now:
                _, job_id, started, kind = heapq.heappop(self._timers)
                job = self.ctl.store.live.jobs.get(job_id)
                if job is None or job.start_time != started:
                    continue                    # gone, or another run by now
                due = dict((k, d) for d, k in time_limit_notices(job)).get(kind)
                if due is not None and due > now:      # its time limit grew meanwhile
                    heapq.heappush(self._timers, (due, job_id, started, kind))
                elif job.state == slurm.RUNNING or (kind == TIME_LIMIT and job.state == slurm.TIMEOUT):
                    text = (summary_subject(job, kind, ArrayBook()) if summarised(job)
                            else subject(job, kind, now))
                    self._queue_notice(job, kind, text)

#!/usr/bin/env python3
"""Fault injection under load: does anything run twice, get lost, or end
COMPLETED although its work was killed?

A private local cluster (``lingjun up`` in a temporary folder, NODES nodes,
a short heartbeat timeout) runs a steady, light stream of work for DURATION
seconds while a seeded loop hurts it, one fault at a time:

- ``ctl-kill``: ``kill -9`` of the controller, restarted 0-3 s later with
  the argv ``lingjun up`` gave it (``cluster.json``), as systemd would;
- ``ctl-stop``: SIGSTOP of the controller for a while shorter, or longer,
  than the heartbeat timeout, then SIGCONT;
- ``agent-kill``: ``kill -9`` of one node's agent (its jobs' processes live
  on, by design), restarted after a delay shorter or longer than the timeout;
- ``agent-stop``: SIGSTOP of one node's agent, short or long, then SIGCONT.

Short is 0.5 s to 0.6 timeouts, long 1.5 to 4 timeouts. The agent hurt is
one of a node that runs work of the load at that moment, if any.

The load, a unit every 3-8 s, each under its own job name ``fi-<n>``:

- ``gang``: ``sbatch -N2 --requeue``: 30 s of batch-side work in the
  background (output to the job's file, so it outlives its agent) while
  ``srun -N2`` runs a 24 s step whose output goes to a file;
- ``single``: ``sbatch -N1``, ``--no-requeue`` half of the time: 20 s of
  batch-side work beside ``srun -N1`` of a 10 s step;
- ``srun``: a standalone ``srun -N2`` of a 10 s step;
- ``salloc``: ``salloc -N2 srun -N2`` of an 8 s step.

Work outlives the heartbeat timeout plus the restart backoff (2 s here), so
a job requeued off a silent node can start again while its first attempt
still runs there.

Every unit of work is ``worker.sh KIND N``: it appends ``start`` to a shared
marker log with the job id, restart count (``SLURM_RESTART_COUNT``), step
id, rank, node and pid, prints ``out ... i`` for i = 1..N (one a second) and
appends ``end``; a ``kill`` leaves a start without an end. Batch scripts log
``script-start`` and ``script-end`` with srun's exit status; a failed srun
ends the script at once (as under ``set -e``), leaving its batch-side work
to be ended with the job.

While it runs, every 0.2 s a sampler reads ``/proc`` for live ``worker.sh``
processes of this run and files them by job id and restart count (from
their environment). At the end the load drains (bounded), and the figures
are judged from ``sacct``, the marker log, the outputs and the samples:

- overlapping attempts: a job with processes of two restart counts alive in
  the same sample, or a process of a job alive more than END_GRACE s after
  the ``End`` sacct gives for it (``End`` has one-second resolution);
- acknowledged jobs lost: ``sbatch`` printed an id, but after the drain
  ``sacct`` does not know it or it never reached a final state;
- steps lost: a step whose tasks started (or whose srun was begun by a
  batch script) and whose output misses lines, unless its attempt was ended
  by node loss (the job was requeued afterwards, or ended NODE_FAIL): those
  are counted apart as "killed with their node". The exit status of srun
  does not decide it (a step can print everything and still exit non-zero:
  that is counted apart too);
- COMPLETED but killed: ``sacct`` says COMPLETED, yet in its last attempt a
  worker has a start without an end, a step's output is incomplete, or the
  batch script did not reach its end with srun's status 0.

Run from a checkout (the commands come from ``sys.executable``'s folder, so
it measures the tree it is run from):

    python3 bench/faultinject.py --duration 300 --nodes 4 --seed 1
    python3 bench/faultinject.py --smoke              # 30 s, for a quick look
    python3 bench/faultinject.py --expect-clean ...   # exit 1 if a goal is missed

Only processes it started are signalled, by pid, after checking their start
time against ``cluster.json``. ``lingjun down`` and the end of every client
and job process of the run happen in ``finally``, on Ctrl-C too.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.conftest import Cluster  # noqa: E402

FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
SAMPLE_S = 0.2

WORKER = r"""#!/bin/sh
# worker.sh KIND N: one unit of work of the fault-injection load.
kind=$1; n=$2
id="${SLURM_JOB_ID:-0} ${SLURM_RESTART_COUNT:-0} ${SLURM_STEP_ID:-batch} ${SLURM_PROCID:-0} ${SLURMD_NODENAME:-none}"
echo "start $(date +%s.%N) $kind $id $$" >> @LOG@
i=1
while [ "$i" -le "$n" ]; do
  echo "out $kind $id $i"
  sleep 1
  i=$((i + 1))
done
echo "end $(date +%s.%N) $kind $id $$" >> @LOG@
"""

BATCH = r"""#!/bin/sh
rc0=${SLURM_RESTART_COUNT:-0}
echo "script-start $(date +%s.%N) $SLURM_JOB_ID $rc0" >> @LOG@
@W@ batch @BN@ &
srun -N@NN@ @W@ step @SN@ > @OUT@/$SLURM_JOB_ID.$rc0.step
rc=$?
[ "$rc" -eq 0 ] && wait
echo "script-end $(date +%s.%N) $SLURM_JOB_ID $rc0 $rc" >> @LOG@
exit $rc
"""


@dataclass
class Unit:
    """One submission of the load and what came of it."""
    n: int
    kind: str                 # gang | single | srun | salloc
    nodes: int
    step_n: int               # lines each step task prints
    argv: list[str]
    requeue: bool = True
    submitted: float = 0.0
    rc: int | None = None
    stdout: str = ""
    stderr: str = ""
    job_id: int | None = None  # sbatch's acknowledgement, or sacct's by name
    acked: bool = False        # srun/salloc: it named its job or printed task output
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def name(self) -> str:
        return f"fi-{self.n}"


@dataclass
class Fault:
    kind: str
    target: str
    start: float
    length: float             # how long stopped, or dead before the restart
    note: str = ""


class Sampler(threading.Thread):
    """Live worker processes of this run, every SAMPLE_S, by job and attempt."""

    def __init__(self, worker: Path):
        super().__init__(daemon=True, name="sampler")
        self.needle = str(worker).encode()
        self.stop = threading.Event()
        self.env_cache: dict[tuple[int, bytes], tuple[int, int, str] | None] = {}
        # job -> restart -> [first, last, nodes]
        self.seen: dict[int, dict[int, list]] = collections.defaultdict(dict)
        # job -> [first, last, samples, {restart: nodes}]
        self.overlaps: dict[int, list] = {}
        self.samples = 0
        self.last: dict[int, dict[int, set[str]]] = {}

    def scan(self) -> dict[int, dict[int, set[str]]]:
        alive: dict[int, dict[int, set[str]]] = collections.defaultdict(lambda: collections.defaultdict(set))
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    # `sh worker.sh ...` only: not the srun clients whose argv names it
                    if self.needle not in f.read().split(b"\0")[:2]:
                        continue
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
                rest = stat[stat.rfind(b")") + 2:].split()
                if rest[0] in (b"Z", b"X"):
                    continue
                key = (int(name), rest[19])          # pid and start time
                if key not in self.env_cache:
                    with open(f"/proc/{name}/environ", "rb") as f:
                        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
                    job = env.get(b"SLURM_JOB_ID")
                    self.env_cache[key] = None if job is None else (
                        int(job), int(env.get(b"SLURM_RESTART_COUNT", b"0")),
                        env.get(b"SLURMD_NODENAME", b"?").decode())
                got = self.env_cache[key]
            except (OSError, ValueError, IndexError):
                continue
            if got:
                alive[got[0]][got[1]].add(got[2])
        return alive

    def sample(self) -> dict[int, dict[int, set[str]]]:
        now = time.time()
        alive = self.scan()
        self.samples += 1
        self.last = alive
        for job, attempts in alive.items():
            for restart, nodes in attempts.items():
                rec = self.seen[job].setdefault(restart, [now, now, set()])
                rec[1] = now
                rec[2] |= nodes
            if len(attempts) > 1:
                ov = self.overlaps.setdefault(job, [now, now, 0, collections.defaultdict(set)])
                ov[1] = now
                ov[2] += 1
                for restart, nodes in attempts.items():
                    ov[3][restart] |= nodes
        return alive

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            self.sample()


class FaultInjection:
    def __init__(self, args, root: Path):
        self.args = args
        self.root = root
        self.c = Cluster(root, nodes=args.nodes, cpus=2, heartbeat_timeout=args.heartbeat_timeout,
                         up_args=("--restart-backoff", str(args.restart_backoff)))
        self.work = self.c.work
        self.log = self.work / "marks.log"
        self.outdir = self.work / "out"
        self.outdir.mkdir(parents=True, exist_ok=True)
        self.worker = self.work / "worker.sh"
        self.worker.write_text(WORKER.replace("@LOG@", str(self.log)))
        self.worker.chmod(0o755)
        self.log.touch()
        self.units: list[Unit] = []
        self.faults: list[Fault] = []
        self.fault_errors: list[str] = []
        self.clients: dict[int, subprocess.Popen] = {}
        self.clients_lock = threading.Lock()
        self.stop_load = threading.Event()
        self.stop_faults = threading.Event()
        self.stopped: set[int] = set()        # pids we SIGSTOPped and not yet continued
        self.sampler = Sampler(self.worker)
        self.t0 = 0.0

    # -- the cluster's daemons ---------------------------------------------------------
    def daemon(self, name: str) -> psutil.Process | None:
        """The live process `name` of this cluster, if its start time is the one
        cluster.json recorded (a recycled pid is never signalled)."""
        entry = self.c.info()["processes"][name]
        try:
            p = psutil.Process(entry["pid"])
            if abs(p.create_time() - entry["create_time"]) < 0.5:
                return p
        except psutil.Error:
            pass
        return None

    def kill9(self, name: str) -> bool:
        p = self.daemon(name)
        if p is None:
            self.fault_errors.append(f"{name} was not running before kill -9")
            return False
        p.kill()
        try:
            p.wait(10)
        except psutil.Error:
            pass
        return True

    def restart(self, name: str) -> None:
        self.c.restart(name)
        time.sleep(0.5)
        if self.daemon(name) is None:
            self.fault_errors.append(f"{name} died right after its restart (see its log)")

    def pause(self, name: str, seconds: float) -> bool:
        p = self.daemon(name)
        if p is None:
            self.fault_errors.append(f"{name} was not running before SIGSTOP")
            return False
        p.send_signal(signal.SIGSTOP)
        self.stopped.add(p.pid)
        try:
            time.sleep(seconds)
        finally:
            p.send_signal(signal.SIGCONT)
            self.stopped.discard(p.pid)
        return True

    def continue_all(self) -> None:
        for pid in list(self.stopped):
            for name in self.c.info()["processes"]:
                p = self.daemon(name)
                if p is not None and p.pid == pid:
                    p.send_signal(signal.SIGCONT)
            self.stopped.discard(pid)

    # -- faults --------------------------------------------------------------------------
    def fault_loop(self) -> None:
        rng = random.Random(self.args.seed)
        hb = self.args.heartbeat_timeout
        nodes = self.c.info()["nodes"]
        while not self.stop_faults.wait(rng.uniform(*self.args.fault_gap)):
            kind = rng.choice(("ctl-kill", "ctl-stop", "agent-kill", "agent-stop"))
            long = rng.random() < 0.5
            length = rng.uniform(1.5 * hb, 4 * hb) if long else rng.uniform(0.5, 0.6 * hb)
            # An agent whose node runs work of the load, when one does: the light load
            # packs onto the first nodes, and losing an idle node tests little.
            busy = sorted({n for att in self.sampler.last.values() for ns in att.values() for n in ns})
            target = "lingjund" if kind.startswith("ctl") else rng.choice(busy or nodes)
            if kind == "ctl-kill":
                length = rng.uniform(0, 3)
            f = Fault(kind, target, time.time(), length,
                      "" if kind == "ctl-kill" else ("longer" if long else "shorter") + " than the timeout")
            try:
                if kind.endswith("kill"):
                    if self.kill9(target):
                        self.faults.append(f)
                        time.sleep(length)
                        self.restart(target)
                else:
                    self.faults.append(f)
                    self.pause(target, length)
            except Exception as e:  # noqa: BLE001 - a failed fault is reported, the run goes on
                self.fault_errors.append(f"{kind} {target}: {e!r}")
                self.continue_all()

    # -- load ----------------------------------------------------------------------------
    def make_unit(self, n: int, rng: random.Random) -> Unit:
        kind = rng.choices(("gang", "single", "srun", "salloc"), (3, 3, 2, 2))[0]
        common = ["-J", f"fi-{n}", "-t", "5"]
        if kind in ("gang", "single"):
            nodes, bn, sn = (2, 30, 24) if kind == "gang" else (1, 20, 10)
            requeue = kind == "gang" or rng.random() < 0.5
            script = self.work / f"job-{n}.sh"
            script.write_text(BATCH.replace("@LOG@", str(self.log)).replace("@W@", str(self.worker))
                              .replace("@BN@", str(bn)).replace("@NN@", str(nodes))
                              .replace("@SN@", str(sn)).replace("@OUT@", str(self.outdir)))
            argv = ["sbatch", "--parsable", *common, "-N", str(nodes),
                    "--requeue" if requeue else "--no-requeue",
                    "-o", str(self.outdir / f"slurm-{n}.out"), str(script)]
            return Unit(n, kind, nodes, sn, argv, requeue)
        if kind == "srun":
            return Unit(n, kind, 2, 10, ["srun", *common, "-N2", str(self.worker), "step", "10"], False)
        return Unit(n, kind, 2, 8, ["salloc", *common, "-N2", "srun", "-N2", str(self.worker), "step", "8"],
                    False)

    def client(self, u: Unit) -> None:
        u.submitted = time.time()
        try:
            p = subprocess.Popen(u.argv, cwd=self.work, env=self.c.env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as e:
            u.rc, u.stderr = -1, repr(e)
            u.done.set()
            return
        with self.clients_lock:
            self.clients[p.pid] = p
        try:
            limit = 60 if u.kind in ("gang", "single") else self.args.duration + self.args.drain + 60
            u.stdout, u.stderr = p.communicate(timeout=limit)
            u.rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            u.stdout, u.stderr = p.communicate()
            u.rc = -9
            u.stderr += "\n(faultinject: client timed out and was killed)"
        finally:
            with self.clients_lock:
                self.clients.pop(p.pid, None)
        if u.kind in ("gang", "single") and u.rc == 0:
            try:
                u.job_id = int(u.stdout.strip().split(";")[0])
            except ValueError:
                pass
        u.done.set()

    def load_loop(self) -> None:
        rng = random.Random(self.args.seed + 1)
        n = 0
        while not self.stop_load.wait(rng.uniform(*self.args.load_gap)):
            if sum(not u.done.is_set() for u in self.units) >= self.args.max_clients:
                continue
            n += 1
            u = self.make_unit(n, rng)
            self.units.append(u)
            threading.Thread(target=self.client, args=(u,), daemon=True, name=u.name).start()

    # -- accounting ------------------------------------------------------------------------
    def sacct(self) -> dict[str, dict]:
        """sacct's view of this run's jobs, by job name (each unit's is unique)."""
        p = self.c.run(["sacct", "-a", "-X", "-P", "-n", "-S", "2000-01-01",
                        "-o", "JobID,JobName,State,End,Restarts,ExitCode"], timeout=60)
        jobs = {}
        for line in p.stdout.splitlines():
            parts = line.split("|")
            if len(parts) < 6 or not parts[1].startswith("fi-"):
                continue
            jid, name, state, end, restarts, exitcode = parts[:6]
            try:
                end_ts = datetime.datetime.fromisoformat(end).timestamp()
            except ValueError:
                end_ts = None
            jobs[name] = {"job_id": int(jid.split("_")[0]), "state": state.split()[0], "end": end_ts,
                          "restarts": int(restarts or 0), "exit": exitcode}
        return jobs

    def drain(self) -> dict[str, dict]:
        deadline = time.time() + self.args.drain
        jobs: dict[str, dict] = {}
        while time.time() < deadline:
            try:
                jobs = self.sacct()
            except subprocess.TimeoutExpired:
                continue
            clients_done = all(u.done.is_set() for u in self.units)
            pending = [u for u in self.units if u.job_id is not None
                       and jobs.get(u.name, {}).get("state") not in FINAL_STATES]
            if clients_done and not pending:
                break
            time.sleep(3)
        time.sleep(self.args.end_grace + 2 * SAMPLE_S)   # stragglers show in the samples
        return self.sacct()

    # -- the whole run -----------------------------------------------------------------------
    def run(self) -> dict:
        self.c.up()
        self.sampler.start()
        self.t0 = time.time()
        load = threading.Thread(target=self.load_loop, daemon=True, name="load")
        faults = threading.Thread(target=self.fault_loop, daemon=True, name="faults")
        load.start()
        faults.start()
        end = self.t0 + self.args.duration
        while time.time() < end:
            time.sleep(min(1.0, max(0.0, end - time.time())))
        self.stop_load.set()
        self.stop_faults.set()
        faults.join(timeout=6 * self.args.heartbeat_timeout)
        load.join(timeout=10)
        self.loaded_s = time.time() - self.t0
        jobs = self.drain()
        self.sampler.stop.set()
        self.sampler.join(5)
        last = self.sampler.sample()        # what is still alive after the drain
        return self.judge(jobs, last)

    def cleanup(self) -> None:
        self.stop_load.set()
        self.stop_faults.set()
        self.sampler.stop.set()
        try:
            self.continue_all()
        except Exception:  # noqa: BLE001 - cleaning up regardless
            pass
        with self.clients_lock:
            for p in self.clients.values():
                try:
                    p.kill()
                except OSError:
                    pass
        try:
            self.c.down()
        except Exception as e:  # noqa: BLE001
            print(f"faultinject: lingjun down failed: {e!r}", file=sys.stderr)
        # Job processes of this run that outlived `down` (they carry this run's worker path).
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if str(self.worker) in " ".join(proc.info["cmdline"] or ()):
                    proc.kill()
            except psutil.Error:
                pass

    # -- judging ---------------------------------------------------------------------------
    def marks(self) -> list[list[str]]:
        return [line.split() for line in self.log.read_text(errors="replace").splitlines() if line.strip()]

    @staticmethod
    def complete(text: str, ntasks: int, n: int) -> bool:
        got: dict[str, set[int]] = collections.defaultdict(set)
        for line in text.splitlines():
            w = line.split()
            # out KIND JOB RESTART STEP PROC NODE I
            if len(w) == 8 and w[0] == "out" and w[1] == "step":
                got[w[5]].add(int(w[7]))
        want = set(range(1, n + 1))
        return len(got) == ntasks and all(v == want for v in got.values())

    @staticmethod
    def tasks_ended(starts, ends, job: int | None, restart: int) -> str:
        """'ended/started' step tasks of an attempt, from the marker log: tells a step
        whose tasks were killed from one whose srun lost their output."""
        if job is None:
            return "-"
        st = {s for s in starts.get((job, restart), ()) if s[0] == "step"}
        return f"{len(st & ends.get((job, restart), set()))}/{len(st)}"

    def judge(self, jobs: dict[str, dict], last: dict) -> dict:
        marks = self.marks()
        # (job, restart) -> worker starts/ends by (kind, step, proc, pid)
        starts: dict[tuple[int, int], set] = collections.defaultdict(set)
        ends: dict[tuple[int, int], set] = collections.defaultdict(set)
        scripts: dict[tuple[int, int], dict] = collections.defaultdict(dict)
        for w in marks:
            if w[0] in ("start", "end") and len(w) == 9:
                key = (int(w[3]), int(w[4]))
                (starts if w[0] == "start" else ends)[key].add((w[2], w[5], w[6], w[8]))
            elif w[0] == "script-start" and len(w) == 4:
                scripts[(int(w[2]), int(w[3]))]["start"] = float(w[1])
            elif w[0] == "script-end" and len(w) == 5:
                scripts[(int(w[2]), int(w[3]))]["rc"] = int(w[4])
        attempts_of: dict[int, set[int]] = collections.defaultdict(set)
        for job, restart in list(starts) + list(scripts):
            attempts_of[job].add(restart)

        for u in self.units:                      # srun/salloc: the job id they printed, or sacct's
            if u.kind in ("srun", "salloc"):
                said = re.search(r"(?:allocation|job) (\d+)", u.stderr)
                u.acked = said is not None or bool(u.stdout.strip())
                if said:
                    u.job_id = int(said.group(1))
                elif u.name in jobs:
                    u.job_id = jobs[u.name]["job_id"]

        acked = [u for u in self.units if u.kind in ("gang", "single") and u.job_id is not None]
        refused = [u for u in self.units if u.kind in ("gang", "single") and u.job_id is None]
        lost_jobs = []
        for u in acked + [u for u in self.units if u.kind in ("srun", "salloc") and u.acked]:
            j = jobs.get(u.name)
            if j is None or j["job_id"] != u.job_id:
                lost_jobs.append({"job": u.job_id, "name": u.name, "why": "unknown to sacct"})
            elif j["state"] not in FINAL_STATES:
                lost_jobs.append({"job": u.job_id, "name": u.name, "why": f"never finished ({j['state']})"})

        steps, lost_steps, node_loss_steps, failed_clients = 0, [], [], []
        completed_killed = []
        for u in self.units:
            j = jobs.get(u.name, {})
            state = j.get("state", "?")
            jid = u.job_id
            if u.kind in ("gang", "single"):
                if jid is None:
                    continue
                final = max(attempts_of.get(jid, {0}) | {j.get("restarts", 0)})
                for restart in sorted(attempts_of.get(jid, ())):
                    out = self.outdir / f"{jid}.{restart}.step"
                    began = out.exists() or any(s[0] == "step" for s in starts[(jid, restart)])
                    if not began:
                        continue
                    steps += 1
                    ok = self.complete(out.read_text(errors="replace") if out.exists() else "", u.nodes, u.step_n)
                    if ok:
                        continue
                    rec = {"job": jid, "attempt": restart, "kind": u.kind, "state": state,
                           "tasks_ended": self.tasks_ended(starts, ends, jid, restart)}
                    if restart < final or state == "NODE_FAIL":
                        node_loss_steps.append(rec)
                    else:
                        lost_steps.append(rec)
                if state == "COMPLETED":
                    why = []
                    if starts[(jid, final)] - ends[(jid, final)]:
                        why.append("a worker started and never ended")
                    if scripts[(jid, final)].get("rc") != 0:
                        why.append(f"script end with srun rc {scripts[(jid, final)].get('rc', 'missing')}")
                    out = self.outdir / f"{jid}.{final}.step"
                    if not self.complete(out.read_text(errors="replace") if out.exists() else "", u.nodes, u.step_n):
                        why.append("step output incomplete")
                    if why:
                        completed_killed.append({"job": jid, "attempt": final, "kind": u.kind, "why": "; ".join(why)})
            else:
                began = bool(u.stdout.strip()) or (jid is not None and bool(starts.get((jid, 0))))
                if not began:
                    continue
                steps += 1
                ok = self.complete(u.stdout, u.nodes, u.step_n)
                if ok and u.rc != 0:
                    failed_clients.append({"job": jid, "kind": u.kind, "rc": u.rc, "state": state,
                                           "stderr": u.stderr.strip().splitlines()[-1:]})
                if not ok:
                    rec = {"job": jid, "attempt": 0, "kind": u.kind, "state": state, "rc": u.rc,
                           "tasks_ended": self.tasks_ended(starts, ends, jid, 0),
                           "stderr": u.stderr.strip().splitlines()[-1:] if u.stderr.strip() else []}
                    (node_loss_steps if state == "NODE_FAIL" else lost_steps).append(rec)
                if state == "COMPLETED" and jid is not None:
                    why = []
                    if starts[(jid, 0)] - ends[(jid, 0)]:
                        why.append("a worker started and never ended")
                    if not self.complete(u.stdout, u.nodes, u.step_n):
                        why.append("srun output incomplete")
                    if why:
                        completed_killed.append({"job": jid, "attempt": 0, "kind": u.kind, "why": "; ".join(why)})

        overlaps = []
        for job, (first, lastt, n, att) in sorted(self.sampler.overlaps.items()):
            overlaps.append({"job": job, "type": "two attempts alive",
                             "attempts": {r: sorted(v) for r, v in sorted(att.items())},
                             "seconds": round(lastt - first + SAMPLE_S, 1), "samples": n})
        by_id = {j["job_id"]: j for j in jobs.values()}
        for job, attempts in sorted(self.sampler.seen.items()):
            j = by_id.get(job)
            if not j or j["state"] not in FINAL_STATES or j["end"] is None:
                continue
            end = j["end"] + 1.0                  # End is truncated to the second
            late = {r: rec for r, rec in attempts.items() if rec[1] > end + self.args.end_grace}
            if late:
                lastt = max(rec[1] for rec in late.values())
                overlaps.append({"job": job, "type": f"alive after the job ended {j['state']}",
                                 "attempts": {r: sorted(rec[2]) for r, rec in sorted(late.items())},
                                 "seconds": round(lastt - end, 1),
                                 "still_alive": job in last})

        fault_counts = collections.Counter(
            f"{f.kind} ({f.note})" if f.note else f.kind for f in self.faults)
        states = collections.Counter(j["state"] for j in jobs.values())
        return {
            "duration_s": round(self.loaded_s, 1), "nodes": self.args.nodes, "seed": self.args.seed,
            "heartbeat_timeout_s": self.args.heartbeat_timeout, "restart_backoff_s": self.args.restart_backoff,
            "unit_counts": collections.Counter(u.kind for u in self.units),
            "units": [{"name": u.name, "kind": u.kind, "job": u.job_id, "requeue": u.requeue, "rc": u.rc,
                       "state": jobs.get(u.name, {}).get("state"), "submitted": round(u.submitted - self.t0, 1),
                       "stderr": u.stderr.strip().splitlines()[-2:]} for u in self.units],
            "fault_log": [{"kind": f.kind, "target": f.target, "at": round(f.start - self.t0, 1),
                           "length": round(f.length, 1)} for f in self.faults],
            "batch_submitted": len(acked) + len(refused), "batch_acknowledged": len(acked),
            "batch_refused": [{"name": u.name, "rc": u.rc, "stderr": u.stderr.strip().splitlines()[-1:]}
                              for u in refused],
            "alloc_submitted": sum(u.kind in ("srun", "salloc") for u in self.units),
            "alloc_acknowledged": sum(u.kind in ("srun", "salloc") and u.acked for u in self.units),
            "jobs_known_to_sacct": len(jobs), "final_states": dict(states),
            "lost_jobs": lost_jobs, "steps_started": steps, "lost_steps": lost_steps,
            "steps_killed_with_node": node_loss_steps, "steps_complete_but_client_failed": failed_clients, "completed_but_killed": completed_killed,
            "overlaps": overlaps, "faults": dict(fault_counts), "fault_errors": self.fault_errors,
            "samples": self.sampler.samples,
            "clients_unfinished": sum(not u.done.is_set() for u in self.units),
        }


def print_report(r: dict, out=sys.stdout) -> bool:
    """The table; True when every goal is met."""
    def row(name, value, goal=""):
        print(f"  {name:<46} {value!s:>8}  {goal}", file=out)

    print(f"\nfault injection: {r['duration_s']} s under load, {r['nodes']} nodes, seed {r['seed']}, "
          f"heartbeat timeout {r['heartbeat_timeout_s']} s, restart backoff {r['restart_backoff_s']} s, "
          f"{r['samples']} samples", file=out)
    print("faults injected:", file=out)
    for k, v in sorted(r["faults"].items()):
        row(k, v)
    print("load:", file=out)
    for k, v in sorted(r["unit_counts"].items()):
        row(f"{k} units", v)
    row("batch jobs submitted", r["batch_submitted"])
    row("  acknowledged (sbatch printed an id)", r["batch_acknowledged"])
    row("  refused (sbatch failed)", len(r["batch_refused"]))
    row("srun/salloc submitted", r["alloc_submitted"])
    row("  acknowledged (named its job or ran tasks)", r["alloc_acknowledged"])
    row("jobs known to sacct (all kinds)", r["jobs_known_to_sacct"])
    row("final states", " ".join(f"{k}={v}" for k, v in sorted(r["final_states"].items())) or "-")
    row("steps started (srun began)", r["steps_started"])
    row("steps killed with their node (requeue/NODE_FAIL)", len(r["steps_killed_with_node"]))
    row("srun/salloc with all output but exit status != 0", len(r["steps_complete_but_client_failed"]))
    print("goals:", file=out)
    goals = [("overlapping attempts", len(r["overlaps"])),
             ("acknowledged jobs lost", len(r["lost_jobs"])),
             ("steps lost", len(r["lost_steps"])),
             ("jobs COMPLETED whose work was killed", len(r["completed_but_killed"]))]
    for name, v in goals:
        row(name, v, "goal 0" + ("" if v == 0 else "  MISSED"))
    for title, key in (("overlaps", "overlaps"), ("lost jobs", "lost_jobs"), ("lost steps", "lost_steps"),
                       ("COMPLETED but killed", "completed_but_killed"),
                       ("srun/salloc with all output but exit status != 0", "steps_complete_but_client_failed"),
                       ("fault errors", "fault_errors")):
        if r[key]:
            print(f"{title}:", file=out)
            for item in r[key]:
                print(f"  {json.dumps(item)}", file=out)
    if r["clients_unfinished"]:
        print(f"note: {r['clients_unfinished']} srun/salloc clients had not finished by the end", file=out)
    return all(v == 0 for _, v in goals)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=300, help="seconds of load and faults (default 300)")
    ap.add_argument("--smoke", action="store_true", help="a 30 s run with a 60 s drain")
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1, help="seeds the fault schedule (and, +1, the load)")
    ap.add_argument("--state-dir", help="run in this folder and keep it (default: a temporary one, removed)")
    ap.add_argument("--heartbeat-timeout", type=float, default=5.0)
    ap.add_argument("--restart-backoff", type=float, default=2.0, help="seconds before a requeued job restarts")
    ap.add_argument("--drain", type=float, default=180, help="at most this long for the load to finish")
    ap.add_argument("--end-grace", type=float, default=1.0,
                    help="a process alive this long after its job's End (plus End's rounding) overlaps")
    ap.add_argument("--max-clients", type=int, default=6, help="submissions whose client still runs, at most")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--expect-clean", action="store_true", help="exit 1 when any goal is missed")
    args = ap.parse_args(argv)
    if args.smoke:
        args.duration, args.drain = 30, 60
    args.fault_gap = (3.0, 10.0)
    args.load_gap = (3.0, 8.0)
    root = Path(args.state_dir).absolute() if args.state_dir else Path(tempfile.mkdtemp(prefix="lingjun-fi-"))
    root.mkdir(parents=True, exist_ok=True)
    def interrupted(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)      # also when started in the background (SIGINT ignored)
    fi = FaultInjection(args, root)
    report = None
    try:
        report = fi.run()
    except KeyboardInterrupt:
        print("faultinject: interrupted; stopping the cluster", file=sys.stderr)
        return 130
    finally:
        fi.cleanup()
        if report is not None and args.json:
            Path(args.json).write_text(json.dumps(report, indent=2, default=str))
        if args.state_dir:
            print(f"faultinject: state, logs and marker log kept in {root}", file=sys.stderr)
        elif report is not None:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"faultinject: kept {root} for a look", file=sys.stderr)
    clean = print_report(report)
    return 1 if args.expect_clean and not clean else 0


if __name__ == "__main__":
    sys.exit(main())

"""srun: run a parallel step, inside an allocation or in one of its own.

    srun [-N nodes] [-n tasks] [--ntasks-per-node=N] [-c cpus] [-l] [-u] [-o out]
         [--gpus=N | --gres=gpu:N | --gpus-per-task=N] [--gpu-bind=...] command [args...]

Inside an allocation (``SLURM_JOB_ID`` set by sbatch or salloc, or
``--jobid``) it asks the controller for a step on the job's nodes. Outside
one it first makes its own allocation (a job without a batch script), says
"job N queued and waiting for resources" / "has been allocated resources"
only when it had to wait, runs the step there, and releases the job with
the step's exit code when the step ends (sacct then shows it COMPLETED or
FAILED with that code). Ctrl-C or SIGTERM ends the step and cancels its own
allocation; if srun dies outright, the controller sees the allocation's
stream break and ends the job itself (cli/allocation.py).

Task output arrives as it is written (cli/step_output.py), and srun exits
with the highest task exit code (128+signal for a task killed by a
signal), as Slurm's srun does. If the controller goes away while the step
runs (a restart, a pause past the connection's life), srun takes the step
back (``_StepStream``) with the output it has printed and the exits it has
seen, and its allocation takes its lease back (cli/allocation.py): the
tasks run on, and every byte and exit is printed once.

GPUs: outside an allocation --gres/--gpus/--gpus-per-task/--cpus-per-gpu/
--mem* shape the allocation srun makes; inside one they shape the step,
which gets a subset of the allocation's GPUs (lingjund/service/steps.py),
and --mem / --mem-per-cpu its memory within the job's (its own cgroup).
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import itertools
import threading
import time
from contextlib import ExitStack

import grpc

from cli.allocation import Allocation, AllocationEnded, exit_program
from cli.common import CONNECT_FAILURE, CommandError, current_user, details, make_api, run
from lingjun.sbatch_options import build_environment
from cli.srun_options import RunOptions, parse_srun
from cli.step_output import StepOutput
from lingjun import slurm
from lingjun import client
from lingjun.client import ControllerUnreachable
from lingjun.filenames import expand_pattern, resolve_path
from lingjun.v1 import api_pb2, api_pb2_grpc

PROG = "srun"
PER_TASK_LETTERS = ("%t", "%n", "%N")   # patterns the nodes expand and write themselves


def main(argv: list[str] | None = None) -> int:
    rc = run(_srun, argv, None, None, None)
    if argv is None:            # the program itself (not a test calling main)
        exit_program(rc)
    return rc


def allocation_spec(o: RunOptions, env: dict[str, str], work_dir: str, prog: str,
                    default_name: str) -> api_pb2.JobSpec:
    """The job an srun (or salloc) outside any allocation asks for."""
    user, uid, gid, group = current_user()
    spec = api_pb2.JobSpec(
        name=o.job_name or default_name, work_dir=work_dir, submit_dir=os.getcwd(),
        partition=o.partition, min_nodes=o.min_nodes, max_nodes=o.max_nodes,
        num_tasks=o.ntasks, ntasks_per_node=o.ntasks_per_node, cpus_per_task=o.cpus_per_task,
        time_limit_min=o.time_limit_min, exclusive=o.exclusive, environment=env,
        export_spec=o.export, account=o.account, qos=o.qos, comment=o.comment,
        submit_host=socket.gethostname().split(".")[0], user=user, uid=uid, gid=gid, group=group,
        command=" ".join(o.command) if o.command else prog, batch=False,
        gpus=o.gpus, gpus_per_node=o.gpus_per_node, gpus_per_task=o.gpus_per_task,
        gpu_type=o.gpu_type, cpus_per_gpu=o.cpus_per_gpu, shards_per_node=o.shards_per_node,
        mps_per_node=o.mps_per_node, gpu_mem_limit_mb=o.gpu_mem_mb,
        switches=o.switches, segment=o.segment, nice=o.nice)
    if o.switch_wait_s is not None:
        spec.switch_wait_s = o.switch_wait_s
    if o.mem_mb is not None:
        spec.mem_per_node_mb = o.mem_mb
    if o.mem_per_cpu_mb is not None:
        spec.mem_per_cpu_mb = o.mem_per_cpu_mb
    if o.mem_per_gpu_mb is not None:
        spec.mem_per_gpu_mb = o.mem_per_gpu_mb
    return spec


def _env_job_id(text: str) -> int:
    """SLURM_JOB_ID as srun reads it (the --jobid setter, so --jobid's words); 0 when unset."""
    if not text.strip():
        return 0
    if not slurm.is_job_id(text.strip()) or int(text) < 1:
        raise CommandError(f'srun: error: Invalid numeric value "{text}" for --jobid.')
    return int(text)


def _srun(argv, api, out, err) -> int:
    o = parse_srun(argv, os.environ)
    if not o.command:
        raise CommandError("srun: fatal: No command given to execute.", 1)
    env = build_environment(o.export, os.environ)
    if o.label:
        env["SLURM_LABELIO"] = "1"
    work_dir = os.path.abspath(o.chdir) if o.chdir else os.getcwd()
    job_id = o.jobid or _env_job_id(os.environ.get("SLURM_JOB_ID", ""))
    stop = _Interrupts()
    own_api = api is None
    try:
        api = api or make_api()
    except ControllerUnreachable as e:
        raise CommandError(f"srun: error: {e}") from None
    try:
        if not job_id:
            return _srun_own_allocation(api, o, env, work_dir, stop, err)
        return _run_step(api, o, job_id, env, work_dir, stop, err,
                         job_name=os.environ.get("SLURM_JOB_NAME", ""))
    finally:
        if own_api:
            api.close()   # before exit, not in gRPC's __del__ at interpreter shutdown


class _Interrupts:
    """SIGINT/SIGTERM/SIGHUP end the step (and srun's own allocation) at once."""

    def __init__(self):
        self.got: list[int] = []
        self.on: list = []
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(s, self._handle)

    def _handle(self, sig, frame) -> None:
        self.got.append(sig)
        for fn in list(self.on):
            fn()

    def add(self, fn) -> None:
        """Call ``fn`` on an interrupt; at once if one came already (before ``fn`` existed)."""
        self.on.append(fn)
        if self.got:
            fn()


def _srun_own_allocation(api, o: RunOptions, env, work_dir: str, stop: _Interrupts, err) -> int:
    if o.nodelist:
        # a new job cannot ask for nodes by name yet (JobSpec has no node list)
        raise CommandError("srun: error: --nodelist is not supported yet outside an allocation")

    def revoked(end: api_pb2.AllocationEnded) -> None:
        print(f"srun: Force Terminated job {end.job_id}", file=err, flush=True)
    alloc = Allocation(api, on_revoked=revoked)
    stop.add(alloc.abandon)
    spec = allocation_spec(o, env, work_dir, PROG, os.path.basename(o.command[0]))

    def queued(q: api_pb2.AllocationQueued) -> None:
        if not o.quiet:
            print(f"srun: job {q.job_id} queued and waiting for resources", file=err, flush=True)
    try:
        granted = alloc.open(spec, queued)
    except AllocationEnded:
        if stop.got:
            return 128 + stop.got[0]
        print(f"srun: error: Job allocation {alloc.job_id} has been revoked", file=err)
        return 1
    except grpc.RpcError as e:
        if stop.got:
            print(f"srun: Job allocation {alloc.job_id} has been revoked", file=err)
            return 128 + stop.got[0]
        if e.code() == grpc.StatusCode.UNAVAILABLE:
            raise CommandError(f"srun: error: {CONNECT_FAILURE}") from None
        raise CommandError(f"srun: error: Unable to allocate resources: {details(e)}") from None
    job_id = granted.job.job_id
    if granted.waited and not o.quiet:
        print(f"srun: job {job_id} has been allocated resources", file=err, flush=True)
    try:
        rc = _run_step(api, o, job_id, env, work_dir, stop, err, job_name=granted.job.name)
    except BaseException:
        alloc.abandon()
        raise
    if stop.got:
        alloc.abandon()
        alloc.close()
        return rc
    if rc > 128:
        # Killed tasks may be the job's cancellation reaching us by the step's
        # stream first: give the allocation's own end a moment, so that srun says
        # "Force Terminated" (the watcher stays quiet once we release).
        alloc.ended.wait(1.0)
    if alloc.ended.is_set():
        alloc.close()
    else:
        alloc.release(rc if rc < 128 else 0, rc - 128 if rc > 128 else 0)
    return rc


def _step_request(o: RunOptions, job_id: int, env, work_dir: str, in_job: bool,
                  per_node) -> api_pb2.RunStepRequest:
    """RunStep's request: the step's shape, command and files (a pattern with
    a per-task letter is opened by the nodes, any other by srun here)."""
    req = api_pb2.RunStepRequest(
        job_id=job_id, num_nodes=o.min_nodes, num_tasks=o.ntasks,
        ntasks_per_node=o.ntasks_per_node, cpus_per_task=o.cpus_per_task,
        argv=list(o.command), environment=env, work_dir=work_dir,
        name=o.job_name if in_job else "", requester_uid=os.getuid(),
        submit_host=socket.gethostname().split(".")[0],
        kill_on_bad_exit=bool(o.kill_on_bad_exit), overlap=o.overlap,
        exact=o.exclusive or bool(o.cpus_per_task) or bool(o.cpus_per_gpu),
        node_names=list(o.nodelist),
        stdout_pattern=o.output if per_node(o.output) else "",
        stderr_pattern=o.error if per_node(o.error) else "",
        gpus_given=o.gpus_given, gpus=o.gpus, gpus_per_node=o.gpus_per_node,
        gpus_per_task=o.gpus_per_task, gpu_bind=o.gpu_bind, cpus_per_gpu=o.cpus_per_gpu)
    if in_job and o.mem_mb is not None:       # the step's own memory within the job's
        req.mem_per_node_mb = o.mem_mb
    elif in_job and o.mem_per_cpu_mb is not None:
        req.mem_per_cpu_mb = o.mem_per_cpu_mb
    return req


def _run_step(api, o: RunOptions, job_id: int, env, work_dir: str, stop: _Interrupts, err,
              job_name: str) -> int:
    # A bare srun inside a job runs the job's shape: its SLURM_NTASKS, SLURM_NNODES,
    # SLURM_GPUS_PER_TASK... are srun's input variables (cli/srun_options.py).
    in_job = bool(o.jobid or os.environ.get("SLURM_JOB_ID"))
    per_node = lambda p: bool(p) and any(x in p for x in PER_TASK_LETTERS)  # noqa: E731
    req = _step_request(o, job_id, env, work_dir, in_job, per_node)
    stream = _StepStream(api, req, stop)
    output: StepOutput | None = None
    said_busy = False
    rc = 1
    with ExitStack() as files:
        try:
            for ev in stream:
                kind = ev.WhichOneof("event")
                if kind == "waiting":
                    said_busy = True
                    if not o.quiet:
                        print(f"srun: Job {job_id} step creation temporarily disabled, retrying "
                              f"({ev.waiting.reason})", file=err, flush=True)
                elif kind == "started":
                    if output is not None:
                        continue        # the same step, taken back after a reattach
                    st = ev.started
                    if said_busy and not o.quiet:
                        print(f"srun: Step created for job {job_id}", file=err, flush=True)
                    subst = dict(job_id=job_id, job_name=job_name or req.name, step_id=st.step_id,
                                 user=current_user()[0], **_array_ids(os.environ))
                    stdout, stderr = _local_files(files, o, subst, work_dir, per_node)
                    output = StepOutput(o.label, len(str(max(st.num_tasks - 1, 0))), o.unbuffered,
                                        stdout, stderr)
                elif kind == "output":
                    output.write(ev.output.rank, ev.output.stream, ev.output.data)
                elif kind == "task_exit":
                    te = ev.task_exit
                    if output is not None:
                        output.task_done(te.rank)
                    _report_exit(te, err)
                elif kind == "done":
                    rc = ev.done.exit_code
        except grpc.RpcError as e:
            if stop.got:
                print("srun: forcing job termination", file=err)
                return 128 + stop.got[0]
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                print(f"srun: error: {CONNECT_FAILURE}", file=err)
            else:
                print(f"srun: error: Unable to create step for job {job_id}: {details(e)}", file=err)
            return 1
        finally:
            stream.close()
            if output is not None:
                output.close()
            sys.stdout.flush()
    return rc


# How long srun keeps trying to take its step back after the controller went
# away (the controller keeps a step that long after its restart, and ends it
# only when no srun came back within its heartbeat timeout).
REATTACH_S = 120.0
REATTACH_BREAKS = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL,
                   grpc.StatusCode.UNKNOWN)


class _StepStream:
    """The step's events, across breaks of the controller: when the stream
    breaks after the step started (the controller was restarted, or paused past
    the connection's keepalive), take the step back with what was already
    seen, so that every byte of output and every exit comes exactly once."""

    def __init__(self, api, req: api_pb2.RunStepRequest, stop: _Interrupts):
        self.api, self.req, self.stop = api, req, stop
        self.step_id: int | None = None
        self.printed: dict[tuple[int, int], int] = {}
        self.exited: set[int] = set()
        self.channels: list = []
        self.call = None

    def _open(self, req, stub):
        self.call = stub.RunStep(req)
        self.stop.add(self.call.cancel)
        return self.call

    def __iter__(self):
        call = self._open(self.req, self.api.stub)
        while True:
            try:
                for ev in call:
                    kind = ev.WhichOneof("event")
                    if kind == "started":
                        self.step_id = ev.started.step_id
                    elif kind == "output":
                        key = (ev.output.rank, ev.output.stream)
                        self.printed[key] = self.printed.get(key, 0) + len(ev.output.data)
                    elif kind == "task_exit":
                        self.exited.add(ev.task_exit.rank)
                    yield ev
                    if kind == "done":
                        return
                return
            except grpc.RpcError as e:
                if (self.stop.got or self.step_id is None or e.code() not in REATTACH_BREAKS):
                    raise
                call = self._reattach(e)

    def _reattach(self, first_error: grpc.RpcError):
        deadline = time.monotonic() + REATTACH_S
        delay = 0.2
        err = first_error
        while time.monotonic() < deadline and not self.stop.got:
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
            req = api_pb2.RunStepRequest()
            req.CopyFrom(self.req)
            req.attach, req.attach_step_id = True, self.step_id
            req.printed.extend(api_pb2.StepStreamOffset(rank=r, stream=s, offset=n)
                               for (r, s), n in sorted(self.printed.items()))
            req.exited_ranks.extend(sorted(self.exited))
            # A fresh channel each try: an old one waits out its reconnect
            # backoff before it even tries the restarted controller.
            ch = client.channel(self.api.address)
            self.channels.append(ch)
            call = self._open(req, api_pb2_grpc.SlurmApiStub(ch))
            try:
                first = next(call)
            except grpc.RpcError as e:
                err = e
                if e.code() in REATTACH_BREAKS:
                    continue
                raise
            except StopIteration:
                return iter(())
            return itertools.chain([first], call)
        raise err

    def close(self) -> None:
        self.call = None
        for ch in self.channels:
            ch.close()
        self.channels.clear()


def _array_ids(env) -> dict:
    """%A/%a inside an array task come from the task's own SLURM_ARRAY_* variables."""
    try:
        return dict(array_job_id=int(env["SLURM_ARRAY_JOB_ID"]),
                    array_task_id=int(env["SLURM_ARRAY_TASK_ID"]))
    except (KeyError, ValueError):
        return {}


def _local_files(files: ExitStack, o: RunOptions, subst: dict, work_dir: str, per_node):
    """-o/-e that srun writes itself (no per-task letter); the terminal otherwise."""
    def open_one(pattern: str, default):
        if not pattern or per_node(pattern):
            return default
        path = resolve_path(expand_pattern(pattern, **subst), work_dir)
        try:
            return files.enter_context(open(path, "wb"))
        except OSError as e:
            raise CommandError(f"srun: error: Could not open output file {path}: {e.strerror}") from None
    stdout = open_one(o.output, sys.stdout.buffer)
    if o.error:
        stderr = open_one(o.error, sys.stderr.buffer)
    elif o.output and not per_node(o.output):
        stderr = stdout     # stderr goes with stdout unless -e says otherwise
    else:
        stderr = sys.stderr.buffer
    return stdout, stderr


# a task's signal when the OOM killer took it (Slurm's SIG_OOM 253, shown 0:125)
OOM_SIGNAL = 125


def _report_exit(te: api_pb2.TaskExit, err) -> None:
    if te.error == "node lost":
        print(f"srun: error: {te.node}: task {te.rank}: node lost", file=err, flush=True)
    elif te.signal == OOM_SIGNAL:     # the OOM killer, in the job's cgroup (Slurm's words)
        print(f"srun: error: {te.node}: task {te.rank}: Out Of Memory", file=err, flush=True)
    elif te.signal:
        try:
            name = signal.strsignal(te.signal)
        except ValueError:
            name = None
        print(f"srun: error: {te.node}: task {te.rank}: {name or te.signal}",
              file=err, flush=True)
    elif te.exit_code:
        print(f"srun: error: {te.node}: task {te.rank}: Exited with exit code {te.exit_code}",
              file=err, flush=True)


if __name__ == "__main__":
    sys.exit(main())

"""salloc: get an allocation, run a command in it, give it back.

    $ salloc -N2 srun -l hostname
    salloc: Granted job allocation 30
    0: node1
    1: node2
    salloc: Relinquishing job allocation 30

The command (default: the user's $SHELL) runs here, on the submit host, with
the job's variables (SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_NNODES...) in
its environment, so an srun it starts runs a step in the allocation. When
the allocation had to wait, salloc says so first ("Pending job allocation",
"queued and waiting for resources", "has been allocated resources"), as
Slurm does. salloc exits with the command's exit status (128+signal when a
signal ended it) and the job ends COMPLETED or FAILED with it.

While the command runs, Ctrl-C belongs to the command (salloc ignores
SIGINT, as Slurm's does); SIGTERM or SIGHUP to salloc, scancel, or the time
limit end the allocation, and the command is sent SIGHUP.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import grpc

from cli.allocation import Allocation, AllocationEnded, exit_program
from cli.common import CONNECT_FAILURE, CommandError, details, make_api, run
from lingjun.sbatch_options import build_environment
from cli.srun import allocation_spec
from cli.srun_options import parse_salloc
from lingjun import slurm
from lingjun.client import ControllerUnreachable
from lingjun.v1 import api_pb2

PROG = "salloc"


def main(argv: list[str] | None = None) -> int:
    rc = run(_salloc, argv, None, None, None)
    if argv is None:            # the program itself (not a test calling main)
        exit_program(rc)
    return rc


def _salloc(argv, api, out, err) -> int:
    o = parse_salloc(argv, os.environ)
    command = list(o.command) or [os.environ.get("SHELL") or "/bin/sh"]
    work_dir = os.path.abspath(o.chdir) if o.chdir else os.getcwd()
    own_api = api is None
    try:
        api = api or make_api()
    except ControllerUnreachable as e:
        raise CommandError(f"salloc: error: {e}") from None
    try:
        return _allocate_and_run(api, o, command, work_dir, err)
    finally:
        if own_api:
            api.close()   # before exit, not in gRPC's __del__ at interpreter shutdown


def _allocate_and_run(api, o, command: list[str], work_dir: str, err) -> int:
    child: list[subprocess.Popen] = []

    def revoked(end: api_pb2.AllocationEnded) -> None:
        if end.state == slurm.TIMEOUT:
            print(f"salloc: Job {end.job_id} has exceeded its time limit and its allocation "
                  f"has been revoked.", file=err, flush=True)
        else:
            print(f"salloc: Job allocation {end.job_id} has been revoked.", file=err, flush=True)
        for p in child:
            _signal(p, signal.SIGHUP)

    alloc = Allocation(api, on_revoked=revoked)
    interrupted: list[int] = []

    def on_signal(sig, frame) -> None:
        interrupted.append(sig)
        for p in child:
            _signal(p, signal.SIGHUP)
        if not child:
            alloc.abandon()
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, on_signal)

    def queued(q: api_pb2.AllocationQueued) -> None:
        if not o.quiet:
            print(f"salloc: Pending job allocation {q.job_id}", file=err, flush=True)
            print(f"salloc: job {q.job_id} queued and waiting for resources", file=err, flush=True)

    spec = allocation_spec(o, build_environment("", os.environ), work_dir, PROG,
                           os.path.basename(command[0]))
    try:
        granted = alloc.open(spec, queued)
    except AllocationEnded:
        print(f"salloc: Job allocation {alloc.job_id} has been revoked.", file=err)
        return 1
    except grpc.RpcError as e:
        if interrupted:
            return 1
        if e.code() == grpc.StatusCode.UNAVAILABLE:
            raise CommandError(f"salloc: error: {CONNECT_FAILURE}") from None
        raise CommandError(f"salloc: error: Job submit/allocate failed: {details(e)}") from None
    job_id = granted.job.job_id
    if not o.quiet:
        if granted.waited:
            print(f"salloc: job {job_id} has been allocated resources", file=err, flush=True)
        print(f"salloc: Granted job allocation {job_id}", file=err, flush=True)
    env = dict(os.environ)
    env.update(granted.environment)
    if threading.current_thread() is threading.main_thread():
        # Ctrl-C is the command's, not ours. A handler that does nothing, not
        # SIG_IGN, which the command would inherit.
        signal.signal(signal.SIGINT, lambda sig, frame: None)
    rc = 1
    try:
        try:
            p = subprocess.Popen(command, env=env, cwd=work_dir)
        except OSError as e:
            print(f'salloc: error: Unable to exec command "{" ".join(command)}": {e.strerror}',
                  file=err, flush=True)
        else:
            child.append(p)
            status = p.wait()
            rc = 128 - status if status < 0 else status
    finally:
        if not alloc.ended.is_set():
            if not o.quiet:
                print(f"salloc: Relinquishing job allocation {job_id}", file=err, flush=True)
            if interrupted and rc == 1:
                alloc.abandon()
                alloc.close()
            else:
                alloc.release(rc if rc < 128 else 0, rc - 128 if rc > 128 else 0)
    return rc


def _signal(p: subprocess.Popen, sig: int) -> None:
    try:
        p.send_signal(sig)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())

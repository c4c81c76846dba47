"""srun: run a parallel step inside an allocation.

    srun [-N nodes] [-n tasks] [--ntasks-per-node=N] [-c cpus] [-l] command [args...]

Inside a batch job (``SLURM_JOB_ID`` set, or ``--jobid``) it asks the
controller to launch the tasks on the job's nodes, writes their output to its
own stdout/stderr as it arrives (``-l`` prefixes each line with the task
rank), and exits with the highest task exit code (128+signal for a task
killed by a signal), as Slurm's srun does.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading

import grpc

from lingjun.client import Api, ControllerUnreachable
from lingjun.v1 import api_pb2

PROG = "srun"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # getopt's words and exit code, as Slurm's srun
        sys.stderr.write(f"{PROG}: {message}\nTry \"srun --help\" for more information\n")
        sys.exit(255)


def parse(argv: list[str]) -> argparse.Namespace:
    p = _Parser(prog=PROG, add_help=True, allow_abbrev=True)
    p.add_argument("-N", "--nodes", type=str)
    p.add_argument("-n", "--ntasks", type=int)
    p.add_argument("--ntasks-per-node", type=int)
    p.add_argument("-c", "--cpus-per-task", type=int)
    p.add_argument("-l", "--label", action="store_true")
    p.add_argument("-J", "--job-name")
    p.add_argument("-D", "--chdir")
    p.add_argument("-K", "--kill-on-bad-exit", nargs="?", const="1", default=None)
    p.add_argument("-u", "--unbuffered", action="store_true")
    p.add_argument("--export")
    p.add_argument("--jobid", type=int)
    p.add_argument("--overlap", action="store_true")
    p.add_argument("--exclusive", action="store_true")
    p.add_argument("--mpi")
    p.add_argument("command", nargs=argparse.REMAINDER)
    return p.parse_args(argv)


class _Labeller:
    """Write task output, with ``rank: `` before each line under -l."""

    def __init__(self, label: bool, width: int):
        self.label = label
        self.width = width
        self.partial: dict[tuple[int, int], bytes] = {}

    def write(self, rank: int, stream: int, data: bytes) -> None:
        out = sys.stdout.buffer if stream == 1 else sys.stderr.buffer
        if not self.label:
            out.write(data)
            out.flush()
            return
        buf = self.partial.pop((rank, stream), b"") + data
        *lines, rest = buf.split(b"\n")
        prefix = f"{rank:>{self.width}}: ".encode()
        for line in lines:
            out.write(prefix + line + b"\n")
        if rest:
            self.partial[(rank, stream)] = rest
        out.flush()

    def flush_all(self) -> None:
        for (rank, stream), rest in self.partial.items():
            out = sys.stdout.buffer if stream == 1 else sys.stderr.buffer
            out.write(f"{rank:>{self.width}}: ".encode() + rest + b"\n")
        self.partial.clear()
        sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if not args.command:
        sys.stderr.write("srun: fatal: No command given to execute.\n")
        return 1
    job_id = args.jobid or int(os.environ.get("SLURM_JOB_ID", "0") or 0)
    if not job_id:
        sys.stderr.write("srun: error: srun must run inside an allocation (an sbatch job); "
                         "srun as its own allocation is not supported yet\n")
        return 1
    num_nodes = 0
    if args.nodes:
        try:
            num_nodes = int(args.nodes.split("-")[0])
        except ValueError:
            sys.stderr.write(f"srun: error: \"{args.nodes}\" is not a valid node count\n")
            return 1
    num_tasks = args.ntasks or 0
    if not (args.nodes or args.ntasks or args.ntasks_per_node):
        num_tasks = int(os.environ.get("SLURM_NTASKS", "0") or 0)
        num_nodes = int(os.environ.get("SLURM_NNODES", "0") or 0)
    req = api_pb2.RunStepRequest(
        job_id=job_id, num_nodes=num_nodes, num_tasks=num_tasks,
        ntasks_per_node=args.ntasks_per_node or 0, cpus_per_task=args.cpus_per_task or 0,
        argv=args.command, environment=dict(os.environ),
        work_dir=os.path.abspath(args.chdir) if args.chdir else os.getcwd(),
        name=args.job_name or "", requester_uid=os.getuid(),
        submit_host=socket.gethostname().split(".")[0],
        kill_on_bad_exit=args.kill_on_bad_exit not in (None, "0"))
    try:
        api = Api()
    except ControllerUnreachable as e:
        sys.stderr.write(f"srun: error: {e}\n")
        return 1
    call = api.stream("RunStep", req)
    got_signal: list[int] = []

    def on_signal(sig, frame):
        got_signal.append(sig)
        call.cancel()
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, on_signal)
    out = None
    rc = 1
    try:
        for ev in call:
            kind = ev.WhichOneof("event")
            if kind == "started":
                out = _Labeller(args.label, len(str(max(ev.started.num_tasks - 1, 0))))
            elif kind == "output":
                out.write(ev.output.rank, ev.output.stream, ev.output.data)
            elif kind == "task_exit":
                te = ev.task_exit
                if te.error == "node lost":
                    sys.stderr.write(f"srun: error: {te.node}: task {te.rank}: node lost\n")
                if te.signal:
                    sys.stderr.write(f"srun: error: {te.node}: task {te.rank}: "
                                     f"{signal.strsignal(te.signal) or te.signal}\n")
                elif te.exit_code:
                    sys.stderr.write(f"srun: error: {te.node}: task {te.rank}: "
                                     f"Exited with exit code {te.exit_code}\n")
            elif kind == "done":
                rc = ev.done.exit_code
    except grpc.RpcError as e:
        if got_signal:
            sys.stderr.write("srun: forcing job termination\n")
            return 128 + got_signal[0]
        if e.code() in (grpc.StatusCode.UNAVAILABLE,):
            sys.stderr.write("srun: error: Unable to contact slurm controller (connect failure)\n")
        else:
            sys.stderr.write(f"srun: error: Unable to create step for job {job_id}: {e.details()}\n")
        return 1
    finally:
        if out is not None:
            out.flush_all()
        sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())

"""lingjun logs [-f] [--rank N] JOB[.STEP]: a job's output, from any login node.

- ``JOB``: the batch output (its StdOut file, which holds what its steps
  printed too); ``-f`` follows it until the job ends (the end is told by
  WatchJobs, not found by asking).
- ``JOB.STEP``, or ``--rank N`` (the job's newest running step): every
  rank's output of a running step, each line labelled ``rank: `` as
  ``srun -l`` labels it, through the controller from the agents that run
  the tasks (``sattach``'s stream); ``--rank N`` keeps rank N only. It ends
  when the step ends.

The batch output is read where the file is: this machine must mount the
job's output directory (a shared home or project filesystem, as on most
clusters); relaying the batch file through its agent is not offered.
"""
from __future__ import annotations

import sys

import grpc

from cli import sattach
from cli.step_output import StepOutput
from lingjun import messages

PROG = "lingjun logs"


def logs(job: str, follow: bool = False, rank: int | None = None) -> int:
    from lingjun.sdk import Client, ControllerUnreachable
    try:
        client = Client()
        if "." in job or rank is not None:
            return _step(client, job, rank)
        if not job.isdigit():
            print(f"{PROG}: error: Invalid job id specified: {job}", file=sys.stderr)
            return 1
        j = client.job(int(job))
        if follow:
            for line in j.logs(follow=True):
                sys.stdout.write(line)
                sys.stdout.flush()
        else:
            sys.stdout.write(j.logs())
        return 0
    except ControllerUnreachable:
        print(f"{PROG}: error: Unable to contact slurm controller (connect failure)", file=sys.stderr)
        return 1
    except LookupError as e:
        print(f"{PROG}: error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 1
    except grpc.RpcError as e:
        print(f"{PROG}: error: {e.details()}", file=sys.stderr)
        return 1


def _step(client, job: str, rank: int | None) -> int:
    from cli.common import CommandError
    try:
        if "." in job:
            job_id, step_id = sattach.parse_step(job, PROG)
        else:
            if not job.isdigit():
                raise CommandError(f"{PROG}: error: Invalid job id specified: {job}")
            job_id, step_id = int(job), -1          # its newest running step
        sink = StepOutput(label=True, width=1, unbuffered=False,
                          stdout=sys.stdout.buffer, stderr=sys.stderr.buffer)
        return sattach.follow(client.api, job_id, step_id, sink, rank, rank)
    except CommandError as e:
        print(e.message, file=sys.stderr)
        return e.rc

"""lingjun logs [-f] [--rank N] JOB[.STEP]: a job's output, from any login node.

- ``JOB``: the batch output (its StdOut file, which holds what its steps
  printed too), relayed by the controller from the agent of the node that
  runs (or ran) the batch script (ReadJobOutput; ``Job.output`` in the SDK).
  ``-f`` follows it until the script has ended and the file is read to its
  end; a pending job is waited for.
- ``JOB.STEP``, or ``--rank N`` (the job's newest running step): every
  rank's output of a running step, each line labelled ``rank: `` as
  ``srun -l`` labels it, through the controller from the agents that run
  the tasks (``sattach``'s stream); ``--rank N`` keeps rank N only. It ends
  when the step ends.

The batch output always comes through the relay, never from opening the
file here, even where this machine mounts it: one path, one permission rule
(the job's owner or an operator, as for sattach, checked by the controller)
and one answer for a job whose node is down ("Job's output is on node3,
which is not responding"), rather than a read that works on some machines,
silently shows another host's stale copy on others, and lets anyone who can
read the file see it. The cost is a hop through the controller, in chunks
it asks for one at a time, so a slow reader holds back only its own stream.
"""
from __future__ import annotations

import sys

import grpc

from cli import sattach
from cli.common import CommandError
from cli.step_output import StepOutput
from lingjun import messages

PROG = "lingjun logs"


def logs(job: str, follow: bool = False, rank: int | None = None) -> int:
    from lingjun.sdk import Client, ControllerUnreachable  # here: the SDK and grpc only when logs are read
    try:
        client = Client()
        if "." in job or rank is not None:
            return _step(client, job, rank)
        if not job.isdigit():
            print(f"{PROG}: error: Invalid job id specified: {job}", file=sys.stderr)
            return 1
        out = sys.stdout.buffer
        for data in client.job(int(job)).output(follow=follow):
            out.write(data)
            if follow:
                out.flush()
        out.flush()
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

"""sbatch: submit a batch script.

    $ sbatch --parsable -N2 -t 10 --wrap 'srun hostname'
    42

What to submit is decided by ``lingjun/sbatch_options.py`` (the script's
``#SBATCH`` lines, ``SBATCH_*`` variables and the command line, all checked
before anything is sent); this submits it, retrying an unreachable
controller with the same client token, and prints the job id. The
submission takes an injectable ``api`` so tests run without a server.
"""
from __future__ import annotations

import os
import sys
import time
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Callable, Mapping, TextIO

from cli.common import CONNECT_FAILURE, controller_errors, details, make_api, refusals, run
from lingjun import messages, slurm
from lingjun.endpoints import ControllerUnreachable
from lingjun.sbatch_options import parse_args

PROG = "sbatch"


# --- submitting ---------------------------------------------------------------------------


def submit(api, request: messages.SubmitJobRequest, attempts: int = 4,
           sleep: Callable[[float], None] = time.sleep) -> messages.SubmitJobResponse:
    """Submit, retrying an unreachable controller with the same client token.

    The token makes a retry of a submission the controller did commit return
    that job instead of creating a second one.
    """
    delay = 0.5
    for attempt in range(attempts):
        try:
            return api.call("SubmitJob", request)
        except ControllerUnreachable:
            if attempt == attempts - 1:
                raise
            sleep(delay)
            delay *= 2
    raise ControllerUnreachable("unreachable")


FINISHED = slurm.FINISHED_STATES


def wait_for(api, job_id: int, sleep: Callable[[float], None] = time.sleep) -> int:
    """--wait: poll until the job ends; its exit code (1 when it did not complete)."""
    while True:
        reply = api.call("GetJobs", messages.GetJobsRequest(job_ids=[job_id], all_states=True))
        jobs = [j for j in reply.jobs if j.job_id == job_id]
        if jobs and jobs[0].state in FINISHED:
            j = jobs[0]
            if j.state == slurm.COMPLETED:
                return j.exit_code
            return j.exit_code or 1
        sleep(2.0)


def main(argv: list[str] | None = None, api=None, stdin: TextIO | None = None,
         env: Mapping[str, str] | None = None, cwd: str | None = None,
         out: TextIO | None = None, err: TextIO | None = None,
         sleep: Callable[[float], None] = time.sleep) -> int:
    return run(_sbatch, argv, api, out, err, stdin=stdin, env=env, cwd=cwd, sleep=sleep,
               exit_now=stdin is None and env is None and cwd is None)


def _sbatch(argv: list[str], api, out: TextIO, err: TextIO, stdin: TextIO | None,
            env: Mapping[str, str] | None, cwd: str | None,
            sleep: Callable[[float], None]) -> int:
    parsed = parse_args(argv, stdin, os.environ if env is None else env, cwd or os.getcwd())
    if parsed.info:
        out.write(parsed.info)
        return 0
    for w in parsed.warnings:
        if not parsed.quiet:
            print(w, file=err)
    spec = parsed.request.spec
    with controller_errors("sbatch: error: Batch job submission failed: "):
        api = api or make_api()
        try:
            reply = submit(api, parsed.request, sleep=sleep)
        except refusals() as e:
            # Slurm names the partition on a line of its own before the usual one.
            if details(e) == "Invalid partition name specified":
                print(f"sbatch: error: invalid partition specified: {spec.partition}", file=err)
            raise
    if parsed.request.test_only:
        # The controller's scheduling core estimated this; nothing was queued.
        print(f"sbatch: Job {reply.job_id} to start at "
              f"{slurm.format_timestamp(reply.test_start_time)} using {reply.test_cpus} "
              f"processors on nodes {reply.test_nodes} in partition {reply.test_partition}",
              file=err)
        return 0
    if parsed.parsable:
        print(str(reply.job_id), file=out)
    else:
        print(f"Submitted batch job {reply.job_id}", file=out)
    out.flush()
    if parsed.wait:
        try:
            return wait_for(api, reply.job_id, sleep)
        except ControllerUnreachable:
            print(f"sbatch: error: {CONNECT_FAILURE}", file=err)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

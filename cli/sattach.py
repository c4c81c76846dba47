"""sattach: attach to a running job step's output (Slurm's sattach).

    sattach [-l] [--output-filter=TASK] [--error-filter=TASK] [-Q] JOBID.STEPID

Prints what the step's tasks write from now until the step ends, as srun
prints it: line by line per task, ``-l`` puts ``rank: `` before each line,
``--output-filter``/``--error-filter`` keep one task's stdout/stderr. The
output comes through the controller (RPC AttachStep), which receives it from
the agents that run the tasks, so sattach works from any login node.
Not as Slurm: input is not forwarded (``--input-filter``, ``--pty`` are
refused), and ``--layout`` is not offered.
"""
from __future__ import annotations

import sys
from typing import TextIO

import grpc

from cli.common import CommandError, controller_errors, make_api, parse_options, run
from lingjun.options import NO, REQUIRED, VERSION, Opt
from cli.step_output import StepOutput
from lingjun import messages

PROG = "sattach"
OPTIONS = [
    Opt("label", ("label",), "l", NO), Opt("output_filter", ("output-filter",), "", REQUIRED),
    Opt("error_filter", ("error-filter",), "", REQUIRED),
    Opt("input_filter", ("input-filter",), "", REQUIRED), Opt("pty", ("pty",), "", NO),
    Opt("layout", ("layout",), "", NO), Opt("quiet", ("quiet",), "Q", NO),
    Opt("verbose", ("verbose",), "v", NO), Opt("help", ("help",), "h", NO),
    Opt("usage", ("usage",), "u", NO), Opt("version", ("version",), "V", NO),
]
USAGE = "Usage: sattach [options] <jobid.stepid>\n"


def parse_step(text: str, prog: str = PROG) -> tuple[int, int]:
    job, dot, step = text.partition(".")
    if not dot or not job.isdigit() or not step.isdigit() or int(job) <= 0:
        raise CommandError(f"{prog}: error: Invalid job step ID: {text}")
    return int(job), int(step)


def _filter(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    if not value.isdigit():
        raise CommandError(f"{PROG}: error: Invalid --{name} value: {value}")
    return int(value)


def main(argv: list[str] | None = None, api=None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    return run(_sattach, argv, api, out, err)


def _sattach(argv: list[str], api, out: TextIO, err: TextIO) -> int:
    opts, words = parse_options(PROG, argv, OPTIONS)
    got = {k: v for k, v, _ in opts}
    if "version" in got:
        out.write(VERSION)
        return 0
    if "help" in got or "usage" in got:
        out.write(USAGE + __doc__.split("\n\n", 2)[1] + "\n")
        return 0
    if "input_filter" in got or "pty" in got:
        raise CommandError(f"{PROG}: error: input forwarding (--input-filter, --pty) is not supported")
    if "layout" in got:
        raise CommandError(f"{PROG}: error: --layout is not supported")
    if len(words) != 1:
        raise CommandError(f"{PROG}: error: {'too many parameters' if words else 'no job step ID given'}"
                           f"\n{USAGE.rstrip()}")
    job_id, step_id = parse_step(words[0])
    keep_out = _filter(got.get("output_filter"), "output-filter")
    keep_err = _filter(got.get("error_filter"), "error-filter")
    api = api or make_api()
    width = 1
    with controller_errors(f"{PROG}: error: "):
        reply = api.call("GetJobs", messages.GetJobsRequest(job_ids=[job_id], with_steps=True))
    for j in reply.jobs:
        for s in j.steps:
            if s.step_id == str(step_id) and s.num_tasks:
                width = len(str(s.num_tasks - 1))
    bout = getattr(out, "buffer", None) or _Bytes(out)
    berr = getattr(err, "buffer", None) or _Bytes(err)
    sink = StepOutput(label="label" in got, width=width, unbuffered=False, stdout=bout, stderr=berr)
    return follow(api, job_id, step_id, sink, keep_out, keep_err)


def follow(api, job_id: int, step_id: int, sink: StepOutput, keep_out: int | None = None,
           keep_err: int | None = None) -> int:
    """Write the step's output into ``sink`` until the step ends; 0, or 1 when refused."""
    try:
        for o in api.stream("AttachStep", messages.to_protobuf(messages.AttachStepRequest(
                job_id=job_id, step_id=step_id))):
            keep = keep_out if o.stream == 1 else keep_err
            if keep is None or keep == o.rank:
                sink.write(o.rank, o.stream, o.data)
    except grpc.RpcError as e:
        sink.close()
        if e.code() == grpc.StatusCode.UNAVAILABLE:
            raise CommandError(f"{PROG}: error: Unable to contact slurm controller (connect failure)")
        raise CommandError(f"{PROG}: error: {e.details()}") from None
    sink.close()
    return 0


class _Bytes:
    """A text stream seen as the bytes one StepOutput writes (tests pass StringIO)."""

    def __init__(self, text: TextIO):
        self.text = text

    def write(self, data: bytes) -> None:
        self.text.write(data.decode(errors="replace"))

    def flush(self) -> None:
        self.text.flush()


if __name__ == "__main__":
    sys.exit(main())

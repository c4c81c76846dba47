"""srun's and salloc's command lines, and how srun writes its tasks' output."""
from __future__ import annotations

import io

import pytest

from cli.common import CommandError, Reply
from cli.srun_options import parse_salloc, parse_srun
from cli.step_output import StepOutput


@pytest.mark.parametrize("argv,want", [
    (["hostname"], dict(command=("hostname",))),
    (["-N2", "-l", "hostname"], dict(min_nodes=2, max_nodes=2, label=True, command=("hostname",))),
    (["-N", "2-4", "true"], dict(min_nodes=2, max_nodes=4)),
    (["-n8", "--ntasks-per-node=2", "-c", "3", "true"], dict(ntasks=8, ntasks_per_node=2, cpus_per_task=3)),
    (["-K", "true"], dict(kill_on_bad_exit=True)),
    (["--kill-on-bad-exit=0", "true"], dict(kill_on_bad_exit=False)),
    (["-u", "--overlap", "--exclusive", "true"], dict(unbuffered=True, overlap=True, exclusive=True)),
    (["-o", "out-%t", "-e", "err-%t", "-i", "none", "true"], dict(output="out-%t", error="err-%t")),
    (["--export=NONE", "true"], dict(export="NONE")),
    (["-J", "nm", "-t", "1:30", "-p", "debug", "true"], dict(job_name="nm", time_limit_min=2, partition="debug")),
    (["-w", "node[1-2]", "true"], dict(nodelist=("node1", "node2"))),
    (["--mpi=pmi2", "true"], dict(mpi="pmi2")),
    (["--cpu-bind=none", "true"], dict(ignored=("--cpu-bind",))),
    (["--jobid=12", "true"], dict(jobid=12)),
    (["-l", "bash", "-c", "echo -n hi"], dict(label=True, command=("bash", "-c", "echo -n hi"))),
    (["--gres=gpu:a100:2", "true"], dict(gpus_given=True, gpus_per_node=2, gpu_type="a100")),
    (["-G", "3", "true"], dict(gpus_given=True, gpus=3)),
    (["--gres=none", "true"], dict(gpus_given=True, gpus_per_node=0, gpus=0)),
    (["-n4", "--gpus-per-task=1", "--gpu-bind=single:2", "true"],
     dict(ntasks=4, gpus_per_task=1, gpu_bind="single:2")),
    (["--gpu-bind=verbose,map_gpu:0x3,1*2", "true"], dict(gpu_bind="map_gpu:0x3,1*2")),
    (["--cpus-per-gpu=4", "--mem-per-gpu=2G", "true"], dict(cpus_per_gpu=4, mem_per_gpu_mb=2048)),
    (["--mem=0", "true"], dict(mem_mb=0, mem_per_cpu_mb=None)),
    (["--gres=shard:3", "true"], dict(shards_per_node=3, gpus_per_node=0)),
    (["--gres=mps:25", "true"], dict(mps_per_node=25, gpus_per_node=0)),
    (["--nice=50", "true"], dict(nice=50)),
    (["--nice", "true"], dict(nice=100, command=("true",))),
], ids=["a bare command", "-N2 -l", "a node range", "task shape", "-K alone means 1", "-K=0 turns it off",
        "step sharing flags", "output patterns and input none", "export", "job name, time (rounded up), partition",
        "a hostlist for -w", "pmi2 is accepted", "cpu binding is a hint we accept",
        "an explicit job", "options after the command belong to the command",
        "GPUs per node by --gres, with a type", "GPUs in all by -G", "no GPUs at all",
        "GPUs per task and their binding", "a GPU map", "CPUs and memory per GPU", "all memory",
        "shards of one GPU", "MPS of one GPU", "--nice=N", "a bare --nice is 100"])
def test_srun_options(argv, want):
    got = parse_srun(argv)
    assert {k: getattr(got, k) for k in want} == want


@pytest.mark.parametrize("argv,message,rc", [
    (["--bogus", "x"], "srun: unrecognized option '--bogus'\nTry \"srun --help\" for more information", 255),
    (["-y", "x"], "srun: invalid option -- 'y'\nTry \"srun --help\" for more information", 255),
    (["-N"], "srun: option requires an argument -- 'N'\nTry \"srun --help\" for more information", 255),
    (["-N", "abc", "x"], 'srun: error: "abc" is not a valid node count', 255),
    (["-n", "0", "x"], 'srun: error: Invalid numeric value "0" for --ntasks.', 1),
    (["-t", "soon", "x"], "srun: error: Invalid --time specification", 255),
    (["--mpi=openmpi", "x"], "srun: error: Invalid MPI type 'openmpi', --mpi=list for acceptable types", 1),
    (["-K2", "x"], 'srun: error: Invalid numeric value "2" for --kill-on-bad-exit.', 1),
    (["--gres=gpux:1", "x"], "srun: error: Invalid generic resource (gres) specification", 1),
    (["--gpu-bind=map_gpu:a", "x"], "srun: error: Invalid --gpu-bind argument: gpu:map_gpu:a",
     255),
    (["--mem=1G", "--mem-per-gpu=2G", "x"],
     "srun: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.", 1),
    (["-c2", "--cpus-per-gpu=4", "x"],
     "srun: error: --cpus-per-gpu is mutually exclusive with --cpus-per-task", 1),
    (["--constraint=a", "x"], "srun: error: --constraint is not supported yet", 1),
    (["-i", "in.txt", "x"], "srun: error: --input=in.txt is not supported yet (only none)", 1),
], ids=["unknown long option", "unknown short option", "missing argument", "bad node count",
        "zero tasks", "bad time", "unknown MPI type", "-K takes only 0 or 1",
        "a GRES other than gpu", "a map_gpu entry that is no number",
        "two memory options", "cpus per GPU and per task",
        "options that would change what runs are refused, not dropped",
        "stdin from a file is not relayed"])
def test_srun_bad_input_gets_slurms_words(argv, message, rc):
    with pytest.raises(CommandError) as e:
        parse_srun(argv)
    assert (e.value.message, e.value.rc) == (message, rc)


def test_help_and_mpi_list_answer_on_stdout():
    with pytest.raises(Reply) as e:
        parse_srun(["--help"])
    assert e.value.text.startswith("Usage: srun")
    with pytest.raises(Reply) as e:
        parse_srun(["--mpi=list"])
    assert "pmi2" in e.value.text


def test_salloc_takes_no_srun_only_options():
    assert parse_salloc(["-N2", "srun", "-l", "hostname"]).command == ("srun", "-l", "hostname")
    with pytest.raises(CommandError) as e:
        parse_salloc(["-l", "true"])
    assert e.value.message.startswith("salloc: invalid option -- 'l'")


def _output(label=False, unbuffered=False, width=1):
    out, err = io.BytesIO(), io.BytesIO()
    return StepOutput(label, width, unbuffered, out, err), out, err


@pytest.mark.parametrize("label,unbuffered,chunks,want", [
    (False, False, [(0, b"he"), (1, b"x\n"), (0, b"llo\n")], b"x\nhello\n"),
    (True, False, [(0, b"he"), (1, b"x\n"), (0, b"llo\nbye")], b"1: x\n0: hello\n0: bye\n"),
    (False, True, [(0, b"he"), (1, b"x\n"), (0, b"llo\n")], b"hex\nllo\n"),
    (True, True, [(0, b"he"), (0, b"llo\n\nnext")], b"0: hello\n0: \n0: next"),
], ids=["lines of two tasks never mix (line-buffered)", "-l labels every line, the last one at the end",
        "-u writes each chunk as it comes", "-u -l labels each line start, blank lines too"])
def test_task_output(label, unbuffered, chunks, want):
    o, out, _ = _output(label, unbuffered)
    for rank, data in chunks:
        o.write(rank, 1, data)
    o.close()
    assert out.getvalue() == want


def test_stderr_goes_to_its_own_stream():
    o, out, err = _output(label=True)
    o.write(0, 2, b"oops\n")
    o.write(0, 1, b"fine\n")
    assert (out.getvalue(), err.getvalue()) == (b"0: fine\n", b"0: oops\n")

"""sbatch --launcher: real distributed programs form the right world (issue: launchers).

One 4-node cluster (2 CPUs each) for the module; torch (CPU, gloo, from the
``launch-test`` extra that .ci/run installs) runs for real, Ray is a fake `ray` on PATH that records its command line and listens
where a head would (the real one is too heavy for a 2-core test machine).
"""
from __future__ import annotations

import re
import shutil
import sys
import time
from pathlib import Path

import pytest

ALLREDUCE = """\
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank={dist.get_rank()} local={os.environ['LOCAL_RANK']} "
      f"node={os.environ['NODE_RANK']} world={dist.get_world_size()} "
      f"host={os.environ['SLURMD_NODENAME']} sum={int(t.item())}", flush=True)
dist.destroy_process_group()
"""

LINE = re.compile(r"rank=(\d+) local=(\d+) node=(\d+) world=(\d+) host=(\S+) sum=(\d+)")


@pytest.fixture(scope="module")
def program(cluster):
    path = cluster.work / "allreduce.py"
    path.write_text(ALLREDUCE)
    return path


def _run_job(cluster, name: str, body: str, *args: str, timeout: float = 120) -> str:
    script = cluster.work / f"{name}.sh"
    script.write_text(f"#!/bin/sh\n#SBATCH -o {name}-%j.out\n{body}\n")
    jid = cluster.sbatch(*args, str(script))
    state = cluster.wait_state(jid, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"),
                               timeout=timeout)
    out = (cluster.work / f"{name}-{jid}.out").read_text()
    assert state == "COMPLETED", f"want COMPLETED, got {state}; output:\n{out}"
    return out


def _ranks(out: str) -> list[tuple[int, int, int, int, str, int]]:
    return sorted((int(r), int(l), int(n), int(w), h, int(s))
                  for r, l, n, w, h, s in LINE.findall(out))


@pytest.mark.parametrize("args, want", [
    (("-N", "4", "--launcher=torchrun"),
     [(0, 0, 0, 4, "node1", 10), (1, 0, 1, 4, "node2", 10),
      (2, 0, 2, 4, "node3", 10), (3, 0, 3, 4, "node4", 10)]),
    (("-N", "2", "--ntasks-per-node=2", "--launcher=torchrun"),
     [(0, 0, 0, 4, "node1", 10), (1, 1, 0, 4, "node1", 10),
      (2, 0, 1, 4, "node2", 10), (3, 1, 1, 4, "node2", 10)]),
], ids=["4 ranks on 4 nodes all-reduce to 10 with nothing but srun",
        "2 ranks on each of 2 nodes get LOCAL_RANK 0 and 1 and all-reduce to 10"])
def test_torch_gloo_all_reduce_under_srun(cluster, program, args, want):
    out = _run_job(cluster, "torch", f"srun {sys.executable} {program}", *args)
    assert _ranks(out) == want, f"want {want}\ngot output:\n{out}"


def test_plain_slurm_variables_are_enough_for_torch(cluster, program):
    """README's recipe without --launcher: everything from SLURM_* alone."""
    body = (
        f"MASTER_ADDR=$({sys.executable} -c 'import hostlist, os; "
        "print(hostlist.expand_hostlist(os.environ[\"SLURM_JOB_NODELIST\"])[0])')\n"
        "export MASTER_ADDR=127.0.0.1  # node names are not resolvable on a local cluster\n"
        f"export MASTER_PORT=$({sys.executable} -c 'import socket; s=socket.socket(); "
        "s.bind((\"\", 0)); print(s.getsockname()[1])')\n"
        "srun sh -c 'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID NODE_RANK=$SLURM_NODEID "
        f"WORLD_SIZE=$SLURM_NTASKS exec {sys.executable} {program}'")
    out = _run_job(cluster, "plain", body, "-N", "2")
    want = [(0, 0, 0, 2, "node1", 3), (1, 0, 1, 2, "node2", 3)]
    assert _ranks(out) == want, f"want {want}\ngot output:\n{out}"


def test_torchrun_per_node_finds_its_arguments_in_the_environment(cluster, program):
    """`srun --ntasks-per-node=1 torchrun train.py`: PET_* give torchrun the world."""
    torchrun = Path(sys.executable).parent / "torchrun"
    out = _run_job(cluster, "trun", f"srun --ntasks-per-node=1 {torchrun} {program}",
                   "-N", "2", "--ntasks-per-node=2", "--launcher=torchrun")
    want = [(0, 0, 0, 4, "node1", 10), (1, 1, 0, 4, "node1", 10),
            (2, 0, 1, 4, "node2", 10), (3, 1, 1, 4, "node2", 10)]
    assert _ranks(out) == want, f"want {want}\ngot output:\n{out}"


@pytest.mark.parametrize("launcher, want", [
    ("deepspeed", {"LINGJUN_HOSTFILE": "node1 slots=2\nnode2 slots=2\nnode3 slots=2\n"}),
    ("mpi", {"LINGJUN_HOSTFILE": "node1 slots=2\nnode2 slots=2\nnode3 slots=2\n",
             "LINGJUN_MACHINEFILE": "node1:2\nnode2:2\nnode3:2\n"}),
], ids=["deepspeed writes a 'host slots=N' hostfile of the allocation",
        "mpi writes an Open MPI hostfile and an MPICH machinefile"])
def test_host_files_list_the_allocation(cluster, launcher, want):
    body = "\n".join(f"echo '== {var}'; cat \"${var}\"" for var in want)
    out = _run_job(cluster, f"hosts-{launcher}", body, "-N", "3", "--ntasks-per-node=2",
                   f"--launcher={launcher}")
    got = {}
    for block in out.split("== ")[1:]:
        var, _, text = block.partition("\n")
        got[var] = text
    assert got == want, f"want {want}\ngot output:\n{out}"


def test_mpi_ranks_get_pmi_less_variables(cluster):
    body = ("srun sh -c 'echo \"mpi $SLURM_PROCID $OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_SIZE "
            "$OMPI_COMM_WORLD_LOCAL_RANK $OMPI_COMM_WORLD_NODE_RANK $PMI_RANK $PMI_SIZE\"'")
    out = _run_job(cluster, "mpienv", body, "-N", "2", "--ntasks-per-node=2", "--launcher=mpi")
    got = sorted(l for l in out.splitlines() if l.startswith("mpi "))
    want = ["mpi 0 0 4 0 0 0 4", "mpi 1 1 4 1 0 1 4", "mpi 2 2 4 0 1 2 4", "mpi 3 3 4 1 1 3 4"]
    assert got == want, f"want {want}\ngot output:\n{out}"


FAKE_RAY = """#!{python}
# A stand-in for `ray start`: records its argv per node; a head listens on --port.
import os, socket, sys, time
with open(os.path.join(os.environ["FAKE_RAY_DIR"], os.environ["SLURMD_NODENAME"]), "w") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if "--head" in sys.argv:
    port = int(next(a for a in sys.argv if a.startswith("--port="))[len("--port="):])
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
time.sleep(300)
"""


def test_ray_head_and_workers_start_with_the_job_and_stop_at_its_end(cluster):
    bindir = cluster.work / "fake-ray-bin"
    record = cluster.work / "fake-ray-record"
    bindir.mkdir()
    record.mkdir()
    ray = bindir / "ray"
    ray.write_text(FAKE_RAY.format(python=sys.executable))
    ray.chmod(0o755)
    env = dict(cluster.env, PATH=f"{bindir}:{cluster.env['PATH']}", FAKE_RAY_DIR=str(record))
    script = cluster.work / "ray.sh"
    # The batch script sees RAY_ADDRESS with the head already up; it waits
    # for the three workers to have started, as a Ray driver would wait for nodes.
    script.write_text("#!/bin/sh\n#SBATCH -o ray-%j.out\n"
                      "echo \"RAY_ADDRESS=$RAY_ADDRESS\"\n"
                      f"{sys.executable} -c 'import socket, os; h, p = os.environ[\"RAY_ADDRESS\"]"
                      ".split(\":\"); socket.create_connection((h, int(p))); print(\"head up\")'\n"
                      f"for i in $(seq 300); do [ $(ls {record} | wc -l) -ge 4 ] && break; "
                      "sleep 0.1; done\n")
    p = cluster.run(["sbatch", "--parsable", "-N", "4", "-c", "2", "--launcher=ray", str(script)],
                    env=env, check=True)
    jid = int(p.stdout.strip())
    state = cluster.wait_state(jid, ("COMPLETED", "FAILED", "CANCELLED"), timeout=60)
    out = (cluster.work / f"ray-{jid}.out").read_text()
    assert state == "COMPLETED", f"want COMPLETED, got {state}; output:\n{out}"
    m = re.search(r"^RAY_ADDRESS=127\.0\.0\.1:(\d+)$", out, re.M)
    assert m and "head up" in out, f"want RAY_ADDRESS=127.0.0.1:PORT and a live head, got:\n{out}"
    port = m.group(1)
    got = {f.name: f.read_text() for f in record.iterdir()}
    want = {"node1": f"start --head --node-ip-address=127.0.0.1 --port={port} --num-cpus=2 --block\n"}
    want.update({n: f"start --address=127.0.0.1:{port} --num-cpus=2 --block\n"
                 for n in ("node2", "node3", "node4")})
    assert got == want, f"want {want}\ngot {got}"
    deadline = time.time() + 30
    while cluster.job_processes(jid) and time.time() < deadline:
        time.sleep(0.2)
    left = cluster.job_processes(jid)
    assert not left, f"want no Ray process left after the job, got {[p.cmdline() for p in left]}"


def test_ray_head_that_cannot_start_fails_the_job_before_its_script_runs(cluster):
    """No `ray` on PATH: the job fails as a launch failure; the script never runs."""
    marker = cluster.work / "ray-script-ran"
    assert not shutil.which("ray", path=cluster.env["PATH"]), "this test wants no ray on PATH"
    p = cluster.run(["sbatch", "--parsable", "-N", "2", "--launcher=ray", "--wrap",
                     f"touch {marker}"], check=True)
    jid = int(p.stdout.strip())
    state = cluster.wait_state(jid, ("COMPLETED", "FAILED", "CANCELLED"), timeout=60)
    reason = cluster.run(["scontrol", "show", "job", str(jid)]).stdout
    assert (state, marker.exists()) == ("FAILED", False), f"got {state}, ran={marker.exists()}"
    assert "Reason=JobLaunchFailure" in reason, f"want Reason=JobLaunchFailure, got:\n{reason}"


@pytest.mark.parametrize("args, env, want_err", [
    (["--launcher=horovod"], {}, "sbatch: error: Invalid --launcher argument: horovod "
                                 "(one of torchrun, deepspeed, mpi, ray)"),
    ([], {"SBATCH_LAUNCHER": "slurm"}, "sbatch: error: Invalid --launcher argument: slurm "
                                       "(one of torchrun, deepspeed, mpi, ray)"),
], ids=["an unknown launcher on the command line is refused", "and in SBATCH_LAUNCHER"])
def test_unknown_launcher_is_refused_and_submits_nothing(cluster, args, env, want_err):
    before = cluster.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout
    p = cluster.run(["sbatch", *args, "--wrap", "true"], env=dict(cluster.env, **env))
    assert (p.returncode, p.stderr.strip()) == (255, want_err)
    assert cluster.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout == before

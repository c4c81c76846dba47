"""Distributed launchers: what ``sbatch --launcher=NAME`` adds to a job.

Slurm gives every task its place (SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID,
SLURM_NTASKS, SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE); each framework wants
the same facts under its own names. A launcher is one row of ``LAUNCHERS``:
the variables it sets from a task's ``Place``, the variables that carry the
rendezvous port, the host files it writes, and the services (Ray's head and
workers) it starts. Adding a framework is adding a row.

Who fills what, and why there:

    controller (jobenv)   Place-derived variables for the batch script and for
                          every srun task; MASTER_ADDR is the first node's
                          registered address, which agents on other nodes reach
    agent of the first    the port (bound to 0 on that node, so it is free
    node (batch launch)   there, not guessed by the controller), the host
                          files in the job's directory, the head service
    controller, once the  the worker services on the other nodes, with the port
    batch runs            the first node reported

srun inside the job inherits LINGJUN_LAUNCHER, MASTER_ADDR, MASTER_PORT and
the host file paths through its environment, as it inherits every variable.

Elastic torchrun (``--launcher=torchrun`` with ``-N min-max``): torchrun's
c10d rendezvous instead of its static one, at an endpoint the first node's
agent hosts (a TCPStore run as the job's service step, on a port of its
own; MASTER_PORT stays free for env:// programs), so no node of the job
has to host it and torchrun forms the world of whatever nodes a run has:

    controller (jobenv)   PET_RDZV_BACKEND=c10d, PET_RDZV_CONF (is_host=false:
                          torchrun never hosts it; a short last call), and per
                          step PET_RDZV_ID=<job>.<restart>.<step> (one
                          rendezvous per torchrun launch: a finished one is
                          closed); PET_NNODES the run's node count
    agent of the first    a free port, PET_RDZV_ENDPOINT=<addr>:<port>, and the
    node (batch launch)   store listening there before the script starts

torchrun then numbers nodes in the order they join (its GROUP_RANK), not by
SLURM_NODEID; fixed-size jobs keep the static rendezvous, where they agree.

For ``sbatch -N2 --ntasks-per-node=2 --launcher=torchrun`` on node[1-2],
``srun python train.py`` gives the task with SLURM_PROCID=3 RANK=3
LOCAL_RANK=1 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 NODE_RANK=1 NNODES=2
NPROC_PER_NODE=2, and MASTER_ADDR/MASTER_PORT of node1.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable

Slots = list[tuple[str, int]]  # (host, tasks there) in allocation order

ENV_VAR = "LINGJUN_LAUNCHER"
# Services run as a step of the job that srun never sees: Slurm's "extern"
# step id (SLURM_EXTERN_CONT, 0xfffffffc) read as an int32.
SERVICE_STEP_ID = -4
# How long the first node waits for a head service to listen before it calls
# the launch failed.
HEAD_START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Place:
    """Where one process of a job stands, in the job's and its step's terms."""
    master_addr: str        # the first node's registered address
    nnodes: int             # nodes of the step (of the job, for the batch script)
    node_rank: int          # SLURM_NODEID
    nproc_per_node: int     # the job's tasks on this node: what torchrun starts here
    world_size: int         # SLURM_NTASKS of the step
    rank: int               # SLURM_PROCID
    local_rank: int         # SLURM_LOCALID
    local_world_size: int   # the step's tasks on this node


# torch.distributed's env:// reads the first six; torchrun's own arguments
# can come from PET_* variables (its argparse "env" action), so a bare
# `srun --ntasks-per-node=1 torchrun train.py` forms the right world too.
_TORCH = {
    "MASTER_ADDR": "{master_addr}",
    "WORLD_SIZE": "{world_size}",
    "RANK": "{rank}",
    "LOCAL_RANK": "{local_rank}",
    "LOCAL_WORLD_SIZE": "{local_world_size}",
    "NODE_RANK": "{node_rank}",
    "GROUP_RANK": "{node_rank}",
    "NNODES": "{nnodes}",
    "NPROC_PER_NODE": "{nproc_per_node}",
    "PET_NNODES": "{nnodes}",
    "PET_NODE_RANK": "{node_rank}",
    "PET_NPROC_PER_NODE": "{nproc_per_node}",
    "PET_MASTER_ADDR": "{master_addr}",
}
_TORCH_PORT = {"MASTER_PORT": "{port}", "PET_MASTER_PORT": "{port}"}
# What an MPI library's launcher would have told each rank: Open MPI's
# OMPI_COMM_WORLD_* and the PMI_* names of MPICH's Hydra, for wrappers and
# libraries (Horovod, DeepSpeed's mpi discovery) that read them without PMI.
_MPI = {
    "OMPI_COMM_WORLD_RANK": "{rank}",
    "OMPI_COMM_WORLD_SIZE": "{world_size}",
    "OMPI_COMM_WORLD_LOCAL_RANK": "{local_rank}",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "{local_world_size}",
    "OMPI_COMM_WORLD_NODE_RANK": "{node_rank}",
    "PMI_RANK": "{rank}",
    "PMI_SIZE": "{world_size}",
}


def openmpi_hostfile(slots: Slots) -> str:
    """Open MPI's --hostfile and DeepSpeed's hostfile: ``node1 slots=2``."""
    return "".join(f"{host} slots={n}\n" for host, n in slots)


def mpich_machinefile(slots: Slots) -> str:
    """MPICH/Hydra's -f machinefile: ``node1:2``."""
    return "".join(f"{host}:{n}\n" for host, n in slots)


@dataclass(frozen=True)
class Launcher:
    name: str
    env: dict[str, str]                 # name -> template over Place's fields
    port_env: dict[str, str]            # name -> template over {addr} and {port}
    # env var -> (file name in the job's directory, renderer over (host, slots))
    files: dict[str, tuple[str, Callable[[Slots], str]]] = field(default_factory=dict)
    head: tuple[str, ...] = ()          # argv run on the first node before the script
    worker: tuple[str, ...] = ()        # argv run on every other node (blocking)


LAUNCHERS: dict[str, Launcher] = {launcher.name: launcher for launcher in (
    Launcher("torchrun", env=_TORCH, port_env=_TORCH_PORT),
    # DLTS_HOSTFILE: the name DeepSpeed's runner gives its default hostfile,
    # which Slurm recipes export for `deepspeed --hostfile=$DLTS_HOSTFILE`.
    Launcher("deepspeed", env=_TORCH, port_env=_TORCH_PORT,
             files={"LINGJUN_HOSTFILE": ("hostfile", openmpi_hostfile),
                    "DLTS_HOSTFILE": ("hostfile", openmpi_hostfile)}),
    Launcher("mpi", env={**_TORCH, **_MPI}, port_env=_TORCH_PORT,
             files={"LINGJUN_HOSTFILE": ("hostfile", openmpi_hostfile),
                    "LINGJUN_MACHINEFILE": ("machinefile", mpich_machinefile)}),
    Launcher("ray", env={"MASTER_ADDR": "{master_addr}", "NNODES": "{nnodes}",
                         "NODE_RANK": "{node_rank}"},
             port_env={"RAY_ADDRESS": "{addr}:{port}"},
             head=("ray", "start", "--head", "--node-ip-address={addr}", "--port={port}",
                   "--num-cpus={cpus}", "--block"),
             worker=("ray", "start", "--address={addr}:{port}", "--num-cpus={cpus}",
                     "--block")),
)}
NAMES = tuple(LAUNCHERS)


class UnknownLauncher(ValueError):
    pass


def get(name: str) -> Launcher:
    try:
        return LAUNCHERS[name]
    except KeyError:
        raise UnknownLauncher(name) from None


def environment(name: str, place: Place) -> dict[str, str]:
    """The variables launcher ``name`` sets for a process at ``place``."""
    values = dataclasses.asdict(place)
    env = {k: v.format(**values) for k, v in get(name).env.items()}
    env[ENV_VAR] = name
    return env


def rank_environment(name: str, rank: int, local_rank: int) -> dict[str, str]:
    """The variables of ``environment`` that differ between tasks on one node."""
    return {k: v.format(rank=rank, local_rank=local_rank)
            for k, v in get(name).env.items() if v in ("{rank}", "{local_rank}")}


def port_environment(name: str, addr: str, port: int) -> dict[str, str]:
    """The variables that carry the rendezvous port chosen on the first node."""
    return {k: v.format(addr=addr, port=port) for k, v in get(name).port_env.items()}


def host_files(name: str, slots: Slots) -> dict[str, tuple[str, str]]:
    """env var -> (file name, contents) of the launcher's host files."""
    return {var: (fname, render(slots)) for var, (fname, render) in get(name).files.items()}


# The c10d rendezvous store of an elastic torchrun job: plain torch, no Lingjun
# import (it runs under the job's python, which has torch; the agent's may not).
RDZV_STORE = (
    "import sys, time\n"
    # -c put the job's directory first on the path (the job's python may
    # predate -P): torch comes from its installation, not from a file there
    "if sys.path and sys.path[0] == '':\n"
    "    del sys.path[0]\n"
    "from torch.distributed import TCPStore\n"
    "store = TCPStore(sys.argv[1], int(sys.argv[2]), is_master=True, wait_for_workers=False)\n"
    "while True:\n"
    "    time.sleep(3600)\n")
RDZV_BACKEND_VAR = "PET_RDZV_BACKEND"
RDZV_ENDPOINT_VAR = "PET_RDZV_ENDPOINT"


def elastic(name: str, min_nodes: int, max_nodes: int) -> bool:
    """Whether a job runs launcher ``name`` elastically (torchrun's c10d rendezvous)."""
    return name == "torchrun" and max_nodes > max(min_nodes, 1)


def rendezvous_environment(job_id: int, restarts: int, step: str) -> dict[str, str]:
    """What the controller sets for an elastic torchrun: backend, run id, config."""
    return {RDZV_BACKEND_VAR: "c10d", "PET_RDZV_ID": f"{job_id}.{restarts}.{step}",
            "PET_RDZV_CONF": "is_host=false,last_call_timeout=2"}


def rendezvous_argv(python: str, addr: str, port: int) -> list[str]:
    """The agent-hosted c10d store, listening on addr:port."""
    return [python, "-c", RDZV_STORE, addr, str(port)]


def head_argv(name: str, addr: str, port: int, cpus: int) -> list[str]:
    return [a.format(addr=addr, port=port, cpus=cpus) for a in get(name).head]


def worker_argv(name: str, addr: str, port: int, cpus: int) -> list[str]:
    return [a.format(addr=addr, port=port, cpus=cpus) for a in get(name).worker]

"""The launcher table and the environment each srun task gets from it."""
from __future__ import annotations

import socket

import grpc
import pytest

from lingjun import launchers
from lingjun.v1 import api_pb2
from lingjun_agent.launcher import distributed
from lingjund.service import jobenv
from lingjund.store.store import JobRecord
from tests.lingjund.test_api import api  # noqa: F401  (the controller-on-a-socket fixture)
from tests.lingjund.test_api import spec as api_spec


def job(launcher: str, nodes=("node1", "node2"), tasks=(2, 2)) -> JobRecord:
    spec = api_pb2.JobSpec(name="train", work_dir="/w", user="u", uid=1000, gid=1000,
                           launcher=launcher)
    return JobRecord(job_id=7, name="train", user="u", uid=1000, partition="debug",
                     state="RUNNING", reason="None", priority=1, submit_time=0,
                     time_limit_min=10, spec=spec, nodes=nodes, cpus_per_node=tasks,
                     tasks_per_node=tasks)


def task(j: JobRecord, rank: int, base_env=None, tasks=None) -> dict[str, str]:
    """What srun's task ``rank`` sees, as the controller builds it."""
    tasks = list(tasks or j.tasks_per_node)
    per_node = jobenv.step_env(j, "c", "ctl:1", step_id=0, step_nodes=j.nodes,
                               tasks_per_node=tasks, base_env=base_env or {})
    first = 0
    for i, node in enumerate(j.nodes):
        if rank < first + tasks[i]:
            env = dict(per_node[node])
            env.update(jobenv.task_env(rank, rank - first, per_node[node]))
            return env
        first += tasks[i]
    raise AssertionError(rank)


TORCH_KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "NNODES",
              "NPROC_PER_NODE", "MASTER_ADDR", "MASTER_PORT", "PET_NODE_RANK", "PET_NNODES",
              "PET_NPROC_PER_NODE", "LINGJUN_LAUNCHER"]
BASE = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "LINGJUN_LAUNCHER": "torchrun"}


@pytest.mark.parametrize("rank, want", [
    (0, ["0", "0", "4", "2", "0", "2", "2", "10.0.0.1", "29500", "0", "2", "2", "torchrun"]),
    (1, ["1", "1", "4", "2", "0", "2", "2", "10.0.0.1", "29500", "0", "2", "2", "torchrun"]),
    (3, ["3", "1", "4", "2", "1", "2", "2", "10.0.0.1", "29500", "1", "2", "2", "torchrun"]),
], ids=["rank 0 is local rank 0 of node 0", "rank 1 is local rank 1 of node 0",
        "rank 3 is local rank 1 of node 1"])
def test_torchrun_task_places_follow_slurm_ranks(rank, want):
    got = task(job("torchrun"), rank, BASE)
    assert [got.get(k) for k in TORCH_KEYS] == want
    assert (got["SLURM_PROCID"], got["SLURM_NODEID"]) == (want[0], want[4])


def test_one_torchrun_per_node_still_starts_the_jobs_tasks_per_node():
    """`srun --ntasks-per-node=1 torchrun`: one task per node, NPROC_PER_NODE 2."""
    got = task(job("torchrun"), 1, BASE, tasks=[1, 1])
    assert {k: got[k] for k in ("RANK", "WORLD_SIZE", "NODE_RANK", "PET_NPROC_PER_NODE",
                                "LOCAL_WORLD_SIZE")} == \
        {"RANK": "1", "WORLD_SIZE": "2", "NODE_RANK": "1", "PET_NPROC_PER_NODE": "2",
         "LOCAL_WORLD_SIZE": "1"}


def test_mpi_ranks_get_open_mpi_and_pmi_names():
    got = task(job("mpi"), 3, {**BASE, "LINGJUN_LAUNCHER": "mpi"})
    assert {k: v for k, v in got.items() if k.startswith(("OMPI_", "PMI_"))} == {
        "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        "OMPI_COMM_WORLD_NODE_RANK": "1", "PMI_RANK": "3", "PMI_SIZE": "4"}


def test_without_a_launcher_srun_tasks_get_only_slurms_variables():
    got = task(job(""), 3, {})
    assert [k for k in TORCH_KEYS if k in got] == []


def test_a_job_without_launcher_does_not_inherit_its_submitters():
    j = job("")
    j.spec.environment["LINGJUN_LAUNCHER"] = "torchrun"  # sbatch run inside a launcher job
    got = jobenv.batch_env(j, "c", "ctl:1", master_addr="10.0.0.1")
    assert "LINGJUN_LAUNCHER" not in got and "RANK" not in got


def test_batch_script_gets_the_first_nodes_address_and_the_whole_world():
    got = jobenv.batch_env(job("deepspeed"), "c", "ctl:1", master_addr="10.0.0.1")
    assert {k: got.get(k) for k in ("MASTER_ADDR", "WORLD_SIZE", "NNODES", "NODE_RANK", "RANK",
                                    "LINGJUN_LAUNCHER", "MASTER_PORT")} == \
        {"MASTER_ADDR": "10.0.0.1", "WORLD_SIZE": "4", "NNODES": "2", "NODE_RANK": "0",
         "RANK": "0", "LINGJUN_LAUNCHER": "deepspeed", "MASTER_PORT": None}


@pytest.mark.parametrize("name, want_env, want_files", [
    ("torchrun", {"MASTER_PORT": "{port}", "PET_MASTER_PORT": "{port}"}, {}),
    ("deepspeed", {"MASTER_PORT": "{port}", "PET_MASTER_PORT": "{port}",
                   "LINGJUN_HOSTFILE": "{dir}/hostfile", "DLTS_HOSTFILE": "{dir}/hostfile"},
     {"hostfile": "node1 slots=2\nnode2 slots=2\nnode3 slots=1\n"}),
    ("mpi", {"MASTER_PORT": "{port}", "PET_MASTER_PORT": "{port}",
             "LINGJUN_HOSTFILE": "{dir}/hostfile", "LINGJUN_MACHINEFILE": "{dir}/machinefile"},
     {"hostfile": "node1 slots=2\nnode2 slots=2\nnode3 slots=1\n",
      "machinefile": "node1:2\nnode2:2\nnode3:1\n"}),
    ("ray", {"RAY_ADDRESS": "10.0.0.1:{port}"}, {}),
], ids=["torchrun: only the port", "deepspeed: port and hostfile",
        "mpi: port, hostfile and machinefile", "ray: the head's address"])
def test_first_node_adds_a_free_port_and_host_files(tmp_path, name, want_env, want_files):
    env = {"MASTER_ADDR": "10.0.0.1", "SLURM_JOB_NODELIST": "node[1-3]",
           "SLURM_TASKS_PER_NODE": "2(x2),1"}
    port, files = distributed.prepare(name, env, tmp_path)
    with socket.socket() as s:  # it was free, so it can be bound again now
        s.bind(("", port))
    added = {k: v for k, v in env.items() if k not in ("MASTER_ADDR", "SLURM_JOB_NODELIST",
                                                       "SLURM_TASKS_PER_NODE")}
    assert added == {k: v.format(port=port, dir=tmp_path) for k, v in want_env.items()}
    assert files == want_files


def test_ray_head_and_worker_command_lines():
    assert launchers.head_argv("ray", "10.0.0.1", 6400, 8) == [
        "ray", "start", "--head", "--node-ip-address=10.0.0.1", "--port=6400",
        "--num-cpus=8", "--block"]
    assert launchers.worker_argv("ray", "10.0.0.1", 6400, 4) == [
        "ray", "start", "--address=10.0.0.1:6400", "--num-cpus=4", "--block"]
    assert launchers.head_argv("torchrun", "10.0.0.1", 6400, 8) == []


def test_every_launcher_sets_only_what_its_templates_can_fill():
    place = launchers.Place(master_addr="a", nnodes=2, node_rank=1, nproc_per_node=2,
                            world_size=4, rank=3, local_rank=1, local_world_size=2)
    for name in launchers.NAMES:
        env = launchers.environment(name, place)
        assert all("{" not in v for v in env.values()), (name, env)
        assert env[launchers.ENV_VAR] == name
    with pytest.raises(launchers.UnknownLauncher):
        launchers.get("horovod")



def test_controller_refuses_an_unknown_launcher_and_changes_nothing(api):
    """A client other than our sbatch (grpcurl, an SDK) gets the same word."""
    stub, store = api
    before = store.dump()
    with pytest.raises(grpc.RpcError) as e:
        stub.SubmitJob(api_pb2.SubmitJobRequest(spec=api_spec(launcher="horovod")))
    assert (e.value.code(), e.value.details()) == \
        (grpc.StatusCode.INVALID_ARGUMENT, "Invalid --launcher argument: horovod")
    assert store.dump() == before

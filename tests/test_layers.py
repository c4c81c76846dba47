"""The controller's layers keep to their own business (DESIGN.md, "The controller").

Service code never imports gRPC: its errors carry Slurm's words, and the one
table that turns them into statuses lives in the transport
(lingjund/transport/status.py). The lifecycle is pure: the Slurm vocabulary,
the store's record types and the standard library, nothing that does I/O.
Checked twice: every import statement in the files (function-local ones
too), and what importing the modules loads, in an interpreter of its own.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from lingjund.service import authz, errors
from lingjund.transport.status import status_of

ROOT = Path(__file__).resolve().parent.parent
SERVICE = sorted((ROOT / "lingjund" / "service").glob("*.py"))
LIFECYCLE = ROOT / "lingjund" / "lifecycle.py"
# what the lifecycle may import: the vocabulary, plain records, the standard library
LIFECYCLE_ALLOWED = {"__future__", "dataclasses", "functools", "signal", "typing",
                     "lingjun", "lingjun.slurm", "lingjund.store.store"}


def imports(path: Path) -> set[str]:
    """Every module an import statement in ``path`` names (``from a import b``: a and a.b)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            if node.module in ("lingjun", "lingjund"):
                out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def is_grpc(module: str) -> bool:
    return module.split(".")[0].startswith("grpc") or module.endswith("_pb2_grpc")


@pytest.mark.parametrize("path", SERVICE + [LIFECYCLE], ids=lambda p: p.name)
def test_service_and_lifecycle_modules_do_not_import_grpc(path):
    found = sorted(m for m in imports(path) if is_grpc(m))
    assert not found, f"{path.relative_to(ROOT)} imports {found}; want no gRPC below the transport"


def test_the_lifecycle_imports_only_the_vocabulary_records_and_the_standard_library():
    extra = sorted(imports(LIFECYCLE) - LIFECYCLE_ALLOWED)
    assert not extra, f"lingjund/lifecycle.py imports {extra}; want only {sorted(LIFECYCLE_ALLOWED)}"


def test_importing_the_service_layer_and_the_lifecycle_loads_no_grpc():
    mods = ["lingjund.lifecycle"] + [f"lingjund.service.{p.stem}" for p in SERVICE
                                     if p.stem != "__init__"]
    code = ("import importlib, json, sys\n"
            f"for m in {mods!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0].startswith('grpc'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == [], "importing the service layer loaded gRPC"


# The statuses the commands depend on (sbatch, scontrol, scancel read them): as
# they were when each error carried its own.
STATUSES = [
    (errors.SlurmError, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.InvalidPartition, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NodeConfigUnavailable, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.InvalidNodeCount, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.TooManyCpus, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.InvalidTimeLimit, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.InvalidFeature, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.InvalidGres, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.InvalidArraySpec, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.InvalidJobId, grpc.StatusCode.NOT_FOUND),
    (errors.InvalidNodeName, grpc.StatusCode.NOT_FOUND),
    (errors.JobNotRunning, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.AlreadyDone, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.AccessDenied, grpc.StatusCode.PERMISSION_DENIED),
    (errors.InvalidRequest, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.InvalidTaskMemory, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.DependencyProblem, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.JobPending, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.JobNotPending, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.Disabled, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.JobHeld, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.InvalidNice, grpc.StatusCode.PERMISSION_DENIED),
    (errors.PriorityResetFail, grpc.StatusCode.PERMISSION_DENIED),
    (errors.BatchOnly, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.InvalidTimeValue, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NoSpace, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.MailUnavailable, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.WatcherTooSlow, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (authz.InvalidUserId, grpc.StatusCode.PERMISSION_DENIED),
    (authz.SubmitLimit, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.InvalidAccount, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.InvalidQos, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NoSuchAccount, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.UnknownOption, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NodeNotResponding, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.OutputUnreadable, grpc.StatusCode.FAILED_PRECONDITION),
]


@pytest.mark.parametrize("cls,code", STATUSES, ids=lambda x: getattr(x, "__name__", str(x)))
def test_each_service_error_keeps_its_status(cls, code):
    assert status_of(cls()) == code


def test_every_service_error_class_has_its_status_listed_here():
    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)
    listed = {cls for cls, _ in STATUSES}
    missing = sorted(c.__name__ for c in subclasses(errors.SlurmError)
                     if c.__module__.startswith("lingjund.") and c not in listed)
    assert not missing, f"errors without a status checked here: {missing}"


# -- job transitions are decided in the lifecycle ----------------------------------------
# Calls that write a job row; a state among their keywords is a transition decided
# on the spot. The lifecycle decides them (lingjund/lifecycle.py) and the service
# writes what it returns.
JOB_WRITES = {"update_job", "split_array_task", "split_task", "replace"}
# Service modules that may still write a job's state themselves: none. The
# submission builds its PENDING row as a JobRecord, which is no write of a state.
STATE_WRITES_ALLOWED: set[str] = set()


def state_writes(source: str, name: str) -> list[str]:
    """Where ``source`` writes a job's state outside the lifecycle: a job-writing
    call with a ``state`` keyword, or a ``dict(state=...)`` / ``{"state": ...}``
    (the fields of such a call, built aside)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if fname in JOB_WRITES | {"dict"} and any(k.arg == "state" for k in node.keywords):
                found.append(f"{name}:{node.lineno} {fname}(state=...)")
        elif isinstance(node, ast.Dict):
            if any(isinstance(k, ast.Constant) and k.value == "state" for k in node.keys):
                found.append(f"{name}:{node.lineno} {{'state': ...}}")
    return found


def test_no_service_module_decides_a_job_transition_itself():
    found = [w for p in SERVICE if p.name not in STATE_WRITES_ALLOWED
             for w in state_writes(p.read_text(), p.name)]
    assert not found, ("job states written in lingjund/service, not decided in "
                       f"lingjund/lifecycle.py: {found}")


@pytest.mark.parametrize("source", [
    "def f(st):\n    st.update_job(1, state=slurm.FAILED, end_time=2)\n",
    "def f(st, job):\n    fields = dict(state=slurm.CANCELLED)\n    st.update_job(1, **fields)\n",
    "def f(st):\n    st.update_job(1, **{'state': 'FAILED'})\n",
    "def f(st, meta):\n    st.split_array_task(meta, 3, state=slurm.CANCELLED)\n",
])
def test_the_transition_check_finds_a_state_written_on_the_spot(source):
    assert state_writes(source, "x.py"), "the check would miss this write of a job state"


def test_the_transition_check_lets_the_lifecycles_fields_through():
    source = ("def f(st, job, now):\n"
              "    st.update_job(job.job_id, **lifecycle.expire(job, now).fields)\n"
              "    st.update_job(job.job_id, completing=())\n")
    assert state_writes(source, "x.py") == []

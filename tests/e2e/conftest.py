"""A real local cluster for end-to-end tests: `lingjun up` in a temp dir.

Everything goes through the commands, as a user would type them: real
controller and agent processes, real gRPC on loopback, real SQLite.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

BIN = str(Path(sys.executable).parent)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, check, timeout: float):
    """check()'s first truthy answer within timeout seconds, or an AssertionError
    naming what was awaited and the last answer."""
    deadline = time.time() + timeout
    got = None
    while time.time() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout} s (last: {got!r})")


class Cluster:
    def __init__(self, root: Path, nodes: int = 4, cpus: int = 2, heartbeat_timeout: float = 30,
                 up_args: tuple[str, ...] = ()):
        self.root = root
        self.state = root / "state"
        self.work = root / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes = nodes
        self.cpus = cpus
        self.heartbeat_timeout = heartbeat_timeout
        self.up_args = up_args          # more `lingjun up` flags (e.g. --restart-backoff)
        self.env = dict(os.environ)
        self.env.update({
            "PATH": BIN + os.pathsep + self.env.get("PATH", ""),
            "LINGJUN_HOME": str(root / "home"),
            "LINGJUN_CONTROLLER": self.address,
        })
        self.env.pop("SLURM_JOB_ID", None)
        self.env.pop("LINGJUN_CONF", None)

    # -- commands -------------------------------------------------------------
    def run(self, cmd: str | list[str], *, input: str | None = None, check: bool = False,
            timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
        shell = isinstance(cmd, str)
        p = subprocess.run(cmd, shell=shell, cwd=self.work, env=env or self.env, input=input,
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"{cmd!r} failed rc={p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        return p

    def up(self) -> None:
        self.run(["lingjun", "up", "--nodes", str(self.nodes), "--cpus", str(self.cpus),
                  "--state-dir", str(self.state), "--port", str(self.port), "--kill-wait", "2",
                  "--heartbeat-timeout", str(self.heartbeat_timeout), *self.up_args],
                 check=True, timeout=90)

    def down(self) -> None:
        self.run(["lingjun", "down", "--state-dir", str(self.state)], timeout=90)

    def serving(self):
        """A module fixture's body: the cluster up with every node registered,
        taken down after the module's tests (``yield from c.serving()``)."""
        self.up()
        try:
            self.wait_nodes_up()
            yield self
        finally:
            self.down()

    def info(self) -> dict:
        return json.loads((self.state / "cluster.json").read_text())

    def sbatch(self, *args: str, input: str | None = None) -> int:
        p = self.run(["sbatch", "--parsable", *args], input=input, check=True)
        return int(p.stdout.strip().split(";")[0])

    def squeue(self, job_id: int, fmt: str = "%T") -> str:
        return self.run(["squeue", "-h", "-t", "all", "-j", str(job_id), "-o", fmt]).stdout.strip()

    def state_of(self, job_id: int) -> str:
        return self.squeue(job_id, "%T")

    def wait_state(self, job_id: int, states: str | tuple[str, ...], timeout: float = 60) -> str:
        states = (states,) if isinstance(states, str) else states
        deadline = time.time() + timeout
        seen = ""
        while time.time() < deadline:
            seen = self.state_of(job_id)
            if seen in states:
                return seen
            time.sleep(0.2)
        raise AssertionError(f"job {job_id}: want state in {states}, got {seen!r} after {timeout}s")

    def wait_file(self, path: Path, timeout: float = 30, contains: str = "") -> str:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if path.exists():
                text = path.read_text()
                if not contains or contains in text:
                    return text
            time.sleep(0.1)
        raise AssertionError(f"{path} did not appear (with {contains!r}) within {timeout}s")

    # -- processes ----------------------------------------------------------------
    def job_processes(self, job_id: int) -> list[psutil.Process]:
        """Every live process of the job on any node (by the launcher's marker)."""
        out = []
        from lingjun_agent.launcher.procs import node_identity
        dirs = self.info()["agent_state_dirs"]
        marks = {f"{node_identity(n, d)}:{job_id}" for n, d in dirs.items()}
        for p in psutil.process_iter():
            try:
                if p.environ().get("LINGJUN_JOB_MARK") in marks and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.Error:
                continue
        return out

    def pid_of(self, name: str) -> int:
        return self.info()["processes"][name]["pid"]

    def kill9(self, name: str) -> None:
        pid = self.pid_of(name)
        os.kill(pid, signal.SIGKILL)
        try:
            psutil.Process(pid).wait(10)
        except psutil.NoSuchProcess:
            pass

    def restart(self, name: str) -> None:
        """Start a daemon again with the argv `lingjun up` gave it (as systemd would)."""
        info = self.info()
        entry = info["processes"][name]
        log = self.state / "logs" / (f"{name}.log")
        with open(log, "ab") as f:
            p = subprocess.Popen(entry["argv"], stdout=f, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True, env=self.env)
        entry["pid"] = p.pid
        entry["create_time"] = psutil.Process(p.pid).create_time()
        (self.state / "cluster.json").write_text(json.dumps(info, indent=2))

    def wait_nodes_up(self, timeout: float = 30) -> None:
        deadline = time.time() + timeout
        out = ""
        while time.time() < deadline:
            out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"]).stdout
            lines = [l for l in out.splitlines() if l.strip()]
            if len(lines) == self.nodes and not any("*" in l or "unk" in l for l in lines):
                return
            time.sleep(0.2)
        raise AssertionError(f"nodes not all up after {timeout}s:\n{out}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    c.up()
    try:
        yield c
    finally:
        c.down()

"""CUDA MPS control daemons: one per GPU while MPS jobs run on it.

A job given ``--gres=mps:P`` shares one GPU with the node's other MPS jobs
through NVIDIA's Multi-Process Service. Before the first MPS job on a GPU
starts, the agent starts that GPU's control daemon (``nvidia-cuda-mps-control
-d``, which forks into the background and returns) with the GPU as its only
visible device and a pipe and log directory of its own; after the last MPS
job there ends, it tells the daemon to quit (``quit`` on the control
program's standard input, with the same pipe directory). Each job's
processes see the GPU, the same pipe and log directories, and their thread
percentage::

    CUDA_VISIBLE_DEVICES=1
    CUDA_MPS_PIPE_DIRECTORY=<agent state>/mps/gpu1/pipe
    CUDA_MPS_LOG_DIRECTORY=<agent state>/mps/gpu1/log
    CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50

Which jobs hold a GPU's daemon is kept on disk (``gpu1/jobs/<job id>``), so
an agent that restarts while MPS jobs run neither starts a second daemon
nor forgets to stop the first. The daemon itself is started and stopped
only through its control program, as an operator would; where no real GPU
is at hand, tests point ``[agent] mps_control`` at a stand-in.
"""
from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

log = logging.getLogger("lingjun_agent.mps")

CONTROL_TIMEOUT_S = 10.0


class MpsError(RuntimeError):
    """The control daemon could not be started: the job cannot run as asked."""


class MpsDaemons:
    """The node's MPS control daemons, by GPU index, and the jobs holding each."""

    def __init__(self, control: str, root: str | Path):
        self.control = control
        self.root = Path(root)

    def _gpu_dir(self, gpu: int) -> Path:
        return self.root / f"gpu{gpu}"

    def job_env(self, gpu: int, percentage: int) -> dict[str, str]:
        """What an MPS job's processes see (the daemon's own variables among them)."""
        env = self._daemon_env(gpu)
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(percentage)
        return env

    def _daemon_env(self, gpu: int) -> dict[str, str]:
        d = self._gpu_dir(gpu)
        return {"CUDA_VISIBLE_DEVICES": str(gpu),
                "CUDA_MPS_PIPE_DIRECTORY": str(d / "pipe"),
                "CUDA_MPS_LOG_DIRECTORY": str(d / "log")}

    def holders(self, gpu: int) -> set[int]:
        try:
            return {int(p.name) for p in (self._gpu_dir(gpu) / "jobs").iterdir()
                    if p.name.isdigit()}
        except OSError:
            return set()

    def held_jobs(self) -> set[int]:
        """Every job holding some GPU's daemon (after a restart: what to reconcile)."""
        try:
            gpus = [int(p.name[3:]) for p in self.root.iterdir()
                    if p.name.startswith("gpu") and p.name[3:].isdigit()]
        except OSError:
            return set()
        return set().union(*(self.holders(g) for g in gpus))

    def acquire(self, job_id: int, gpu: int) -> None:
        """``job_id`` runs MPS on ``gpu``: start the GPU's daemon if no job held it.

        Idempotent: a launch sent again finds the job already a holder."""
        d = self._gpu_dir(gpu)
        first = not self.holders(gpu)
        for sub in ("pipe", "log"):
            (d / sub).mkdir(parents=True, exist_ok=True)
            (d / sub).chmod(0o755)
        if first:
            self._run(gpu, ["-d"], None, "start")
            log.info("job=%d: MPS control daemon started for GPU %d (%s)", job_id, gpu,
                     self.control)
        (d / "jobs").mkdir(exist_ok=True)
        (d / "jobs" / str(job_id)).touch()

    def release(self, job_id: int) -> None:
        """``job_id`` has ended: a GPU it was the last MPS job of has its daemon stopped."""
        try:
            gpus = [int(p.name[3:]) for p in self.root.iterdir()
                    if p.name.startswith("gpu") and p.name[3:].isdigit()]
        except OSError:
            return
        for gpu in gpus:
            mark = self._gpu_dir(gpu) / "jobs" / str(job_id)
            if not mark.exists():
                continue
            mark.unlink(missing_ok=True)
            if self.holders(gpu):
                continue
            try:
                self._run(gpu, [], "quit\n", "stop")
                log.info("job=%d: MPS control daemon of GPU %d told to quit", job_id, gpu)
            except MpsError as e:
                log.error("job=%d: %s", job_id, e)

    def _run(self, gpu: int, args: list[str], stdin: str | None, what: str) -> None:
        env = dict(os.environ)
        env.update(self._daemon_env(gpu))
        # Its output goes to a file, not a pipe: with -d it forks a daemon that
        # may keep the descriptor open long after the control program returns.
        errors = self._gpu_dir(gpu) / "log" / "control.err"
        try:
            with open(errors, "a+") as err:
                start = err.tell()
                r = subprocess.run([self.control, *args], env=env, input=stdin, text=True,
                                   stdout=err, stderr=err, timeout=CONTROL_TIMEOUT_S,
                                   cwd="/", check=False)
                err.seek(start)
                said = err.read()[-200:].strip()
        except (OSError, subprocess.TimeoutExpired) as e:
            raise MpsError(f"cannot {what} the MPS control daemon of GPU {gpu} "
                           f"({self.control}): {e}") from None
        if r.returncode != 0:
            raise MpsError(f"cannot {what} the MPS control daemon of GPU {gpu} "
                           f"({self.control}): exit {r.returncode}: {said}")

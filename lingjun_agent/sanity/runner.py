"""When the probes run, and running them: each in a worker thread under its timeout.

    registration   before the agent's Register: the results travel in it, so a
                   node that fails never shows as IDLE
    periodic       every interval_s * (1 +- jitter) while connected (jitter keeps
                   a thousand agents from probing, and reporting, in step)
    prolog         on the controller's SanityPrologRequest, before a batch job's
                   script starts on the node

A probe that overruns its timeout fails ("timed out after 10 s"); its thread
is left to finish on its own (a thread cannot be killed) and the pass goes on.
Drop-in executables run as child processes in their own session and are
killed on timeout. Each drop-in sees LINGJUN_NODE (its node) and
LINGJUN_SANITY_PHASE (register, periodic or prolog), plus LINGJUN_JOB_ID in a
prolog.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time

from lingjun.config import SanityConfig
from lingjun.v1 import api_pb2
from lingjun_agent.sanity import facts, probes
from lingjun_agent.sanity.checks import DRAIN, Probe, Result, fail

log = logging.getLogger("lingjun_agent.sanity")


class SanityRunner:
    def __init__(self, cfg: SanityConfig, ctx: probes.NodeContext):
        self.cfg = cfg
        self.ctx = ctx
        self.nvml = facts.Nvml(cfg.nvml_module)
        self.probes: list[Probe] = probes.build(cfg, ctx, self.nvml) if cfg.enabled else []
        self.rng = random.Random(ctx.node)
        self.last: list[Result] = []
        # each probe's newest result, whatever phase ran it (the agent's /metrics)
        self.latest: dict[str, Result] = {}

    def reconfigure(self, cfg: SanityConfig) -> None:
        """Probe settings re-read from the file (SIGHUP): the next pass uses them."""
        if cfg.nvml_module != self.cfg.nvml_module:
            self.nvml = facts.Nvml(cfg.nvml_module)
        self.cfg = cfg
        self.probes = probes.build(cfg, self.ctx, self.nvml) if cfg.enabled else []

    def next_wait(self) -> float:
        return self.cfg.interval_s * (1 + self.cfg.jitter * (2 * self.rng.random() - 1))

    async def run(self, phase: str, job_id: int = 0) -> list[Result]:
        """One pass of every probe that runs in this phase, concurrently."""
        if not self.cfg.enabled:
            return []
        jobs = [self._builtin(p, phase) for p in self.probes if phase in p.phases]
        env = {"LINGJUN_NODE": self.ctx.node, "LINGJUN_SANITY_PHASE": phase}
        if job_id:
            env["LINGJUN_JOB_ID"] = str(job_id)
        for path in probes.dropin_probes(self.cfg.path(self.cfg.dropin_dir, self.ctx.node)):
            jobs.append(self._dropin(path, phase, env))
        t0 = time.monotonic()
        results = list(await asyncio.gather(*jobs))
        self.last = results
        self.latest.update((r.name, r) for r in results)
        bad = [r for r in results if not r.ok]
        log.log(logging.WARNING if bad else logging.DEBUG,
                "node=%s sanity %s pass: %d probes in %.3f s%s", self.ctx.node, phase,
                len(results), time.monotonic() - t0,
                "".join(f"; {r.name} FAILED: {r.reason}" for r in bad))
        return results

    async def _builtin(self, p: Probe, phase: str) -> Result:
        t0, wall = time.monotonic(), time.time()
        try:
            v = await asyncio.wait_for(asyncio.to_thread(p.run), p.timeout_s)
        except asyncio.TimeoutError:
            v = fail(f"timed out after {p.timeout_s:g} s")
        except Exception as e:   # noqa: BLE001 - a probe's bug fails that probe only
            log.exception("node=%s: probe %s raised", self.ctx.node, p.name)
            v = fail(f"probe error: {type(e).__name__}: {e}")
        return Result(name=p.name, severity=p.severity, ok=v.ok, reason=v.reason,
                      duration_s=time.monotonic() - t0, time=wall, phase=phase)

    async def _dropin(self, path, phase: str, env: dict[str, str]) -> Result:
        name = f"{probes.DROPIN}:{path.name}"
        t0, wall = time.monotonic(), time.time()
        try:
            v = await probes.run_dropin(path, self.cfg.timeout_s, env)
        except OSError as e:
            v = fail(f"cannot run: {e.strerror or e}")
        return Result(name=name, severity=self.cfg.severity.get(name, DRAIN), ok=v.ok,
                      reason=v.reason, duration_s=time.monotonic() - t0, time=wall, phase=phase)


def to_pb(r: Result) -> api_pb2.SanityResult:
    return api_pb2.SanityResult(name=r.name, severity=r.severity, ok=r.ok, reason=r.reason,
                                duration_s=r.duration_s, time=r.time, phase=r.phase)

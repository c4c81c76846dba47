"""GroupCommit: a lone submission is written at once; a storm shares its commits."""
from __future__ import annotations

import asyncio

from lingjund.service import jobs


class _Recorder:
    """Stands in for prepare/commit: each commit's batch, and when it ran."""

    def __init__(self):
        self.batches: list[tuple[float, list]] = []

    def prepare(self, ctl, request):
        return request

    def commit(self, ctl, subs):
        self.batches.append((asyncio.get_running_loop().time(), list(subs)))
        return [f"ok {s}" for s in subs]


def _group(monkeypatch) -> tuple[jobs.GroupCommit, _Recorder]:
    rec = _Recorder()
    monkeypatch.setattr(jobs, "prepare", rec.prepare)
    monkeypatch.setattr(jobs, "commit", rec.commit)
    return jobs.GroupCommit(ctl=None), rec


def test_a_lone_submission_is_committed_without_the_gather_wait(monkeypatch):
    group, rec = _group(monkeypatch)
    group.GATHER_S = 0.5         # a wait this long would show

    async def go():
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert await group.submit("a") == "ok a"
        return loop.time() - t0
    took = asyncio.run(go())
    assert took < 0.1, f"a lone submission waited {took:.3f} s"
    assert [b for _, b in rec.batches] == [["a"]]


def test_submissions_that_arrive_together_share_a_commit(monkeypatch):
    group, rec = _group(monkeypatch)

    async def go():
        first = await group.submit("first")          # alone: at once
        rest = await asyncio.gather(*(group.submit(str(i)) for i in range(5)))
        return first, rest
    first, rest = asyncio.run(go())
    assert (first, rest) == ("ok first", [f"ok {i}" for i in range(5)])
    assert [b for _, b in rec.batches] == [["first"], ["0", "1", "2", "3", "4"]]


def test_a_submission_right_after_another_waits_for_the_next_to_join(monkeypatch):
    group, rec = _group(monkeypatch)
    group.GATHER_S = 0.05

    async def go():
        await group.submit("a")                          # alone: at once
        b = asyncio.ensure_future(group.submit("b"))     # just after a: busy, waits
        await asyncio.sleep(group.GATHER_S / 4)
        c = asyncio.ensure_future(group.submit("c"))     # joins b's commit
        return await asyncio.gather(b, c)
    assert asyncio.run(go()) == ["ok b", "ok c"]
    assert [b for _, b in rec.batches] == [["a"], ["b", "c"]]


def test_a_client_submitting_one_after_another_never_waits(monkeypatch):
    group, rec = _group(monkeypatch)
    group.GATHER_S = 0.5

    async def go():
        loop = asyncio.get_running_loop()
        for i in range(3):
            await asyncio.sleep(group.QUIET_S * 2)    # a command's start between them
            t0 = loop.time()
            await group.submit(str(i))
            assert loop.time() - t0 < 0.1
    asyncio.run(go())
    assert [b for _, b in rec.batches] == [["0"], ["1"], ["2"]]

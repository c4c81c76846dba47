"""The controller passes a step's output on exactly once: agents send chunks
at offsets of each task's stream, and resend from an offset after any
reconnect; only what continues what the client has goes to srun."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from lingjun.v1 import agent_pb2
from lingjund.service import steps


def _run() -> steps.StepRun:
    return steps.StepRun(job_id=1, step_id=0, nodes=("n1",), rank_node={0: "n1"}, num_tasks=1)


def _out(offset: int, data: bytes, rank: int = 0) -> agent_pb2.AgentTaskOutput:
    return agent_pb2.AgentTaskOutput(job_id=1, step_id=0, rank=rank, stream=1, data=data,
                                     offset=offset)


def _passed(run: steps.StepRun) -> bytes:
    got = b""
    while not run.queue.empty():
        got += run.queue.get_nowait().output.data
    return got


@pytest.mark.parametrize("chunks,have,want", [
    ([(0, b"one\n"), (4, b"two\n")], 0, b"one\ntwo\n"),
    ([(0, b"one\n"), (0, b"one\n"), (4, b"two\n")], 0, b"one\ntwo\n"),
    ([(0, b"one\ntwo\n")], 4, b"two\n"),
    ([(4, b"two\n"), (0, b"one\n")], 0, b"one\n"),
    ([(0, b"one\n"), (2, b"e\ntwo\n")], 0, b"one\ntwo\n"),
], ids=["in order: all of it", "a resend of what was passed is dropped",
        "after srun reattached: only past what it printed",
        "a gap (lost in a dead stream) waits for the resend",
        "an overlap passes only the new part"])
def test_output_is_passed_on_once_and_in_order(chunks, have, want):
    run = _run()
    run.offsets[(0, 1)] = have
    ctl = SimpleNamespace(steps={(1, 0): run})
    for offset, data in chunks:
        steps.task_output(ctl, "n1", _out(offset, data))
    assert _passed(run) == want


def test_output_from_a_node_that_does_not_run_the_task_is_dropped():
    run = _run()
    ctl = SimpleNamespace(steps={(1, 0): run})
    steps.task_output(ctl, "n2", _out(0, b"x"))
    assert _passed(run) == b""


def test_an_exit_comes_once_and_not_again_to_a_client_that_saw_it():
    run = _run()
    run.num_tasks = 2
    run.rank_node[1] = "n1"
    run.client_seen = {1}
    ctl = SimpleNamespace(steps={(1, 0): run})
    for rank in (0, 0, 1):
        steps.task_exit(ctl, "n1", agent_pb2.AgentTaskExit(job_id=1, step_id=0, rank=rank,
                                                          exit_code=3))
    events = []
    while not run.queue.empty():
        events.append(run.queue.get_nowait().task_exit.rank)
    assert events == [0]
    assert run.exits == {0: (3, 0), 1: (3, 0)}


def test_running_steps_are_kept_in_the_store_until_recorded(tmp_path):
    from lingjund.store.store import RunningStepRecord, Store
    store = Store(str(tmp_path / "db"))
    rec = RunningStepRecord(job_id=7, step_id=2, name="bash", nodes=("n1", "n2"),
                            rank_node={0: "n1", 1: "n2"}, cpus={"n1": 2, "n2": 2}, num_tasks=2,
                            num_cpus=4, start_time=100.0, kill_on_bad_exit=True)
    with store.transaction() as st:
        st.put_running_step(rec)
    assert store.running_steps() == [rec]
    with store.transaction() as st:
        st.delete_running_step(7, 2)
    assert store.running_steps() == []


def test_srun_coming_back_to_a_step_already_recorded_gets_its_end():
    import asyncio

    from lingjun.v1 import api_pb2
    from lingjund.store.store import StepRecord
    rec = StepRecord(job_id=1, step_id="0", name="bash", state="CANCELLED", exit_code=0,
                     exit_signal=9, nodes=("n1",), num_tasks=1)
    store = SimpleNamespace(job=lambda j: SimpleNamespace(uid=1000),
                            steps=lambda ids: {1: [rec]})
    ctl = SimpleNamespace(steps={}, store=store)

    async def events():
        req = api_pb2.RunStepRequest(job_id=1, attach=True, attach_step_id=0,
                                     requester_uid=1000)
        return [ev async for ev in steps.run_step(ctl, req)]
    got = asyncio.run(events())
    assert [ev.WhichOneof("event") for ev in got] == ["started", "done"]
    assert got[1].done.exit_code == 137


class _FakeStore:
    def __init__(self):
        self.recorded = []

    def transaction(self):
        import contextlib
        store = self

        @contextlib.contextmanager
        def tx():
            yield SimpleNamespace(put_step=store.recorded.append,
                                  delete_running_step=lambda j, s: None)
        return tx()


def test_srun_gets_every_event_even_when_the_last_exits_arrive_together():
    """Exits are recorded as they arrive; the step is done for srun only once
    its stream has carried every one of them (and the output before them)."""
    import asyncio
    run = steps.StepRun(job_id=1, step_id=0, nodes=("n1", "n2"),
                        rank_node={0: "n1", 1: "n2"}, num_tasks=2)
    sent = []
    ctl = SimpleNamespace(steps={(1, 0): run}, store=_FakeStore(), clock=lambda: 0.0,
                          jobs_changed=lambda: None,
                          agents=SimpleNamespace(send=lambda n, m: sent.append(n)))

    async def main():
        gen = steps._follow(ctl, run)
        kinds = [(await gen.__anext__()).WhichOneof("event")]          # started
        steps.task_exit(ctl, "n2", agent_pb2.AgentTaskExit(job_id=1, step_id=0, rank=1))
        steps.task_output(ctl, "n1", _out(0, b"late\n"))
        steps.task_exit(ctl, "n1", agent_pb2.AgentTaskExit(job_id=1, step_id=0, rank=0,
                                                          exit_code=3))
        kinds += [ev.WhichOneof("event") async for ev in gen]
        return kinds
    assert asyncio.run(main()) == ["started", "task_exit", "output", "task_exit", "done"]
    assert [r.exit_code for r in ctl.store.recorded] == [3]
    assert sorted(sent) == ["n1", "n2"], "each node is told to drop the step's files"

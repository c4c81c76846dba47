"""The agent's side of lingjun logs (lingjun_agent/launcher/output.py): one chunk
per ReadOutput, only the job owner's regular file, and "ended" only when the
script was already gone before a read that found nothing."""
from __future__ import annotations

import asyncio
import os

import pytest

from lingjun.v1 import agent_pb2
from lingjun_agent.launcher import output


def _req(path, offset=0, follow=False, uid=None) -> agent_pb2.ReadOutput:
    return agent_pb2.ReadOutput(read_id=7, job_id=1, path=str(path), offset=offset, follow=follow,
                                uid=os.getuid() if uid is None else uid)


def test_a_chunk_is_read_from_the_offset_and_capped(tmp_path):
    f = tmp_path / "out"
    f.write_bytes(b"x" * (output.CHUNK + 10))
    got = asyncio.run(output.answer(_req(f, offset=5), lambda: True))
    assert (got.read_id, got.offset, len(got.data), got.ended, got.error) == (7, 5, output.CHUNK, False, "")


@pytest.mark.parametrize("running,want_ended", [(False, True), (True, False)],
                         ids=["the script has ended: nothing more will come",
                              "the script runs: nothing yet, not the end"])
def test_nothing_past_the_offset(tmp_path, running, want_ended):
    f = tmp_path / "out"
    f.write_bytes(b"abc")
    got = asyncio.run(output.answer(_req(f, offset=3), lambda: running))
    assert (got.data, got.ended) == (b"", want_ended)


def test_a_file_not_yet_created_is_empty_not_an_error(tmp_path):
    got = asyncio.run(output.answer(_req(tmp_path / "later"), lambda: False))
    assert (got.data, got.ended, got.error) == (b"", True, "")


def test_following_waits_for_the_file_to_grow(tmp_path):
    f = tmp_path / "out"
    f.write_bytes(b"")

    async def go():
        async def write_later():
            await asyncio.sleep(0.3)
            f.write_bytes(b"late\n")
        t = asyncio.create_task(write_later())
        got = await output.answer(_req(f, follow=True), lambda: True)
        await t
        return got
    assert asyncio.run(go()).data == b"late\n"


def test_a_file_of_another_user_or_a_symlink_is_refused(tmp_path):
    f = tmp_path / "out"
    f.write_bytes(b"secret")
    got = asyncio.run(output.answer(_req(f, uid=os.getuid() + 1), lambda: False))
    assert (got.data, got.error) == (b"", f"{f}: not owned by the job's user")
    link = tmp_path / "link"
    link.symlink_to(f)
    got = asyncio.run(output.answer(_req(link), lambda: False))
    assert got.data == b"" and got.error.startswith(f"{link}: ")
    got = asyncio.run(output.answer(_req(tmp_path), lambda: False))
    assert got.error == f"{tmp_path}: not a regular file"

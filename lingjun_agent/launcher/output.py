"""A job's batch output file, read for ``lingjun logs`` (ReadOutput).

The controller asks for one chunk at a time (``read_id``, path, offset) and
asks again after each answer, so what is read here is only what a reader
has taken. ``answer`` reads in a worker thread (a slow or hung filesystem
holds no event loop), and with ``follow`` waits up to ``FOLLOW_WAIT_S`` for
the file to grow before it answers with nothing.

The agent reads as root where it runs as root; the path comes from the job
(``sbatch -o``), which its owner chose. So the file is opened without
following a last symlink and must be a regular file owned by the job's
user: a job cannot have the agent read ``/etc/shadow`` for it by naming it
its output. ``ended`` is set only when the script was not running before a
read that found nothing, so nothing written by it is lost at the end.
"""
from __future__ import annotations

import asyncio
import os
import stat
from typing import Callable

from lingjun.v1 import agent_pb2

CHUNK = 64 * 1024          # bytes in one answer, at most
FOLLOW_WAIT_S = 1.0        # an answer with nothing new waits this long for the file to grow
POLL_S = 0.1               # how often the file is looked at meanwhile


class OutputError(Exception):
    """The file exists but is not the job's to read (or not readable): in words."""


def read_chunk(path: str, offset: int, uid: int, limit: int = CHUNK) -> bytes:
    """Up to ``limit`` bytes of ``path`` from ``offset``; b"" where the file
    does not exist (yet). Blocking: call it in a worker thread."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return b""
    except OSError as e:
        raise OutputError(f"{path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"{path}: not a regular file")
        if st.st_uid != uid:
            raise OutputError(f"{path}: not owned by the job's user")
        return os.pread(fd, limit, offset)
    finally:
        os.close(fd)


async def answer(req: agent_pb2.ReadOutput, running: Callable[[], bool]) -> agent_pb2.OutputChunk:
    """The answer to one ReadOutput; ``running()`` says whether the job's batch
    script still runs on this node."""
    reply = agent_pb2.OutputChunk(read_id=req.read_id, offset=req.offset)
    waited = 0.0
    while True:
        was_running = running()
        try:
            data = await asyncio.to_thread(read_chunk, req.path, req.offset, req.uid)
        except OutputError as e:
            reply.error = str(e)
            return reply
        if data:
            reply.data = data
            return reply
        if not was_running:
            reply.ended = True
            return reply
        if not req.follow or waited >= FOLLOW_WAIT_S:
            return reply
        await asyncio.sleep(POLL_S)
        waited += POLL_S

"""Forwarding batch jobs' output to a site's log pipeline (``[agent] output_sink``).

Sites that collect logs centrally (journald and a forwarder, or a shipper
such as Fluent Bit or Vector tailing a file) get every line a batch job
writes to its StdOut, labelled with the job, its user and the node, while
the job's own output file stays where ``sbatch -o`` put it:

- ``"journald"`` (or ``"journald:/path/of/the/socket"``): one journal entry
  per line over journald's native protocol, with ``SYSLOG_IDENTIFIER=lingjun-job``,
  ``LINGJUN_JOB_ID``, ``LINGJUN_USER`` and ``LINGJUN_NODE`` fields, so
  ``journalctl LINGJUN_JOB_ID=12`` shows one job;
- ``"file:/var/log/lingjun/jobs.log"``: lines appended to that file as
  ``TIME NODE job=ID user=NAME: LINE``, one file per node for a shipper to tail.

The agent follows the file while the script runs (the same reads as
``lingjun logs``: ``launcher/output.py``, in a worker thread, of a regular
file owned by the job's user) and sends what is left once it has ended; a
last line without its newline is sent too. A sink that refuses (journald
not running, a full disk) costs the job nothing: the first failure is
logged once per job and the rest of its lines are dropped there; the
output file still holds them. After an agent restart the jobs it recovers
are not forwarded again (their lines would be sent twice or partly).

Why no library: journald's native protocol is a datagram of ``KEY=value``
lines (``KEY\\n`` + little-endian length + bytes for a value that may hold a
newline), which the ``systemd`` Python bindings would wrap around libsystemd;
they are not on PyPI in a form that builds without its headers.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import time
from typing import Callable

from lingjun_agent.launcher import output

log = logging.getLogger("lingjun.agent.outputsink")

POLL_S = 0.5                  # how often a running job's file is looked at
MAX_LINE = 64 * 1024          # a longer "line" is sent in pieces of this size


class SinkError(Exception):
    pass


class Sink:
    """Where the lines go; ``send`` blocks (call it in a worker thread)."""

    def __init__(self, kind: str, where: str, node: str):
        self.kind, self.where, self.node = kind, where, node

    def send(self, job_id: int, user: str, lines: list[bytes]) -> None:
        try:
            if self.kind == "journald":
                self._journal(job_id, user, lines)
            else:
                self._file(job_id, user, lines)
        except OSError as e:
            raise SinkError(f"{self.kind}:{self.where}: {e.strerror or e}") from None

    def _journal(self, job_id: int, user: str, lines: list[bytes]) -> None:
        fixed = (b"SYSLOG_IDENTIFIER=lingjun-job\nPRIORITY=6\n"
                 + f"LINGJUN_JOB_ID={job_id}\nLINGJUN_USER={user}\nLINGJUN_NODE={self.node}\n"
                 .encode())
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            for line in lines:
                s.sendto(fixed + b"MESSAGE\n" + struct.pack("<Q", len(line)) + line + b"\n",
                         self.where)

    def _file(self, job_id: int, user: str, lines: list[bytes]) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S").encode()
        head = stamp + f" {self.node} job={job_id} user={user}: ".encode()
        data = b"".join(head + line + b"\n" for line in lines)
        fd = os.open(self.where, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        try:
            os.write(fd, data)          # one append per batch of lines: no interleaving within it
        finally:
            os.close(fd)


def _split(buf: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines (without their newline) and what is left after the last one."""
    *lines, rest = buf.split(b"\n")
    out = []
    for line in lines:
        out += [line[i:i + MAX_LINE] for i in range(0, len(line), MAX_LINE)] or [b""]
    while len(rest) > MAX_LINE:
        out.append(rest[:MAX_LINE])
        rest = rest[MAX_LINE:]
    return out, rest


async def forward(sink: Sink, job_id: int, user: str, uid: int, path: str,
                  running: Callable[[], bool]) -> None:
    """Send the job's output file's lines to ``sink`` until the script has ended
    and the file is read to its end."""
    offset, rest = 0, b""
    while True:
        was_running = running()
        try:
            data = await asyncio.to_thread(output.read_chunk, path, offset, uid)
        except output.OutputError as e:
            log.warning("job=%d: output not forwarded: %s", job_id, e)
            return
        offset += len(data)
        lines, rest = _split(rest + data)
        if not data and not was_running and rest:
            lines, rest = lines + [rest], b""
        if lines:
            try:
                await asyncio.to_thread(sink.send, job_id, user, lines)
            except SinkError as e:
                log.warning("job=%d: output sink refused, the rest of its output is not forwarded: %s",
                            job_id, e)
                return
        if not data:
            if not was_running:
                return
            await asyncio.sleep(POLL_S)

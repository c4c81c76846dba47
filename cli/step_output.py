"""Where srun writes the output its tasks stream back, and how.

- Default: line-buffered per task and stream, so that lines of different
  tasks never mix inside one line (what Slurm's srun does); a task's last
  line without a newline is written when the step ends.
- ``-u/--unbuffered``: every chunk is written the moment it arrives.
- ``-l/--label``: ``rank: `` before every line (with -u, before every line
  start), the rank right-aligned to the width of the highest rank.
- ``-o/-e`` without ``%t``, ``%n`` or ``%N``: one file that srun itself
  opens and writes (Slurm's "IO_ALL" case); with one of them the nodes write
  per-task or per-node files and nothing of that stream comes here.
"""
from __future__ import annotations

from typing import BinaryIO


class StepOutput:
    def __init__(self, label: bool, width: int, unbuffered: bool,
                 stdout: BinaryIO, stderr: BinaryIO):
        self.label = label
        self.width = width
        self.unbuffered = unbuffered
        self.files = {1: stdout, 2: stderr}
        self.partial: dict[tuple[int, int], bytes] = {}
        self.at_line_start: dict[tuple[int, int], bool] = {}

    def _prefix(self, rank: int) -> bytes:
        return f"{rank:>{self.width}}: ".encode() if self.label else b""

    def write(self, rank: int, stream: int, data: bytes) -> None:
        out = self.files[1 if stream == 1 else 2]
        key = (rank, stream)
        if self.unbuffered:
            if self.label:
                start = self.at_line_start.get(key, True)
                pieces = data.split(b"\n")
                buf = []
                for i, piece in enumerate(pieces):
                    last = i == len(pieces) - 1
                    line_start = start if i == 0 else True
                    if line_start and not (last and not piece):
                        buf.append(self._prefix(rank))
                    buf.append(piece)
                    if not last:
                        buf.append(b"\n")
                self.at_line_start[key] = data.endswith(b"\n") or (start and not data)
                data = b"".join(buf)
            out.write(data)
            out.flush()
            return
        buf = self.partial.pop(key, b"") + data
        *lines, rest = buf.split(b"\n")
        if lines:
            prefix = self._prefix(rank)
            out.write(b"".join(prefix + line + b"\n" for line in lines))
            out.flush()
        if rest:
            self.partial[key] = rest

    def task_done(self, rank: int) -> None:
        """A task ended: what it left without a newline is written now."""
        for stream in (1, 2):
            rest = self.partial.pop((rank, stream), b"")
            if rest:
                out = self.files[stream]
                out.write(self._prefix(rank) + rest + (b"\n" if self.label else b""))
                out.flush()

    def close(self) -> None:
        for rank, _ in list(self.partial):
            self.task_done(rank)
        for f in self.files.values():
            f.flush()

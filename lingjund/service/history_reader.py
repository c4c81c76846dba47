"""A history reader: a process of its own that reads sacct's pages and encodes them.

As slurmdbd answers sacct for slurmctld, a reader answers GetAccounting for
the controller: it opens the state database read-only (store/history.py),
runs the filtered SQL, builds each page's JobInfo messages and sends the
page already serialized. The controller's interpreter only forwards those
bytes to the client (service/accounting.py), so a million-job ``sacct -a``
never holds its GIL for longer than a copy.

Started by the controller (``python -m lingjund.service.history_reader FD
PID``; never forked from its running event loop), it talks over the
socket FD and dies with its parent: the kernel kills it when the controller
goes (PR_SET_PDEATHSIG), and it exits when its socket closes.

The conversation, each message a frame (``frame``: kind byte, length,
payload); the controller speaks first:

    controller                          reader
    C config (pickled)                  -
    Q (path, now, GetJobsRequest)       P page ... W     (a batch of rows)
    M (more)                            P page ... W  or  E (no more rows)
    S (stop: the client went)           -
                                        X text: the request failed

After W the reader waits for M or S, so it never runs further ahead of the
client than one batch (history.PAGE_ROWS jobs).
"""
from __future__ import annotations

import ctypes
import os
import pickle
import signal
import socket
import struct
import sys
import traceback
from types import SimpleNamespace

from lingjun.v1 import api_pb2
from lingjund.service import faulttol, jobs
from lingjund.service.context import Controller
from lingjund.store import history
from lingjund.store.assoc import AssocTables
from lingjund.store.store import JobRecord

PAGE_BYTES = 3 * 1024 * 1024      # under gRPC's default 4 MiB receive limit of any client

# frame kinds
CONFIG, QUERY, MORE, STOP = b"C", b"Q", b"M", b"S"
PAGE, WAIT, END, FAILED = b"P", b"W", b"E", b"X"

HEADER = struct.Struct("!cI")     # kind, payload length


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def history_query(req: api_pb2.GetJobsRequest, now: float) -> history.HistoryQuery:
    window = None
    if req.HasField("window_start") or req.HasField("window_end"):
        window = (float(req.window_start) if req.HasField("window_start") else 0.0,
                  float(req.window_end) if req.HasField("window_end") else now)
    return history.HistoryQuery(
        job_ids=tuple(req.job_ids), users=tuple(req.users), partitions=tuple(req.partitions),
        names=tuple(req.names), states=tuple(req.states), window=window)


class _Nodes:
    """What job_info asks of the store: a node's reported inventory (its
    GPU type), read from the database's nodes table. No QOS records: under
    preempt/qos a job of the history shows its partition's PreemptMode."""

    def __init__(self, reader: history.HistoryReader):
        self.reader = reader
        self._inv: dict | None = None
        self.assoc = AssocTables()

    def node(self, name: str):
        if self._inv is None:
            self._inv = self.reader.inventories()
        inv = self._inv.get(name)
        return SimpleNamespace(inventory=inv) if inv is not None else None


class Pager:
    """One answer being built: the reader, its rows still to come, and what
    a page needs besides them (the controller's config, its clock)."""

    def __init__(self, config, path: str, req: api_pb2.GetJobsRequest, now: float):
        self.now = now
        self.with_steps = req.with_steps
        self.accounts = frozenset(req.accounts)
        self.reader = history.HistoryReader(path)
        self.ctl = Controller(config=config, store=_Nodes(self.reader), clock=lambda: now)
        self.rows = self.reader.pages(history_query(req, now))
        self._biggest: dict[str, int] | None = None

    def next_pages(self) -> list[api_pb2.GetJobsResponse] | None:
        """The replies for the next rows; None when there are no more."""
        records = next(self.rows, None)
        if records is None:
            return None
        if self.accounts:
            records = [j for j in records if (j.spec.account or j.user) in self.accounts]
        ids = [j.job_id for j in records]
        steps = self.reader.steps(ids) if self.with_steps else {}
        derived = {} if self.with_steps else self.reader.derived_exits(ids)
        runs = self.reader.attempts([j.job_id for j in records if j.restarts])
        biggest = self.biggest_cpus() if any(_unplaced(j) for j in records) else {}
        out = [api_pb2.GetJobsResponse(now=int(self.now))]
        size = 0
        for j in records:
            info = jobs.job_info(self.ctl, j, steps.get(j.job_id), self.now, biggest)
            if j.job_id in derived:
                info.derived_exit_code, info.derived_exit_signal = derived[j.job_id]
            info.attempts.extend(faulttol.attempt_msgs(runs.get(j.job_id, [])))
            n = info.ByteSize()
            if size and size + n > PAGE_BYTES:
                out.append(api_pb2.GetJobsResponse(now=int(self.now)))
                size = 0
            out[-1].jobs.append(info)
            size += n
        return out

    def biggest_cpus(self) -> dict[str, int]:
        """The CPUs of each partition's largest node (resources.node_capacity's
        rule: configured, else reported), read on this connection."""
        if self._biggest is None:
            config = self.ctl.config
            reported = self.reader.node_cpus()
            known = {n.name for n in config.nodes} | set(reported)
            self._biggest = {}
            for part in self.ctl.partitions():
                names = known if part.nodes is None else part.nodes
                self._biggest[part.name] = max(
                    ((c.cpus if (c := config.node(n)) and c.cpus else 0) or reported.get(n, 0)
                     for n in names), default=0)
        return self._biggest

    def close(self) -> None:
        self.reader.close()


def _unplaced(j: JobRecord) -> bool:
    return not j.nodes and bool(j.spec.num_tasks) and not j.spec.min_nodes


# -- the process ------------------------------------------------------------------------

class _Closed(Exception):
    """The controller closed the socket (or died): this reader is done."""


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise _Closed()
        got += k
    return bytes(buf)


def recv_frame(sock: socket.socket) -> tuple[bytes, bytes]:
    kind, n = HEADER.unpack(_recv_exactly(sock, HEADER.size))
    return kind, _recv_exactly(sock, n) if n else b""


def answer(sock: socket.socket, config, path: str, req: api_pb2.GetJobsRequest, now: float) -> None:
    """One GetAccounting: pages a batch at a time, each batch let go by the
    controller's M. The first page is sent even when it holds no job (sacct
    prints its header); later empty ones are not."""
    pager = Pager(config, path, req, now)
    try:
        first = True
        while (replies := pager.next_pages()) is not None:
            for reply in replies:
                if reply.jobs or first:
                    first = False
                    sock.sendall(frame(PAGE, reply.SerializeToString()))
            sock.sendall(frame(WAIT))
            kind, _ = recv_frame(sock)
            if kind != MORE:
                return
        sock.sendall(frame(END))
    finally:
        pager.close()


def serve(sock: socket.socket) -> None:
    config = None
    while True:
        try:
            kind, body = recv_frame(sock)
        except _Closed:
            return
        if kind == CONFIG:
            config = pickle.loads(body)
        elif kind == QUERY:
            path, now, raw = pickle.loads(body)
            try:
                answer(sock, config, path, api_pb2.GetJobsRequest.FromString(raw), now)
            except (_Closed, BrokenPipeError, ConnectionResetError):
                return
            except Exception:
                sock.sendall(frame(FAILED, traceback.format_exc().encode()))


PR_SET_PDEATHSIG = 1


def die_with(parent: int) -> None:
    """Be killed by the kernel when the process that started us goes, even
    by SIGKILL; already gone: go now."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass            # not Linux: the closed socket still ends us
    if os.getppid() != parent:
        os._exit(0)


def main(argv: list[str]) -> int:
    fd, parent = int(argv[0]), int(argv[1])
    die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # a ^C to the controller's group is its to handle
    sock = socket.socket(fileno=fd)
    try:
        serve(sock)
    finally:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

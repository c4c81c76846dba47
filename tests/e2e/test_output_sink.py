"""[agent] output_sink = "journald": a batch job's output lines reach the
site's journal as entries of their own, labelled with the job, its user and
the node (journald's native protocol over a real datagram socket, which this
test serves in journald's place), while the job's own output file keeps them."""
from __future__ import annotations

import os
import socket
import struct

import pytest

from tests.e2e.conftest import Cluster, wait_for


def entries(sock: socket.socket) -> list[dict[str, bytes]]:
    """Every datagram waiting on ``sock``, decoded as journald decodes them."""
    out = []
    sock.settimeout(0.2)
    while True:
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            return out
        fields: dict[str, bytes] = {}
        while data:
            head, nl, data = data.partition(b"\n")
            if b"=" in head:
                k, _, v = head.partition(b"=")
                fields[k.decode()] = v
            else:                               # KEY\n<u64 le length><bytes>\n
                (n,) = struct.unpack("<Q", data[:8])
                fields[head.decode()] = data[8:8 + n]
                data = data[8 + n + 1:]
        out.append(fields)


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    root = tmp_path_factory.mktemp("sink")
    path = root / "journal.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    c = Cluster(root, nodes=1)
    c.up()
    try:
        conf = c.state / "lingjun.toml"
        conf.write_text(conf.read_text().replace("[agent]\n", f'[agent]\noutput_sink = "journald:{path}"\n', 1))
        c.kill9("node1")                         # the agent reads output_sink when it starts
        c.restart("node1")
        c.wait_nodes_up(timeout=60)
        yield c, sock
    finally:
        c.down()
        sock.close()


def test_each_output_line_is_a_journal_entry_of_the_job(journal):
    c, sock = journal
    out = c.work / "sink-%j.out"
    jid = c.sbatch("-o", str(out), "--wrap", "echo one; echo 'two  spaced'; printf 'last without newline'")
    c.wait_state(jid, "COMPLETED")
    got: list[dict[str, bytes]] = []
    for _ in range(50):                          # the last lines are sent once the script has ended
        got += entries(sock)
        if len(got) >= 3:
            break
    assert [e["MESSAGE"] for e in got] == [b"one", b"two  spaced", b"last without newline"]
    for e in got:
        assert (e["SYSLOG_IDENTIFIER"], e["LINGJUN_JOB_ID"], e["LINGJUN_NODE"], e["LINGJUN_USER"]) == (
            b"lingjun-job", str(jid).encode(), b"node1", b"root")
    assert (c.work / f"sink-{jid}.out").read_text() == "one\ntwo  spaced\nlast without newline"


def test_a_sink_that_is_gone_costs_the_job_nothing(journal):
    """journald not answering: the job completes, its file holds everything."""
    c, sock = journal
    sock_path = sock.getsockname()
    sock.close()
    try:
        jid = c.sbatch("-o", str(c.work / "gone-%j.out"), "--wrap", "echo kept")
        c.wait_state(jid, "COMPLETED")
        assert (c.work / f"gone-{jid}.out").read_text() == "kept\n"
        # said by the job's supervisor, which may write it after the job's end is known
        wait_for("the agent's log says the sink refused",
                 lambda: f"job={jid}: output sink refused" in (c.state / "logs" / "node1.log").read_text(),
                 10)
    finally:
        os.unlink(sock_path)

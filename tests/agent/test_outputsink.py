"""The file sink of [agent] output_sink, the line splitting both sinks use,
and the setting's checks."""
from __future__ import annotations

import asyncio
import os
import re

import pytest

from lingjun import config
from lingjun_agent import outputsink


def test_the_file_sink_appends_labelled_lines_and_follows_until_the_end(tmp_path):
    out, sink_file = tmp_path / "job.out", tmp_path / "site.log"
    out.write_bytes(b"")
    state = {"running": True}

    async def scenario() -> None:
        sink = outputsink.Sink("file", str(sink_file), "n3")
        fwd = asyncio.create_task(outputsink.forward(sink, 12, "alice", os.getuid(), str(out),
                                                     lambda: state["running"]))
        with out.open("ab") as f:
            f.write(b"epoch 1\nepoch")
            f.flush()
            await asyncio.sleep(1.2)
            f.write(b" 2\n" + b"x" * (outputsink.MAX_LINE + 5) + b"\ndone")
        state["running"] = False
        await asyncio.wait_for(fwd, 10)

    asyncio.run(scenario())
    lines = sink_file.read_text().splitlines()
    label = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d n3 job=12 user=alice: ")
    assert all(label.match(line) for line in lines), lines[:2]
    bodies = [label.sub("", line) for line in lines]
    assert bodies == ["epoch 1", "epoch 2", "x" * outputsink.MAX_LINE, "xxxxx", "done"]


def test_a_file_not_owned_by_the_job_user_is_not_forwarded(tmp_path):
    out = tmp_path / "job.out"
    out.write_text("secret\n")
    sink = outputsink.Sink("file", str(tmp_path / "site.log"), "n1")
    asyncio.run(outputsink.forward(sink, 1, "bob", os.getuid() + 1, str(out), lambda: False))
    assert not (tmp_path / "site.log").exists()


@pytest.mark.parametrize("text, words", [
    ("syslog", "is not \"journald\", \"journald:/SOCKET\" or \"file:/PATH\""),
    ("file:relative.log", "the path must be absolute"),
    ("file", "is not \"journald\""),
])
def test_a_bad_output_sink_is_refused_in_words(text, words):
    with pytest.raises(config.ConfigError, match=re.escape(words)):
        config.parse(f'cluster_name = "c"\n[agent]\noutput_sink = "{text}"\n')


def test_the_sinks_a_site_may_name():
    assert config.output_sink_target("journald") == ("journald", "/run/systemd/journal/socket")
    assert config.output_sink_target("journald:/tmp/j.sock") == ("journald", "/tmp/j.sock")
    assert config.output_sink_target("file:/var/log/lingjun/jobs.log") == ("file", "/var/log/lingjun/jobs.log")
    assert config.output_sink_target("") == ("", "")

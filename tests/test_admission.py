"""What one user may hold of a daemon (lingjun/admission.py): the limits'
arithmetic against the descriptor table, the counts, and the refusal log's
bound. The doors that keep these counts are exercised over real sockets in
tests/test_command_server.py and, with real users, tests/e2e/test_door_limits.py."""
from __future__ import annotations

import logging
import resource
import subprocess
import sys

import pytest

from lingjun import config
from lingjun.admission import Admission, Budget, RefusalLog
from lingjun.config import LimitsConfig

ALICE, BOB, ROOT = 1001, 1002, 0


def _admission(**limits) -> Admission:
    return Admission(Budget.of(LimitsConfig(**limits), nofile=65536), frozenset({ROOT}),
                     logging.getLogger("test.admission"))


@pytest.mark.parametrize("nofile", [1024, 20_000, 65_536, 524_288],
                         ids=lambda n: f"descriptor limit {n}")
def test_the_default_limits_keep_every_door_together_under_the_descriptor_limit(nofile):
    b = Budget.of(LimitsConfig(), nofile)
    # the unix doors and gRPC together leave at least a sixteenth of the
    # table (and 256) to the store, the logs and the processes the
    # controller starts
    left = nofile - b.connections - b.grpc_connections
    assert left >= max(256, nofile // 16), (b, nofile)
    # one ordinary user fits in the share of the unix doors' connections
    # not kept for root, so the per-user bound is the one that holds him
    assert b.connections_per_user <= b.connections - b.reserved, b
    # and a user cannot take more than a small part of the descriptor table
    assert b.connections_per_user <= nofile // 8, b
    assert b.reserved >= 1
    # a cluster's agents hold one gRPC connection each
    assert b.grpc_connections >= nofile // 2, b


def test_the_shipped_units_descriptor_limit_is_worked_out_as_the_module_says():
    b = Budget.of(LimitsConfig(), 65536)
    assert (b.connections, b.reserved, b.grpc_connections) == (16384, 2048, 45056)
    b = Budget.of(LimitsConfig(), 20_000)
    assert (b.connections, b.grpc_connections) == (5000, 13750)


def test_the_finding_one_user_with_22000_connections_is_held_to_his_share():
    """The finding: 2 x 11,000 idle connections of one user took all of the
    controller's 20,000 descriptors. Now the 129th is refused."""
    a = Admission(Budget.of(LimitsConfig(), 20_000), frozenset({ROOT}),
                  logging.getLogger("test.admission"))
    admitted = sum(a.connect(ALICE) is None for _ in range(22_000))
    assert admitted == LimitsConfig().connections_per_user == 128
    assert a.open == 128
    assert a.connect(BOB) is None and a.connect(ROOT) is None


def test_everyone_together_leaves_roots_reserve():
    a = _admission(connections=80, connections_per_user=30)
    assert a.budget.reserved == 10
    users = [a.connect(uid) for uid in range(2000, 2010) for _ in range(10)]
    assert users.count(None) == 70, "ordinary users stop at connections less the reserve"
    assert "kept for root" in a.connect(3000)
    assert [a.connect(ROOT) for _ in range(10)] == [None] * 10
    assert "all of [limits] connections" in a.connect(ROOT)


def test_a_connection_closed_gives_its_place_back():
    a = _admission(connections_per_user=2)
    assert a.connect(ALICE) is None and a.connect(ALICE) is None
    assert "connections_per_user" in a.connect(ALICE)
    a.disconnect(ALICE)
    assert a.connect(ALICE) is None
    assert a.connections_of(ALICE) == 2 and a.open == 2


def test_calls_and_streams_are_counted_apart_and_root_is_not_limited():
    a = _admission(requests_per_user=2, streams_per_user=1)
    assert [a.begin(ALICE), a.begin(ALICE)] == [None, None]
    assert "requests_per_user" in a.begin(ALICE)
    assert a.begin(ALICE, stream=True) is None
    assert "streams_per_user" in a.begin(ALICE, stream=True)
    assert a.begin(BOB) is None
    assert all(a.begin(ROOT) is None for _ in range(100))
    a.end(ALICE)
    assert a.begin(ALICE) is None
    assert a.calls_of(ALICE) == 2 and a.calls_of(ALICE, stream=True) == 1


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_refusals_are_logged_once_per_user_per_interval_with_the_count(caplog):
    clock = _Clock()
    refusals = RefusalLog(logging.getLogger("test.refusals"), interval_s=10, clock=clock)
    with caplog.at_level(logging.WARNING, "test.refusals"):
        for _ in range(5000):
            refusals.note(ALICE, "connections at the command socket", "128 open")
            clock.now += 0.001
        refusals.note(BOB, "connections at the command socket", "128 open")
        clock.now += 10
        refusals.note(ALICE, "connections at the command socket", "128 open")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0].startswith(f"refused 1 connections at the command socket of uid {ALICE}")
    assert lines[1].startswith(f"refused 1 connections at the command socket of uid {BOB}")
    assert lines[2].startswith(f"refused 5000 connections at the command socket of uid {ALICE}")
    assert "in the last 15s" in lines[2]


def test_the_refusal_log_forgets_users_it_has_not_heard_from():
    clock = _Clock()
    refusals = RefusalLog(logging.getLogger("test.refusals"), interval_s=10, clock=clock)
    for uid in range(3 * RefusalLog.PRUNE_AT):
        refusals.note(uid, "calls by gRPC", "busy")
        clock.now += 0.01
    assert refusals.remembered() <= RefusalLog.PRUNE_AT + 1000


def test_limits_are_read_from_the_config_file_and_checked():
    cfg = config.parse("[limits]\nconnections_per_user = 16\nfirst_byte_timeout_s = 2.5\n")
    assert (cfg.limits.connections_per_user, cfg.limits.first_byte_timeout_s) == (16, 2.5)
    assert config.Config().limits == LimitsConfig()
    with pytest.raises(config.ConfigError, match=r"\[limits\] requests_per_user = 0"):
        config.parse("[limits]\nrequests_per_user = 0\n")
    with pytest.raises(config.ConfigError, match="limits"):
        config.parse("[limits]\nconnection_per_user = 3\n")


def test_the_daemon_raises_its_soft_descriptor_limit_to_the_hard_one():
    """As systemd's default of 1024:524288 would leave it: the controller
    works its budget out from the raised limit."""
    code = ("from lingjun.admission import raise_descriptor_limit; import resource; "
            "print(raise_descriptor_limit(), *resource.getrlimit(resource.RLIMIT_NOFILE))")

    def lowered():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096))
    out = subprocess.run([sys.executable, "-c", code], preexec_fn=lowered, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["4096", "4096", "4096"], out

"""The lease arithmetic (Holder, by hand-moved clock) and the wait a
supervisor does on the lease file (real files, real select)."""
from __future__ import annotations

import os
import threading
import time

import pytest

from lingjun_agent.launcher import lease


class Clock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def holder(tmp_path):
    clock = Clock()
    h = lease.Holder(tmp_path / "lease.json", clock=clock, agent_pid=42, agent_start=7)
    h.configure(timeout_s=3.0, grace_s=2.0)
    return h, clock


def test_an_answer_renews_the_lease_to_the_send_plus_the_timeout(holder):
    h, clock = holder
    h.sent(1)                       # at 100
    clock.now = 100.4               # the answer comes later: the send counts
    assert h.acked(1) == lease.Lease(103.0, 2.0, 42, 7)
    assert lease.read(h.path) == lease.Lease(103.0, 2.0, 42, 7)
    assert h.left() == pytest.approx(2.6)


def test_the_lease_ends_no_later_than_the_controllers_down(holder):
    """Controller: DOWN = last receipt + timeout; receipt >= send."""
    h, clock = holder
    for seq, (send, delay) in enumerate([(100.0, 0.01), (101.0, 0.7), (102.0, 0.0)], 1):
        clock.now = send
        h.sent(seq)
        clock.now = send + delay
        h.acked(seq)
        down = (send + delay) + h.timeout_s
        assert h.expires_at <= down, f"lease {h.expires_at} after the DOWN at {down}"


def test_answers_out_of_order_or_unknown_never_move_it_back(holder):
    h, clock = holder
    h.sent(1)
    clock.now = 101.0
    h.sent(2)
    assert h.acked(2).expires_at == 104.0
    assert h.acked(1) is None, "1 was dropped when 2 was answered"
    assert h.acked(99) is None
    assert h.renew(100.5) is None, "an older send cannot shorten it"
    assert lease.read(h.path).expires_at == 104.0


def test_a_lease_that_cannot_be_written_is_not_renewed(holder):
    h, clock = holder
    h.renew(100.0)
    h.path = h.path.parent / "missing-dir" / "lease.json"     # e.g. a full disk
    assert h.renew(101.0) is None and h.expires_at == 103.0, "the old end stands"


def test_no_terms_no_lease(tmp_path):
    h = lease.Holder(tmp_path / "lease.json", clock=Clock())
    h.sent(1)
    assert h.acked(1) is None and not (tmp_path / "lease.json").exists()
    assert lease.read(tmp_path / "lease.json") is None and not h.lapsed()


def test_lapsed_once_the_clock_passes_the_end(holder):
    h, clock = holder
    h.renew(100.0)
    clock.now = 102.99
    assert not h.lapsed()
    clock.now = 103.0
    assert h.lapsed()


# -- wait --------------------------------------------------------------------------
def write_in(path, seconds: float, grace: float = 1.0) -> None:
    lease.write(path, lease.Lease(lease.clock() + seconds, grace))


def test_wait_raises_at_the_end_of_an_unrenewed_lease(tmp_path):
    p = tmp_path / "lease.json"
    write_in(p, 0.3)
    r, w = os.pipe()
    t = time.monotonic()
    with pytest.raises(lease.Lapsed) as e:
        lease.wait(p, [r], 5.0)
    took = time.monotonic() - t
    assert 0.25 < took < 0.6, f"want to wake at the end (0.3 s), woke after {took:.2f} s"
    assert e.value.lease.grace_s == 1.0


def test_wait_follows_renewals_and_returns_ready_fds(tmp_path):
    p = tmp_path / "lease.json"
    write_in(p, 0.3)
    r, w = os.pipe()

    def agent():
        for _ in range(4):          # renewed every 0.2 s for 0.8 s, then the fd is ready
            time.sleep(0.2)
            write_in(p, 0.3)
        os.write(w, b"x")
    threading.Thread(target=agent).start()
    assert lease.wait(p, [r], 5.0) == [r]


def test_wait_times_out_and_no_file_never_lapses(tmp_path):
    r, _ = os.pipe()
    assert lease.wait(tmp_path / "none.json", [r], 0.1) == []
    assert lease.wait(None, [r], 0.1) == []

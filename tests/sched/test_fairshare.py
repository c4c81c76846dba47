"""Fair share (lingjund/sched/fairshare.py): Slurm's Fair Tree, decay, billing."""
from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from lingjund.sched import fairshare as fs


def _factors(accounts, users, shares=None):
    out = fs.fair_tree(accounts, users, shares or {})
    return {(a, u): s.fairshare for (a, u), s in out.items() if u}


def test_worked_example_of_the_docstring():
    accounts = {"root": "", "a": "root", "b": "root"}
    users = [("a", "u1", 1, 100.0), ("a", "u2", 1, 0.0), ("b", "u3", 1, 300.0)]
    f = _factors(accounts, users)
    assert f[("a", "u2")] == 1.0
    assert math.isclose(f[("a", "u1")], 2 / 3)
    assert math.isclose(f[("b", "u3")], 1 / 3)
    tree = fs.fair_tree(accounts, users, {})
    assert tree[("a", "")].raw_usage == 100.0 and tree[("root", "")].raw_usage == 400.0
    assert math.isclose(tree[("a", "")].effective_usage, 0.25)
    assert math.isclose(tree[("a", "")].level_fs, 2.0)


def test_no_usage_at_all_ties_everyone_at_one():
    f = _factors({"root": "", "a": "root"}, [("a", "x", 1, 0.0), ("a", "y", 5, 0.0)])
    assert f == {("a", "x"): 1.0, ("a", "y"): 1.0}


def test_more_shares_for_the_same_usage_ranks_first():
    f = _factors({"root": "", "a": "root"}, [("a", "x", 1, 50.0), ("a", "y", 3, 50.0)])
    assert f[("a", "y")] > f[("a", "x")]


# -- properties --------------------------------------------------------------------
_names = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def trees(draw):
    n_acc = draw(st.integers(1, 4))
    accounts = {"root": ""}
    for i in range(n_acc):
        accounts[f"acc{i}"] = draw(st.sampled_from(["root"] + [f"acc{j}" for j in range(i)]))
    shares = {a: draw(st.integers(0, 5)) for a in accounts if a != "root"}
    users = []
    for a in accounts:
        for u in draw(st.sets(_names, max_size=3)):
            users.append((a, u, draw(st.integers(0, 5)),
                          float(draw(st.sampled_from([0, 1, 10, 100, 1000])))))
    return accounts, shares, users


@settings(max_examples=300, deadline=None)
@given(trees(), st.data())
def test_more_usage_never_raises_a_factor(tree, data):
    accounts, shares, users = tree
    if not users:
        return
    i = data.draw(st.integers(0, len(users) - 1))
    extra = data.draw(st.sampled_from([1.0, 10.0, 1000.0, 1e6]))
    before = _factors(accounts, users, shares)
    more = list(users)
    a, u, s, use = more[i]
    more[i] = (a, u, s, use + extra)
    after = _factors(accounts, more, shares)
    assert after[(a, u)] <= before[(a, u)]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5), st.sampled_from([0.0, 5.0, 500.0]), st.integers(1, 4),
       st.sampled_from([0.0, 1.0, 7.0]))
def test_equal_shares_and_usage_give_equal_factors(shares, usage, n_others, other_usage):
    accounts = {"root": "", "a": "root", "b": "root"}
    users = [("a", "x", shares, usage), ("a", "y", shares, usage)]
    users += [("b", f"o{i}", 1, other_usage) for i in range(n_others)]
    f = _factors(accounts, users)
    assert f[("a", "x")] == f[("a", "y")]


@settings(max_examples=200, deadline=None)
@given(trees())
def test_factors_lie_in_zero_to_one_and_someone_has_one(tree):
    accounts, shares, users = tree
    f = _factors(accounts, users, shares)
    assert all(0 < v <= 1 for v in f.values())
    if f:
        assert max(f.values()) == 1.0


def test_decay_halves_usage_each_half_life():
    assert fs.decay(100.0, 7 * 86400, 7 * 86400) == 50.0
    assert fs.decay(100.0, 3600, 0) == 100.0


def test_reset_period_starts_usage_over_at_the_boundary():
    jan31 = 1706659200.0 + 3600         # 2024-01-31T01:00Z
    feb1 = 1706745600.0 + 60            # 2024-02-01T00:01Z
    assert fs.advance(500.0, jan31, feb1, 7.0, 0, "MONTHLY") == 7.0
    assert fs.advance(500.0, jan31, feb1, 7.0, 0, "NONE") == 507.0
    assert fs.advance(500.0, jan31, jan31 + 60, 7.0, 0, "MONTHLY") == 507.0


def test_billing_weights_as_slurm_spells_them():
    w = fs.parse_billing_weights("CPU=1.0,Mem=0.25G,GRES/gpu=16")
    assert w == {"cpu": 1.0, "mem": 0.25, "gres/gpu": 16.0}
    assert fs.billing(4, 8192, 2, 1, w) == 4 + 2 + 32
    assert fs.billing(4, 8192, 2, 1, {}) == 4.0

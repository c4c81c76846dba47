"""Slurm's vocabulary: parsing and formatting tables, and a round trip."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from lingjun import slurm


@pytest.mark.parametrize("text,minutes", [
    ("5", 5), ("0", 0), ("1:30", 2), ("1:00", 1), ("2:00:00", 120), ("00:05:00", 5),
    ("1-0", 1440), ("1-02", 1560), ("1-02:03", 1563), ("1-02:03:04", 1564),
    ("UNLIMITED", -1), ("unlimited", -1), ("infinite", -1), ("INFINITE", -1), ("-1", -1),
], ids=lambda v: repr(v))
def test_parse_time_limit(text, minutes):
    assert slurm.parse_time_limit(text) == minutes


@pytest.mark.parametrize("text", ["abc", "", "1:2:3:4", "-5", "1-", "1--2", "1:x", "1.5", "1-2-3"])
def test_parse_time_limit_refuses_garbage(text):
    with pytest.raises(ValueError):
        slurm.parse_time_limit(text)


@pytest.mark.parametrize("minutes,squeue,scontrol", [
    (-1, "UNLIMITED", "UNLIMITED"), (1, "1:00", "00:01:00"), (5, "5:00", "00:05:00"),
    (60, "1:00:00", "01:00:00"), (1440, "1-00:00:00", "1-00:00:00"),
    (365 * 1440, "365-00:00:00", "365-00:00:00"), (0, "0:00", "00:00:00"),
])
def test_format_time_limit(minutes, squeue, scontrol):
    assert slurm.format_time_limit(minutes) == squeue
    assert slurm.format_time_limit(minutes, "scontrol") == scontrol


@pytest.mark.parametrize("seconds,squeue,sacct", [
    (0, "0:00", "00:00:00"), (3, "0:03", "00:00:03"), (83, "1:23", "00:01:23"),
    (3723, "1:02:03", "01:02:03"), (2 * 86400 + 3723, "2-01:02:03", "2-01:02:03"),
])
def test_format_elapsed(seconds, squeue, sacct):
    assert slurm.format_elapsed(seconds) == squeue
    assert slurm.format_elapsed(seconds, "sacct") == sacct


@given(st.integers(min_value=0, max_value=10_000_000))
def test_time_limit_round_trips(minutes):
    for style in ("squeue", "scontrol"):
        assert slurm.parse_time_limit(slurm.format_time_limit(minutes, style)) == minutes


@given(st.integers(min_value=0, max_value=1000), st.integers(min_value=0, max_value=23),
       st.integers(min_value=0, max_value=59), st.integers(min_value=0, max_value=59))
def test_seconds_round_up_to_the_next_minute(d, h, m, s):
    total = ((d * 24 + h) * 60 + m) * 60 + s
    assert slurm.parse_time_limit(f"{d}-{h}:{m}:{s}") == -(-total // 60)


@pytest.mark.parametrize("text,mb", [("500", 500), ("4G", 4096), ("4g", 4096), ("2048K", 2),
                                     ("1T", 1048576), ("100M", 100), ("0", 0), ("1.5G", 1536)])
def test_parse_size_mb(text, mb):
    assert slurm.parse_size_mb(text) == mb


@pytest.mark.parametrize("text", ["", "lots", "4X", "-1", "G", "9" * 309, "9" * 400 + "G"])
def test_parse_size_refuses_garbage(text):
    with pytest.raises(ValueError):
        slurm.parse_size_mb(text)


@pytest.mark.parametrize("counts,text", [
    ([2, 2, 1], "2(x2),1"), ([1], "1"), ([4, 4, 4, 4], "4(x4)"), ([1, 2, 1], "1,2,1"), ([], ""),
])
def test_compress_counts(counts, text):
    assert slurm.compress_counts(counts) == text
    assert slurm.expand_counts(text) == counts


def test_hostlists():
    assert slurm.compress_hostlist(["node2", "node10", "node1"]) == "node[1-2,10]"
    assert slurm.expand_hostlist("node[1-3],gpu01") == ["node1", "node2", "node3", "gpu01"]
    assert slurm.expand_hostlist("") == []
    assert slurm.compress_hostlist([]) == ""
    assert sorted(["node10", "node2", "node1"], key=slurm.natural_key) == ["node1", "node2", "node10"]
    with pytest.raises(ValueError):
        slurm.expand_hostlist("node[1-")


@pytest.mark.parametrize("state,code", [
    ("PENDING", "PD"), ("RUNNING", "R"), ("COMPLETING", "CG"), ("COMPLETED", "CD"),
    ("FAILED", "F"), ("CANCELLED", "CA"), ("TIMEOUT", "TO"), ("NODE_FAIL", "NF"),
    ("PREEMPTED", "PR"), ("OUT_OF_MEMORY", "OOM"), ("BOOT_FAIL", "BF"), ("DEADLINE", "DL"),
])
def test_job_state_codes(state, code):
    assert slurm.job_state_code(state) == code
    assert slurm.parse_job_state(code.lower()) == state
    assert slurm.parse_job_state(state.lower()) == state


@pytest.mark.parametrize("state,drain,nr,short,long_,sinfo_long", [
    ("IDLE", False, False, "idle", "IDLE", "idle"),
    ("ALLOCATED", False, False, "alloc", "ALLOCATED", "allocated"),
    ("MIXED", False, False, "mix", "MIXED", "mixed"),
    ("DOWN", False, True, "down*", "DOWN+NOT_RESPONDING", "down*"),
    ("IDLE", True, False, "drain", "IDLE+DRAIN", "drained"),
    ("ALLOCATED", True, False, "drng", "ALLOCATED+DRAIN", "draining"),
    ("IDLE", False, True, "idle*", "IDLE+NOT_RESPONDING", "idle*"),
], ids=["idle", "allocated", "mixed", "down and silent", "drained", "draining", "idle but silent"])
def test_node_states(state, drain, nr, short, long_, sinfo_long):
    assert slurm.node_state_short(state, drain, nr) == short
    assert slurm.node_state_long(state, drain, nr) == long_
    assert slurm.node_state_sinfo_long(state, drain, nr) == sinfo_long


def test_drain_words():
    assert slurm.node_state_drain_word("IDLE", True) == "DRAINED"
    assert slurm.node_state_drain_word("MIXED", True) == "DRAINING"


def test_exit_codes_signals_and_timestamps():
    assert slurm.format_exit_code(3) == "3:0"
    assert slurm.format_exit_code(0, 15) == "0:15"
    assert slurm.parse_signal("USR1") == slurm.parse_signal("SIGUSR1") == 10
    assert slurm.parse_signal("9") == 9
    with pytest.raises(ValueError):
        slurm.parse_signal("NOPE")
    assert slurm.format_timestamp(0) == "Unknown"
    assert len(slurm.format_timestamp(1796205842)) == len("2026-12-02T10:04:02")


# --- --signal, --mail-type, -C --------------------------------------------------------

@pytest.mark.parametrize("text,want", [
    ("USR1", (10, 60, "")), ("SIGUSR2@30", (12, 30, "")), ("B:USR1@50", (10, 50, "B")),
    ("b:10", (10, 60, "B")), ("R:TERM@0", (15, 0, "R")), ("9@65535", (9, 65535, "")),
], ids=["a name, default 60 s", "SIG prefix and a time", "B: the batch shell only",
        "lower-case b: and a number", "R: with zero seconds", "the largest time"])
def test_parse_warn_signal(text, want):
    assert slurm.parse_warn_signal(text) == want


@pytest.mark.parametrize("text", ["FOO", "USR1@", "USR1@x", "USR1@65536", "X:USR1", ""])
def test_parse_warn_signal_refuses_garbage(text):
    with pytest.raises(ValueError):
        slurm.parse_warn_signal(text)


@pytest.mark.parametrize("text,want", [
    ("end", "END"), ("FAIL,begin", "BEGIN,FAIL"), ("ALL", "BEGIN,END,FAIL,REQUEUE,STAGE_OUT"),
    ("NONE", ""), ("time_limit_80,ARRAY_TASKS", "ARRAY_TASKS,TIME_LIMIT_80"),
], ids=["one word, upper-cased", "printed in Slurm's order", "ALL is Slurm's set",
        "NONE is no mail", "array tasks first"])
def test_parse_mail_type(text, want):
    assert slurm.parse_mail_type(text) == want


@pytest.mark.parametrize("expr,features,want", [
    ("fast", {"fast"}, True), ("fast", set(), False),
    ("fast&ib", {"fast"}, False), ("fast,ib", {"fast", "ib"}, True),
    ("fast|slow", {"slow"}, True), ("(a|b)&c", {"b", "c"}, True),
    ("a|b&c", {"b", "c"}, True), ("a|b&c", {"a"}, False), ("[a|b]", {"b"}, True),
], ids=["a plain feature present", "a plain feature absent", "AND needs both",
        "comma is AND", "OR needs one", "parentheses group",
        "left to right: (a|b)&c with b,c", "left to right: (a|b)&c with a only",
        "brackets group like parentheses"])
def test_constraint_matches(expr, features, want):
    assert slurm.constraint_matches(expr, features) is want


@pytest.mark.parametrize("expr", ["", "a&", "|a", "(a", "a)", "a*2", "a b", "a&&b"])
def test_bad_constraints_are_refused(expr):
    with pytest.raises(ValueError):
        slurm.parse_constraint(expr)


@pytest.mark.parametrize("text, indices, throttle", [
    ("1-10", list(range(1, 11)), 0),
    ("1,3,5", [1, 3, 5], 0),
    ("0-15:4", [0, 4, 8, 12], 0),
    ("0,6,16-32:8", [0, 6, 16, 24, 32], 0),
    ("4-9%2", [4, 5, 6, 7, 8, 9], 2),
    ("3,1,2,3", [1, 2, 3], 0),
    ("0-1000", list(range(0, 1001)), 0),
], ids=["a range", "a list", "a range with a step", "a list mixing single indices and ranges",
        "a %N throttle", "indices sorted and duplicates merged", "the highest index MaxArraySize allows"])
def test_array_specs(text, indices, throttle):
    got = slurm.parse_array_spec(text)
    assert (list(got.indices), got.max_running) == (indices, throttle)


@pytest.mark.parametrize("text", ["1-1001", "abc", "", "3-1", "1-5:0", "1%x", "1,,2", "-1", "1-"],
                         ids=["over MaxArraySize (golden err_sbatch_bad_array)", "not a number",
                              "empty", "a range backwards", "a zero step", "a bad throttle",
                              "an empty item", "a negative index", "a range without its end"])
def test_bad_array_specs(text):
    with pytest.raises(ValueError):
        slurm.parse_array_spec(text)


@pytest.mark.parametrize("indices, text", [
    ([1, 2, 3, 5], "1-3,5"), ([0, 4, 8, 12], "0,4,8,12"), ([7], "7"), ([], ""),
], ids=["runs become ranges", "a stepped array lists each index, as Slurm's bit_fmt",
        "a single index", "nothing"])
def test_fold_indices(indices, text):
    assert slurm.fold_indices(indices) == text
    assert slurm.unfold_indices(text) == indices


# --- --begin / --deadline / StartTime= ------------------------------
def _local(y, mo, d, h=0, mi=0, s=0) -> int:
    import time
    return int(time.mktime((y, mo, d, h, mi, s, 0, 0, -1)))


BEGIN_NOW = _local(2026, 12, 2, 10, 0, 0)      # a Wednesday, 10:00 local time


# Each checked against Slurm 22.05's own parse_time (sacct -S X -v prints the
# window it read; sbatch --begin and scontrol StartTime= read the same way).
@pytest.mark.parametrize("text,want", [
    ("now", BEGIN_NOW),
    ("now+60", BEGIN_NOW + 60),
    ("now+90seconds", BEGIN_NOW + 90),
    ("now+5minutes", BEGIN_NOW + 300),
    ("now+2hours", BEGIN_NOW + 7200),
    ("now + 2 hours", BEGIN_NOW + 7200),
    ("now+1days", BEGIN_NOW + 86400),
    ("now+1week", BEGIN_NOW + 7 * 86400),
    ("now-5", BEGIN_NOW - 5),
    ("16:00", _local(2026, 12, 2, 16)),
    ("16:00:30", _local(2026, 12, 2, 16, 0, 30)),
    ("09:00", _local(2026, 12, 3, 9)),
    ("4:30PM", _local(2026, 12, 2, 16, 30)),
    ("12:00am", _local(2026, 12, 3, 0)),
    ("today", _local(2026, 12, 2)),
    ("tomorrow", _local(2026, 12, 3)),
    ("midnight", _local(2026, 12, 3)),
    ("noon", _local(2026, 12, 2, 12)),
    ("fika", _local(2026, 12, 2, 15)),
    ("teatime", _local(2026, 12, 2, 16)),
    ("tomorrow noon", _local(2026, 12, 3, 12)),
    ("noon tomorrow", _local(2026, 12, 3, 12)),
    ("2027-01-05", _local(2027, 1, 5)),
    ("2027-01-05T10:11", _local(2027, 1, 5, 10, 11)),
    ("2027-01-05T10:11:12", _local(2027, 1, 5, 10, 11, 12)),
    ("2027-01-05 10:11", _local(2027, 1, 5, 10, 11)),
    ("2027-02-30", _local(2027, 3, 2)),
    ("12/25", _local(2026, 12, 25)),
    ("12/25/27", _local(2027, 12, 25)),
    ("12/25-10:00", _local(2026, 12, 25, 10)),
    ("1225", _local(2026, 12, 25)),
    ("0101", _local(2027, 1, 1)),
    ("1201", _local(2027, 12, 1)),
    ("01.02.28", _local(2028, 1, 2)),
    ("uts1700000000", 1700000000),
    ("", 0),
], ids=[
    "now is now", "now+60 counts seconds", "now+90seconds", "now+5minutes", "now+2hours",
    "blanks between the words", "now+1days", "now+1week", "now-5 is in the past",
    "a time still to come today", "with seconds",
    "a time already past today is tomorrow", "12-hour clock with PM", "12am is midnight",
    "today is midnight gone", "tomorrow is the coming midnight", "midnight is the coming one",
    "noon still to come", "fika at three", "teatime at four", "tomorrow noon",
    "the words in either order", "ISO date",
    "ISO date and minutes", "ISO date and seconds", "ISO date, a blank, a time",
    "a day past the month's end rolls over as mktime's", "MM/DD still to come this year",
    "MM/DD/YY", "MM/DD-HH:MM", "MMDD still to come", "MMDD already past is next year's",
    "MMDD earlier this month is next year's", "MM.DD.YY", "uts and Unix seconds",
    "nothing at all is zero",
])
def test_parse_time(text, want):
    got = slurm.parse_time(text, BEGIN_NOW)
    assert got == want, f"{text}: want {want}, got {got} ({got - want:+d} s)"


@pytest.mark.parametrize("text,want", [
    ("1201", _local(2026, 12, 1)),
    ("1203", _local(2026, 12, 3)),
    ("0101", _local(2026, 1, 1)),
    ("16:00", _local(2026, 12, 2, 16)),
    ("09:00", _local(2026, 12, 2, 9)),
    ("midnight", _local(2026, 12, 2)),
], ids=["MMDD earlier this month is this year's (sacct -S 1203)",
        "MMDD later this month is still this year's", "January is this year's",
        "a time to come is today's", "a time gone is today's", "midnight is today's"])
def test_parse_time_looking_back(text, want):
    """sacct reads its dates looking back: "-S 1201" is this December 1st,
    never a year to come, and never 2001-12-01."""
    assert slurm.parse_time(text, BEGIN_NOW, past=True) == want


@pytest.mark.parametrize("text,pos", [
    ("soon", 0), ("now+", 3), ("now+5parsecs", 4), ("now+1h", 4), ("nowx", 3),
    ("25:00", 0), ("12:61", 3), ("1:2", 3), ("13/40", 0), ("2027-13-01", 5),
    ("2026-12-01T10", 13), ("13:00PM", 5), ("0000", 0), ("uts99", 0), ("elevenses", 0),
], ids=repr)
def test_parse_time_refuses_garbage_where_slurm_stops(text, pos):
    """Slurm 22.05's words, with the position where it stopped reading
    (22.05 knows no "elevenses", though its man page names it)."""
    with pytest.raises(ValueError) as e:
        slurm.parse_time(text, BEGIN_NOW)
    assert str(e.value) == f"Invalid time specification (pos={pos}): {text}"

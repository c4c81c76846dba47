"""What the commands parse without ``re`` and ``json`` (their start-up, issue 17)
reads exactly as the patterns and the json calls it replaced."""
from __future__ import annotations

import json
import re

from hypothesis import given, strategies as st

from cli import common, formats
from lingjun import cjson, lean, slurm

# the characters that matter to the patterns, and a few that \d or isalpha
# read differently from ASCII (superscript two, Arabic-Indic one, e acute)
TEXT = st.text(alphabet="%.#0123456789aZj-_ ,[]\n\u00b2\u0661\u00e9|:", max_size=14)


def _parse_format_re(fmt: str):
    fields, pos = [], 0
    for m in re.finditer(r"%(\.)?(#|\d+)?([A-Za-z%])", fmt):
        prefix = fmt[pos:m.start()]
        dot, width, letter = m.groups()
        if letter == "%":
            fields.append(formats.Field("%", 0, False, prefix))
        else:
            fields.append(formats.Field(letter, 0 if width in (None, "#") else int(width),
                                        bool(dot), prefix, width == "#"))
        pos = m.end()
    return fields, fmt[pos:]


def _bad_letters_re(fmt: str) -> list[str]:
    bad = []
    for token in (t for t in fmt.split("%")[1:] if t):
        m = re.match(r"\.?\d*(.)", token, re.S)
        if m and not m.group(1).isalpha():
            bad.append(m.group(1))
    return bad


@given(TEXT)
def test_format_parsing_reads_as_the_pattern(fmt):
    assert formats.parse_format(fmt) == _parse_format_re(fmt)
    assert formats.bad_format_letters(fmt) == _bad_letters_re(fmt)


@given(TEXT)
def test_job_words_ids_and_natural_keys_read_as_the_patterns(text):
    assert common.job_words(text) == [w for w in re.findall(r"[^,\[]*(?:\[[^\]]*\][^,]*)?", text) if w]
    assert slurm.is_job_id(text) == (bool(re.match(r"[0-9]+\Z", text))
                                     and int(text) <= slurm.MAX_JOB_ID)
    assert slurm._digit_split(text) == re.split(r"(\d+)", text)


def test_a_pattern_compiles_on_first_use_with_inline_flags():
    p = lean.Pattern(r"(?i)^(\d+)([KMG]?)$")
    assert p._compiled is None
    assert p.match("12g").groups() == ("12", "g")
    assert p._compiled is not None
    assert slurm.parse_size_mb("2g") == slurm.parse_size_mb("2G") == 2048   # (?i) inline


JSONABLE = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20)


@given(JSONABLE)
def test_cjson_gives_jsons_text_and_values(obj):
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    assert cjson.dumps(obj) == text
    assert cjson.loads(text.encode("utf-8", "surrogatepass") + b"\n") == json.loads(text)


def test_cjson_refuses_what_json_refuses():
    for bad in (b"", b" ", b"x", b"[1", b"{}{}", b"[1] x", b"\xff", b'{"a" 1}'):
        try:
            json.loads(bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"json accepts {bad!r}")
        try:
            cjson.loads(bad)
        except ValueError:
            continue
        raise AssertionError(f"cjson accepts {bad!r}")


def test_a_record_is_a_named_tuple():
    from collections import namedtuple
    for fields, defaults, args, kwargs in (
            (("a", "b", "c"), (2, 3), (1,), {}), ("a b c", (), (1, 2, 3), {}),
            (("a", "b"), (0,), (), {"a": 5}), (("a", "b"), (), (1,), {"b": "2"})):
        ours, theirs = lean.record("R", fields, defaults), namedtuple("R", fields, defaults=defaults)
        one, other = ours(*args, **kwargs), theirs(*args, **kwargs)
        assert (one == other, hash(tuple(one)) == hash(tuple(other)), repr(one)) == (True, True, repr(other))
        assert [getattr(one, f) for f in other._fields] == list(other)
    R = lean.record("R", ("a", "b"), (0,))
    for args, kwargs in (((), {}), ((1, 2, 3), {}), ((1,), {"a": 2}), ((1,), {"z": 2})):
        try:
            R(*args, **kwargs)
        except TypeError:
            continue
        raise AssertionError(f"R{args, kwargs} accepted")


def test_lru_cache_caches():
    calls = []

    @lean.lru_cache(maxsize=2)
    def f(x):
        """doc"""
        calls.append(x)
        return x * 2
    assert [f(1), f(1), f(2), f(3), f(1)] == [2, 2, 4, 6, 2]
    assert calls == [1, 2, 3, 1] and f.__name__ == "f" and f.__doc__ == "doc"


NAMES = st.lists(st.builds(lambda p, n, z: p + ("0" if z else "") + str(n),
                           st.sampled_from(["node", "n", "gpu-", "a_b", "x.y", "rack1n", "", " n", "é"]),
                           st.integers(0, 40), st.booleans()),
                 min_size=1, max_size=8)


@given(NAMES)
def test_ranging_one_prefix_by_hand_is_python_hostlists_answer(names):
    import hostlist
    ours = slurm._one_prefix_ranges(names)
    assert ours is None or ours == hostlist.collect_hostlist(list(names))
    if len(names) > 1:
        assert slurm.compress_hostlist(names) == hostlist.collect_hostlist(list(names))

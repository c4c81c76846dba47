"""What the commands parse by hand instead of with a pattern or python-hostlist
reads exactly as the pattern and the library would."""
from __future__ import annotations

import re

from hypothesis import given, strategies as st

from cli import common
from cli.formats.fields import bad_format_letters, Field, parse_format
from lingjun import slurm

# the characters that matter to the patterns, and a few that \d or isalpha
# read differently from ASCII (superscript two, Arabic-Indic one, e acute)
TEXT = st.text(alphabet="%.#0123456789aZj-_ ,[]\n\u00b2\u0661\u00e9|:", max_size=14)


def _parse_format_re(fmt: str):
    fields, pos = [], 0
    for m in re.finditer(r"%(\.)?(#|\d+)?([A-Za-z%])", fmt):
        prefix = fmt[pos:m.start()]
        dot, width, letter = m.groups()
        if letter == "%":
            fields.append(Field("%", 0, False, prefix))
        else:
            fields.append(Field(letter, 0 if width in (None, "#") else int(width),
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
    assert parse_format(fmt) == _parse_format_re(fmt)
    assert bad_format_letters(fmt) == _bad_letters_re(fmt)


@given(TEXT)
def test_job_words_ids_and_natural_keys_read_as_the_patterns(text):
    assert common.job_words(text) == [w for w in re.findall(r"[^,\[]*(?:\[[^\]]*\][^,]*)?", text) if w]
    assert slurm.is_job_id(text) == (bool(re.match(r"[0-9]+\Z", text))
                                     and int(text) <= slurm.MAX_JOB_ID)
    assert slurm._digit_split(text) == re.split(r"(\d+)", text)


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

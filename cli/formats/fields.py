"""The %-format and -O machinery every table command shares: a format string
("%.18i %.9P %j") parsed into Fields, rows padded and joined, -O's
"Type[:[.]size[suffix]]" tokens split.

Behaviour from Slurm 22.05's src/squeue/opts.c (parse_format, _parse_token)
and src/sinfo/opts.c, which parse alike: a '.' right-justifies, a width pads
(never truncates, as _print_str does without '.'), an unknown letter stays
literal text. squeue, sinfo and (through -O) both use it; nothing else here
knows which command prints.
"""
from __future__ import annotations

import re
from collections import namedtuple
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Callable, Iterable


class Field(namedtuple("Field", ("letter", "width", "right", "prefix", "computed", "suffix"),
                       defaults=(0, False, "", False, ""))):
    """One %-field of a format string: letter, width (0 = natural), justification
    (right), the literal text before it (prefix) and after it (suffix, -O
    "Field:size<suffix>"), and computed: a '#' width, from the data (sinfo).
    A named tuple: dataclasses would cost every squeue its import of inspect."""
    __slots__ = ()


def _field_at(fmt: str, i: int) -> tuple[bool, str, str, int] | None:
    """The field that the "%" at ``i`` starts, as ``%(\\.)?(#|\\d+)?([A-Za-z%])``
    matches it there: (dot, width text, letter, its end); None where that
    pattern matches nothing (the "%" is literal text then). By hand: ``re``
    costs every squeue and sinfo 3-4 ms to import."""
    n = len(fmt)
    j = i + 1
    dot = j < n and fmt[j] == "."
    if dot:
        j += 1
    k = j
    if k < n and fmt[k] == "#":
        k += 1
    else:
        while k < n and fmt[k].isdecimal():      # \d in a str pattern
            k += 1
    if k < n and (fmt[k] == "%" or (fmt[k].isascii() and fmt[k].isalpha())):
        return dot, fmt[j:k], fmt[k], k + 1
    return None


def parse_format(fmt: str) -> tuple[list[Field], str]:
    """"%.18i %.9P" -> fields (each with the literal text before it) and the trailing text."""
    fields: list[Field] = []
    pos = 0
    i = fmt.find("%")
    while i >= 0:
        found = _field_at(fmt, i)
        if found is None:
            i = fmt.find("%", i + 1)
            continue
        dot, width, letter, end = found
        prefix = fmt[pos:i]
        if letter == "%":
            fields.append(Field("%", 0, False, prefix))
        else:
            fields.append(Field(letter, 0 if width in ("", "#") else int(width),
                                dot, prefix, width == "#"))
        pos = end
        i = fmt.find("%", pos)
    return fields, fmt[pos:]


def bad_format_letters(fmt: str) -> list[str]:
    """The type characters of a %-format that name no field ("%-10j" -> "-"):
    squeue reports each and prints that piece of the format as it was typed,
    which parse_format already does by leaving it as literal text."""
    bad = []
    for token in (t for t in fmt.split("%")[1:] if t):
        letter = _type_char(token)
        if letter is not None and not letter.isalpha():
            bad.append(letter)
    return bad


def _type_char(token: str) -> str | None:
    r"""What ``re.match(r"\.?\d*(.)", token, re.S)`` takes as group 1: the
    character after an optional dot and the digits, backing off one character
    where the token ends there (".12" -> "2", "." -> ".")."""
    n = len(token)
    j = 1 if token[:1] == "." else 0
    k = j
    while k < n and token[k].isdecimal():
        k += 1
    if k < n:
        return token[k]
    if k > j:
        return token[k - 1]         # the last digit
    return token[0] if j else None  # "." alone


def pad(value: str, width: int, right: bool) -> str:
    """Slurm's _print_str with cut_output: truncate to width, then justify."""
    if width <= 0:
        return value
    value = value[:width]
    return value.rjust(width) if right else value.ljust(width)


def render_rows(fields: list[Field], trailer: str, rows: Iterable[dict[str, str]],
                headers: dict[str, str] | None, widths: dict[str, int] | None = None) -> str:
    """Lay out rows (letter -> text) under an optional header row."""
    plan, end = row_plan(fields, trailer, widths or {})
    lines = [render_row(plan, end, headers.get)] if headers is not None else []
    lines.extend(render_row(plan, end, r.get) for r in rows)
    return "".join(lines)


def row_plan(fields: list[Field], trailer: str, widths: dict[str, int]):
    """Each field as (literal before, letter or None, width, justify or None), settled
    once for all rows; and the text that ends each row."""
    plan = []
    for f in fields:
        if f.letter == "%":
            plan.append((f.prefix + "%", None, 0, None))
            continue
        w = widths.get(f.letter, f.width) if f.computed else f.width
        plan.append((f.prefix, f.letter, w,
                     None if w <= 0 else (str.rjust if f.right else str.ljust)))
        if f.suffix:
            plan.append((f.suffix, None, 0, None))
    return plan, trailer + "\n"


def render_row(plan, end: str, value: Callable[[str], str | None]) -> str:
    """One row: ``value(letter)`` is the field's text (None: empty); pad() inlined."""
    out = []
    for prefix, letter, w, justify in plan:
        out.append(prefix)
        if letter is None:
            continue
        v = value(letter) or ""
        out.append(v if justify is None else justify(v[:w], w))
    out.append(end)
    return "".join(out)


class FormatError(ValueError):
    """A -o/-O/--format specification that the command cannot print."""


_O_SIZE = r"(?s)(\.)?(\d*)(.*)"


def split_O_token(token: str) -> tuple[str, int, bool, str]:
    """One -O field, "type[:[.][size][suffix]]" -> (name, width, right, suffix).

    No size means 20 columns; ":0" means the value's own width; the suffix is
    printed after the field ("JobID:8|" ends each cell with a bar).
    """
    name, colon, rest = token.partition(":")
    if not colon:
        return name.strip(), 20, False, ""
    dot, size, suffix = re.fullmatch(_O_SIZE, rest).groups()
    return name.strip(), int(size) if size else 20, bool(dot), suffix


def bad_O_fields(spec: str, known: dict) -> list[str]:
    """The field names of a -O spec that the command does not know. squeue and
    sinfo report each ("Invalid job format specification: <name>", both of
    them) and print the rest, the unknown column left empty, with rc 0."""
    names = (split_O_token(t)[0] for t in spec.split(",") if t)
    return [n for n in names if n.lower() not in known]

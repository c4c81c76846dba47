"""JSON for the commands' start-up: ``dumps`` and ``loads`` through ``_json``, json's C half.

``import json`` costs a command 5-6 ms before it has done anything: its
Python modules compile five regular expressions at import and bring in
``re`` (and with it ``enum``), though on CPython the work is done by the C
encoder and scanner. These two call the C code directly, with what
``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))`` and
``json.loads`` hand it, and give the same text and the same values:

    >>> from lingjun import cjson
    >>> cjson.dumps({"a": [1, 2.5, None, True], "b": "\u00e9"})
    '{"a":[1,2.5,null,true],"b":"\u00e9"}'
    >>> cjson.loads(b' {"x": [1, "y"]}\n')
    {'x': [1, 'y']}

A malformed document raises ValueError (from ``_json``: json's own
JSONDecodeError, which imports json.decoder then, on that path only).
"""
from __future__ import annotations

import _json


def _not_serializable(o):
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


# (markers, default, encoder, indent, key_separator, item_separator, sort_keys,
# skipkeys, allow_nan): json.dumps' for ensure_ascii=False, separators=(",", ":")
_encode = _json.make_encoder(None, _not_serializable, _json.encode_basestring, None, ":", ",",
                               False, False, True)


def dumps(obj) -> str:
    """``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))``, through ``_json``.

    No cycle check (a request is a tree of dicts and lists)."""
    return "".join(_encode(obj, 0))


class _ScanContext:
    """What json.JSONDecoder hands ``_json.make_scanner``: json.loads' defaults."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"),
                      "NaN": float("nan")}.__getitem__
    memo: dict = {}


_scan = _json.make_scanner(_ScanContext())
_SPACE = " \t\n\r"


def loads(data: bytes | str):
    """``json.loads(data)`` for UTF-8 text, through ``_json``'s scanner; ValueError
    (json.JSONDecodeError's base) when it is not one JSON value, RecursionError
    when it nests too deep, as json.loads."""
    s = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    n = len(s)
    i = 0
    while i < n and s[i] in _SPACE:
        i += 1
    try:
        obj, end = _scan(s, i)
    except StopIteration:
        raise ValueError(f"Expecting value: char {i}") from None
    while end < n and s[end] in _SPACE:
        end += 1
    if end != n:
        raise ValueError(f"Extra data: char {end}")
    return obj


__all__ = ["dumps", "loads"]

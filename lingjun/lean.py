"""Named tuples, LRU caches and patterns for the commands, without the modules they come from.

A command's start is mostly imports (issue 17; bench/README.md says where
its milliseconds go). ``collections`` (for ``namedtuple``), ``functools``
(for ``lru_cache``) and ``contextlib`` cost it 2-3 ms together before any of
its work, and ``re`` (with ``enum``) 3-4 ms more: more than the half of
Slurm's whole command. These stand-ins behave as the originals do where the
commands use them, and load nothing but C modules:

- ``record``: a tuple class with named fields and defaults, as
  ``collections.namedtuple`` makes one (positional and keyword arguments,
  the same repr, equality, hashing and unpacking as a tuple);
- ``lru_cache``: ``functools.lru_cache(maxsize)``'s own C wrapper;
- ``Pattern``: ``re.compile(pattern)``, compiled on first use (flags inline:
  ``(?i)``, ``(?s)``).

    >>> Point = record("Point", ("x", "y"), defaults=(0,))
    >>> Point(1), Point(x=1, y=2) == (1, 2), Point(1, 2).y
    (Point(x=1, y=0), True, 2)
"""
from __future__ import annotations

from _operator import itemgetter

try:
    from _functools import _lru_cache_wrapper
except ImportError:            # an interpreter without it (not CPython): the module's own
    _lru_cache_wrapper = None


def record(name: str, fields: tuple[str, ...] | str, defaults: tuple = ()) -> type:
    """``collections.namedtuple(name, fields, defaults=defaults)`` without collections:
    no ``_replace``/``_asdict``/``_make`` (nothing of ours calls them)."""
    fields = tuple(fields.replace(",", " ").split()) if isinstance(fields, str) else tuple(fields)
    defaults = tuple(defaults)
    n = len(fields)
    if len(defaults) > n:
        raise TypeError("Got more default values than field names")
    first_default = n - len(defaults)
    index = {f: i for i, f in enumerate(fields)}

    def __new__(cls, *args, **kwargs):
        if not kwargs and first_default <= len(args) <= n:     # the usual call: positional
            return tuple.__new__(cls, args + defaults[len(args) - first_default:])
        if len(args) > n:
            raise TypeError(f"{name}.__new__() takes {n + 1} positional arguments "
                            f"but {len(args) + 1} were given")
        values = list(args) + [_MISSING] * (n - len(args))
        for key, value in kwargs.items():
            i = index.get(key)
            if i is None:
                raise TypeError(f"{name}.__new__() got an unexpected keyword argument {key!r}")
            if i < len(args):
                raise TypeError(f"{name}.__new__() got multiple values for argument {key!r}")
            values[i] = value
        for i in range(len(args), n):
            if values[i] is _MISSING:
                if i < first_default:
                    raise TypeError(f"{name}.__new__() missing required argument: {fields[i]!r}")
                values[i] = defaults[i - first_default]
        return tuple.__new__(cls, values)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(
            f"{f}={v!r}" for f, v in zip(fields, self)) + ")"

    def __getnewargs__(self):
        return tuple(self)

    namespace = {"__slots__": (), "_fields": fields, "_field_defaults": dict(zip(
        fields[first_default:], defaults)), "__new__": __new__, "__repr__": __repr__,
        "__getnewargs__": __getnewargs__, "__match_args__": fields}
    for i, f in enumerate(fields):
        namespace[f] = property(itemgetter(i), doc=f"Alias for field number {i}")
    __new__.__qualname__ = f"{name}.__new__"
    return type(name, (tuple,), namespace)


_MISSING = object()


def _cache_info(hits, misses, maxsize, currsize):
    return (hits, misses, maxsize, currsize)


def lru_cache(maxsize: int = 128):
    """``functools.lru_cache(maxsize)``: the same C wrapper, without importing functools."""
    if _lru_cache_wrapper is None:
        import functools
        return functools.lru_cache(maxsize)

    def decorate(function):
        wrapper = _lru_cache_wrapper(function, maxsize, False, _cache_info)
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            try:
                setattr(wrapper, attr, getattr(function, attr))
            except AttributeError:
                pass
        wrapper.__wrapped__ = function
        return wrapper
    return decorate


class Pattern:
    """``re.compile(pattern)``, compiled on its first use.

    ``re`` (with ``enum``) costs a command's start 3-4 ms, and each pattern
    compiled at import a few hundred microseconds more, for options most
    calls do not give: a command imports ``re`` only when it parses one.
    Flags go inline (``(?i)``, ``(?s)``). The methods are the compiled
    pattern's."""
    __slots__ = ("pattern", "_compiled")

    def __init__(self, pattern: str):
        self.pattern = pattern
        self._compiled = None

    def __getattr__(self, name: str):
        if self._compiled is None:
            import re
            self._compiled = re.compile(self.pattern)
        return getattr(self._compiled, name)


__all__ = ["Pattern", "lru_cache", "record"]

"""The API messages for the commands, in the standard library only.

A command on its common path (sbatch, squeue, scancel...) must not pay for
importing protobuf (a fifth of a Slurm command's whole run). These classes
stand in for ``lingjun.v1.api_pb2``'s where the commands build requests and
read replies: same names, same fields, proto3's defaults for what is unset,
presence for ``optional`` and message fields, and ValueError for a number
out of its field's range, as protobuf's own classes raise. Their fields come
from the descriptors (``lingjun/v1/api_fields.py``, generated), so the two
cannot drift apart unnoticed (tests/test_messages.py).

    >>> from lingjun import messages
    >>> req = messages.GetJobsRequest(job_ids=[7], all_states=True)
    >>> req.job_ids, req.users, req.squeue_order
    ([7], [], False)
    >>> req.to_dict()
    {'job_ids': [7], 'all_states': True}
    >>> messages.JobInfo.from_dict({"job_id": "12", "state": "RUNNING"}).job_id
    12

On the wire they are JSON objects keyed by the proto field names (the local
command socket, ``lingjun/command_socket.py``); ``to_dict``/``from_dict``
convert. 64-bit integers may come as strings (protobuf's JSON mapping) and
bytes as base64; both are read back to their Python types.
"""
from __future__ import annotations

from lingjun.v1.api_fields import ENUMS, FIELDS, METHODS

_RANGES = {"i32": (-2 ** 31, 2 ** 31 - 1), "i64": (-2 ** 63, 2 ** 63 - 1),
           "u32": (0, 2 ** 32 - 1), "u64": (0, 2 ** 64 - 1)}
_DEFAULTS = {"i32": 0, "i64": 0, "u32": 0, "u64": 0, "bool": False, "str": "", "bytes": b"",
             "float": 0.0}


_PLAIN_TYPES = {"i32": int, "i64": int, "u32": int, "u64": int, "bool": bool, "str": str,
                "float": float}


def _plain_ok(kind: str, value) -> bool:
    """``value`` is already what a field of ``kind`` holds (the common case on the wire)."""
    if type(value) is not _PLAIN_TYPES.get(kind):
        return False
    bounds = _RANGES.get(kind)
    return bounds is None or bounds[0] <= value <= bounds[1]


def _scalar(kind: str, value, where: str):
    """``value`` checked for a field of ``kind`` (protobuf's TypeError/ValueError)."""
    bounds = _RANGES.get(kind)
    if bounds is not None:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, str) and kind in ("i64", "u64"):
                value = int(value)          # the JSON mapping's 64-bit integers
            else:
                raise TypeError(f"{where}: {value!r} has type {type(value).__name__}, "
                                f"but expected one of: int")
        if not bounds[0] <= value <= bounds[1]:
            raise ValueError(f"Value out of range: {value}")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise TypeError(f"{where}: {value!r} has type {type(value).__name__}, "
                            f"but expected one of: str")
        return value
    if kind == "bool":
        if not isinstance(value, (bool, int)):
            raise TypeError(f"{where}: {value!r} is not a bool")
        return bool(value)
    if kind == "float":
        if isinstance(value, str):
            return float(value)             # "NaN", "Infinity" in the JSON mapping
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{where}: {value!r} is not a number")
        return float(value)
    if kind == "bytes":
        if isinstance(value, str):
            import base64
            return base64.b64decode(value)
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError(f"{where}: {value!r} is not bytes")
        return bytes(value)
    raise TypeError(f"{where}: unknown kind {kind}")


class Repeated(list):
    """A repeated field: a list whose items are checked; ``add`` makes a message item."""
    __slots__ = ("_kind", "_where")

    def __init__(self, kind: str, where: str, items=()):
        super().__init__()
        self._kind, self._where = kind, where
        self.extend(items)

    def _item(self, value):
        cls = _message_class(self._kind)
        if cls is None:
            return _scalar(self._kind, value, self._where)
        return value if isinstance(value, Message) else cls.from_any(value)

    def append(self, value) -> None:
        super().append(self._item(value))

    def extend(self, values) -> None:
        super().extend(self._item(v) for v in values)

    def add(self, **fields):
        one = _CLASSES[self._kind](**fields)
        super().append(one)
        return one


class Message:
    """One API message; subclasses are made per message name from FIELDS."""
    # _implicit: made by reading an unset message field; present (HasField,
    # on the wire) only once something in it is set, as in protobuf
    __slots__ = ("_values", "_implicit")
    NAME = ""
    FIELDS: dict = {}

    def __init__(self, **fields):
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_implicit", False)
        for name, value in fields.items():
            if value is None:
                continue
            kind, how, _ = self._spec(name)
            if how:
                getattr(self, name).extend(value) if how == "list" else getattr(self, name).update(value)
            else:
                setattr(self, name, value)

    @classmethod
    def _spec(cls, name: str) -> tuple[str, str, bool]:
        try:
            return cls.FIELDS[name]
        except KeyError:
            raise AttributeError(f"{cls.NAME} has no field {name!r}") from None

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        values = self._values
        if name in values:
            return values[name]
        kind, how, _ = self._spec(name)
        if how == "list":
            value = values[name] = Repeated(kind, f"{self.NAME}.{name}")
        elif how == "map":
            value = values[name] = {}
        elif kind in _DEFAULTS:
            return _DEFAULTS[kind]
        else:
            value = values[name] = _CLASSES[kind]()
            object.__setattr__(value, "_implicit", True)
        return value

    def __setattr__(self, name: str, value) -> None:
        kind, how, _ = self._spec(name)
        where = f"{self.NAME}.{name}"
        if how == "list":
            value = Repeated(kind, where, value)
        elif how == "map":
            value = {str(k): _scalar(kind, v, where) for k, v in dict(value).items()}
        elif kind in _DEFAULTS:
            value = _scalar(kind, value, where)
        else:
            value = value if isinstance(value, Message) else _CLASSES[kind].from_any(value)
            object.__setattr__(value, "_implicit", False)
        self._values[name] = value

    # -- protobuf's methods that the commands use -----------------------------------------
    def HasField(self, name: str) -> bool:
        kind, how, presence = self._spec(name)
        if not presence:
            raise ValueError(f'Field {self.NAME}.{name} does not have presence.')
        return name in self._values and _present(self._values[name])

    def ClearField(self, name: str) -> None:
        self._spec(name)
        self._values.pop(name, None)

    def CopyFrom(self, other: "Message") -> None:
        object.__setattr__(self, "_values", {})
        for name, value in _fields_of(other):
            setattr(self, name, _copy(value))

    def MergeFrom(self, other: "Message") -> None:
        for name, value in _fields_of(other):
            kind, how, _ = self._spec(name)
            if how == "list":
                getattr(self, name).extend(_copy(value))
            elif how == "map":
                getattr(self, name).update(value)
            else:
                setattr(self, name, _copy(value))

    def ListFields(self) -> list[tuple["FieldRef", object]]:
        """(field, value) of the set fields; ``field.name`` as a descriptor's."""
        return [(FieldRef(name), value) for name, value in _fields_of(self)]

    def __eq__(self, other) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self.NAME == other.NAME and self.to_dict() == other.to_dict()

    __hash__ = None

    def __repr__(self) -> str:
        return f"{self.NAME}({self.to_dict()!r})"

    # -- the wire --------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The set fields, as JSON takes them (bytes as base64)."""
        out = {}
        for name, value in self._values.items():
            kind, how, presence = self.FIELDS[name]
            if isinstance(value, Message):
                if _present(value):
                    out[name] = value.to_dict()
            elif how == "list":
                if value:
                    out[name] = [v.to_dict() if isinstance(v, Message) else _plain(v) for v in value]
            elif how == "map":
                if value:
                    out[name] = {k: _plain(v) for k, v in value.items()}
            elif presence or value != _DEFAULTS[kind]:
                out[name] = _plain(value)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Message":
        """A message from its JSON object; unknown fields are refused (ValueError),
        and values protobuf would refuse (TypeError, ValueError)."""
        self = cls()
        values = self._values
        fields = cls.FIELDS
        for name, value in data.items():
            try:
                kind, how, _ = fields[name]
            except KeyError:
                raise ValueError(f"{cls.NAME} has no field {name!r}") from None
            if kind in _DEFAULTS:
                if how == "list":
                    items = Repeated(kind, "")
                    if all(_plain_ok(kind, v) for v in value):
                        list.extend(items, value)
                    else:
                        items._where = f"{cls.NAME}.{name}"
                        items.extend(value)
                    values[name] = items
                elif how == "map":
                    values[name] = {str(k): v if _plain_ok(kind, v) else _scalar(kind, v, name)
                                    for k, v in value.items()}
                else:
                    values[name] = value if _plain_ok(kind, value) else \
                        _scalar(kind, value, f"{cls.NAME}.{name}")
            else:
                sub = _CLASSES[kind]
                if how == "list":
                    items = Repeated(kind, "")
                    list.extend(items, [sub.from_dict(v) for v in value])
                    values[name] = items
                else:
                    values[name] = sub.from_dict(value)
        return self

    @classmethod
    def from_any(cls, value) -> "Message":
        """A message of this type from a dict or from another message (protobuf's too)."""
        if isinstance(value, dict):
            return cls.from_dict(value)
        if isinstance(value, Message):
            return cls.from_dict(value.to_dict())
        return from_protobuf(value, cls)


def _present(value) -> bool:
    """False only for a message made by reading an unset field and never written to."""
    if not isinstance(value, Message) or not value._implicit:
        return True
    return any(_present(v) for v in value._values.values())


class FieldRef:
    """What ListFields pairs each value with: the field's name, as ``FieldDescriptor.name``."""
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"FieldRef({self.name!r})"


def _plain(value):
    if isinstance(value, bytes):
        import base64
        return base64.b64encode(value).decode()
    return value


def _copy(value):
    if isinstance(value, Message):
        return type(value).from_dict(value.to_dict())
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, dict):
        return dict(value)
    return value


def _fields_of(msg):
    """(name, value) of the set fields of ours or of a protobuf message."""
    if isinstance(msg, Message):
        return [(n, v) for n, v in msg._values.items() if _present(v)]
    return [(fd.name, value) for fd, value in msg.ListFields()]


def from_protobuf(msg, cls: type[Message] | None = None) -> Message:
    """One of ours from a protobuf message of the same name (the gRPC fallback's replies)."""
    cls = cls or _CLASSES[msg.DESCRIPTOR.name]
    out = cls()
    for name, value in _fields_of(msg):
        kind, how, _ = cls.FIELDS[name]
        sub = _message_class(kind)
        if how == "list":
            out._values[name] = Repeated(kind, name, [from_protobuf(v, sub) for v in value]
                                         if sub is not None else list(value))
        elif how == "map":
            out._values[name] = dict(value)
        elif sub is not None:
            out._values[name] = from_protobuf(value, sub)
        else:
            out._values[name] = value
    return out


def to_protobuf(msg: Message):
    """The protobuf message of ours (the gRPC fallback's requests); imports protobuf."""
    from google.protobuf import json_format
    from lingjun.v1 import api_pb2  # here: protobuf only for the gRPC fallback
    return json_format.ParseDict(msg.to_dict(), getattr(api_pb2, msg.NAME)())


def message_class(name: str) -> type[Message]:
    return _CLASSES[name]


class _Classes(dict):
    """Each message's class, made the first time it is asked for (a command uses a few)."""

    def __missing__(self, name: str) -> type[Message]:
        fields = {f[0]: f[1:] for f in FIELDS[name]}     # KeyError: no such message
        cls = self[name] = type(name, (Message,), {"__slots__": (), "NAME": name, "FIELDS": fields,
                                                   "__module__": __name__, **ENUMS.get(name, {})})
        return cls


_CLASSES = _Classes()


def _message_class(kind: str) -> type[Message] | None:
    """The class of a message kind; None for a scalar kind."""
    return None if kind in _DEFAULTS else _CLASSES[kind]


def __getattr__(name: str) -> type[Message]:
    """``messages.SubmitJobRequest`` and the like, as ``api_pb2`` names them."""
    try:
        return _CLASSES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


__all__ = ["Message", "Repeated", "METHODS", "from_protobuf", "to_protobuf", "message_class"]

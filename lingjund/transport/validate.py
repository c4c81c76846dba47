"""Every request is checked here before any service function sees it.

The controller is reachable by every user of the cluster, so a request is
hostile until shown otherwise. Two layers, both at the transport boundary:

1. ``DecodeGuard``, a server interceptor: the handler receives raw bytes and
   decodes them itself, so bytes that are not the message (truncated,
   garbage, invalid UTF-8 in a string) get INVALID_ARGUMENT "Unable to
   decode the request" instead of gRPC's INTERNAL "Exception deserializing
   request!" and a stack trace in the log. gRPC itself refuses a message
   over ``[authz] max_message_bytes`` (RESOURCE_EXHAUSTED) before decoding.
2. ``check``, called from the unary wrapper in api.py: a walk over every
   field of the decoded message, driven by the protobuf descriptors, so a
   field added to the contract tomorrow is bounded too:

       string          no NUL byte; at most MAX_STRING characters
                       (paths: PATH_MAX; the batch script: max_script_bytes)
       repeated / map  at most MAX_REPEATED entries (environment: MAX_ENV)
       integer         -1 ("unset/unlimited") or more, at most 2**53 (the
                       store keeps times as REAL); uids and gids 0 or more;
                       nice is the one signed field
       message         the same, recursively

A refusal is ``errors.InvalidRequest`` with a sentence naming the field, so
the command prints it after its usual prefix and nothing has been touched.
"""
from __future__ import annotations

import logging

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from lingjun.config import AuthzConfig
from lingjund.service import errors
from lingjund.transport import status

log = logging.getLogger("lingjund.validate")

MAX_STRING = 128 * 1024
MAX_PATH = 4096
MAX_REPEATED = 100_000
MAX_ENV = 10_000
MAX_INT = 2 ** 53
PATH_FIELDS = frozenset({"work_dir", "stdout_pattern", "stderr_pattern", "stdin_path", "command",
                         "submit_dir"})
ID_FIELDS = frozenset({"uid", "gid", "requester_uid"})
SIGNED_FIELDS = frozenset({"nice"})
LONG_TEXT_FIELDS = frozenset({"dependency", "comment"})      # bounded at 100,000 like before
# Where Slurm has words for a value out of range, they are used instead of ours.
# A job id past the bound names no job: Slurm's "Invalid job id specified".
RANGE_ERRORS = {"time_limit_min": errors.InvalidTimeLimit, "job_id": errors.InvalidJobId,
                "job_ids": errors.InvalidJobId, "array_job_id": errors.InvalidJobId,
                "attach_job_id": errors.InvalidJobId}
_INTS = (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT32,
         FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED32, FieldDescriptor.TYPE_SFIXED64,
         FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED32,
         FieldDescriptor.TYPE_FIXED64)


def check(msg: Message, cfg: AuthzConfig) -> None:
    """Raise ``errors.InvalidRequest`` at the first field out of bounds."""
    _check(msg, cfg, "")


async def each(messages, cfg: AuthzConfig):
    """A request stream with every message checked as it arrives (Allocate)."""
    async for msg in messages:
        check(msg, cfg)
        yield msg


def _check(msg: Message, cfg: AuthzConfig, where: str) -> None:
    for fd, value in msg.ListFields():
        name = where + fd.name
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            limit = MAX_ENV if fd.name == "environment" else MAX_REPEATED
            if len(value) > limit:
                raise errors.InvalidRequest(f"Too many entries in {name} (at most {limit})")
            key_fd = fd.message_type.fields_by_name["key"]
            val_fd = fd.message_type.fields_by_name["value"]
            for k, v in value.items():
                _scalar(key_fd, k, cfg, f"{name} key")
                if val_fd.message_type is not None:
                    _check(v, cfg, f"{name}[{k}].")
                else:
                    _scalar(val_fd, v, cfg, f"{name}[{k}]")
        elif _repeated(fd):
            limit = MAX_ENV if fd.name == "argv" else MAX_REPEATED
            if len(value) > limit:
                raise errors.InvalidRequest(f"Too many entries in {name} (at most {limit})")
            for item in value:
                if fd.message_type is not None:
                    _check(item, cfg, name + ".")
                else:
                    _scalar(fd, item, cfg, name)
        elif fd.message_type is not None:
            _check(value, cfg, name + ".")
        else:
            _scalar(fd, value, cfg, name)


def _repeated(fd: FieldDescriptor) -> bool:
    # protobuf 5.29+ spells it is_repeated (label is gone from upb); older ones only label
    flag = getattr(fd, "is_repeated", None)
    return flag if flag is not None else fd.label == FieldDescriptor.LABEL_REPEATED


def _scalar(fd: FieldDescriptor, value, cfg: AuthzConfig, name: str) -> None:
    if fd.type == FieldDescriptor.TYPE_STRING:
        if "\0" in value:
            raise errors.InvalidRequest(f"Invalid {fd.name}: contains a NUL character")
        if fd.name == "script":
            if len(value.encode()) > cfg.max_script_bytes:
                raise errors.InvalidRequest("Batch script is too large")
            return
        limit = (MAX_PATH if fd.name in PATH_FIELDS
                 else 100_000 if fd.name in LONG_TEXT_FIELDS else MAX_STRING)
        if len(value) > limit:
            raise errors.InvalidRequest(f"Invalid {fd.name}: longer than {limit} characters")
    elif fd.type == FieldDescriptor.TYPE_BYTES:
        if len(value) > MAX_STRING:
            raise errors.InvalidRequest(f"Invalid {fd.name}: longer than {MAX_STRING} bytes")
    elif fd.type in _INTS:
        low = 0 if fd.name in ID_FIELDS else -(2 ** 31) if fd.name in SIGNED_FIELDS else -1
        if not low <= value <= MAX_INT:
            raise RANGE_ERRORS.get(fd.name, errors.InvalidRequest)(
                None if fd.name in RANGE_ERRORS else f"Invalid {fd.name}: {value} is out of range")
    elif fd.type == FieldDescriptor.TYPE_ENUM:
        # proto3 enums are open: an unknown number decodes, and would reach the service.
        if fd.enum_type.values_by_number.get(value) is None:
            raise errors.InvalidRequest(f"Invalid {fd.name}: {value} is not one of "
                                        + ", ".join(v.name for v in fd.enum_type.values))
    elif fd.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        if value != value or value in (float("inf"), float("-inf")):
            raise errors.InvalidRequest(f"Invalid {fd.name}: not a number")


# -- undecodable bytes ---------------------------------------------------------------
DECODE_FAILURE = "Unable to decode the request: malformed message"


class DecodeGuard(grpc.aio.ServerInterceptor):
    """Decode requests in the handler, so malformed bytes get a clear INVALID_ARGUMENT.

    Unary-request methods only (every SlurmApi call but Allocate, and the
    health and reflection services pass through untouched): a stream's
    messages are decoded by gRPC as it reads them.
    """

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if (handler is None or handler.request_streaming or handler.request_deserializer is None
                or not handler_call_details.method.startswith("/lingjun.")):
            return handler
        decode = handler.request_deserializer
        method = handler_call_details.method

        async def _decode(raw: bytes, context):
            try:
                return decode(raw)
            except (DecodeError, UnicodeDecodeError, ValueError, TypeError) as e:
                log.warning("%s: undecodable request of %d bytes from %s: %s",
                            method, len(raw), context.peer(), e)
                await status.abort_with(context, status.rich_status(
                    grpc.StatusCode.INVALID_ARGUMENT, DECODE_FAILURE, status.UNDECODABLE))

        if handler.response_streaming:
            inner = handler.unary_stream

            async def unary_stream(raw, context):
                request = await _decode(raw, context)
                async for item in inner(request, context):
                    yield item
            return grpc.unary_stream_rpc_method_handler(
                unary_stream, response_serializer=handler.response_serializer)
        inner_unary = handler.unary_unary

        async def unary_unary(raw, context):
            return await inner_unary(await _decode(raw, context), context)
        return grpc.unary_unary_rpc_method_handler(
            unary_unary, response_serializer=handler.response_serializer)

"""The transport boundary: malformed bytes and out-of-bounds fields
get a clear INVALID_ARGUMENT, the controller answers the next call, and the
store is unchanged."""
from __future__ import annotations

import grpc
import pytest

from lingjun.v1 import api_pb2
from lingjund.transport.validate import DECODE_FAILURE
from tests.lingjund.inproc import serve
from tests.lingjund.test_api import CONF, spec


@pytest.fixture
def served(tmp_path):
    with serve(tmp_path, "[authz]\nmax_message_bytes = 200000\nmax_script_bytes = 2048\n"
               + CONF) as s:
        yield s


@pytest.fixture
def api(served):
    return served.stub, served.store


@pytest.mark.parametrize("payload", [
    b"\xff\xff\xff\xff", b"\x0a\x05abc", b"\x0a\x03\x12\x01\xff", b"\x08" + b"\xff" * 11,
], ids=["garbage", "a truncated field", "a string that is not UTF-8", "an overlong varint"])
@pytest.mark.parametrize("method", ["SubmitJob", "CancelJobs", "GetJobs", "UpdateNode"])
def test_undecodable_bytes_get_invalid_argument(served, method, payload):
    stub, store = served.stub, served.store
    before = store.dump()
    with pytest.raises(grpc.RpcError) as e:
        served.raw(method, payload)
    assert (e.value.code(), e.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, DECODE_FAILURE)
    assert store.dump() == before
    assert stub.Ping(api_pb2.PingRequest()).cluster == "lingjun"


@pytest.mark.parametrize("bad,words", [
    (spec(name="a\0b"), "Invalid name: contains a NUL character"),
    (spec(stdout_pattern="/tmp/" + "x" * 5000), "Invalid stdout_pattern: longer than 4096"),
    (spec(script="#!/bin/sh\n" + "#" * 3000), "Batch script is too large"),
    (spec(environment={f"V{i}": "x" for i in range(10_001)}), "Too many entries in spec.environment"),
    (spec(num_tasks=-5), "Invalid num_tasks: -5 is out of range"),
    (spec(cpus_per_task=-3), "Invalid cpus_per_task: -3 is out of range"),
    (spec(begin_time=2 ** 60), "out of range"),
], ids=["a NUL in the name", "an output path over PATH_MAX", "a script over max_script_bytes",
        "10,001 environment variables", "a negative task count", "a negative CPU count",
        "a begin time past 2**53"])
def test_out_of_bounds_fields_are_refused_by_name(api, bad, words):
    stub, store = api
    before = store.dump()
    with pytest.raises(grpc.RpcError) as e:
        stub.SubmitJob(api_pb2.SubmitJobRequest(spec=bad))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert words in e.value.details()
    assert store.dump() == before


def test_an_unknown_enum_number_is_refused_before_the_service(api):
    stub, store = api
    before = store.dump()
    with pytest.raises(grpc.RpcError) as e:
        stub.HoldJobs(api_pb2.HoldJobsRequest(job_ids=[1], action=10))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Invalid action: 10 is not one of" in e.value.details()
    assert store.dump() == before


def test_a_message_over_max_message_bytes_is_refused_before_decoding(api):
    stub, store = api
    before = store.dump()
    with pytest.raises(grpc.RpcError) as e:
        stub.GetJobs(api_pb2.GetJobsRequest(users=["u" * 250_000]))
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert store.dump() == before

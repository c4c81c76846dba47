"""The commands' stdlib stand-ins for the API messages (lingjun/messages.py) agree
with protobuf's: the same fields from the same descriptors, the same defaults,
presence and range errors, and a lossless trip to protobuf and back."""
from __future__ import annotations

import pytest
from google.protobuf import json_format

from lingjun import messages
from lingjun.command_server import plain
from lingjun.v1 import api_pb2, gen_api_fields


def test_the_committed_field_table_is_the_descriptors():
    from lingjun.v1 import api_fields
    assert api_fields.FIELDS == gen_api_fields.field_table(), \
        "api.proto changed: run python -m lingjun.v1.gen_api_fields"
    assert api_fields.METHODS == gen_api_fields.methods()
    assert api_fields.ENUMS == gen_api_fields.enums()


def test_enum_values_read_as_protobufs_do():
    assert messages.HoldJobsRequest.RELEASE == api_pb2.HoldJobsRequest.RELEASE
    assert messages.HoldJobsRequest(action=messages.HoldJobsRequest.HOLD).action == api_pb2.HoldJobsRequest.HOLD


@pytest.mark.parametrize("name", sorted(api_pb2.DESCRIPTOR.message_types_by_name))
def test_every_message_reads_protobufs_defaults(name):
    ours, theirs = getattr(messages, name)(), getattr(api_pb2, name)()
    for fd in theirs.DESCRIPTOR.fields:
        want = getattr(theirs, fd.name)
        got = getattr(ours, fd.name)
        if fd.message_type is not None and not fd.message_type.GetOptions().map_entry \
                and not gen_api_fields._repeated(fd):
            assert isinstance(got, messages.Message) and got.to_dict() == {}, fd.name
        elif gen_api_fields._repeated(fd):
            assert list(got) == [] and len(want) == 0 or dict(got) == dict(want) == {}, fd.name
        else:
            assert got == want, f"{name}.{fd.name}: want {want!r}, got {got!r}"


def test_presence_of_optional_fields_as_protobuf_keeps_it():
    spec = messages.JobSpec()
    assert not spec.HasField("max_restarts") and spec.max_restarts == 0
    spec.max_restarts = 0
    assert spec.HasField("max_restarts")
    spec.ClearField("max_restarts")
    assert not spec.HasField("max_restarts")
    with pytest.raises(ValueError):
        spec.HasField("name")          # no presence, as in protobuf


def test_reading_an_unset_message_field_does_not_make_it_present():
    req = messages.SubmitJobRequest()
    assert req.spec.name == "" and not req.HasField("spec") and req.to_dict() == {}
    req.spec.name = "x"
    assert req.HasField("spec") and req.to_dict() == {"spec": {"name": "x"}}
    assert messages.SubmitJobRequest(spec=messages.JobSpec()).HasField("spec")


@pytest.mark.parametrize("field,value,error", [
    ("min_nodes", 2 ** 31, ValueError), ("min_nodes", -2 ** 31 - 1, ValueError),
    ("begin_time", 2 ** 63, ValueError), ("min_nodes", "2", TypeError), ("name", 7, TypeError),
], ids=["int32 too large", "int32 too small", "int64 too large", "text for a number",
        "a number for text"])
def test_a_value_protobuf_refuses_is_refused_alike(field, value, error):
    with pytest.raises(error):
        setattr(api_pb2.JobSpec(), field, value)
    with pytest.raises(error):
        setattr(messages.JobSpec(), field, value)


def _full_request() -> api_pb2.SubmitJobRequest:
    req = api_pb2.SubmitJobRequest(client_token="t", test_only=True)
    s = req.spec
    s.name, s.script, s.min_nodes, s.begin_time = "job ü \t", "#!/bin/sh\ntrue\n", 2, 2 ** 40
    s.argv.extend(["a", "b c"])
    s.environment.update({"A": "1", "B": "x=y"})
    s.max_restarts = 0          # set to its default: presence must survive
    s.requeue = False
    s.nice = -5
    return req


def test_a_request_goes_to_protobuf_and_back_unchanged():
    theirs = _full_request()
    ours = messages.from_protobuf(theirs)
    assert ours.spec.HasField("max_restarts") and ours.spec.HasField("requeue")
    assert messages.to_protobuf(ours) == theirs
    assert messages.SubmitJobRequest.from_dict(ours.to_dict()) == ours


def test_the_servers_encoding_and_protobufs_json_both_read_back():
    reply = api_pb2.GetJobsResponse(now=2 ** 40, squeue_order=True, jobs=[
        api_pb2.JobInfo(job_id=7, name="a", state="RUNNING", start_time=2 ** 35),
        api_pb2.JobInfo(job_id=8, array_task_str="1-3")])
    for data in (plain(reply), json_format.MessageToDict(reply, preserving_proto_field_name=True)):
        ours = messages.GetJobsResponse.from_dict(data)
        assert ours.now == 2 ** 40 and ours.squeue_order is True
        assert [(j.job_id, j.state, j.start_time) for j in ours.jobs] == [
            (7, "RUNNING", 2 ** 35), (8, "", 0)]
        assert messages.to_protobuf(ours) == reply


def test_an_unknown_field_on_the_wire_is_refused():
    with pytest.raises(ValueError):
        messages.JobInfo.from_dict({"job_id": 1, "no_such_field": 2})


def test_a_copy_shares_nothing_with_its_original():
    spec = messages.JobSpec(name="a", argv=["x"], environment={"A": "1"})
    one = type(spec)()
    one.CopyFrom(spec)
    one.name = "b"
    one.argv.append("y")
    one.environment["B"] = "2"
    assert (spec.name, list(spec.argv), spec.environment) == ("a", ["x"], {"A": "1"})
    assert (one.name, list(one.argv), one.environment) == ("b", ["x", "y"], {"A": "1", "B": "2"})

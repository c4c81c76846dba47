"""sacctmgr side by side with real Slurm's.

tests/cli/golden/sacctmgr/ holds what /usr/bin/sacctmgr (22.05, slurmdbd,
cluster "anchor") answered to a sequence of commands (capture.sh). Here the
same sequence runs, in order, through our sacctmgr against lingjund's own
service on a real store (the transport left out: the command calls the
service function its RPC would), and each step's stdout, stderr and exit
status must be Slurm's. Lists whose order Slurm takes from its database's
row order (the associations a modify touched) are compared as sets.
"""
from __future__ import annotations

import io
import shlex
from pathlib import Path

import pytest
from google.protobuf import json_format

from cli import sacctmgr
from lingjun import config, messages
from lingjun.command_socket import ControllerError
from lingjun.v1 import api_pb2
from lingjund.service import associations, errors
from lingjund.service.context import Controller
from lingjund.store.store import Store
from lingjund.transport import status

GOLDEN = Path(__file__).parent / "golden" / "sacctmgr"
STEPS = sorted(GOLDEN.glob("[0-9]*.txt"))
UNORDERED = ("Modified account associations", "Modified user associations")


class ServiceApi:
    """The command's api: each call goes to the service function its RPC calls,
    with the caller's identity written in as the transport would."""

    def __init__(self, ctl: Controller, uid: int = 0, user: str = "root"):
        self.ctl, self.uid, self.user = ctl, uid, user

    def call(self, method, request, **kw):
        req = getattr(api_pb2, type(request).__name__)()
        json_format.ParseDict(request.to_dict(), req)
        if hasattr(req, "requester_uid"):
            req.requester_uid, req.requester = self.uid, self.user
        fn = {"AcctMgr": associations.acctmgr, "GetAssociations": associations.get_associations}[method]
        try:
            reply = fn(self.ctl, req)
        except errors.SlurmError as e:
            raise ControllerError(status.status_of(e).name, str(e)) from None
        return getattr(messages, type(reply).__name__).from_dict(
            json_format.MessageToDict(reply, preserving_proto_field_name=True))


@pytest.fixture(scope="module")
def ctl(tmp_path_factory):
    store = Store(str(tmp_path_factory.mktemp("sacctmgr") / "db.sqlite"))
    yield Controller(config=config.parse('cluster_name = "anchor"\n'), store=store)
    store.close()


def _golden(path: Path) -> tuple[list[str], str, str, int]:
    text = path.read_text()
    first, rest = text.split("\n", 1)
    out, rest = rest.split("--- stderr\n", 1)
    err, rc = rest.rsplit("--- rc ", 1)
    return shlex.split(first[2:]), out, err, int(rc)


def _stdin_of(name: str) -> str:
    return "n\n" if "answer_no" in name else ""


def _comparable(text: str, argv: list[str]) -> list[str]:
    lines = text.splitlines()
    if lines and any(lines[0].startswith(" " + u) for u in UNORDERED):
        return [lines[0], *sorted(lines[1:])]
    if "withassoc" in argv:      # the users of an account: Slurm's row order
        return [*lines[:3], *sorted(lines[3:])]
    return lines


@pytest.mark.parametrize("path", STEPS, ids=[p.stem for p in STEPS])
def test_each_step_answers_as_slurm(ctl, path):
    argv, want_out, want_err, want_rc = _golden(path)
    assert argv[0] == "sacctmgr"
    out, err = io.StringIO(), io.StringIO()
    rc = sacctmgr.main(argv[1:], api=ServiceApi(ctl), out=out, err=err,
                       stdin=io.StringIO(_stdin_of(path.stem)))
    assert _comparable(out.getvalue(), argv) == _comparable(want_out, argv)
    assert err.getvalue() == want_err
    assert rc == want_rc


def test_a_user_who_is_no_operator_is_refused_and_nothing_changes(tmp_path):
    store = Store(str(tmp_path / "db.sqlite"))
    c = Controller(config=config.parse('cluster_name = "anchor"\n'), store=store)
    before = store.dump()
    out, err = io.StringIO(), io.StringIO()
    rc = sacctmgr.main(["-i", "add", "account", "ljnope"], api=ServiceApi(c, 1000, "alice"),
                       out=out, err=err)
    assert rc == 1
    assert err.getvalue() == " Problem adding accounts: Access/permission denied\n"
    assert store.dump() == before


def test_an_operator_by_admin_level_may_change_things(tmp_path):
    store = Store(str(tmp_path / "db.sqlite"))
    c = Controller(config=config.parse('cluster_name = "anchor"\n'), store=store)
    root = ServiceApi(c)
    run = lambda api, *argv: sacctmgr.main(list(argv), api=api, out=io.StringIO(), err=io.StringIO())
    assert run(root, "-i", "add", "user", "carol", "account=root", "adminlevel=operator") == 0
    assert run(ServiceApi(c, 1000, "carol"), "-i", "add", "account", "chem") == 0
    assert "chem" in store.assoc.accounts


def test_a_change_at_the_end_of_stdin_is_discarded(tmp_path):
    """Real sacctmgr loops for ever on "Y or N please" when its stdin is at its
    end; ours takes that as "no"."""
    store = Store(str(tmp_path / "db.sqlite"))
    c = Controller(config=config.parse('cluster_name = "anchor"\n'), store=store)
    before = store.dump()
    out = io.StringIO()
    rc = sacctmgr.main(["add", "account", "x"], api=ServiceApi(c), out=out, err=io.StringIO(),
                       stdin=io.StringIO(""))
    assert rc == 0 and out.getvalue().endswith("(N/y): \n Changes Discarded\n")
    assert store.dump() == before
    rc = sacctmgr.main(["add", "account", "x"], api=ServiceApi(c), out=io.StringIO(),
                       err=io.StringIO(), stdin=io.StringIO("y\n"))
    assert rc == 0 and "x" in store.assoc.accounts

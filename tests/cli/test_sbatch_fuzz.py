"""Sbatch over random argument lists: a bad command line ends with
Slurm's words on stderr and a non-zero status, never a Python traceback.

The options come from sbatch's own table (lingjun/sbatch_options.py ALL_OPTIONS), so
each is tried with values from good to hostile: empty, huge, negative,
NUL-free garbage, and a path escaping upwards. --wait is left out (it polls
the controller); no controller is involved, a fake records what would be sent.
"""
from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli import sbatch
from lingjun import sbatch_options
from lingjun.options import NO
from lingjun.v1 import api_pb2

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/u"}

OPTIONS = [o for o in sbatch_options.ALL_OPTIONS if o.key != "wait"]
VALUES = st.one_of(
    st.sampled_from(["", "1", "0", "-1", "2-4", "99999999999999999999", "1:00:00", "UNLIMITED",
                     "node[1-3]", "afterok:1", "gpu:2", "ALL,FOO=1", "../../../etc/shadow",
                     "%x-%j.out", "now+60", "1-10%2", "a&b", "B:USR1@60", "=", ",,", "[", "%"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
            max_size=20),
    st.builds(lambda n: "9" * n, st.integers(20, 400)),
)


@st.composite
def words(draw):
    opt = draw(st.sampled_from(OPTIONS))
    long_ok = bool(opt.long)
    use_long = long_ok and (not opt.short or draw(st.booleans()))
    if opt.arg == NO:
        return ["--" + opt.long[0]] if use_long else ["-" + opt.short]
    value = draw(VALUES)
    if use_long:
        return ["--" + opt.long[0] + "=" + value] if draw(st.booleans()) else ["--" + opt.long[0], value]
    return ["-" + opt.short + value] if value and draw(st.booleans()) else ["-" + opt.short, value]


argvs = st.tuples(
    st.lists(st.one_of(words(), st.lists(VALUES, max_size=1)), max_size=6),
    st.sampled_from([["job.sh"], ["--wrap=true"], [], ["nosuch.sh"], ["job.sh", "arg1"]]),
).map(lambda t: [w for ws in t[0] for w in ws] + t[1])


class Api:
    def __init__(self):
        self.sent = []

    def call(self, method, request, **kw):
        assert method == "SubmitJob"
        self.sent.append(request)
        return api_pb2.SubmitJobResponse(job_id=7, test_start_time=0, test_nodes="node1")


@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=argvs)
def test_random_argument_lists_end_cleanly(tmp_path, argv):
    (tmp_path / "job.sh").write_text("#!/bin/sh\n#SBATCH --time=5\ntrue\n")
    out, err, api = io.StringIO(), io.StringIO(), Api()
    rc = sbatch.main(list(argv), api=api, stdin=io.StringIO(""), env=ENV, cwd=str(tmp_path),
                     out=out, err=err, sleep=lambda s: None)
    assert isinstance(rc, int)
    text = err.getvalue()
    assert "Traceback" not in text
    if rc != 0:
        # Slurm's date parser says where it stopped on a line of its own first
        said = text.split("\n", 1)[1] if text.startswith("Invalid time specification") else text
        assert said.startswith("sbatch: "), f"argv {argv}: rc {rc}, stderr {text!r}"
        assert not api.sent, f"argv {argv}: refused yet sent"
    else:
        assert api.sent or out.getvalue(), f"argv {argv}: rc 0 but nothing done"

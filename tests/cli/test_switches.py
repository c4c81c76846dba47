"""--switches=N[@max-time] and --segment=N in sbatch, srun and salloc (and their input
variables), read as Slurm 22.05's sbatch reads them (checked side by side)."""
from __future__ import annotations

import pytest

from lingjun import sbatch_options
from cli.common import CommandError
from cli.srun_options import parse_salloc, parse_srun


def _spec(prog: str, argv: list[str], env: dict | None = None):
    env = env or {}
    if prog == "sbatch":
        s = sbatch_options.build_request([*argv, "--wrap", "true"], None, env, "/tmp").spec
        return (s.switches, s.switch_wait_s if s.HasField("switch_wait_s") else None, s.segment)
    o = (parse_srun if prog == "srun" else parse_salloc)([*argv, "true"], env)
    return o.switches, o.switch_wait_s, o.segment


@pytest.mark.parametrize("prog", ["sbatch", "srun", "salloc"])
@pytest.mark.parametrize("argv, want", [
    (["--switches=2"], (2, None, 0)),
    (["--switches=1@5:00"], (1, 300, 0)),
    (["--switches=1@1-00:00:00"], (1, 86400, 0)),
    (["--switches", "3@10"], (3, 600, 0)),
    (["--switches=1@zz"], (1, None, 0)),         # Slurm drops a time it cannot read
    (["--segment=4", "-N", "8"], (0, None, 4)),
])
def test_switches_and_segment_are_read_alike(prog, argv, want):
    assert _spec(prog, argv) == want


@pytest.mark.parametrize("prog", ["sbatch", "srun", "salloc"])
@pytest.mark.parametrize("value", ["x", "0", "-1"])
def test_a_bad_switch_count_is_refused_in_slurms_words(prog, value):
    with pytest.raises(CommandError) as e:
        _spec(prog, [f"--switches={value}"])
    assert str(e.value) == f'{prog}: error: Invalid numeric value "{value}" for --switches.'
    assert e.value.rc == 1


@pytest.mark.parametrize("prog, var", [("sbatch", "SBATCH_REQ_SWITCH"),
                                       ("srun", "SLURM_REQ_SWITCH"),
                                       ("salloc", "SALLOC_REQ_SWITCH")])
def test_the_input_variable_asks_for_switches(prog, var):
    assert _spec(prog, [], {var: "2@1:00"}) == (2, 60, 0)
    assert _spec(prog, ["--switches=1"], {var: "2@1:00"})[0] == 1   # the option wins

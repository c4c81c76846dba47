"""`--help` is the full option list, as Slurm's is; `--usage` the short synopsis."""
from __future__ import annotations

import io

import pytest

from cli import sacct, scancel, sinfo, squeue

COMMANDS = {"squeue": squeue, "sinfo": sinfo, "sacct": sacct, "scancel": scancel}


def output(mod, *argv) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = mod.main(list(argv), api=object(), out=out, err=err)
    return rc, out.getvalue()


@pytest.mark.parametrize("name", COMMANDS)
def test_help_names_every_option_the_command_takes_and_none_it_refuses(name):
    mod = COMMANDS[name]
    rc, text = output(mod, "--help")
    assert rc == 0
    taken = [o for o in mod.OPTIONS if o.key != "unsupported"]
    missing = [f"--{lng}" for o in taken for lng in o.long if f"--{lng}" not in text]
    assert not missing, f"{name} --help lacks {missing}"
    missing = [f"-{o.short}" for o in taken if o.short and f"-{o.short}," not in text]
    assert not missing, f"{name} --help lacks {missing}"
    refused = [f"--{lng}" for o in mod.OPTIONS if o.key == "unsupported" for lng in o.long
               if f"  --{lng}" in text or f", --{lng}" in text]
    assert not refused, f"{name} --help offers options it refuses: {refused}"


@pytest.mark.parametrize("name", COMMANDS)
def test_usage_stays_the_short_synopsis(name):
    mod = COMMANDS[name]
    rc, text = output(mod, "--usage")
    assert (rc, text) == (0, mod.USAGE)
    assert len(output(mod, "--help")[1].splitlines()) > 3 * len(text.splitlines())


def test_lingjun_version_names_its_release_and_the_slurm_it_answers_as(capsys):
    from importlib import metadata

    from cli import lingjun
    with pytest.raises(SystemExit) as e:
        lingjun.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == (f"lingjun {metadata.version('lingjun')} "
                                       "(commands compatible with slurm 22.05.8)\n")

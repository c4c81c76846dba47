"""sbatch --launcher: from the command line, #SBATCH lines and SBATCH_LAUNCHER."""
from __future__ import annotations

import pytest

from tests.cli.test_sbatch_args import ENV, run, spec_of


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "launch.sh").write_text("#!/bin/sh\n#SBATCH --launcher=torchrun\nsrun true\n")
    return tmp_path


@pytest.mark.parametrize("argv, env, want", [
    (["--launcher=torchrun", "--wrap=x"], {}, "torchrun"),
    (["--launcher", "mpi", "--wrap=x"], {}, "mpi"),
    (["--wrap=x"], {"SBATCH_LAUNCHER": "ray"}, "ray"),
    (["--launcher=deepspeed", "--wrap=x"], {"SBATCH_LAUNCHER": "ray"}, "deepspeed"),
    (["launch.sh"], {}, "torchrun"),
    (["--wrap=x"], {}, ""),
], ids=["--launcher=NAME", "--launcher NAME", "SBATCH_LAUNCHER", "the command line beats SBATCH_LAUNCHER",
        "#SBATCH --launcher in the script", "no launcher unless asked"])
def test_launcher_reaches_the_spec(argv, env, want, workdir):
    got = spec_of(argv, workdir, env={**ENV, **env}).launcher
    assert got == want, f"want {want!r}, got {got!r}"


def test_unknown_launcher_is_refused_before_submitting(workdir):
    rc, out, err, api = run(["--launcher=horovod", "--wrap=x"], workdir)
    assert (rc, out, err) == (255, "", "sbatch: error: Invalid --launcher argument: horovod "
                                       "(one of torchrun, deepspeed, mpi, ray)\n")
    assert api.requests == []

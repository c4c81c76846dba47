"""Typed configuration: EnforcePartLimits as Slurm spells it."""
from __future__ import annotations

import pytest

from lingjun import config


@pytest.mark.parametrize("text,want", [
    ("", "NO"),
    ('[controller]\nenforce_part_limits = "ALL"\n', "ALL"),
    ('[controller]\nenforce_part_limits = "any"\n', "ANY"),
    ('[controller]\nenforce_part_limits = "YES"\n', "ANY"),
], ids=["Slurm's default is NO", "ALL is kept", "case does not matter",
        "YES is Slurm's older word for ANY"])
def test_enforce_part_limits_takes_slurms_words(text, want):
    got = config.parse(text).controller.enforce_part_limits
    assert got == want, f"want {want}, got {got}"


def test_an_unknown_enforce_part_limits_word_is_refused():
    with pytest.raises(config.ConfigError) as e:
        config.parse('[controller]\nenforce_part_limits = "SOMETIMES"\n')
    assert "enforce_part_limits: 'SOMETIMES' is not one of NO, ANY, ALL" in str(e.value)

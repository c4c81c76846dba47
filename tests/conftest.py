"""The whole suite: the files that take a minute or more start first.

README's command runs the suite on three xdist workers, a file at a time
(``--dist loadfile``). xdist hands out files largest-count first by default
(``--loadscope-reorder``), so a file of three tests that takes three minutes
(the scrontab cadence, a backfill reservation waiting on a two-minute time
limit) was handed out last and ran alone at the end while the other workers
idled. Files marked ``pytest.mark.long`` are collected first and the reorder
is turned off, so they start at once and the short files fill in around
them (longest first: what keeps the wall time near the total over three).
"""
from __future__ import annotations


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "long: a test file that takes a minute or more; started first")
    if getattr(config.option, "loadscopereorder", None) is not None:
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items) -> None:
    items.sort(key=lambda item: item.get_closest_marker("long") is None)   # stable

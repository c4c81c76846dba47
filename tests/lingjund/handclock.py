"""A controller over a real SQLite store whose clock the test moves by hand,
for service tests of deadlines (heartbeats, backoff, grace times, flapping)."""
from __future__ import annotations

import contextlib
from typing import Iterator

from lingjun import config
from lingjund.service.context import Controller
from lingjund.store.store import Store


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@contextlib.contextmanager
def controller(tmp_path, conf: str, nodes, **node_fields) -> Iterator[Controller]:
    """``nodes`` registered (with ``node_fields``) at clock time 1000."""
    store = Store(str(tmp_path / "db.sqlite"))
    c = Controller(config=config.parse(conf), store=store, clock=Clock())
    with store.transaction() as st:
        for n in nodes:
            st.put_node(n, registered=True, **node_fields)
    try:
        yield c
    finally:
        store.close()

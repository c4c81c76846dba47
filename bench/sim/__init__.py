"""A simulated cluster: a real ``lingjund`` and K simulated agents on loopback.

    agents.py      the simulated node agents (the real agent protocol, no processes)
    fleet.py       those agents in child processes, driven over a pipe
    controller.py  the real controller: its configuration, process and figures
    cluster.py     the two together (SimCluster), as the tests and the command use them
    probe.py       lingjund with pass timing and event-loop lag logged
    workload.py    seeded workloads and the trace format (JSON lines)
    replay.py      submitting a trace through the real API, cancels included
    report.py      the figures
    stub.py        the agents against a stand-in controller: the simulator's own cost

``bench/simulate.py`` is the command; ``tests/sim/`` runs small scenarios.
"""

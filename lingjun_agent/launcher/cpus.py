"""Which of the node's CPUs a job gets here, and which host CPUs those are.

The controller counts CPUs (a job holds ``cpus_per_node[i]`` of node i); the
agent picks which ones, from what the jobs it runs already hold, lowest
free first, as it alone knows the host and its running jobs. Two jobs on a
node never share a CPU while the controller's counts add up::

    >>> choose(4, 2, held=[(0,)])
    (1, 2)
    >>> on_host((1, 2), host=(0, 1))
    (0, 1)

``on_host``: a node may declare more CPUs than its host has (a local cluster
of several nodes on one machine); its CPU i is then the host's CPU
``host[i % len(host)]`` (in the order of the agent's own affinity), so jobs
of such a node share host CPUs exactly when their indices agree modulo the
host's count.
"""
from __future__ import annotations

from typing import Iterable, Sequence


def choose(node_cpus: int, want: int, held: Iterable[Sequence[int]]) -> tuple[int, ...]:
    """``want`` of the node's CPU indices 0..node_cpus-1: the lowest not held;
    where the held ones leave too few (counts out of step with the
    controller's), the least shared after them."""
    if want <= 0 or node_cpus <= 0:
        return ()
    use = [0] * node_cpus
    for ids in held:
        for i in ids:
            if 0 <= i < node_cpus:
                use[i] += 1
    order = sorted(range(node_cpus), key=lambda i: (use[i], i))
    return tuple(sorted(order[:min(want, node_cpus)]))


def on_host(ids: Iterable[int], host: Sequence[int]) -> tuple[int, ...]:
    """The host CPUs that node CPU indices ``ids`` stand for (see the module)."""
    if not host:
        return ()
    return tuple(sorted({host[i % len(host)] for i in ids}))

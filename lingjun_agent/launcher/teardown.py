"""Ending a stopped node's jobs, as a program::

    python -P -m lingjun_agent.launcher.teardown NODE=STATE_DIR [NODE=STATE_DIR ...]

The jobs' processes (and each node's fence keeper) outlive their agent by
design (``fencekeeper``, ``stepd``), so whoever stops agents for good
(``lingjun down`` on the local cluster) must end them too. For every node
named: stop its fence keeper, end every job the node's marker finds (each
gets its grace of 2 s once, every node's at once, not once per node), then
remove the jobs' cgroups and the node's own.

Why a program and not a function the command imports: the launcher is the
agent's, and ``cli/`` (the commands, a floor beside the agent's) imports
nothing of it; the command runs this as it runs the agent itself, from "/"
with ``-P``. It exits 0 whatever it could not end (best effort while
stopping), and 2 on arguments it cannot read.
"""
from __future__ import annotations

import asyncio
import sys

from lingjun_agent.launcher import cgroups, fencekeeper, procs

GRACE_S = 2.0


def end_nodes(state_dirs: dict[str, str]) -> None:
    """Stop the fence keepers of ``state_dirs`` (node -> agent state dir), end
    their jobs' processes and remove their cgroups."""
    marks = [procs.node_identity(node, state_dir) for node, state_dir in state_dirs.items()]
    for state_dir in state_dirs.values():
        fencekeeper.stop(state_dir)

    async def end_jobs() -> None:
        await asyncio.gather(*(procs.terminate_job(mark, jid, GRACE_S)
                               for mark in marks for jid in procs.running_jobs(mark)),
                             return_exceptions=True)     # best effort while stopping
    asyncio.run(end_jobs())
    for mark in marks:
        for cg in cgroups.jobs(mark):
            cgroups.remove(cg, timeout=0)
        cgroups.remove_node(mark)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    pairs = [a.partition("=") for a in args]
    if any(not node or not sep or not state_dir for node, sep, state_dir in pairs):
        print("usage: python -m lingjun_agent.launcher.teardown NODE=STATE_DIR ...", file=sys.stderr)
        return 2
    end_nodes({node: state_dir for node, _, state_dir in pairs})
    return 0


if __name__ == "__main__":
    sys.exit(main())

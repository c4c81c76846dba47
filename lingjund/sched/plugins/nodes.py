"""node_features/request: which nodes a job may use at all, and whether the
nodes it insists on can be used now.

Two hooks, each over one ``NodeView`` (never over free resources):

- ``check_node(job, node)``: a reason this node can never serve the job,
  else None. -x excludes a node; -C needs the node's features to satisfy
  the expression (``lingjun.slurm.constraint_matches``: & and "," AND, |
  OR, left to right, parentheses group); --gres=gpu:TYPE needs a node whose
  GPUs are of that type. Waiting cures none of these, so the cycle simply
  drops such nodes from the job's candidates.
- ``check_required(job, nodes)``: a -w job whose required nodes include one
  that is down, drained or not responding pends with Slurm's
  "ReqNodeNotAvail, UnavailableNodes:<nodes>" and does not hold back the
  jobs behind it (it cannot use what they would take).

Example: node[1-4], node1 and node2 with feature "fast", node3 down.
``-C fast -x node1`` may use node2 only; ``-w node3`` pends with
"ReqNodeNotAvail, UnavailableNodes:node3".
"""
from __future__ import annotations

from functools import lru_cache
from typing import Hashable, Mapping

from lingjun import slurm
from lingjund.sched.snapshot import JobRequest, NodeView

# What check_node says of a node it drops (for logs and tests; the job's
# pending reason stays Slurm's, e.g. Resources).
EXCLUDED = "excluded"
LACKS_FEATURES = "lacks features"
WRONG_GPU_TYPE = "wrong gpu type"


class NodeRequest:
    name = "node_features/request"

    def node_key(self, job: JobRequest) -> Hashable:
        """What ``check_node`` reads of the job: () when it refuses no node."""
        if not (job.exc_nodes or job.constraint or job.gpu_type):
            return ()
        return (job.exc_nodes, job.constraint, job.gpu_type)

    def check_node(self, job: JobRequest, node: NodeView) -> str | None:
        """Why ``node`` can never be one of ``job``'s nodes, or None if it may."""
        if node.name in job.exc_nodes:
            return EXCLUDED
        if job.constraint and not _matches(job.constraint, node.features):
            return LACKS_FEATURES
        if job.gpu_type and node.gpu_type != job.gpu_type:
            return WRONG_GPU_TYPE
        return None

    def check_required(self, job: JobRequest, nodes: Mapping[str, NodeView]) -> str | None:
        """A pending reason when a -w node cannot take work now, else None."""
        gone = [n for n in job.req_nodes if n not in nodes or not nodes[n].schedulable]
        return slurm.req_node_not_avail(gone) if gone else None


@lru_cache(maxsize=4096)
def _matches(constraint: str, features: tuple[str, ...]) -> bool:
    # Nodes of one kind share their features: parse and test each expression once
    # per kind, not once per node.
    return slurm.constraint_matches(constraint, features)

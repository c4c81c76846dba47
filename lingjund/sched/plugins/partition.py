"""partition/limits: jobs that their partition will not run as they are.

A partition that is DOWN or INACTIVE starts nothing; a job asking more
CPUs than all the partition's nodes together have (PartitionConfig, as
Slurm says for `-n 9` on 4 nodes x 2 CPUs), more
nodes than the partition has or allows, fewer than it requires, or a longer
time limit than it allows, will not start by waiting. These refusals never
block lower-priority jobs. A DRAIN partition takes no new submissions but
still runs what is queued, so it passes here.

Example: ``debug`` on node[1-4] with MaxNodes=2 and MaxTime=60: ``-N3``
pends with PartitionNodeLimit, ``-t 120`` with PartitionTimeLimit, and the
job behind either still starts.
"""
from __future__ import annotations

from lingjun.slurm import (REASON_PARTITION_CONFIG, REASON_PARTITION_DOWN,
                           REASON_PARTITION_INACTIVE, REASON_PARTITION_NODE_LIMIT,
                           REASON_PARTITION_TIME_LIMIT)
from lingjund.sched.snapshot import UNLIMITED, JobRequest, PartitionView


def node_cap(partition: PartitionView) -> int:
    """The most nodes one job may have in this partition."""
    count = partition.node_count
    if partition.max_nodes != UNLIMITED:
        return min(count, partition.max_nodes)
    return count


class PartitionLimits:
    name = "partition/limits"

    def check(self, job: JobRequest, partition: PartitionView, now: float) -> str | None:
        # Asked for every pending job of every pass: plain comparisons, no calls
        # where one will do.
        state = partition.state
        if state != "UP":
            state = state.upper()
            if state == "DOWN":
                return REASON_PARTITION_DOWN
            if state == "INACTIVE":
                return REASON_PARTITION_INACTIVE
        min_nodes = job.min_nodes if job.min_nodes > 1 else 1
        if partition.total_cpus:
            tasks = job.num_tasks or (job.ntasks_per_node or 1) * min_nodes
            cpt = job.cpus_per_task if job.cpus_per_task > 1 else 1
            if tasks * cpt > partition.total_cpus:
                return REASON_PARTITION_CONFIG
        max_nodes = job.max_nodes if job.max_nodes > min_nodes else min_nodes
        if min_nodes > node_cap(partition) or max_nodes < partition.min_nodes:
            return REASON_PARTITION_NODE_LIMIT
        if (job.time_limit_min != UNLIMITED and partition.max_time_min != UNLIMITED
                and job.time_limit_min > partition.max_time_min):
            return REASON_PARTITION_TIME_LIMIT
        return None

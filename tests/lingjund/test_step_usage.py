"""A step's accounting from its tasks' reports (what sacct shows for ID.0)."""
from lingjun.v1 import agent_pb2
from lingjund.service.steps import StepRun, step_usage


def report(rank, peak, mean, user, system):
    return agent_pb2.AgentTaskExit(job_id=1, step_id=0, rank=rank, max_rss_kb=peak,
                                   ave_rss_kb=mean, user_cpu_ms=user, system_cpu_ms=system)


def test_the_highest_task_peak_is_the_steps_and_says_where_it_was():
    run = StepRun(1, 0, ("node1", "node2"), {0: "node1", 1: "node1", 2: "node2"})
    run.usage = {0: report(0, 1000, 800, 10, 1), 1: report(1, 5000, 3000, 20, 2),
                 2: report(2, 4000, 1000, 30, 3)}
    got = step_usage(run)
    assert got == dict(max_rss_kb=5000, max_rss_node="node1", max_rss_task=1,
                       ave_rss_kb=1600, user_cpu_ms=60, system_cpu_ms=6, gpu_util_ave=0,
                       gpu_util_max=0, gpu_mem_ave_kb=0, gpu_mem_max_kb=0)


def test_gpu_samples_of_the_steps_nodes_give_its_mean_and_peak():
    run = StepRun(1, 0, ("node1", "node2"), {0: "node1", 1: "node2"})
    run.usage = {
        0: agent_pb2.AgentTaskExit(rank=0, gpu_util_ave=40, gpu_util_max=70,
                                   gpu_mem_ave_kb=1000, gpu_mem_max_kb=3000),
        1: agent_pb2.AgentTaskExit(rank=1, gpu_util_ave=80, gpu_util_max=90,
                                   gpu_mem_ave_kb=2000, gpu_mem_max_kb=2500)}
    got = step_usage(run)
    assert (got["gpu_util_ave"], got["gpu_util_max"]) == (60, 90)
    assert (got["gpu_mem_ave_kb"], got["gpu_mem_max_kb"]) == (1500, 3000)


def test_equal_peaks_name_the_lowest_rank():
    run = StepRun(1, 0, ("node1", "node2"), {0: "node1", 1: "node2"})
    run.usage = {1: report(1, 7, 7, 0, 0), 0: report(0, 7, 7, 0, 0)}
    assert (step_usage(run)["max_rss_task"], step_usage(run)["max_rss_node"]) == (0, "node1")


def test_a_step_without_reports_records_nothing():
    assert step_usage(StepRun(1, 0, ("node1",), {0: "node1"})) == {}

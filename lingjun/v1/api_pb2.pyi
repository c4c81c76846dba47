from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobSpec(_message.Message):
    __slots__ = ("name", "script", "argv", "work_dir", "stdout_pattern", "stderr_pattern", "stdin_path", "partition", "min_nodes", "max_nodes", "num_tasks", "ntasks_per_node", "cpus_per_task", "mem_per_node_mb", "gpus_per_node", "gpus", "time_limit_min", "exclusive", "environment", "export_spec", "hold", "requeue", "comment", "account", "qos", "nice", "submit_host", "submit_dir", "user", "uid", "gid", "group", "command", "batch", "open_mode", "array", "launcher", "req_nodes", "exc_nodes", "constraint", "mem_per_cpu_mb", "gpu_type", "signal", "signal_time_s", "signal_flags", "mail_type", "mail_user", "dependency", "kill_on_invalid_dep", "begin_time", "deadline", "max_restarts", "hang_timeout_s", "gpus_per_task", "cpus_per_gpu", "mem_per_gpu_mb", "shards_per_node", "mps_per_node", "gpu_mem_limit_mb", "cron_spec", "switches", "switch_wait_s", "segment", "failed_nodes", "requeue_expedite")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    WORK_DIR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_PATTERN_FIELD_NUMBER: _ClassVar[int]
    STDERR_PATTERN_FIELD_NUMBER: _ClassVar[int]
    STDIN_PATH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    MIN_NODES_FIELD_NUMBER: _ClassVar[int]
    MAX_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_TASKS_FIELD_NUMBER: _ClassVar[int]
    NTASKS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    CPUS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    MEM_PER_NODE_MB_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_MIN_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    EXPORT_SPEC_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    REQUEUE_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    QOS_FIELD_NUMBER: _ClassVar[int]
    NICE_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_HOST_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_DIR_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    OPEN_MODE_FIELD_NUMBER: _ClassVar[int]
    ARRAY_FIELD_NUMBER: _ClassVar[int]
    LAUNCHER_FIELD_NUMBER: _ClassVar[int]
    REQ_NODES_FIELD_NUMBER: _ClassVar[int]
    EXC_NODES_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    MEM_PER_CPU_MB_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_TIME_S_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FLAGS_FIELD_NUMBER: _ClassVar[int]
    MAIL_TYPE_FIELD_NUMBER: _ClassVar[int]
    MAIL_USER_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    KILL_ON_INVALID_DEP_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIME_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    MAX_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    HANG_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    CPUS_PER_GPU_FIELD_NUMBER: _ClassVar[int]
    MEM_PER_GPU_MB_FIELD_NUMBER: _ClassVar[int]
    SHARDS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    MPS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    GPU_MEM_LIMIT_MB_FIELD_NUMBER: _ClassVar[int]
    CRON_SPEC_FIELD_NUMBER: _ClassVar[int]
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    SWITCH_WAIT_S_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    FAILED_NODES_FIELD_NUMBER: _ClassVar[int]
    REQUEUE_EXPEDITE_FIELD_NUMBER: _ClassVar[int]
    name: str
    script: str
    argv: _containers.RepeatedScalarFieldContainer[str]
    work_dir: str
    stdout_pattern: str
    stderr_pattern: str
    stdin_path: str
    partition: str
    min_nodes: int
    max_nodes: int
    num_tasks: int
    ntasks_per_node: int
    cpus_per_task: int
    mem_per_node_mb: int
    gpus_per_node: int
    gpus: int
    time_limit_min: int
    exclusive: bool
    environment: _containers.ScalarMap[str, str]
    export_spec: str
    hold: bool
    requeue: bool
    comment: str
    account: str
    qos: str
    nice: int
    submit_host: str
    submit_dir: str
    user: str
    uid: int
    gid: int
    group: str
    command: str
    batch: bool
    open_mode: str
    array: str
    launcher: str
    req_nodes: str
    exc_nodes: str
    constraint: str
    mem_per_cpu_mb: int
    gpu_type: str
    signal: int
    signal_time_s: int
    signal_flags: str
    mail_type: str
    mail_user: str
    dependency: str
    kill_on_invalid_dep: bool
    begin_time: int
    deadline: int
    max_restarts: int
    hang_timeout_s: int
    gpus_per_task: int
    cpus_per_gpu: int
    mem_per_gpu_mb: int
    shards_per_node: int
    mps_per_node: int
    gpu_mem_limit_mb: int
    cron_spec: str
    switches: int
    switch_wait_s: int
    segment: int
    failed_nodes: str
    requeue_expedite: bool
    def __init__(self, name: _Optional[str] = ..., script: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., work_dir: _Optional[str] = ..., stdout_pattern: _Optional[str] = ..., stderr_pattern: _Optional[str] = ..., stdin_path: _Optional[str] = ..., partition: _Optional[str] = ..., min_nodes: _Optional[int] = ..., max_nodes: _Optional[int] = ..., num_tasks: _Optional[int] = ..., ntasks_per_node: _Optional[int] = ..., cpus_per_task: _Optional[int] = ..., mem_per_node_mb: _Optional[int] = ..., gpus_per_node: _Optional[int] = ..., gpus: _Optional[int] = ..., time_limit_min: _Optional[int] = ..., exclusive: _Optional[bool] = ..., environment: _Optional[_Mapping[str, str]] = ..., export_spec: _Optional[str] = ..., hold: _Optional[bool] = ..., requeue: _Optional[bool] = ..., comment: _Optional[str] = ..., account: _Optional[str] = ..., qos: _Optional[str] = ..., nice: _Optional[int] = ..., submit_host: _Optional[str] = ..., submit_dir: _Optional[str] = ..., user: _Optional[str] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., group: _Optional[str] = ..., command: _Optional[str] = ..., batch: _Optional[bool] = ..., open_mode: _Optional[str] = ..., array: _Optional[str] = ..., launcher: _Optional[str] = ..., req_nodes: _Optional[str] = ..., exc_nodes: _Optional[str] = ..., constraint: _Optional[str] = ..., mem_per_cpu_mb: _Optional[int] = ..., gpu_type: _Optional[str] = ..., signal: _Optional[int] = ..., signal_time_s: _Optional[int] = ..., signal_flags: _Optional[str] = ..., mail_type: _Optional[str] = ..., mail_user: _Optional[str] = ..., dependency: _Optional[str] = ..., kill_on_invalid_dep: _Optional[bool] = ..., begin_time: _Optional[int] = ..., deadline: _Optional[int] = ..., max_restarts: _Optional[int] = ..., hang_timeout_s: _Optional[int] = ..., gpus_per_task: _Optional[int] = ..., cpus_per_gpu: _Optional[int] = ..., mem_per_gpu_mb: _Optional[int] = ..., shards_per_node: _Optional[int] = ..., mps_per_node: _Optional[int] = ..., gpu_mem_limit_mb: _Optional[int] = ..., cron_spec: _Optional[str] = ..., switches: _Optional[int] = ..., switch_wait_s: _Optional[int] = ..., segment: _Optional[int] = ..., failed_nodes: _Optional[str] = ..., requeue_expedite: _Optional[bool] = ...) -> None: ...

class SubmitJobRequest(_message.Message):
    __slots__ = ("spec", "client_token", "test_only")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TEST_ONLY_FIELD_NUMBER: _ClassVar[int]
    spec: JobSpec
    client_token: str
    test_only: bool
    def __init__(self, spec: _Optional[_Union[JobSpec, _Mapping]] = ..., client_token: _Optional[str] = ..., test_only: _Optional[bool] = ...) -> None: ...

class SubmitJobResponse(_message.Message):
    __slots__ = ("job_id", "duplicate", "cluster", "test_start_time", "test_cpus", "test_nodes", "test_partition")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    TEST_START_TIME_FIELD_NUMBER: _ClassVar[int]
    TEST_CPUS_FIELD_NUMBER: _ClassVar[int]
    TEST_NODES_FIELD_NUMBER: _ClassVar[int]
    TEST_PARTITION_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    duplicate: bool
    cluster: str
    test_start_time: int
    test_cpus: int
    test_nodes: str
    test_partition: str
    def __init__(self, job_id: _Optional[int] = ..., duplicate: _Optional[bool] = ..., cluster: _Optional[str] = ..., test_start_time: _Optional[int] = ..., test_cpus: _Optional[int] = ..., test_nodes: _Optional[str] = ..., test_partition: _Optional[str] = ...) -> None: ...

class SubmitJobsRequest(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[SubmitJobRequest]
    def __init__(self, jobs: _Optional[_Iterable[_Union[SubmitJobRequest, _Mapping]]] = ...) -> None: ...

class SubmitJobsResult(_message.Message):
    __slots__ = ("job", "error", "reason")
    JOB_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job: SubmitJobResponse
    error: str
    reason: str
    def __init__(self, job: _Optional[_Union[SubmitJobResponse, _Mapping]] = ..., error: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class SubmitJobsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SubmitJobsResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SubmitJobsResult, _Mapping]]] = ...) -> None: ...

class StepInfo(_message.Message):
    __slots__ = ("step_id", "name", "state", "exit_code", "exit_signal", "nodes", "num_tasks", "num_cpus", "start_time", "end_time", "max_rss_kb", "ave_rss_kb", "max_rss_node", "max_rss_task", "user_cpu_ms", "system_cpu_ms", "gpus", "gpu_util_ave", "gpu_util_max", "gpu_mem_ave_kb", "gpu_mem_max_kb", "mem_mb")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_TASKS_FIELD_NUMBER: _ClassVar[int]
    NUM_CPUS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    MAX_RSS_KB_FIELD_NUMBER: _ClassVar[int]
    AVE_RSS_KB_FIELD_NUMBER: _ClassVar[int]
    MAX_RSS_NODE_FIELD_NUMBER: _ClassVar[int]
    MAX_RSS_TASK_FIELD_NUMBER: _ClassVar[int]
    USER_CPU_MS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_CPU_MS_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_UTIL_AVE_FIELD_NUMBER: _ClassVar[int]
    GPU_UTIL_MAX_FIELD_NUMBER: _ClassVar[int]
    GPU_MEM_AVE_KB_FIELD_NUMBER: _ClassVar[int]
    GPU_MEM_MAX_KB_FIELD_NUMBER: _ClassVar[int]
    MEM_MB_FIELD_NUMBER: _ClassVar[int]
    step_id: str
    name: str
    state: str
    exit_code: int
    exit_signal: int
    nodes: str
    num_tasks: int
    num_cpus: int
    start_time: int
    end_time: int
    max_rss_kb: int
    ave_rss_kb: int
    max_rss_node: str
    max_rss_task: int
    user_cpu_ms: int
    system_cpu_ms: int
    gpus: int
    gpu_util_ave: int
    gpu_util_max: int
    gpu_mem_ave_kb: int
    gpu_mem_max_kb: int
    mem_mb: int
    def __init__(self, step_id: _Optional[str] = ..., name: _Optional[str] = ..., state: _Optional[str] = ..., exit_code: _Optional[int] = ..., exit_signal: _Optional[int] = ..., nodes: _Optional[str] = ..., num_tasks: _Optional[int] = ..., num_cpus: _Optional[int] = ..., start_time: _Optional[int] = ..., end_time: _Optional[int] = ..., max_rss_kb: _Optional[int] = ..., ave_rss_kb: _Optional[int] = ..., max_rss_node: _Optional[str] = ..., max_rss_task: _Optional[int] = ..., user_cpu_ms: _Optional[int] = ..., system_cpu_ms: _Optional[int] = ..., gpus: _Optional[int] = ..., gpu_util_ave: _Optional[int] = ..., gpu_util_max: _Optional[int] = ..., gpu_mem_ave_kb: _Optional[int] = ..., gpu_mem_max_kb: _Optional[int] = ..., mem_mb: _Optional[int] = ...) -> None: ...

class JobInfo(_message.Message):
    __slots__ = ("job_id", "name", "user", "uid", "gid", "group", "state", "reason", "partition", "num_nodes", "max_nodes", "num_cpus", "num_tasks", "cpus_per_task", "ntasks_per_node", "mem_per_node_mb", "gpus_per_node", "time_limit_min", "submit_time", "eligible_time", "start_time", "end_time", "nodes", "node_names", "batch_host", "exit_code", "exit_signal", "derived_exit_code", "derived_exit_signal", "work_dir", "stdout_path", "stderr_path", "stdin_path", "command", "priority", "restarts", "requeue", "exclusive", "comment", "account", "qos", "batch", "submit_host", "cancelled_by", "steps", "cpus_per_node", "now", "nice", "gpus", "hold", "array_job_id", "array_task_id", "array_task_str", "array_max_running", "req_nodes", "exc_nodes", "features", "mem_per_cpu_mb", "gpu_type", "mail_type", "mail_user", "signal_spec", "dependency", "deadline", "preempt_eligible_time", "preempt_time", "preempted_by", "attempts", "max_restarts", "hang_timeout_s", "node_allocs", "sched_start_time", "sched_nodes", "shards_per_node", "mps_per_node", "gpu_mem_limit_mb")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    MAX_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_CPUS_FIELD_NUMBER: _ClassVar[int]
    NUM_TASKS_FIELD_NUMBER: _ClassVar[int]
    CPUS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    NTASKS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    MEM_PER_NODE_MB_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_MIN_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    NODE_NAMES_FIELD_NUMBER: _ClassVar[int]
    BATCH_HOST_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    DERIVED_EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    DERIVED_EXIT_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    WORK_DIR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_PATH_FIELD_NUMBER: _ClassVar[int]
    STDERR_PATH_FIELD_NUMBER: _ClassVar[int]
    STDIN_PATH_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    REQUEUE_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    QOS_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_HOST_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_BY_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    CPUS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    NICE_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    ARRAY_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ARRAY_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ARRAY_TASK_STR_FIELD_NUMBER: _ClassVar[int]
    ARRAY_MAX_RUNNING_FIELD_NUMBER: _ClassVar[int]
    REQ_NODES_FIELD_NUMBER: _ClassVar[int]
    EXC_NODES_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    MEM_PER_CPU_MB_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    MAIL_TYPE_FIELD_NUMBER: _ClassVar[int]
    MAIL_USER_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_SPEC_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    PREEMPT_ELIGIBLE_TIME_FIELD_NUMBER: _ClassVar[int]
    PREEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    PREEMPTED_BY_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    MAX_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    HANG_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    NODE_ALLOCS_FIELD_NUMBER: _ClassVar[int]
    SCHED_START_TIME_FIELD_NUMBER: _ClassVar[int]
    SCHED_NODES_FIELD_NUMBER: _ClassVar[int]
    SHARDS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    MPS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    GPU_MEM_LIMIT_MB_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    name: str
    user: str
    uid: int
    gid: int
    group: str
    state: str
    reason: str
    partition: str
    num_nodes: int
    max_nodes: int
    num_cpus: int
    num_tasks: int
    cpus_per_task: int
    ntasks_per_node: int
    mem_per_node_mb: int
    gpus_per_node: int
    time_limit_min: int
    submit_time: int
    eligible_time: int
    start_time: int
    end_time: int
    nodes: str
    node_names: _containers.RepeatedScalarFieldContainer[str]
    batch_host: str
    exit_code: int
    exit_signal: int
    derived_exit_code: int
    derived_exit_signal: int
    work_dir: str
    stdout_path: str
    stderr_path: str
    stdin_path: str
    command: str
    priority: int
    restarts: int
    requeue: bool
    exclusive: bool
    comment: str
    account: str
    qos: str
    batch: bool
    submit_host: str
    cancelled_by: str
    steps: _containers.RepeatedCompositeFieldContainer[StepInfo]
    cpus_per_node: int
    now: int
    nice: int
    gpus: int
    hold: bool
    array_job_id: int
    array_task_id: int
    array_task_str: str
    array_max_running: int
    req_nodes: str
    exc_nodes: str
    features: str
    mem_per_cpu_mb: int
    gpu_type: str
    mail_type: str
    mail_user: str
    signal_spec: str
    dependency: str
    deadline: int
    preempt_eligible_time: int
    preempt_time: int
    preempted_by: int
    attempts: _containers.RepeatedCompositeFieldContainer[JobAttempt]
    max_restarts: int
    hang_timeout_s: int
    node_allocs: _containers.RepeatedCompositeFieldContainer[JobNodeAlloc]
    sched_start_time: int
    sched_nodes: str
    shards_per_node: int
    mps_per_node: int
    gpu_mem_limit_mb: int
    def __init__(self, job_id: _Optional[int] = ..., name: _Optional[str] = ..., user: _Optional[str] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., group: _Optional[str] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ..., partition: _Optional[str] = ..., num_nodes: _Optional[int] = ..., max_nodes: _Optional[int] = ..., num_cpus: _Optional[int] = ..., num_tasks: _Optional[int] = ..., cpus_per_task: _Optional[int] = ..., ntasks_per_node: _Optional[int] = ..., mem_per_node_mb: _Optional[int] = ..., gpus_per_node: _Optional[int] = ..., time_limit_min: _Optional[int] = ..., submit_time: _Optional[int] = ..., eligible_time: _Optional[int] = ..., start_time: _Optional[int] = ..., end_time: _Optional[int] = ..., nodes: _Optional[str] = ..., node_names: _Optional[_Iterable[str]] = ..., batch_host: _Optional[str] = ..., exit_code: _Optional[int] = ..., exit_signal: _Optional[int] = ..., derived_exit_code: _Optional[int] = ..., derived_exit_signal: _Optional[int] = ..., work_dir: _Optional[str] = ..., stdout_path: _Optional[str] = ..., stderr_path: _Optional[str] = ..., stdin_path: _Optional[str] = ..., command: _Optional[str] = ..., priority: _Optional[int] = ..., restarts: _Optional[int] = ..., requeue: _Optional[bool] = ..., exclusive: _Optional[bool] = ..., comment: _Optional[str] = ..., account: _Optional[str] = ..., qos: _Optional[str] = ..., batch: _Optional[bool] = ..., submit_host: _Optional[str] = ..., cancelled_by: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[StepInfo, _Mapping]]] = ..., cpus_per_node: _Optional[int] = ..., now: _Optional[int] = ..., nice: _Optional[int] = ..., gpus: _Optional[int] = ..., hold: _Optional[bool] = ..., array_job_id: _Optional[int] = ..., array_task_id: _Optional[int] = ..., array_task_str: _Optional[str] = ..., array_max_running: _Optional[int] = ..., req_nodes: _Optional[str] = ..., exc_nodes: _Optional[str] = ..., features: _Optional[str] = ..., mem_per_cpu_mb: _Optional[int] = ..., gpu_type: _Optional[str] = ..., mail_type: _Optional[str] = ..., mail_user: _Optional[str] = ..., signal_spec: _Optional[str] = ..., dependency: _Optional[str] = ..., deadline: _Optional[int] = ..., preempt_eligible_time: _Optional[int] = ..., preempt_time: _Optional[int] = ..., preempted_by: _Optional[int] = ..., attempts: _Optional[_Iterable[_Union[JobAttempt, _Mapping]]] = ..., max_restarts: _Optional[int] = ..., hang_timeout_s: _Optional[int] = ..., node_allocs: _Optional[_Iterable[_Union[JobNodeAlloc, _Mapping]]] = ..., sched_start_time: _Optional[int] = ..., sched_nodes: _Optional[str] = ..., shards_per_node: _Optional[int] = ..., mps_per_node: _Optional[int] = ..., gpu_mem_limit_mb: _Optional[int] = ...) -> None: ...

class JobNodeAlloc(_message.Message):
    __slots__ = ("node", "cpus", "mem_mb", "gpu_ids", "gpu_type")
    NODE_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEM_MB_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    node: str
    cpus: int
    mem_mb: int
    gpu_ids: _containers.RepeatedScalarFieldContainer[int]
    gpu_type: str
    def __init__(self, node: _Optional[str] = ..., cpus: _Optional[int] = ..., mem_mb: _Optional[int] = ..., gpu_ids: _Optional[_Iterable[int]] = ..., gpu_type: _Optional[str] = ...) -> None: ...

class JobAttempt(_message.Message):
    __slots__ = ("attempt", "nodes", "start_time", "end_time", "state", "exit_code", "exit_signal")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    nodes: str
    start_time: int
    end_time: int
    state: str
    exit_code: int
    exit_signal: int
    def __init__(self, attempt: _Optional[int] = ..., nodes: _Optional[str] = ..., start_time: _Optional[int] = ..., end_time: _Optional[int] = ..., state: _Optional[str] = ..., exit_code: _Optional[int] = ..., exit_signal: _Optional[int] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ("time", "kind", "text")
    TIME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    time: int
    kind: str
    text: str
    def __init__(self, time: _Optional[int] = ..., kind: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class GetJobEventsRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    def __init__(self, job_id: _Optional[int] = ...) -> None: ...

class GetJobEventsResponse(_message.Message):
    __slots__ = ("events", "attempts", "state")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[JobEvent]
    attempts: _containers.RepeatedCompositeFieldContainer[JobAttempt]
    state: str
    def __init__(self, events: _Optional[_Iterable[_Union[JobEvent, _Mapping]]] = ..., attempts: _Optional[_Iterable[_Union[JobAttempt, _Mapping]]] = ..., state: _Optional[str] = ...) -> None: ...

class GetJobsRequest(_message.Message):
    __slots__ = ("job_ids", "users", "states", "partitions", "names", "all_states", "with_steps", "window_start", "window_end", "accounts", "job_fields", "squeue_order", "nodes")
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    ALL_STATES_FIELD_NUMBER: _ClassVar[int]
    WITH_STEPS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTS_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELDS_FIELD_NUMBER: _ClassVar[int]
    SQUEUE_ORDER_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    users: _containers.RepeatedScalarFieldContainer[str]
    states: _containers.RepeatedScalarFieldContainer[str]
    partitions: _containers.RepeatedScalarFieldContainer[str]
    names: _containers.RepeatedScalarFieldContainer[str]
    all_states: bool
    with_steps: bool
    window_start: int
    window_end: int
    accounts: _containers.RepeatedScalarFieldContainer[str]
    job_fields: _containers.RepeatedScalarFieldContainer[str]
    squeue_order: bool
    nodes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ..., users: _Optional[_Iterable[str]] = ..., states: _Optional[_Iterable[str]] = ..., partitions: _Optional[_Iterable[str]] = ..., names: _Optional[_Iterable[str]] = ..., all_states: _Optional[bool] = ..., with_steps: _Optional[bool] = ..., window_start: _Optional[int] = ..., window_end: _Optional[int] = ..., accounts: _Optional[_Iterable[str]] = ..., job_fields: _Optional[_Iterable[str]] = ..., squeue_order: _Optional[bool] = ..., nodes: _Optional[_Iterable[str]] = ...) -> None: ...

class GetJobsResponse(_message.Message):
    __slots__ = ("jobs", "now", "squeue_order")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    SQUEUE_ORDER_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobInfo]
    now: int
    squeue_order: bool
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobInfo, _Mapping]]] = ..., now: _Optional[int] = ..., squeue_order: _Optional[bool] = ...) -> None: ...

class CancelJobsRequest(_message.Message):
    __slots__ = ("job_ids", "user", "name", "states", "partitions", "signal", "batch_only", "requester_uid", "array_tasks")
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    BATCH_ONLY_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    ARRAY_TASKS_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    user: str
    name: str
    states: _containers.RepeatedScalarFieldContainer[str]
    partitions: _containers.RepeatedScalarFieldContainer[str]
    signal: int
    batch_only: bool
    requester_uid: int
    array_tasks: _containers.RepeatedCompositeFieldContainer[ArrayTaskSelection]
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ..., user: _Optional[str] = ..., name: _Optional[str] = ..., states: _Optional[_Iterable[str]] = ..., partitions: _Optional[_Iterable[str]] = ..., signal: _Optional[int] = ..., batch_only: _Optional[bool] = ..., requester_uid: _Optional[int] = ..., array_tasks: _Optional[_Iterable[_Union[ArrayTaskSelection, _Mapping]]] = ...) -> None: ...

class ArrayTaskSelection(_message.Message):
    __slots__ = ("array_job_id", "task_ids")
    ARRAY_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    array_job_id: int
    task_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, array_job_id: _Optional[int] = ..., task_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class CancelResult(_message.Message):
    __slots__ = ("job_id", "ok", "error", "array_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ARRAY_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    ok: bool
    error: str
    array_id: str
    def __init__(self, job_id: _Optional[int] = ..., ok: _Optional[bool] = ..., error: _Optional[str] = ..., array_id: _Optional[str] = ...) -> None: ...

class CancelJobsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CancelResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CancelResult, _Mapping]]] = ...) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ("name", "state", "drain", "not_responding", "reason", "reason_user", "reason_time", "cpus", "cpus_alloc", "real_memory_mb", "alloc_memory_mb", "free_memory_mb", "gpus", "gpus_alloc", "partitions", "address", "hostname", "boot_time", "agent_start_time", "cpu_load", "os", "arch", "sockets", "cores_per_socket", "threads_per_core", "last_busy_time", "version", "job_ids", "weight", "features", "tmp_disk_mb", "completing", "gpu_type", "shards", "mps", "shards_alloc", "mps_alloc", "net_status", "sanity_results", "gpu_devices", "gpu_ids_alloc", "leaf_switch")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    NOT_RESPONDING_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REASON_USER_FIELD_NUMBER: _ClassVar[int]
    REASON_TIME_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    CPUS_ALLOC_FIELD_NUMBER: _ClassVar[int]
    REAL_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    ALLOC_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    FREE_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPUS_ALLOC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    BOOT_TIME_FIELD_NUMBER: _ClassVar[int]
    AGENT_START_TIME_FIELD_NUMBER: _ClassVar[int]
    CPU_LOAD_FIELD_NUMBER: _ClassVar[int]
    OS_FIELD_NUMBER: _ClassVar[int]
    ARCH_FIELD_NUMBER: _ClassVar[int]
    SOCKETS_FIELD_NUMBER: _ClassVar[int]
    CORES_PER_SOCKET_FIELD_NUMBER: _ClassVar[int]
    THREADS_PER_CORE_FIELD_NUMBER: _ClassVar[int]
    LAST_BUSY_TIME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    TMP_DISK_MB_FIELD_NUMBER: _ClassVar[int]
    COMPLETING_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    MPS_FIELD_NUMBER: _ClassVar[int]
    SHARDS_ALLOC_FIELD_NUMBER: _ClassVar[int]
    MPS_ALLOC_FIELD_NUMBER: _ClassVar[int]
    NET_STATUS_FIELD_NUMBER: _ClassVar[int]
    SANITY_RESULTS_FIELD_NUMBER: _ClassVar[int]
    GPU_DEVICES_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_ALLOC_FIELD_NUMBER: _ClassVar[int]
    LEAF_SWITCH_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: str
    drain: bool
    not_responding: bool
    reason: str
    reason_user: str
    reason_time: int
    cpus: int
    cpus_alloc: int
    real_memory_mb: int
    alloc_memory_mb: int
    free_memory_mb: int
    gpus: int
    gpus_alloc: int
    partitions: _containers.RepeatedScalarFieldContainer[str]
    address: str
    hostname: str
    boot_time: int
    agent_start_time: int
    cpu_load: float
    os: str
    arch: str
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    last_busy_time: int
    version: str
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    weight: int
    features: _containers.RepeatedScalarFieldContainer[str]
    tmp_disk_mb: int
    completing: bool
    gpu_type: str
    shards: int
    mps: int
    shards_alloc: int
    mps_alloc: int
    net_status: NetStatusReport
    sanity_results: _containers.RepeatedCompositeFieldContainer[SanityResult]
    gpu_devices: _containers.RepeatedCompositeFieldContainer[GpuDevice]
    gpu_ids_alloc: _containers.RepeatedScalarFieldContainer[int]
    leaf_switch: str
    def __init__(self, name: _Optional[str] = ..., state: _Optional[str] = ..., drain: _Optional[bool] = ..., not_responding: _Optional[bool] = ..., reason: _Optional[str] = ..., reason_user: _Optional[str] = ..., reason_time: _Optional[int] = ..., cpus: _Optional[int] = ..., cpus_alloc: _Optional[int] = ..., real_memory_mb: _Optional[int] = ..., alloc_memory_mb: _Optional[int] = ..., free_memory_mb: _Optional[int] = ..., gpus: _Optional[int] = ..., gpus_alloc: _Optional[int] = ..., partitions: _Optional[_Iterable[str]] = ..., address: _Optional[str] = ..., hostname: _Optional[str] = ..., boot_time: _Optional[int] = ..., agent_start_time: _Optional[int] = ..., cpu_load: _Optional[float] = ..., os: _Optional[str] = ..., arch: _Optional[str] = ..., sockets: _Optional[int] = ..., cores_per_socket: _Optional[int] = ..., threads_per_core: _Optional[int] = ..., last_busy_time: _Optional[int] = ..., version: _Optional[str] = ..., job_ids: _Optional[_Iterable[int]] = ..., weight: _Optional[int] = ..., features: _Optional[_Iterable[str]] = ..., tmp_disk_mb: _Optional[int] = ..., completing: _Optional[bool] = ..., gpu_type: _Optional[str] = ..., shards: _Optional[int] = ..., mps: _Optional[int] = ..., shards_alloc: _Optional[int] = ..., mps_alloc: _Optional[int] = ..., net_status: _Optional[_Union[NetStatusReport, _Mapping]] = ..., sanity_results: _Optional[_Iterable[_Union[SanityResult, _Mapping]]] = ..., gpu_devices: _Optional[_Iterable[_Union[GpuDevice, _Mapping]]] = ..., gpu_ids_alloc: _Optional[_Iterable[int]] = ..., leaf_switch: _Optional[str] = ...) -> None: ...

class GpuDevice(_message.Message):
    __slots__ = ("index", "uuid", "name", "type", "memory_mb", "numa_node", "pci_bus_id", "nvlink_peers", "nic", "pcie_switch")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    NUMA_NODE_FIELD_NUMBER: _ClassVar[int]
    PCI_BUS_ID_FIELD_NUMBER: _ClassVar[int]
    NVLINK_PEERS_FIELD_NUMBER: _ClassVar[int]
    NIC_FIELD_NUMBER: _ClassVar[int]
    PCIE_SWITCH_FIELD_NUMBER: _ClassVar[int]
    index: int
    uuid: str
    name: str
    type: str
    memory_mb: int
    numa_node: int
    pci_bus_id: str
    nvlink_peers: _containers.RepeatedScalarFieldContainer[int]
    nic: str
    pcie_switch: str
    def __init__(self, index: _Optional[int] = ..., uuid: _Optional[str] = ..., name: _Optional[str] = ..., type: _Optional[str] = ..., memory_mb: _Optional[int] = ..., numa_node: _Optional[int] = ..., pci_bus_id: _Optional[str] = ..., nvlink_peers: _Optional[_Iterable[int]] = ..., nic: _Optional[str] = ..., pcie_switch: _Optional[str] = ...) -> None: ...

class SanityResult(_message.Message):
    __slots__ = ("name", "severity", "ok", "reason", "duration_s", "time", "phase")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    name: str
    severity: str
    ok: bool
    reason: str
    duration_s: float
    time: float
    phase: str
    def __init__(self, name: _Optional[str] = ..., severity: _Optional[str] = ..., ok: _Optional[bool] = ..., reason: _Optional[str] = ..., duration_s: _Optional[float] = ..., time: _Optional[float] = ..., phase: _Optional[str] = ...) -> None: ...

class SanityEvent(_message.Message):
    __slots__ = ("time", "node", "event", "reason", "job_id", "by")
    TIME_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    time: float
    node: str
    event: str
    reason: str
    job_id: int
    by: str
    def __init__(self, time: _Optional[float] = ..., node: _Optional[str] = ..., event: _Optional[str] = ..., reason: _Optional[str] = ..., job_id: _Optional[int] = ..., by: _Optional[str] = ...) -> None: ...

class GetSanityResultsRequest(_message.Message):
    __slots__ = ("names", "events")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    events: int
    def __init__(self, names: _Optional[_Iterable[str]] = ..., events: _Optional[int] = ...) -> None: ...

class SanityNode(_message.Message):
    __slots__ = ("name", "drain_by_probe", "results", "events")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DRAIN_BY_PROBE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    drain_by_probe: bool
    results: _containers.RepeatedCompositeFieldContainer[SanityResult]
    events: _containers.RepeatedCompositeFieldContainer[SanityEvent]
    def __init__(self, name: _Optional[str] = ..., drain_by_probe: _Optional[bool] = ..., results: _Optional[_Iterable[_Union[SanityResult, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[SanityEvent, _Mapping]]] = ...) -> None: ...

class GetSanityResultsResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[SanityNode]
    def __init__(self, nodes: _Optional[_Iterable[_Union[SanityNode, _Mapping]]] = ...) -> None: ...

class GetNodesRequest(_message.Message):
    __slots__ = ("names", "partitions")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    partitions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ..., partitions: _Optional[_Iterable[str]] = ...) -> None: ...

class GetNodesResponse(_message.Message):
    __slots__ = ("nodes", "now")
    NODES_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    now: int
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., now: _Optional[int] = ...) -> None: ...

class UpdateNodeRequest(_message.Message):
    __slots__ = ("names", "state", "reason", "requester_uid", "requester")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    state: str
    reason: str
    requester_uid: int
    requester: str
    def __init__(self, names: _Optional[_Iterable[str]] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ..., requester_uid: _Optional[int] = ..., requester: _Optional[str] = ...) -> None: ...

class UpdateNodeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PartitionInfo(_message.Message):
    __slots__ = ("name", "default", "state", "max_time_min", "default_time_min", "max_nodes", "min_nodes", "node_names", "total_cpus", "total_nodes", "priority_tier", "total_memory_mb", "preempt_mode", "grace_time_s", "priority_job_factor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MAX_TIME_MIN_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TIME_MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_NODES_FIELD_NUMBER: _ClassVar[int]
    MIN_NODES_FIELD_NUMBER: _ClassVar[int]
    NODE_NAMES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CPUS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_NODES_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_TIER_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    PREEMPT_MODE_FIELD_NUMBER: _ClassVar[int]
    GRACE_TIME_S_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_JOB_FACTOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    default: bool
    state: str
    max_time_min: int
    default_time_min: int
    max_nodes: int
    min_nodes: int
    node_names: _containers.RepeatedScalarFieldContainer[str]
    total_cpus: int
    total_nodes: int
    priority_tier: int
    total_memory_mb: int
    preempt_mode: str
    grace_time_s: int
    priority_job_factor: int
    def __init__(self, name: _Optional[str] = ..., default: _Optional[bool] = ..., state: _Optional[str] = ..., max_time_min: _Optional[int] = ..., default_time_min: _Optional[int] = ..., max_nodes: _Optional[int] = ..., min_nodes: _Optional[int] = ..., node_names: _Optional[_Iterable[str]] = ..., total_cpus: _Optional[int] = ..., total_nodes: _Optional[int] = ..., priority_tier: _Optional[int] = ..., total_memory_mb: _Optional[int] = ..., preempt_mode: _Optional[str] = ..., grace_time_s: _Optional[int] = ..., priority_job_factor: _Optional[int] = ...) -> None: ...

class GetPartitionsRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class GetPartitionsResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionInfo]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionInfo, _Mapping]]] = ...) -> None: ...

class RunStepRequest(_message.Message):
    __slots__ = ("job_id", "num_nodes", "num_tasks", "ntasks_per_node", "cpus_per_task", "argv", "environment", "work_dir", "name", "requester_uid", "submit_host", "kill_on_bad_exit", "overlap", "exact", "node_names", "stdout_pattern", "stderr_pattern", "gpus_given", "gpus", "gpus_per_node", "gpus_per_task", "gpu_bind", "cpus_per_gpu", "mem_per_node_mb", "mem_per_cpu_mb", "attach", "attach_step_id", "printed", "exited_ranks")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_TASKS_FIELD_NUMBER: _ClassVar[int]
    NTASKS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    CPUS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    WORK_DIR_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_HOST_FIELD_NUMBER: _ClassVar[int]
    KILL_ON_BAD_EXIT_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    EXACT_FIELD_NUMBER: _ClassVar[int]
    NODE_NAMES_FIELD_NUMBER: _ClassVar[int]
    STDOUT_PATTERN_FIELD_NUMBER: _ClassVar[int]
    STDERR_PATTERN_FIELD_NUMBER: _ClassVar[int]
    GPUS_GIVEN_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    GPU_BIND_FIELD_NUMBER: _ClassVar[int]
    CPUS_PER_GPU_FIELD_NUMBER: _ClassVar[int]
    MEM_PER_NODE_MB_FIELD_NUMBER: _ClassVar[int]
    MEM_PER_CPU_MB_FIELD_NUMBER: _ClassVar[int]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    ATTACH_STEP_ID_FIELD_NUMBER: _ClassVar[int]
    PRINTED_FIELD_NUMBER: _ClassVar[int]
    EXITED_RANKS_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    num_nodes: int
    num_tasks: int
    ntasks_per_node: int
    cpus_per_task: int
    argv: _containers.RepeatedScalarFieldContainer[str]
    environment: _containers.ScalarMap[str, str]
    work_dir: str
    name: str
    requester_uid: int
    submit_host: str
    kill_on_bad_exit: bool
    overlap: bool
    exact: bool
    node_names: _containers.RepeatedScalarFieldContainer[str]
    stdout_pattern: str
    stderr_pattern: str
    gpus_given: bool
    gpus: int
    gpus_per_node: int
    gpus_per_task: int
    gpu_bind: str
    cpus_per_gpu: int
    mem_per_node_mb: int
    mem_per_cpu_mb: int
    attach: bool
    attach_step_id: int
    printed: _containers.RepeatedCompositeFieldContainer[StepStreamOffset]
    exited_ranks: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, job_id: _Optional[int] = ..., num_nodes: _Optional[int] = ..., num_tasks: _Optional[int] = ..., ntasks_per_node: _Optional[int] = ..., cpus_per_task: _Optional[int] = ..., argv: _Optional[_Iterable[str]] = ..., environment: _Optional[_Mapping[str, str]] = ..., work_dir: _Optional[str] = ..., name: _Optional[str] = ..., requester_uid: _Optional[int] = ..., submit_host: _Optional[str] = ..., kill_on_bad_exit: _Optional[bool] = ..., overlap: _Optional[bool] = ..., exact: _Optional[bool] = ..., node_names: _Optional[_Iterable[str]] = ..., stdout_pattern: _Optional[str] = ..., stderr_pattern: _Optional[str] = ..., gpus_given: _Optional[bool] = ..., gpus: _Optional[int] = ..., gpus_per_node: _Optional[int] = ..., gpus_per_task: _Optional[int] = ..., gpu_bind: _Optional[str] = ..., cpus_per_gpu: _Optional[int] = ..., mem_per_node_mb: _Optional[int] = ..., mem_per_cpu_mb: _Optional[int] = ..., attach: _Optional[bool] = ..., attach_step_id: _Optional[int] = ..., printed: _Optional[_Iterable[_Union[StepStreamOffset, _Mapping]]] = ..., exited_ranks: _Optional[_Iterable[int]] = ...) -> None: ...

class StepStreamOffset(_message.Message):
    __slots__ = ("rank", "stream", "offset")
    RANK_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    rank: int
    stream: int
    offset: int
    def __init__(self, rank: _Optional[int] = ..., stream: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class StepStarted(_message.Message):
    __slots__ = ("job_id", "step_id", "node_names", "num_tasks")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_NAMES_FIELD_NUMBER: _ClassVar[int]
    NUM_TASKS_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    step_id: int
    node_names: _containers.RepeatedScalarFieldContainer[str]
    num_tasks: int
    def __init__(self, job_id: _Optional[int] = ..., step_id: _Optional[int] = ..., node_names: _Optional[_Iterable[str]] = ..., num_tasks: _Optional[int] = ...) -> None: ...

class TaskOutput(_message.Message):
    __slots__ = ("rank", "stream", "data")
    RANK_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    rank: int
    stream: int
    data: bytes
    def __init__(self, rank: _Optional[int] = ..., stream: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class TaskExit(_message.Message):
    __slots__ = ("rank", "node", "exit_code", "signal", "error")
    RANK_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    rank: int
    node: str
    exit_code: int
    signal: int
    error: str
    def __init__(self, rank: _Optional[int] = ..., node: _Optional[str] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class StepDone(_message.Message):
    __slots__ = ("exit_code",)
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    def __init__(self, exit_code: _Optional[int] = ...) -> None: ...

class StepEvent(_message.Message):
    __slots__ = ("started", "output", "task_exit", "done", "waiting")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TASK_EXIT_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    started: StepStarted
    output: TaskOutput
    task_exit: TaskExit
    done: StepDone
    waiting: StepWaiting
    def __init__(self, started: _Optional[_Union[StepStarted, _Mapping]] = ..., output: _Optional[_Union[TaskOutput, _Mapping]] = ..., task_exit: _Optional[_Union[TaskExit, _Mapping]] = ..., done: _Optional[_Union[StepDone, _Mapping]] = ..., waiting: _Optional[_Union[StepWaiting, _Mapping]] = ...) -> None: ...

class StepWaiting(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class AllocationRequest(_message.Message):
    __slots__ = ("spec", "attach_job_id", "release", "requester_uid")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    ATTACH_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    spec: JobSpec
    attach_job_id: int
    release: AllocationRelease
    requester_uid: int
    def __init__(self, spec: _Optional[_Union[JobSpec, _Mapping]] = ..., attach_job_id: _Optional[int] = ..., release: _Optional[_Union[AllocationRelease, _Mapping]] = ..., requester_uid: _Optional[int] = ...) -> None: ...

class AllocationRelease(_message.Message):
    __slots__ = ("exit_code", "signal")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    signal: int
    def __init__(self, exit_code: _Optional[int] = ..., signal: _Optional[int] = ...) -> None: ...

class AllocationQueued(_message.Message):
    __slots__ = ("job_id", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    reason: str
    def __init__(self, job_id: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class AllocationGranted(_message.Message):
    __slots__ = ("job", "waited", "environment")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_FIELD_NUMBER: _ClassVar[int]
    WAITED_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    job: JobInfo
    waited: bool
    environment: _containers.ScalarMap[str, str]
    def __init__(self, job: _Optional[_Union[JobInfo, _Mapping]] = ..., waited: _Optional[bool] = ..., environment: _Optional[_Mapping[str, str]] = ...) -> None: ...

class AllocationEnded(_message.Message):
    __slots__ = ("job_id", "state", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    state: str
    reason: str
    def __init__(self, job_id: _Optional[int] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class AllocationEvent(_message.Message):
    __slots__ = ("queued", "granted", "ended")
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    queued: AllocationQueued
    granted: AllocationGranted
    ended: AllocationEnded
    def __init__(self, queued: _Optional[_Union[AllocationQueued, _Mapping]] = ..., granted: _Optional[_Union[AllocationGranted, _Mapping]] = ..., ended: _Optional[_Union[AllocationEnded, _Mapping]] = ...) -> None: ...

class PingRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PingResponse(_message.Message):
    __slots__ = ("cluster", "controller_host", "now", "version")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_HOST_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    controller_host: str
    now: int
    version: str
    def __init__(self, cluster: _Optional[str] = ..., controller_host: _Optional[str] = ..., now: _Optional[int] = ..., version: _Optional[str] = ...) -> None: ...

class GetConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetConfigResponse(_message.Message):
    __slots__ = ("settings", "topology")
    class SettingsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    settings: _containers.ScalarMap[str, str]
    topology: _containers.RepeatedCompositeFieldContainer[TopologySwitch]
    def __init__(self, settings: _Optional[_Mapping[str, str]] = ..., topology: _Optional[_Iterable[_Union[TopologySwitch, _Mapping]]] = ...) -> None: ...

class TopologySwitch(_message.Message):
    __slots__ = ("name", "level", "link_speed", "nodes", "switches")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    LINK_SPEED_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    name: str
    level: int
    link_speed: int
    nodes: str
    switches: str
    def __init__(self, name: _Optional[str] = ..., level: _Optional[int] = ..., link_speed: _Optional[int] = ..., nodes: _Optional[str] = ..., switches: _Optional[str] = ...) -> None: ...

class UpdateJobRequest(_message.Message):
    __slots__ = ("job_id", "time_limit_min", "partition", "min_nodes", "max_nodes", "name", "comment", "dependency", "nice", "begin_time", "deadline", "requester_uid", "priority")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_MIN_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    MIN_NODES_FIELD_NUMBER: _ClassVar[int]
    MAX_NODES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    NICE_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIME_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    time_limit_min: int
    partition: str
    min_nodes: int
    max_nodes: int
    name: str
    comment: str
    dependency: str
    nice: int
    begin_time: int
    deadline: int
    requester_uid: int
    priority: int
    def __init__(self, job_id: _Optional[int] = ..., time_limit_min: _Optional[int] = ..., partition: _Optional[str] = ..., min_nodes: _Optional[int] = ..., max_nodes: _Optional[int] = ..., name: _Optional[str] = ..., comment: _Optional[str] = ..., dependency: _Optional[str] = ..., nice: _Optional[int] = ..., begin_time: _Optional[int] = ..., deadline: _Optional[int] = ..., requester_uid: _Optional[int] = ..., priority: _Optional[int] = ...) -> None: ...

class UpdateJobResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TopJobsRequest(_message.Message):
    __slots__ = ("job_ids", "requester_uid")
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    requester_uid: int
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ..., requester_uid: _Optional[int] = ...) -> None: ...

class PriorityFactorsRequest(_message.Message):
    __slots__ = ("job_ids", "users", "partitions")
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    users: _containers.RepeatedScalarFieldContainer[str]
    partitions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ..., users: _Optional[_Iterable[str]] = ..., partitions: _Optional[_Iterable[str]] = ...) -> None: ...

class JobPriorityFactors(_message.Message):
    __slots__ = ("job_id", "partition", "user", "account", "qos", "priority", "site", "age", "assoc", "fairshare", "job_size", "partition_factor", "qos_factor", "nice")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    QOS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    AGE_FIELD_NUMBER: _ClassVar[int]
    ASSOC_FIELD_NUMBER: _ClassVar[int]
    FAIRSHARE_FIELD_NUMBER: _ClassVar[int]
    JOB_SIZE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    QOS_FACTOR_FIELD_NUMBER: _ClassVar[int]
    NICE_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    partition: str
    user: str
    account: str
    qos: str
    priority: int
    site: int
    age: float
    assoc: float
    fairshare: float
    job_size: float
    partition_factor: float
    qos_factor: float
    nice: int
    def __init__(self, job_id: _Optional[int] = ..., partition: _Optional[str] = ..., user: _Optional[str] = ..., account: _Optional[str] = ..., qos: _Optional[str] = ..., priority: _Optional[int] = ..., site: _Optional[int] = ..., age: _Optional[float] = ..., assoc: _Optional[float] = ..., fairshare: _Optional[float] = ..., job_size: _Optional[float] = ..., partition_factor: _Optional[float] = ..., qos_factor: _Optional[float] = ..., nice: _Optional[int] = ...) -> None: ...

class PriorityFactorsResponse(_message.Message):
    __slots__ = ("priority_type", "weights", "jobs")
    class WeightsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    PRIORITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    priority_type: str
    weights: _containers.ScalarMap[str, int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobPriorityFactors]
    def __init__(self, priority_type: _Optional[str] = ..., weights: _Optional[_Mapping[str, int]] = ..., jobs: _Optional[_Iterable[_Union[JobPriorityFactors, _Mapping]]] = ...) -> None: ...

class HoldJobsRequest(_message.Message):
    __slots__ = ("job_ids", "action", "requester_uid")
    class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        HOLD: _ClassVar[HoldJobsRequest.Action]
        USER_HOLD: _ClassVar[HoldJobsRequest.Action]
        RELEASE: _ClassVar[HoldJobsRequest.Action]
    HOLD: HoldJobsRequest.Action
    USER_HOLD: HoldJobsRequest.Action
    RELEASE: HoldJobsRequest.Action
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    action: HoldJobsRequest.Action
    requester_uid: int
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ..., action: _Optional[_Union[HoldJobsRequest.Action, str]] = ..., requester_uid: _Optional[int] = ...) -> None: ...

class RequeueJobsRequest(_message.Message):
    __slots__ = ("job_ids", "hold", "requester_uid")
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    hold: bool
    requester_uid: int
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ..., hold: _Optional[bool] = ..., requester_uid: _Optional[int] = ...) -> None: ...

class JobControlResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CancelResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CancelResult, _Mapping]]] = ...) -> None: ...

class NetIfaceStatus(_message.Message):
    __slots__ = ("name", "desired", "live", "ok")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESIRED_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    name: str
    desired: str
    live: str
    ok: bool
    def __init__(self, name: _Optional[str] = ..., desired: _Optional[str] = ..., live: _Optional[str] = ..., ok: _Optional[bool] = ...) -> None: ...

class NetUplinkStatus(_message.Message):
    __slots__ = ("name", "active")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    name: str
    active: str
    def __init__(self, name: _Optional[str] = ..., active: _Optional[str] = ...) -> None: ...

class NetRdmaPort(_message.Message):
    __slots__ = ("device", "port", "state", "phys_state", "link_layer", "rate", "netdev")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PHYS_STATE_FIELD_NUMBER: _ClassVar[int]
    LINK_LAYER_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    NETDEV_FIELD_NUMBER: _ClassVar[int]
    device: str
    port: int
    state: str
    phys_state: str
    link_layer: str
    rate: str
    netdev: str
    def __init__(self, device: _Optional[str] = ..., port: _Optional[int] = ..., state: _Optional[str] = ..., phys_state: _Optional[str] = ..., link_layer: _Optional[str] = ..., rate: _Optional[str] = ..., netdev: _Optional[str] = ...) -> None: ...

class NetStatusReport(_message.Message):
    __slots__ = ("profile", "state", "message", "interfaces", "uplinks", "rdma", "changes", "time")
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    INTERFACES_FIELD_NUMBER: _ClassVar[int]
    UPLINKS_FIELD_NUMBER: _ClassVar[int]
    RDMA_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    profile: str
    state: str
    message: str
    interfaces: _containers.RepeatedCompositeFieldContainer[NetIfaceStatus]
    uplinks: _containers.RepeatedCompositeFieldContainer[NetUplinkStatus]
    rdma: _containers.RepeatedCompositeFieldContainer[NetRdmaPort]
    changes: _containers.RepeatedScalarFieldContainer[str]
    time: float
    def __init__(self, profile: _Optional[str] = ..., state: _Optional[str] = ..., message: _Optional[str] = ..., interfaces: _Optional[_Iterable[_Union[NetIfaceStatus, _Mapping]]] = ..., uplinks: _Optional[_Iterable[_Union[NetUplinkStatus, _Mapping]]] = ..., rdma: _Optional[_Iterable[_Union[NetRdmaPort, _Mapping]]] = ..., changes: _Optional[_Iterable[str]] = ..., time: _Optional[float] = ...) -> None: ...

class NetReconfigureRequest(_message.Message):
    __slots__ = ("requester_uid",)
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    requester_uid: int
    def __init__(self, requester_uid: _Optional[int] = ...) -> None: ...

class NetReconfigureResponse(_message.Message):
    __slots__ = ("pushed",)
    PUSHED_FIELD_NUMBER: _ClassVar[int]
    pushed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, pushed: _Optional[_Iterable[str]] = ...) -> None: ...

class GetBatchScriptRequest(_message.Message):
    __slots__ = ("job_id", "requester_uid")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    requester_uid: int
    def __init__(self, job_id: _Optional[int] = ..., requester_uid: _Optional[int] = ...) -> None: ...

class GetBatchScriptResponse(_message.Message):
    __slots__ = ("script", "job_id")
    SCRIPT_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    script: str
    job_id: int
    def __init__(self, script: _Optional[str] = ..., job_id: _Optional[int] = ...) -> None: ...

class SetCrontabRequest(_message.Message):
    __slots__ = ("user", "text", "entries", "requester_uid", "requester")
    USER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_FIELD_NUMBER: _ClassVar[int]
    user: str
    text: str
    entries: _containers.RepeatedCompositeFieldContainer[JobSpec]
    requester_uid: int
    requester: str
    def __init__(self, user: _Optional[str] = ..., text: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[JobSpec, _Mapping]]] = ..., requester_uid: _Optional[int] = ..., requester: _Optional[str] = ...) -> None: ...

class SetCrontabResponse(_message.Message):
    __slots__ = ("job_ids",)
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class GetCrontabRequest(_message.Message):
    __slots__ = ("user", "requester_uid", "requester")
    USER_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_FIELD_NUMBER: _ClassVar[int]
    user: str
    requester_uid: int
    requester: str
    def __init__(self, user: _Optional[str] = ..., requester_uid: _Optional[int] = ..., requester: _Optional[str] = ...) -> None: ...

class GetCrontabResponse(_message.Message):
    __slots__ = ("found", "text")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    found: bool
    text: str
    def __init__(self, found: _Optional[bool] = ..., text: _Optional[str] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("after", "job_ids", "nodes")
    AFTER_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    after: int
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    nodes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, after: _Optional[int] = ..., job_ids: _Optional[_Iterable[int]] = ..., nodes: _Optional[_Iterable[str]] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ("cursor", "time", "job_id", "node", "kind", "state", "previous_state", "text", "exit_code")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_STATE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    cursor: int
    time: int
    job_id: int
    node: str
    kind: str
    state: str
    previous_state: str
    text: str
    exit_code: int
    def __init__(self, cursor: _Optional[int] = ..., time: _Optional[int] = ..., job_id: _Optional[int] = ..., node: _Optional[str] = ..., kind: _Optional[str] = ..., state: _Optional[str] = ..., previous_state: _Optional[str] = ..., text: _Optional[str] = ..., exit_code: _Optional[int] = ...) -> None: ...

class AttachStepRequest(_message.Message):
    __slots__ = ("job_id", "step_id", "requester_uid")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    step_id: int
    requester_uid: int
    def __init__(self, job_id: _Optional[int] = ..., step_id: _Optional[int] = ..., requester_uid: _Optional[int] = ...) -> None: ...

class ReadJobOutputRequest(_message.Message):
    __slots__ = ("job_id", "offset", "follow", "requester_uid")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    offset: int
    follow: bool
    requester_uid: int
    def __init__(self, job_id: _Optional[int] = ..., offset: _Optional[int] = ..., follow: _Optional[bool] = ..., requester_uid: _Optional[int] = ...) -> None: ...

class JobOutputChunk(_message.Message):
    __slots__ = ("offset", "data", "node")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    offset: int
    data: bytes
    node: str
    def __init__(self, offset: _Optional[int] = ..., data: _Optional[bytes] = ..., node: _Optional[str] = ...) -> None: ...

class AcctMgrRequest(_message.Message):
    __slots__ = ("verb", "entity", "names", "where", "set", "dry_run", "requester_uid", "requester")
    class WhereEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class SetEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VERB_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_UID_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_FIELD_NUMBER: _ClassVar[int]
    verb: str
    entity: str
    names: _containers.RepeatedScalarFieldContainer[str]
    where: _containers.ScalarMap[str, str]
    set: _containers.ScalarMap[str, str]
    dry_run: bool
    requester_uid: int
    requester: str
    def __init__(self, verb: _Optional[str] = ..., entity: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ..., where: _Optional[_Mapping[str, str]] = ..., set: _Optional[_Mapping[str, str]] = ..., dry_run: _Optional[bool] = ..., requester_uid: _Optional[int] = ..., requester: _Optional[str] = ...) -> None: ...

class AssocKey(_message.Message):
    __slots__ = ("cluster", "account", "user", "partition", "parent")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    account: str
    user: str
    partition: str
    parent: str
    def __init__(self, cluster: _Optional[str] = ..., account: _Optional[str] = ..., user: _Optional[str] = ..., partition: _Optional[str] = ..., parent: _Optional[str] = ...) -> None: ...

class AcctMgrResponse(_message.Message):
    __slots__ = ("names", "assocs", "new_users")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    ASSOCS_FIELD_NUMBER: _ClassVar[int]
    NEW_USERS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    assocs: _containers.RepeatedCompositeFieldContainer[AssocKey]
    new_users: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ..., assocs: _Optional[_Iterable[_Union[AssocKey, _Mapping]]] = ..., new_users: _Optional[_Iterable[str]] = ...) -> None: ...

class AccountInfo(_message.Message):
    __slots__ = ("name", "description", "organization", "parent")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ORGANIZATION_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    organization: str
    parent: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., organization: _Optional[str] = ..., parent: _Optional[str] = ...) -> None: ...

class AcctUserInfo(_message.Message):
    __slots__ = ("name", "default_account", "admin_level")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    ADMIN_LEVEL_FIELD_NUMBER: _ClassVar[int]
    name: str
    default_account: str
    admin_level: str
    def __init__(self, name: _Optional[str] = ..., default_account: _Optional[str] = ..., admin_level: _Optional[str] = ...) -> None: ...

class AssocInfo(_message.Message):
    __slots__ = ("id", "cluster", "account", "user", "partition", "parent", "shares", "grp_tres", "grp_jobs", "grp_submit_jobs", "max_tres_per_job", "max_jobs", "max_submit_jobs", "max_wall_min", "qos", "default_qos", "raw_usage", "norm_shares", "norm_usage", "effective_usage", "fairshare", "level_fs")
    ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    SHARES_FIELD_NUMBER: _ClassVar[int]
    GRP_TRES_FIELD_NUMBER: _ClassVar[int]
    GRP_JOBS_FIELD_NUMBER: _ClassVar[int]
    GRP_SUBMIT_JOBS_FIELD_NUMBER: _ClassVar[int]
    MAX_TRES_PER_JOB_FIELD_NUMBER: _ClassVar[int]
    MAX_JOBS_FIELD_NUMBER: _ClassVar[int]
    MAX_SUBMIT_JOBS_FIELD_NUMBER: _ClassVar[int]
    MAX_WALL_MIN_FIELD_NUMBER: _ClassVar[int]
    QOS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_QOS_FIELD_NUMBER: _ClassVar[int]
    RAW_USAGE_FIELD_NUMBER: _ClassVar[int]
    NORM_SHARES_FIELD_NUMBER: _ClassVar[int]
    NORM_USAGE_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_USAGE_FIELD_NUMBER: _ClassVar[int]
    FAIRSHARE_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FS_FIELD_NUMBER: _ClassVar[int]
    id: int
    cluster: str
    account: str
    user: str
    partition: str
    parent: str
    shares: int
    grp_tres: str
    grp_jobs: int
    grp_submit_jobs: int
    max_tres_per_job: str
    max_jobs: int
    max_submit_jobs: int
    max_wall_min: int
    qos: str
    default_qos: str
    raw_usage: float
    norm_shares: float
    norm_usage: float
    effective_usage: float
    fairshare: float
    level_fs: float
    def __init__(self, id: _Optional[int] = ..., cluster: _Optional[str] = ..., account: _Optional[str] = ..., user: _Optional[str] = ..., partition: _Optional[str] = ..., parent: _Optional[str] = ..., shares: _Optional[int] = ..., grp_tres: _Optional[str] = ..., grp_jobs: _Optional[int] = ..., grp_submit_jobs: _Optional[int] = ..., max_tres_per_job: _Optional[str] = ..., max_jobs: _Optional[int] = ..., max_submit_jobs: _Optional[int] = ..., max_wall_min: _Optional[int] = ..., qos: _Optional[str] = ..., default_qos: _Optional[str] = ..., raw_usage: _Optional[float] = ..., norm_shares: _Optional[float] = ..., norm_usage: _Optional[float] = ..., effective_usage: _Optional[float] = ..., fairshare: _Optional[float] = ..., level_fs: _Optional[float] = ...) -> None: ...

class QosInfo(_message.Message):
    __slots__ = ("name", "description", "priority", "usage_factor", "grp_tres", "max_tres_per_user", "max_tres_per_job", "max_jobs_per_user", "max_submit_jobs_per_user", "max_wall_min", "preempt", "preempt_mode", "flags", "grace_time", "preempt_exempt_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    USAGE_FACTOR_FIELD_NUMBER: _ClassVar[int]
    GRP_TRES_FIELD_NUMBER: _ClassVar[int]
    MAX_TRES_PER_USER_FIELD_NUMBER: _ClassVar[int]
    MAX_TRES_PER_JOB_FIELD_NUMBER: _ClassVar[int]
    MAX_JOBS_PER_USER_FIELD_NUMBER: _ClassVar[int]
    MAX_SUBMIT_JOBS_PER_USER_FIELD_NUMBER: _ClassVar[int]
    MAX_WALL_MIN_FIELD_NUMBER: _ClassVar[int]
    PREEMPT_FIELD_NUMBER: _ClassVar[int]
    PREEMPT_MODE_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    GRACE_TIME_FIELD_NUMBER: _ClassVar[int]
    PREEMPT_EXEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    priority: int
    usage_factor: float
    grp_tres: str
    max_tres_per_user: str
    max_tres_per_job: str
    max_jobs_per_user: int
    max_submit_jobs_per_user: int
    max_wall_min: int
    preempt: str
    preempt_mode: str
    flags: str
    grace_time: int
    preempt_exempt_time: int
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., priority: _Optional[int] = ..., usage_factor: _Optional[float] = ..., grp_tres: _Optional[str] = ..., max_tres_per_user: _Optional[str] = ..., max_tres_per_job: _Optional[str] = ..., max_jobs_per_user: _Optional[int] = ..., max_submit_jobs_per_user: _Optional[int] = ..., max_wall_min: _Optional[int] = ..., preempt: _Optional[str] = ..., preempt_mode: _Optional[str] = ..., flags: _Optional[str] = ..., grace_time: _Optional[int] = ..., preempt_exempt_time: _Optional[int] = ...) -> None: ...

class GetAssociationsRequest(_message.Message):
    __slots__ = ("with_usage",)
    WITH_USAGE_FIELD_NUMBER: _ClassVar[int]
    with_usage: bool
    def __init__(self, with_usage: _Optional[bool] = ...) -> None: ...

class GetAssociationsResponse(_message.Message):
    __slots__ = ("cluster", "accounts", "users", "assocs", "qos")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTS_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    ASSOCS_FIELD_NUMBER: _ClassVar[int]
    QOS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    accounts: _containers.RepeatedCompositeFieldContainer[AccountInfo]
    users: _containers.RepeatedCompositeFieldContainer[AcctUserInfo]
    assocs: _containers.RepeatedCompositeFieldContainer[AssocInfo]
    qos: _containers.RepeatedCompositeFieldContainer[QosInfo]
    def __init__(self, cluster: _Optional[str] = ..., accounts: _Optional[_Iterable[_Union[AccountInfo, _Mapping]]] = ..., users: _Optional[_Iterable[_Union[AcctUserInfo, _Mapping]]] = ..., assocs: _Optional[_Iterable[_Union[AssocInfo, _Mapping]]] = ..., qos: _Optional[_Iterable[_Union[QosInfo, _Mapping]]] = ...) -> None: ...

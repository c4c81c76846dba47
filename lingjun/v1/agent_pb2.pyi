from lingjun.v1 import api_pb2 as _api_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Inventory(_message.Message):
    __slots__ = ("hostname", "cpus", "real_memory_mb", "free_memory_mb", "gpus", "sockets", "cores_per_socket", "threads_per_core", "arch", "os", "boot_time", "cpu_load", "address", "tmp_disk_mb", "gpu_type", "sanity_port", "gpu_devices", "gpus_discovered", "leaf_switch")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    REAL_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    FREE_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    SOCKETS_FIELD_NUMBER: _ClassVar[int]
    CORES_PER_SOCKET_FIELD_NUMBER: _ClassVar[int]
    THREADS_PER_CORE_FIELD_NUMBER: _ClassVar[int]
    ARCH_FIELD_NUMBER: _ClassVar[int]
    OS_FIELD_NUMBER: _ClassVar[int]
    BOOT_TIME_FIELD_NUMBER: _ClassVar[int]
    CPU_LOAD_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TMP_DISK_MB_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    SANITY_PORT_FIELD_NUMBER: _ClassVar[int]
    GPU_DEVICES_FIELD_NUMBER: _ClassVar[int]
    GPUS_DISCOVERED_FIELD_NUMBER: _ClassVar[int]
    LEAF_SWITCH_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    cpus: int
    real_memory_mb: int
    free_memory_mb: int
    gpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    arch: str
    os: str
    boot_time: int
    cpu_load: float
    address: str
    tmp_disk_mb: int
    gpu_type: str
    sanity_port: int
    gpu_devices: _containers.RepeatedCompositeFieldContainer[_api_pb2.GpuDevice]
    gpus_discovered: bool
    leaf_switch: str
    def __init__(self, hostname: _Optional[str] = ..., cpus: _Optional[int] = ..., real_memory_mb: _Optional[int] = ..., free_memory_mb: _Optional[int] = ..., gpus: _Optional[int] = ..., sockets: _Optional[int] = ..., cores_per_socket: _Optional[int] = ..., threads_per_core: _Optional[int] = ..., arch: _Optional[str] = ..., os: _Optional[str] = ..., boot_time: _Optional[int] = ..., cpu_load: _Optional[float] = ..., address: _Optional[str] = ..., tmp_disk_mb: _Optional[int] = ..., gpu_type: _Optional[str] = ..., sanity_port: _Optional[int] = ..., gpu_devices: _Optional[_Iterable[_Union[_api_pb2.GpuDevice, _Mapping]]] = ..., gpus_discovered: _Optional[bool] = ..., leaf_switch: _Optional[str] = ...) -> None: ...

class BatchFinished(_message.Message):
    __slots__ = ("job_id", "exit_code", "signal", "start_time", "end_time", "max_rss_kb", "error", "ave_rss_kb", "user_cpu_ms", "system_cpu_ms", "out_of_memory", "gpu_util_ave", "gpu_util_max", "gpu_mem_ave_kb", "gpu_mem_max_kb")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    MAX_RSS_KB_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    AVE_RSS_KB_FIELD_NUMBER: _ClassVar[int]
    USER_CPU_MS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_CPU_MS_FIELD_NUMBER: _ClassVar[int]
    OUT_OF_MEMORY_FIELD_NUMBER: _ClassVar[int]
    GPU_UTIL_AVE_FIELD_NUMBER: _ClassVar[int]
    GPU_UTIL_MAX_FIELD_NUMBER: _ClassVar[int]
    GPU_MEM_AVE_KB_FIELD_NUMBER: _ClassVar[int]
    GPU_MEM_MAX_KB_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    exit_code: int
    signal: int
    start_time: int
    end_time: int
    max_rss_kb: int
    error: str
    ave_rss_kb: int
    user_cpu_ms: int
    system_cpu_ms: int
    out_of_memory: bool
    gpu_util_ave: int
    gpu_util_max: int
    gpu_mem_ave_kb: int
    gpu_mem_max_kb: int
    def __init__(self, job_id: _Optional[int] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., start_time: _Optional[int] = ..., end_time: _Optional[int] = ..., max_rss_kb: _Optional[int] = ..., error: _Optional[str] = ..., ave_rss_kb: _Optional[int] = ..., user_cpu_ms: _Optional[int] = ..., system_cpu_ms: _Optional[int] = ..., out_of_memory: _Optional[bool] = ..., gpu_util_ave: _Optional[int] = ..., gpu_util_max: _Optional[int] = ..., gpu_mem_ave_kb: _Optional[int] = ..., gpu_mem_max_kb: _Optional[int] = ...) -> None: ...

class Register(_message.Message):
    __slots__ = ("node_name", "inventory", "running_job_ids", "unacked", "agent_start_time", "version", "sanity", "steps")
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    INVENTORY_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    UNACKED_FIELD_NUMBER: _ClassVar[int]
    AGENT_START_TIME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SANITY_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    inventory: Inventory
    running_job_ids: _containers.RepeatedScalarFieldContainer[int]
    unacked: _containers.RepeatedCompositeFieldContainer[BatchFinished]
    agent_start_time: int
    version: str
    sanity: _containers.RepeatedCompositeFieldContainer[_api_pb2.SanityResult]
    steps: _containers.RepeatedCompositeFieldContainer[StepHeld]
    def __init__(self, node_name: _Optional[str] = ..., inventory: _Optional[_Union[Inventory, _Mapping]] = ..., running_job_ids: _Optional[_Iterable[int]] = ..., unacked: _Optional[_Iterable[_Union[BatchFinished, _Mapping]]] = ..., agent_start_time: _Optional[int] = ..., version: _Optional[str] = ..., sanity: _Optional[_Iterable[_Union[_api_pb2.SanityResult, _Mapping]]] = ..., steps: _Optional[_Iterable[_Union[StepHeld, _Mapping]]] = ...) -> None: ...

class StepHeld(_message.Message):
    __slots__ = ("job_id", "step_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    step_id: int
    def __init__(self, job_id: _Optional[int] = ..., step_id: _Optional[int] = ...) -> None: ...

class StreamOffset(_message.Message):
    __slots__ = ("rank", "stream", "offset")
    RANK_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    rank: int
    stream: int
    offset: int
    def __init__(self, rank: _Optional[int] = ..., stream: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class StepResume(_message.Message):
    __slots__ = ("job_id", "step_id", "offsets")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    step_id: int
    offsets: _containers.RepeatedCompositeFieldContainer[StreamOffset]
    def __init__(self, job_id: _Optional[int] = ..., step_id: _Optional[int] = ..., offsets: _Optional[_Iterable[_Union[StreamOffset, _Mapping]]] = ...) -> None: ...

class StepForget(_message.Message):
    __slots__ = ("job_id", "step_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    step_id: int
    def __init__(self, job_id: _Optional[int] = ..., step_id: _Optional[int] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("seq", "sent_at", "free_memory_mb", "cpu_load", "running_job_ids", "activity")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    FREE_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    CPU_LOAD_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    seq: int
    sent_at: float
    free_memory_mb: int
    cpu_load: float
    running_job_ids: _containers.RepeatedScalarFieldContainer[int]
    activity: _containers.RepeatedCompositeFieldContainer[JobActivity]
    def __init__(self, seq: _Optional[int] = ..., sent_at: _Optional[float] = ..., free_memory_mb: _Optional[int] = ..., cpu_load: _Optional[float] = ..., running_job_ids: _Optional[_Iterable[int]] = ..., activity: _Optional[_Iterable[_Union[JobActivity, _Mapping]]] = ...) -> None: ...

class JobActivity(_message.Message):
    __slots__ = ("job_id", "last_activity", "quiet_ranks")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    QUIET_RANKS_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    last_activity: float
    quiet_ranks: _containers.RepeatedCompositeFieldContainer[RankActivity]
    def __init__(self, job_id: _Optional[int] = ..., last_activity: _Optional[float] = ..., quiet_ranks: _Optional[_Iterable[_Union[RankActivity, _Mapping]]] = ...) -> None: ...

class RankActivity(_message.Message):
    __slots__ = ("step_id", "rank", "last_activity")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    rank: int
    last_activity: float
    def __init__(self, step_id: _Optional[int] = ..., rank: _Optional[int] = ..., last_activity: _Optional[float] = ...) -> None: ...

class BatchStarted(_message.Message):
    __slots__ = ("job_id", "pid", "launcher_port")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    LAUNCHER_PORT_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    pid: int
    launcher_port: int
    def __init__(self, job_id: _Optional[int] = ..., pid: _Optional[int] = ..., launcher_port: _Optional[int] = ...) -> None: ...

class AgentTaskOutput(_message.Message):
    __slots__ = ("job_id", "step_id", "rank", "stream", "data", "offset")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    step_id: int
    rank: int
    stream: int
    data: bytes
    offset: int
    def __init__(self, job_id: _Optional[int] = ..., step_id: _Optional[int] = ..., rank: _Optional[int] = ..., stream: _Optional[int] = ..., data: _Optional[bytes] = ..., offset: _Optional[int] = ...) -> None: ...

class AgentTaskExit(_message.Message):
    __slots__ = ("job_id", "step_id", "rank", "exit_code", "signal", "error", "max_rss_kb", "ave_rss_kb", "user_cpu_ms", "system_cpu_ms", "gpu_util_ave", "gpu_util_max", "gpu_mem_ave_kb", "gpu_mem_max_kb")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MAX_RSS_KB_FIELD_NUMBER: _ClassVar[int]
    AVE_RSS_KB_FIELD_NUMBER: _ClassVar[int]
    USER_CPU_MS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_CPU_MS_FIELD_NUMBER: _ClassVar[int]
    GPU_UTIL_AVE_FIELD_NUMBER: _ClassVar[int]
    GPU_UTIL_MAX_FIELD_NUMBER: _ClassVar[int]
    GPU_MEM_AVE_KB_FIELD_NUMBER: _ClassVar[int]
    GPU_MEM_MAX_KB_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    step_id: int
    rank: int
    exit_code: int
    signal: int
    error: str
    max_rss_kb: int
    ave_rss_kb: int
    user_cpu_ms: int
    system_cpu_ms: int
    gpu_util_ave: int
    gpu_util_max: int
    gpu_mem_ave_kb: int
    gpu_mem_max_kb: int
    def __init__(self, job_id: _Optional[int] = ..., step_id: _Optional[int] = ..., rank: _Optional[int] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., error: _Optional[str] = ..., max_rss_kb: _Optional[int] = ..., ave_rss_kb: _Optional[int] = ..., user_cpu_ms: _Optional[int] = ..., system_cpu_ms: _Optional[int] = ..., gpu_util_ave: _Optional[int] = ..., gpu_util_max: _Optional[int] = ..., gpu_mem_ave_kb: _Optional[int] = ..., gpu_mem_max_kb: _Optional[int] = ...) -> None: ...

class JobCleaned(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    def __init__(self, job_id: _Optional[int] = ...) -> None: ...

class NetInterfaceSpec(_message.Message):
    __slots__ = ("name", "mac", "address", "mtu", "table", "gateway", "rule_priority", "sysctl", "rdma_device")
    class SysctlEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MTU_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_FIELD_NUMBER: _ClassVar[int]
    RULE_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    SYSCTL_FIELD_NUMBER: _ClassVar[int]
    RDMA_DEVICE_FIELD_NUMBER: _ClassVar[int]
    name: str
    mac: str
    address: str
    mtu: int
    table: int
    gateway: str
    rule_priority: int
    sysctl: _containers.ScalarMap[str, int]
    rdma_device: str
    def __init__(self, name: _Optional[str] = ..., mac: _Optional[str] = ..., address: _Optional[str] = ..., mtu: _Optional[int] = ..., table: _Optional[int] = ..., gateway: _Optional[str] = ..., rule_priority: _Optional[int] = ..., sysctl: _Optional[_Mapping[str, int]] = ..., rdma_device: _Optional[str] = ...) -> None: ...

class NetUplinkSpec(_message.Message):
    __slots__ = ("name", "primary", "backup", "target", "primary_gateway", "backup_gateway", "source", "hold_down_s", "probe", "probe_interval_s", "probe_timeout_s")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_FIELD_NUMBER: _ClassVar[int]
    BACKUP_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_GATEWAY_FIELD_NUMBER: _ClassVar[int]
    BACKUP_GATEWAY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    HOLD_DOWN_S_FIELD_NUMBER: _ClassVar[int]
    PROBE_FIELD_NUMBER: _ClassVar[int]
    PROBE_INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    PROBE_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    name: str
    primary: str
    backup: str
    target: str
    primary_gateway: str
    backup_gateway: str
    source: str
    hold_down_s: float
    probe: str
    probe_interval_s: float
    probe_timeout_s: float
    def __init__(self, name: _Optional[str] = ..., primary: _Optional[str] = ..., backup: _Optional[str] = ..., target: _Optional[str] = ..., primary_gateway: _Optional[str] = ..., backup_gateway: _Optional[str] = ..., source: _Optional[str] = ..., hold_down_s: _Optional[float] = ..., probe: _Optional[str] = ..., probe_interval_s: _Optional[float] = ..., probe_timeout_s: _Optional[float] = ...) -> None: ...

class NetProfileSpec(_message.Message):
    __slots__ = ("name", "interfaces", "uplinks")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INTERFACES_FIELD_NUMBER: _ClassVar[int]
    UPLINKS_FIELD_NUMBER: _ClassVar[int]
    name: str
    interfaces: _containers.RepeatedCompositeFieldContainer[NetInterfaceSpec]
    uplinks: _containers.RepeatedCompositeFieldContainer[NetUplinkSpec]
    def __init__(self, name: _Optional[str] = ..., interfaces: _Optional[_Iterable[_Union[NetInterfaceSpec, _Mapping]]] = ..., uplinks: _Optional[_Iterable[_Union[NetUplinkSpec, _Mapping]]] = ...) -> None: ...

class AuthChallenge(_message.Message):
    __slots__ = ("nonce", "controller_time_ms", "controller_mac")
    NONCE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_MAC_FIELD_NUMBER: _ClassVar[int]
    nonce: bytes
    controller_time_ms: int
    controller_mac: bytes
    def __init__(self, nonce: _Optional[bytes] = ..., controller_time_ms: _Optional[int] = ..., controller_mac: _Optional[bytes] = ...) -> None: ...

class AuthHello(_message.Message):
    __slots__ = ("node_name", "nonce")
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    nonce: bytes
    def __init__(self, node_name: _Optional[str] = ..., nonce: _Optional[bytes] = ...) -> None: ...

class AuthProof(_message.Message):
    __slots__ = ("node_name", "nonce", "time_ms", "mac")
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    nonce: bytes
    time_ms: int
    mac: bytes
    def __init__(self, node_name: _Optional[str] = ..., nonce: _Optional[bytes] = ..., time_ms: _Optional[int] = ..., mac: _Optional[bytes] = ...) -> None: ...

class SanityReport(_message.Message):
    __slots__ = ("phase", "job_id", "results", "unreachable")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    UNREACHABLE_FIELD_NUMBER: _ClassVar[int]
    phase: str
    job_id: int
    results: _containers.RepeatedCompositeFieldContainer[_api_pb2.SanityResult]
    unreachable: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, phase: _Optional[str] = ..., job_id: _Optional[int] = ..., results: _Optional[_Iterable[_Union[_api_pb2.SanityResult, _Mapping]]] = ..., unreachable: _Optional[_Iterable[str]] = ...) -> None: ...

class SanityPeer(_message.Message):
    __slots__ = ("node", "address", "port")
    NODE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    node: str
    address: str
    port: int
    def __init__(self, node: _Optional[str] = ..., address: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class SanityPrologRequest(_message.Message):
    __slots__ = ("job_id", "peers", "extended", "bandwidth_bytes", "min_bandwidth_mbps")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    EXTENDED_FIELD_NUMBER: _ClassVar[int]
    BANDWIDTH_BYTES_FIELD_NUMBER: _ClassVar[int]
    MIN_BANDWIDTH_MBPS_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    peers: _containers.RepeatedCompositeFieldContainer[SanityPeer]
    extended: bool
    bandwidth_bytes: int
    min_bandwidth_mbps: float
    def __init__(self, job_id: _Optional[int] = ..., peers: _Optional[_Iterable[_Union[SanityPeer, _Mapping]]] = ..., extended: _Optional[bool] = ..., bandwidth_bytes: _Optional[int] = ..., min_bandwidth_mbps: _Optional[float] = ...) -> None: ...

class SanityClock(_message.Message):
    __slots__ = ("echo_sent_at", "controller_time", "echo_seq")
    ECHO_SENT_AT_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_TIME_FIELD_NUMBER: _ClassVar[int]
    ECHO_SEQ_FIELD_NUMBER: _ClassVar[int]
    echo_sent_at: float
    controller_time: float
    echo_seq: int
    def __init__(self, echo_sent_at: _Optional[float] = ..., controller_time: _Optional[float] = ..., echo_seq: _Optional[int] = ...) -> None: ...

class ReadOutput(_message.Message):
    __slots__ = ("read_id", "job_id", "path", "offset", "follow", "uid")
    READ_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    read_id: int
    job_id: int
    path: str
    offset: int
    follow: bool
    uid: int
    def __init__(self, read_id: _Optional[int] = ..., job_id: _Optional[int] = ..., path: _Optional[str] = ..., offset: _Optional[int] = ..., follow: _Optional[bool] = ..., uid: _Optional[int] = ...) -> None: ...

class OutputChunk(_message.Message):
    __slots__ = ("read_id", "offset", "data", "ended", "error")
    READ_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    read_id: int
    offset: int
    data: bytes
    ended: bool
    error: str
    def __init__(self, read_id: _Optional[int] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., ended: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class AgentMessage(_message.Message):
    __slots__ = ("register", "heartbeat", "batch_started", "batch_finished", "task_output", "task_exit", "job_cleaned", "net_status", "auth_proof", "auth_hello", "sanity_report", "output_chunk")
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    BATCH_STARTED_FIELD_NUMBER: _ClassVar[int]
    BATCH_FINISHED_FIELD_NUMBER: _ClassVar[int]
    TASK_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TASK_EXIT_FIELD_NUMBER: _ClassVar[int]
    JOB_CLEANED_FIELD_NUMBER: _ClassVar[int]
    NET_STATUS_FIELD_NUMBER: _ClassVar[int]
    AUTH_PROOF_FIELD_NUMBER: _ClassVar[int]
    AUTH_HELLO_FIELD_NUMBER: _ClassVar[int]
    SANITY_REPORT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_CHUNK_FIELD_NUMBER: _ClassVar[int]
    register: Register
    heartbeat: Heartbeat
    batch_started: BatchStarted
    batch_finished: BatchFinished
    task_output: AgentTaskOutput
    task_exit: AgentTaskExit
    job_cleaned: JobCleaned
    net_status: _api_pb2.NetStatusReport
    auth_proof: AuthProof
    auth_hello: AuthHello
    sanity_report: SanityReport
    output_chunk: OutputChunk
    def __init__(self, register: _Optional[_Union[Register, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., batch_started: _Optional[_Union[BatchStarted, _Mapping]] = ..., batch_finished: _Optional[_Union[BatchFinished, _Mapping]] = ..., task_output: _Optional[_Union[AgentTaskOutput, _Mapping]] = ..., task_exit: _Optional[_Union[AgentTaskExit, _Mapping]] = ..., job_cleaned: _Optional[_Union[JobCleaned, _Mapping]] = ..., net_status: _Optional[_Union[_api_pb2.NetStatusReport, _Mapping]] = ..., auth_proof: _Optional[_Union[AuthProof, _Mapping]] = ..., auth_hello: _Optional[_Union[AuthHello, _Mapping]] = ..., sanity_report: _Optional[_Union[SanityReport, _Mapping]] = ..., output_chunk: _Optional[_Union[OutputChunk, _Mapping]] = ...) -> None: ...

class RegisterReply(_message.Message):
    __slots__ = ("accepted", "message", "controller_time", "heartbeat_interval_s", "expected_job_ids", "acked_job_ids", "net_profile", "heartbeat_timeout_s", "fence_grace_s", "resume_steps")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_TIME_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    ACKED_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    NET_PROFILE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    FENCE_GRACE_S_FIELD_NUMBER: _ClassVar[int]
    RESUME_STEPS_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    message: str
    controller_time: float
    heartbeat_interval_s: float
    expected_job_ids: _containers.RepeatedScalarFieldContainer[int]
    acked_job_ids: _containers.RepeatedScalarFieldContainer[int]
    net_profile: NetProfileSpec
    heartbeat_timeout_s: float
    fence_grace_s: float
    resume_steps: _containers.RepeatedCompositeFieldContainer[StepResume]
    def __init__(self, accepted: _Optional[bool] = ..., message: _Optional[str] = ..., controller_time: _Optional[float] = ..., heartbeat_interval_s: _Optional[float] = ..., expected_job_ids: _Optional[_Iterable[int]] = ..., acked_job_ids: _Optional[_Iterable[int]] = ..., net_profile: _Optional[_Union[NetProfileSpec, _Mapping]] = ..., heartbeat_timeout_s: _Optional[float] = ..., fence_grace_s: _Optional[float] = ..., resume_steps: _Optional[_Iterable[_Union[StepResume, _Mapping]]] = ...) -> None: ...

class JobShare(_message.Message):
    __slots__ = ("memory_bytes", "cpus", "gpu_ids", "mps_percentage")
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    MPS_PERCENTAGE_FIELD_NUMBER: _ClassVar[int]
    memory_bytes: int
    cpus: int
    gpu_ids: _containers.RepeatedScalarFieldContainer[int]
    mps_percentage: int
    def __init__(self, memory_bytes: _Optional[int] = ..., cpus: _Optional[int] = ..., gpu_ids: _Optional[_Iterable[int]] = ..., mps_percentage: _Optional[int] = ...) -> None: ...

class LaunchBatch(_message.Message):
    __slots__ = ("job_id", "script", "argv", "environment", "work_dir", "stdout_path", "stderr_path", "stdin_path", "uid", "gid", "user", "append", "launcher", "share")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    WORK_DIR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_PATH_FIELD_NUMBER: _ClassVar[int]
    STDERR_PATH_FIELD_NUMBER: _ClassVar[int]
    STDIN_PATH_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    APPEND_FIELD_NUMBER: _ClassVar[int]
    LAUNCHER_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    script: str
    argv: _containers.RepeatedScalarFieldContainer[str]
    environment: _containers.ScalarMap[str, str]
    work_dir: str
    stdout_path: str
    stderr_path: str
    stdin_path: str
    uid: int
    gid: int
    user: str
    append: bool
    launcher: str
    share: JobShare
    def __init__(self, job_id: _Optional[int] = ..., script: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., environment: _Optional[_Mapping[str, str]] = ..., work_dir: _Optional[str] = ..., stdout_path: _Optional[str] = ..., stderr_path: _Optional[str] = ..., stdin_path: _Optional[str] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., user: _Optional[str] = ..., append: _Optional[bool] = ..., launcher: _Optional[str] = ..., share: _Optional[_Union[JobShare, _Mapping]] = ...) -> None: ...

class TaskSpec(_message.Message):
    __slots__ = ("rank", "local_id", "environment", "stdout_path", "stderr_path")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RANK_FIELD_NUMBER: _ClassVar[int]
    LOCAL_ID_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    STDOUT_PATH_FIELD_NUMBER: _ClassVar[int]
    STDERR_PATH_FIELD_NUMBER: _ClassVar[int]
    rank: int
    local_id: int
    environment: _containers.ScalarMap[str, str]
    stdout_path: str
    stderr_path: str
    def __init__(self, rank: _Optional[int] = ..., local_id: _Optional[int] = ..., environment: _Optional[_Mapping[str, str]] = ..., stdout_path: _Optional[str] = ..., stderr_path: _Optional[str] = ...) -> None: ...

class LaunchTasks(_message.Message):
    __slots__ = ("job_id", "step_id", "argv", "environment", "work_dir", "tasks", "uid", "gid", "share", "step_memory_bytes")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    WORK_DIR_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    STEP_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    step_id: int
    argv: _containers.RepeatedScalarFieldContainer[str]
    environment: _containers.ScalarMap[str, str]
    work_dir: str
    tasks: _containers.RepeatedCompositeFieldContainer[TaskSpec]
    uid: int
    gid: int
    share: JobShare
    step_memory_bytes: int
    def __init__(self, job_id: _Optional[int] = ..., step_id: _Optional[int] = ..., argv: _Optional[_Iterable[str]] = ..., environment: _Optional[_Mapping[str, str]] = ..., work_dir: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[TaskSpec, _Mapping]]] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., share: _Optional[_Union[JobShare, _Mapping]] = ..., step_memory_bytes: _Optional[int] = ...) -> None: ...

class SignalJob(_message.Message):
    __slots__ = ("job_id", "signal", "batch_only", "step_id", "steps_only")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    BATCH_ONLY_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEPS_ONLY_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    signal: int
    batch_only: bool
    step_id: int
    steps_only: bool
    def __init__(self, job_id: _Optional[int] = ..., signal: _Optional[int] = ..., batch_only: _Optional[bool] = ..., step_id: _Optional[int] = ..., steps_only: _Optional[bool] = ...) -> None: ...

class TerminateJob(_message.Message):
    __slots__ = ("job_id", "grace_s", "reason", "announce", "cause")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    GRACE_S_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ANNOUNCE_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    grace_s: float
    reason: str
    announce: bool
    cause: str
    def __init__(self, job_id: _Optional[int] = ..., grace_s: _Optional[float] = ..., reason: _Optional[str] = ..., announce: _Optional[bool] = ..., cause: _Optional[str] = ...) -> None: ...

class AckBatchFinished(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    def __init__(self, job_id: _Optional[int] = ...) -> None: ...

class ControllerMessage(_message.Message):
    __slots__ = ("register_reply", "launch_batch", "launch_tasks", "signal_job", "terminate_job", "ack_batch_finished", "net_profile", "auth_challenge", "sanity_prolog", "sanity_clock", "resume_step", "forget_step", "read_output")
    REGISTER_REPLY_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_BATCH_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_TASKS_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_JOB_FIELD_NUMBER: _ClassVar[int]
    TERMINATE_JOB_FIELD_NUMBER: _ClassVar[int]
    ACK_BATCH_FINISHED_FIELD_NUMBER: _ClassVar[int]
    NET_PROFILE_FIELD_NUMBER: _ClassVar[int]
    AUTH_CHALLENGE_FIELD_NUMBER: _ClassVar[int]
    SANITY_PROLOG_FIELD_NUMBER: _ClassVar[int]
    SANITY_CLOCK_FIELD_NUMBER: _ClassVar[int]
    RESUME_STEP_FIELD_NUMBER: _ClassVar[int]
    FORGET_STEP_FIELD_NUMBER: _ClassVar[int]
    READ_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    register_reply: RegisterReply
    launch_batch: LaunchBatch
    launch_tasks: LaunchTasks
    signal_job: SignalJob
    terminate_job: TerminateJob
    ack_batch_finished: AckBatchFinished
    net_profile: NetProfileSpec
    auth_challenge: AuthChallenge
    sanity_prolog: SanityPrologRequest
    sanity_clock: SanityClock
    resume_step: StepResume
    forget_step: StepForget
    read_output: ReadOutput
    def __init__(self, register_reply: _Optional[_Union[RegisterReply, _Mapping]] = ..., launch_batch: _Optional[_Union[LaunchBatch, _Mapping]] = ..., launch_tasks: _Optional[_Union[LaunchTasks, _Mapping]] = ..., signal_job: _Optional[_Union[SignalJob, _Mapping]] = ..., terminate_job: _Optional[_Union[TerminateJob, _Mapping]] = ..., ack_batch_finished: _Optional[_Union[AckBatchFinished, _Mapping]] = ..., net_profile: _Optional[_Union[NetProfileSpec, _Mapping]] = ..., auth_challenge: _Optional[_Union[AuthChallenge, _Mapping]] = ..., sanity_prolog: _Optional[_Union[SanityPrologRequest, _Mapping]] = ..., sanity_clock: _Optional[_Union[SanityClock, _Mapping]] = ..., resume_step: _Optional[_Union[StepResume, _Mapping]] = ..., forget_step: _Optional[_Union[StepForget, _Mapping]] = ..., read_output: _Optional[_Union[ReadOutput, _Mapping]] = ...) -> None: ...

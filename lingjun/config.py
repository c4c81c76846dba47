"""Typed configuration, parsed once from one TOML file.

Every key has a default that works on one machine, so an empty file (or no
file) gives a one-partition cluster whose nodes are whatever agents register.

    cluster_name = "lingjun"

    [controller]
    listen = "127.0.0.1:6917"       # API and agent channel; Slurm uses 6817-6819
    state_dir = "/var/lib/lingjun"
    enforce_part_limits = "NO"      # NO | ANY | ALL, as Slurm's EnforcePartLimits
    heartbeat_timeout_s = 60.0      # silence this long: the node is DOWN (SlurmdTimeout)
    fence_grace_s = -1              # a silent node's fence: SIGTERM .. SIGKILL (-1: kill_wait_s)
    fence_margin_s = -1             # DOWN .. a requeued attempt may start (-1: grace + 2 s)

    [[nodes]]
    names = "node[1-4]"             # a hostlist expression
    cpus = 2
    memory_mb = 2000

    [[partitions]]
    name = "debug"
    nodes = "node[1-4]"             # or "ALL"
    default = true
    max_time = "UNLIMITED"          # Slurm time syntax

    [network]                       # optional: NIC profiles the agents apply
    rdma_sysfs_root = "/sys/class/infiniband"
    [[network.profile]]
    name = "rails"
    nodes = "node[1-4]"             # node1 gets each base address, node2 base+1...
    [[network.profile.interface]]
    name = "rail0"                  # or mac = "..."
    address = "10.0.0.11/24"
    mtu = 4200
    table = 100                     # per-rail table, rule "from ADDRESS lookup 100"
    gateway = "10.0.0.1"
    [[network.profile.uplink]]
    name = "storage"
    primary = "upa"
    backup = "upb"
    target = "192.0.2.0/24"
    primary_gateway = "10.10.0.1"
    backup_gateway = "10.11.0.1"
    hold_down_s = 5.0               # the primary must stay up this long before traffic returns
    probe = "192.0.2.1"             # optional: ICMP echo through each NIC, not carrier alone

    [auth]                          # lingjun/auth.py, lingjun/credential.py
    key_file = "/etc/lingjun/cluster.key"   # `lingjun keygen`; mode 0600, same on every host
    socket = "/run/lingjun/auth.sock"   # the credential socket the commands ask
    token_ttl_s = 300.0             # user tokens expire (like munge's TTL)
    handshake_max_skew_s = 30.0     # agent clock vs controller clock at the handshake
    controller_serves_socket = true # the controller hands out tokens on `socket`
    agent_serves_socket = false     # agents hand out tokens on `socket` (login/compute nodes; one daemon per host)
    tls_cert = ""                   # PEM files: set cert+key on the controller to serve TLS,
    tls_key = ""                    # tls_ca on agents and commands to verify it
    tls_ca = ""
    [preempt]                       # optional: preemptible work (Slurm's PreemptType...)
    type = "partition_prio"         # or "none" (the default): no job preempts another
    mode = "REQUEUE"                # PreemptMode of partitions that name none: OFF|CANCEL|REQUEUE
    exempt_time_s = 0               # PreemptExemptTime: a job runs this long before it may be preempted

    [[partitions]]                  # per partition, with [preempt] type = "partition_prio":
    priority_tier = 2               # PriorityTier: a higher tier's pending job preempts lower tiers'
    preempt_mode = "OFF"            # this partition's jobs are never preempted ("" = [preempt] mode)
    grace_time_s = 3                # GraceTime: the victim's signal .. its end
    [authz]                         # who may do what, and how much one request may carry
    operators = ["alice"]           # users who may act on anyone's jobs and change nodes (root always may)
    max_message_bytes = 16777216    # a larger gRPC request is refused before it is decoded
    max_script_bytes = 4194304      # sbatch: "Batch script is too large"
    max_submit_jobs_per_user = 0    # Slurm's MaxSubmitJobsPerUser over pending+running jobs; 0 = none
    [sanity]                        # node health probes (SanityConfig lists every key)
    interval_s = 300.0
    scratch_paths = ["/scratch/{node}"]
    dropin_dir = "/etc/lingjun/probes.d"

lingjun_agent/network/profile.py documents every key of a profile.

    [faulttol]                      # restarts after failures (FaulttolConfig)
    restart_backoff_s = 10.0        # doubles per restart ...
    restart_backoff_max_s = 300.0   # ... up to this
    checkpoint_root = "/shared/ckpt"  # LINGJUN_CHECKPOINT_DIR = <root>/<job id>

    [accounting]                    # the job history sacct reads (AccountingConfig)
    purge_job_after = "12months"    # slurmdbd's PurgeJobAfter: N hours|days|months; "" = keep forever
"""
from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import hostlist

DEFAULT_PORT = 6917
DEFAULT_CONFIG_PATH = "/etc/lingjun/lingjun.toml"
ENFORCE_PART_LIMITS = ("NO", "ANY", "ALL")


# What a fence needs beyond its grace: the supervisor waking at the lease's
# end, the SIGKILL, the kernel tearing the processes down, and the two hosts'
# clocks drifting apart over one heartbeat timeout (NTP keeps that to ms).
FENCE_SLACK_S = 2.0


class ConfigError(ValueError):
    """The configuration file cannot be used; the message says why."""


@dataclass(frozen=True)
class NodeConfig:
    name: str
    cpus: int = 0                    # 0 = what the agent reports
    memory_mb: int = 0               # 0 = what the agent reports
    gpus: int = 0
    features: tuple[str, ...] = ()
    weight: int = 1
    gpu_type: str = ""               # GPU model ("a100") for --gres=gpu:TYPE:N; "" = untyped


@dataclass(frozen=True)
class PartitionConfig:
    name: str
    nodes: tuple[str, ...] | None = None   # None = every node
    default: bool = False
    state: str = "UP"
    max_time_min: int = -1
    default_time_min: int = -1
    max_nodes: int = -1
    min_nodes: int = 0
    priority_tier: int = 1
    # PreemptMode of this partition's jobs ("" = [preempt] mode) and
    # GraceTime, seconds between the victim's signal and its end.
    preempt_mode: str = ""
    grace_time_s: float = 0.0


@dataclass(frozen=True)
class ControllerConfig:
    listen: str = f"127.0.0.1:{DEFAULT_PORT}"
    address: str = ""                # how clients and agents reach it ("" = listen)
    state_dir: str = "/var/lib/lingjun"
    heartbeat_interval_s: float = 5.0
    heartbeat_timeout_s: float = 60.0
    kill_wait_s: float = 30.0        # Slurm's KillWait: SIGTERM .. SIGKILL
    scheduler_interval_s: float = 5.0
    synchronous: str = "FULL"        # SQLite synchronous pragma: FULL survives power loss
    job_requeue: bool = True         # Slurm's JobRequeue default
    min_job_age_s: float = 300.0     # finished jobs stay visible to squeue this long
    # Slurm's MaxArraySize: array indices run from 0 to max_array_size - 1.
    max_array_size: int = 1001
    # Slurm's DependencyParameters=kill_invalid_depend: cancel a job whose
    # dependency can never be satisfied (sbatch --kill-on-invalid-dep overrides).
    kill_invalid_depend: bool = False
    # A requeued job pends with reason BeginTime this long. Slurm waits
    # cred_expire+1 (121 s), an artefact of its credentials; short here.
    requeue_delay_s: float = 2.0
    # Slurm's EnforcePartLimits: NO accepts a job over its partition's limits and lets it
    # pend (PartitionNodeLimit, PartitionConfig, PartitionTimeLimit); ANY/ALL refuse it at
    # submission. A job names one partition here, so ANY and ALL decide alike.
    enforce_part_limits: str = "NO"
    # Fencing (lingjun_agent/launcher/lease.py). An agent's lease on its jobs
    # ends no later than the moment its node is declared DOWN; its supervisors
    # then need up to fence_grace_s (SIGTERM .. SIGKILL) to stop the job there.
    # A requeued attempt of a job of a DOWN node waits fence_margin_s after the
    # node went DOWN before it may start elsewhere. Negative = derived:
    # fence_grace_s + FENCE_SLACK_S, and fence_grace_s = kill_wait_s.
    fence_margin_s: float = -1.0
    fence_grace_s: float = -1.0

    @property
    def connect_address(self) -> str:
        return self.address or self.listen

    @property
    def fence_grace(self) -> float:
        """Seconds between the SIGTERM and the SIGKILL of a fence."""
        grace = self.kill_wait_s if self.fence_grace_s < 0 else self.fence_grace_s
        if self.fence_margin_s >= 0:     # the margin the operator set bounds the grace
            grace = min(grace, max(0.0, self.fence_margin_s - FENCE_SLACK_S))
        return grace

    @property
    def fence_margin(self) -> float:
        """Seconds from a node's DOWN until its jobs may start elsewhere."""
        if self.fence_margin_s >= 0:
            return self.fence_margin_s
        return self.fence_grace + FENCE_SLACK_S


@dataclass(frozen=True)
class AgentConfig:
    # Not inside the controller's (0700) state dir: a host that runs both must
    # still let users reach their job scripts through here (0711).
    state_dir: str = "/var/lib/lingjun-agent"
    reconnect_min_s: float = 0.2
    reconnect_max_s: float = 5.0
    # where the GPU device files (nvidia0, nvidia1, ...) are: a job's cgroup
    # denies it the ones of GPUs it was not given
    device_root: str = "/dev"


@dataclass(frozen=True)
class NetProfileConfig:
    """One [[network.profile]]: a profile for the nodes of a hostlist."""
    nodes: tuple[str, ...]
    profile: object                  # lingjun_agent.network.profile.Profile (base addresses)


@dataclass(frozen=True)
class NetworkConfig:
    rdma_sysfs_root: str = "/sys/class/infiniband"   # the agent's RDMA inventory reads here
    profiles: tuple[NetProfileConfig, ...] = ()

    def profile_for(self, node: str):
        """The node's own profile (its addresses offset by its place in the
        group's hostlist), or None when no profile names it."""
        from lingjun_agent.network import profile as netprofile
        for group in self.profiles:
            if node in group.nodes:
                return netprofile.for_node(group.profile, group.nodes.index(node))
        return None


def _network(table: dict) -> NetworkConfig:
    from lingjun_agent.network import profile as netprofile  # the model is the agent's
    table = dict(table)
    groups: list[NetProfileConfig] = []
    owner: dict[str, str] = {}
    for i, t in enumerate(table.pop("profile", [])):
        t = dict(t)
        where = f"[[network.profile]] #{i + 1}"
        if "nodes" not in t:
            raise ConfigError(f"{where}: nodes (a hostlist) is required")
        nodes = _expand(str(t.pop("nodes")))
        try:
            prof = netprofile.from_table(t, where)
            netprofile.check_static(prof)
            for k in range(len(nodes)):
                netprofile.for_node(prof, k)
        except netprofile.ProfileError as e:
            raise ConfigError(str(e)) from None
        for n in nodes:
            if n in owner:
                raise ConfigError(f"{where}: node {n} already has profile {owner[n]!r}")
            owner[n] = prof.name or where
        groups.append(NetProfileConfig(nodes=nodes, profile=prof))
    net = _take(table, NetworkConfig, "[network]")
    return replace(net, profiles=tuple(groups))


PREEMPT_TYPES = ("none", "partition_prio")
PREEMPT_MODES = ("OFF", "CANCEL", "REQUEUE")


@dataclass(frozen=True)
class PreemptConfig:
    """[preempt]: Slurm's PreemptType, PreemptMode and PreemptExemptTime."""
    type: str = "none"               # "none" | "partition_prio" (preempt/none, preempt/partition_prio)
    mode: str = "OFF"                # cluster PreemptMode: partitions without their own take it
    exempt_time_s: float = 0.0       # PreemptExemptTime: minimum run time before a job may be preempted

    @property
    def enabled(self) -> bool:
        """Any job may preempt another; which may be preempted is each partition's mode."""
        return self.type != "none"


def _preempt(table: dict) -> PreemptConfig:
    cfg = _take(dict(table), PreemptConfig, "[preempt]")
    kind = cfg.type.lower().removeprefix("preempt/")
    mode = cfg.mode.upper()
    if kind not in PREEMPT_TYPES:
        raise ConfigError(f"[preempt] type: {cfg.type!r} is not one of {', '.join(PREEMPT_TYPES)}")
    if mode not in PREEMPT_MODES:
        raise ConfigError(f"[preempt] mode: {cfg.mode!r} is not one of {', '.join(PREEMPT_MODES)}")
    if cfg.exempt_time_s < 0:
        raise ConfigError("[preempt] exempt_time_s: must not be negative")
    return replace(cfg, type=kind, mode=mode)


@dataclass(frozen=True)
class AuthConfig:
    """The cluster key, the credential socket and TLS (see the module docstring)."""
    key_file: str = "/etc/lingjun/cluster.key"
    socket: str = "/run/lingjun/auth.sock"
    token_ttl_s: float = 300.0
    handshake_max_skew_s: float = 30.0
    controller_serves_socket: bool = True
    agent_serves_socket: bool = False
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""

    @property
    def tls(self) -> bool:
        """Whether clients (agents, commands) speak TLS to the controller."""
        return bool(self.tls_ca or self.tls_cert)


def _auth(table: dict) -> AuthConfig:
    a = _take(table, AuthConfig, "[auth]")
    if bool(a.tls_cert) != bool(a.tls_key):
        raise ConfigError("[auth] tls_cert and tls_key go together")
    if a.token_ttl_s <= 0 or a.handshake_max_skew_s <= 0:
        raise ConfigError("[auth] token_ttl_s and handshake_max_skew_s must be positive")
    return a


@dataclass(frozen=True)
class AuthzConfig:
    """[authz]: operators and the limits on one request.

    Operators are Slurm's "Operator" admin level: they may cancel, hold,
    release, update and requeue anyone's jobs, read anyone's script, and
    change node states. Root (uid 0) always is one.
    """
    operators: tuple[str, ...] = ()
    max_message_bytes: int = 16 * 1024 * 1024
    max_script_bytes: int = 4 * 1024 * 1024
    max_submit_jobs_per_user: int = 0


@dataclass(frozen=True)
class FaulttolConfig:
    """What happens to a job after a failure (lingjund/service/restarts.py).

    Whether a job is requeued after its node is lost follows --requeue /
    --no-requeue, else ``[controller] job_requeue`` (Slurm's JobRequeue).
    """
    restart_backoff_s: float = 10.0      # wait before the first automatic restart
    restart_backoff_max_s: float = 300.0  # the backoff doubles per restart up to this
    # shared path of LINGJUN_CHECKPOINT_DIR; "" = <state_dir>/checkpoints, which only root's
    # jobs can enter (the state dir is 0700): set it on any cluster with other users
    checkpoint_root: str = ""
# XIDs that mean the GPU needs attention (Azure HPC health checks' list:
# 48 DBE, 63/64 page retirement / row remap, 74 NVLink, 79 fell off the bus, 92 high
# SBE, 94/95 contained/uncontained ECC, 119/120 GSP).
FATAL_XIDS = (48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 94, 95, 119, 120)
SANITY_PROBES = ("cpu", "memory", "disk", "clock", "processes", "gpu", "rdma", "nic")


@dataclass(frozen=True)
class SanityConfig:
    """[sanity]: the agents' node health probes (lingjun_agent/sanity/).

    Paths may hold ``{node}``, replaced by each agent's node name (so the
    local cluster's nodes, sharing one host, each get their own scratch).
    """
    enabled: bool = True
    interval_s: float = 300.0          # periodic pass (NHC's usual 300 s); 0 = none
    jitter: float = 0.1                # each wait is interval_s * (1 +- jitter)
    disabled: tuple[str, ...] = ()     # built-in probes not to run (names in SANITY_PROBES)
    severity: dict = field(default_factory=dict)   # probe -> "drain" | "warn" (defaults: probes.py)
    timeout_s: float = 10.0            # per probe
    prolog: bool = True                # probe a batch job's nodes before its script starts
    prolog_timeout_s: float = 30.0     # no answer by then = that node failed its prolog
    disk_min_free_pct: float = 1.0
    disk_min_free_mb: float = 64.0
    disk_min_free_inodes_pct: float = 1.0
    scratch_paths: tuple[str, ...] = ()  # besides the agent's spool and /tmp
    check_tmp: bool = True
    dropin_dir: str = ""               # every executable here is a probe ("" = none)
    clock_max_offset_s: float = 5.0
    min_free_memory_mb: int = 0        # 0 = not checked
    max_load_per_cpu: float = 0.0      # 0 = not checked
    zombie_max: int = 5                # defunct children of this node's jobs
    stray_user_min_uid: int = 0        # >0: processes of such users with no job here fail
    gpu_max_temp_c: int = 90
    gpu_fatal_xids: tuple[int, ...] = FATAL_XIDS
    gpu_ecc_max: int = 0               # volatile uncorrected ECC errors tolerated
    gpu_require_persistence: bool = True
    rdma_devices: tuple[str, ...] = ()  # must be present; () = check those present, if any
    rdma_min_rate_gbps: float = 0.0
    nics: tuple[str, ...] = ()         # "NAME" or "NAME:MTU": up, carrier, and that MTU
    reachability: bool = True          # TCP all-to-all among a multi-node job's agents in its prolog
    reach_timeout_s: float = 2.0
    flap_window_s: float = 3600.0      # this many recoveries in the window: stays drained
    flap_count: int = 3
    nvml_module: str = "pynvml"        # the NVML binding's module name

    def path(self, p: str, node: str) -> str:
        return p.replace("{node}", node)


def _sanity(table: dict) -> SanityConfig:
    tuples = ("disabled", "scratch_paths", "gpu_fatal_xids", "rdma_devices", "nics")
    table = {k: tuple(v) if k in tuples and isinstance(v, list) else v for k, v in table.items()}
    cfg = _take(table, SanityConfig, "[sanity]")
    unknown = set(cfg.disabled) - set(SANITY_PROBES)
    if unknown:
        raise ConfigError(f"[sanity] disabled: unknown probe(s) {', '.join(sorted(unknown))}; "
                          f"built-in probes are {', '.join(SANITY_PROBES)}")
    for name, sev in cfg.severity.items():
        if sev not in ("drain", "warn"):
            raise ConfigError(f"[sanity] severity.{name}: {sev!r} is not drain or warn")
    if cfg.interval_s < 0 or not 0 <= cfg.jitter < 1 or cfg.flap_count < 1:
        raise ConfigError("[sanity] interval_s >= 0, 0 <= jitter < 1 and flap_count >= 1 are required")
    return cfg


PURGE_UNITS = {"hour": 3600, "day": 86400, "month": 30 * 86400}


def parse_purge_after(text: str) -> float:
    """slurmdbd.conf's PurgeJobAfter -> seconds: "12months", "30days", "720hours"
    (singular and abbreviated units too: "1month", "7d"); a bare number is
    months, as slurmdbd reads it. Raises ValueError on anything else."""
    import re
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if not m:
        raise ValueError(text)
    unit = m.group(2).removesuffix("s") or "month"
    name = next((u for u in PURGE_UNITS if u.startswith(unit)), None) if unit else None
    if name is None or int(m.group(1)) <= 0:
        raise ValueError(text)
    return int(m.group(1)) * PURGE_UNITS[name]


@dataclass(frozen=True)
class AccountingConfig:
    """[accounting]: how long the job history sacct reads is kept.

    ``purge_job_after``: finished jobs whose end is older than this are
    deleted with their steps, earlier runs and events, as slurmdbd's
    PurgeJobAfter does ("12months", "30days", "720hours"); "" keeps them
    forever. ``purge_interval_s``: how often the controller looks (and once
    at start); ``purge_batch_jobs``: jobs deleted per transaction, so the
    write lock is never held long."""
    purge_job_after: str = ""
    purge_interval_s: float = 3600.0
    purge_batch_jobs: int = 2000

    @property
    def purge_after_s(self) -> float | None:
        """The retention in seconds; None = keep forever."""
        return parse_purge_after(self.purge_job_after) if self.purge_job_after else None


def _accounting(table: dict) -> AccountingConfig:
    a = _take(dict(table), AccountingConfig, "[accounting]")
    if not isinstance(a.purge_job_after, str):
        raise ConfigError("[accounting] purge_job_after: a string such as \"12months\", "
                          "\"30days\" or \"720hours\"")
    try:
        a.purge_after_s
    except ValueError:
        raise ConfigError(f"[accounting] purge_job_after: invalid value {a.purge_job_after!r} "
                          "(want a number of hours, days or months: \"12months\", \"30days\", "
                          "\"720hours\")") from None
    if (not isinstance(a.purge_interval_s, (int, float)) or isinstance(a.purge_interval_s, bool)
            or a.purge_interval_s <= 0):
        raise ConfigError("[accounting] purge_interval_s: a number of seconds above 0")
    if not isinstance(a.purge_batch_jobs, int) or isinstance(a.purge_batch_jobs, bool) \
            or a.purge_batch_jobs < 1:
        raise ConfigError("[accounting] purge_batch_jobs: a whole number, at least 1")
    return a


@dataclass(frozen=True)
class Config:
    cluster_name: str = "lingjun"
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    nodes: tuple[NodeConfig, ...] = ()
    partitions: tuple[PartitionConfig, ...] = ()
    path: str = ""
    network: NetworkConfig = field(default_factory=NetworkConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    preempt: PreemptConfig = field(default_factory=PreemptConfig)
    authz: AuthzConfig = field(default_factory=AuthzConfig)
    faulttol: FaulttolConfig = field(default_factory=FaulttolConfig)
    sanity: SanityConfig = field(default_factory=SanityConfig)
    accounting: AccountingConfig = field(default_factory=AccountingConfig)

    def node(self, name: str) -> NodeConfig | None:
        """The node named ``name``, or None: a dict lookup, since the service asks
        for every node of a pass (a linear scan was most of a submission at 10,000 nodes)."""
        return self._nodes_by_name.get(name)

    @cached_property
    def _nodes_by_name(self) -> dict[str, NodeConfig]:
        # First definition wins, as the scan it replaces did.
        by_name: dict[str, NodeConfig] = {}
        for n in self.nodes:
            by_name.setdefault(n.name, n)
        return by_name

    def effective_partitions(self) -> tuple[PartitionConfig, ...]:
        if self.partitions:
            return self.partitions
        return (PartitionConfig(name="debug", default=True),)

    def preempt_mode(self, part: PartitionConfig) -> str:
        """The PreemptMode a partition's jobs get: OFF unless preemption is on."""
        if self.preempt.type == "none":
            return "OFF"
        return part.preempt_mode or self.preempt.mode


def _minutes(value, key: str) -> int:
    from lingjun import slurm  # the one place that parses Slurm's time syntax
    if isinstance(value, int):
        return value
    try:
        return slurm.parse_time_limit(str(value))
    except ValueError as e:
        raise ConfigError(f"{key}: {e}") from None


def _expand(expr: str) -> tuple[str, ...]:
    try:
        return tuple(hostlist.expand_hostlist(expr))
    except hostlist.BadHostlist as e:
        raise ConfigError(f"bad hostlist {expr!r}: {e}") from None


def _take(table: dict, cls, where: str, **converters):
    known = set(cls.__dataclass_fields__)
    unknown = set(table) - known - set(converters)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    args = {}
    for k, v in table.items():
        if k in converters:
            k2, v = converters[k](v)
            args[k2] = v
        else:
            args[k] = v
    try:
        return cls(**args)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}") from None


def parse(text: str, path: str = "") -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path or 'config'}: {e}") from None
    controller = _take(data.pop("controller", {}), ControllerConfig, "[controller]")
    enforce = controller.enforce_part_limits.upper()
    if enforce == "YES":            # Slurm's older spelling of ANY
        enforce = "ANY"
    if enforce not in ENFORCE_PART_LIMITS:
        raise ConfigError(f"[controller] enforce_part_limits: {controller.enforce_part_limits!r} "
                          f"is not one of {', '.join(ENFORCE_PART_LIMITS)}")
    controller = replace(controller, enforce_part_limits=enforce)
    agent = _take(data.pop("agent", {}), AgentConfig, "[agent]")
    nodes: list[NodeConfig] = []
    for i, t in enumerate(data.pop("nodes", [])):
        t = dict(t)
        names = _expand(str(t.pop("names", t.pop("name", ""))))
        if "features" in t:
            t["features"] = tuple(t["features"])
        for name in names:
            nodes.append(_take(dict(t, name=name), NodeConfig, f"[[nodes]] #{i + 1}"))
    partitions: list[PartitionConfig] = []
    for i, t in enumerate(data.pop("partitions", [])):
        t = dict(t)
        where = f"[[partitions]] #{i + 1}"
        conv = {
            "nodes": lambda v: ("nodes", None if str(v).upper() == "ALL" else _expand(str(v))),
            "max_time": lambda v: ("max_time_min", _minutes(v, "max_time")),
            "default_time": lambda v: ("default_time_min", _minutes(v, "default_time")),
        }
        part = _take(t, PartitionConfig, where, **conv)
        if part.preempt_mode.upper() not in PREEMPT_MODES + ("",):
            raise ConfigError(f"{where}: preempt_mode {part.preempt_mode!r} is not one of "
                              f"{', '.join(PREEMPT_MODES)}")
        if part.grace_time_s < 0:
            raise ConfigError(f"{where}: grace_time_s must not be negative")
        partitions.append(replace(part, preempt_mode=part.preempt_mode.upper()))
    if partitions and not any(p.default for p in partitions):
        partitions[0] = PartitionConfig(**{**partitions[0].__dict__, "default": True})
    network = _network(data.pop("network", {}))
    auth_conf = _auth(data.pop("auth", {}))
    preempt = _preempt(data.pop("preempt", {}))
    authz = _authz(data.pop("authz", {}))
    faulttol = _take(data.pop("faulttol", {}), FaulttolConfig, "[faulttol]")
    sanity = _sanity(data.pop("sanity", {}))
    accounting = _accounting(data.pop("accounting", {}))
    cluster_name = data.pop("cluster_name", "lingjun")
    if data:
        raise ConfigError(f"{path or 'config'}: unknown key(s) {', '.join(sorted(data))}")
    return Config(cluster_name=cluster_name, controller=controller, agent=agent,
                  nodes=tuple(nodes), partitions=tuple(partitions), path=path, network=network,
                  auth=auth_conf, preempt=preempt, authz=authz, faulttol=faulttol,
                  sanity=sanity, accounting=accounting)


def _authz(table: dict) -> AuthzConfig:
    ops = table.get("operators", ())
    if isinstance(ops, str) or not all(isinstance(o, str) for o in ops):
        raise ConfigError("[authz] operators: a list of user names")
    a = _take(dict(table, operators=tuple(ops)), AuthzConfig, "[authz]")
    for key in ("max_message_bytes", "max_script_bytes"):
        if getattr(a, key) < 1024:
            raise ConfigError(f"[authz] {key}: at least 1024")
    if a.max_submit_jobs_per_user < 0:
        raise ConfigError("[authz] max_submit_jobs_per_user: 0 (none) or more")
    return a


def config_path() -> str:
    return os.environ.get("LINGJUN_CONF", DEFAULT_CONFIG_PATH)


def load(path: str | None = None) -> Config:
    """Load the config file; a missing file at the default path means defaults."""
    p = path or config_path()
    try:
        text = Path(p).read_text()
    except FileNotFoundError:
        if path is None and "LINGJUN_CONF" not in os.environ:
            return Config()
        raise ConfigError(f"cannot read configuration file {p}") from None
    return parse(text, p)

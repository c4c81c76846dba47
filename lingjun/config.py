"""Typed configuration, parsed once from one TOML file.

Every key has a default that works on one machine, so an empty file (or no
file) gives a one-partition cluster whose nodes are whatever agents register.

    cluster_name = "lingjun"

    [controller]
    listen = "127.0.0.1:6917"       # API and agent channel; Slurm uses 6817-6819
    state_dir = "/var/lib/lingjun"
    enforce_part_limits = "NO"      # NO | ANY | ALL, as Slurm's EnforcePartLimits
    heartbeat_timeout_s = 60.0      # silence this long: the node is DOWN (SlurmdTimeout)
    heartbeat_interval_s = 0        # 0: 5 s, longer past 5,000 nodes (HEARTBEATS_PER_S)
    fence_grace_s = -1              # a silent node's fence: SIGTERM .. SIGKILL (-1: kill_wait_s)
    fence_margin_s = -1             # DOWN .. a requeued attempt may start (-1: grace + 2 s)
    mail_prog = "/usr/bin/mail"     # Slurm's MailProg: run as PROG -s SUBJECT -- USER for --mail-type;
                                    # "" = no mail (sbatch --mail-type is then refused)
    metrics_address = ""            # HOST:PORT of /metrics and the dashboard, e.g.
                                    # "127.0.0.1:6920" ("" = none, port 0 = any free one)
    user = "lingjun"                # Slurm's SlurmUser: the unprivileged user lingjund runs as
                                    # ("" = whoever starts it); lingjun restd refuses it and root

    [agent]
    metrics_address = ""            # HOST:PORT of each agent's /metrics (the same rules)
    output_sink = ""                # batch output lines to "journald" or "file:/PATH" too

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
    token_relay_users = []          # users whose processes on the controller's host may present
                                    # others' tokens (lingjun restd's user there); root always may
    [scheduler]                     # optional: Slurm's SchedulerType / SchedulerParameters
    backfill = true                 # sched/backfill (default); false = sched/builtin, strict per partition
    bf_window_min = 1440            # bf_window: how far ahead a reservation may be (minutes)
    bf_max_job_test = 500           # bf_max_job_test: jobs given a reservation per pass
    bf_resolution_s = 60            # bf_resolution: expected ends rounded up to this (seconds)
    lend_idle_quota = false         # a job held only by a GrpTRES may borrow idle quota (Borrowed)
    [priority]                      # optional: Slurm's PriorityType and PriorityWeight*
    type = "priority/multifactor"   # (default) or "priority/basic": submission order less nice
    weight_age = 1000               # PriorityWeightAge (defaults: these five)
    weight_fairshare = 10000        # PriorityWeightFairshare
    weight_partition = 1000         # PriorityWeightPartition (of [[partitions]] priority_job_factor)
    weight_qos = 1000               # PriorityWeightQOS
    weight_job_size = 0             # PriorityWeightJobSize; weight_assoc: PriorityWeightAssoc
    max_age = "7-0"                 # PriorityMaxAge: age factor 1.0 from here on
    favor_small = false             # PriorityFavorSmall
    [preempt]                       # optional: preemptible work (Slurm's PreemptType...)
    type = "partition_prio"         # or "qos" (sacctmgr's Preempt=), or "none" (the default)
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
    [limits]                        # what one user may hold of the controller (lingjun/admission.py)
    connections_per_user = 128      # open connections at the command and credential sockets
    requests_per_user = 32          # calls in progress at once, command socket and gRPC together
    streams_per_user = 512          # gRPC streams open at once (srun, salloc, sattach, sacct, WatchJobs)
    first_byte_timeout_s = 5.0      # a command-socket connection silent this long is closed
    connections = 0                 # everyone's connections at the two sockets; 0 = a quarter of
                                    # the descriptor limit (lingjund raises it to the hard limit)
    grpc_connections = 0            # gRPC connections at once; 0 = the rest of the descriptor
                                    # limit but a sixteenth (agents hold one each)
                                    # Root and the controller's user: no per-user limits, and an
                                    # eighth of `connections` kept for them alone.
    [sanity]                        # node health probes (SanityConfig lists every key)
    interval_s = 300.0
    scratch_paths = ["/scratch/{node}"]
    dropin_dir = "/etc/lingjun/probes.d"

lingjun/netprofile.py documents every key of a profile.

    [faulttol]                      # restarts after failures (FaulttolConfig)
    restart_backoff_s = 10.0        # doubles per restart ...
    restart_backoff_max_s = 300.0   # ... up to this
    checkpoint_root = "/shared/ckpt"  # LINGJUN_CHECKPOINT_DIR = <root>/<job id>

    [accounting]                    # the job history sacct reads (AccountingConfig)
    purge_job_after = "12months"    # slurmdbd's PurgeJobAfter: N hours|days|months; "" = keep forever

    [topology]                      # Slurm's TopologyPlugin and topology.conf (TopologyConfig)
    plugin = "topology/tree"        # or "topology/block"; "topology/default" (none) by default
    max_switch_wait_s = 300         # max_switch_wait: how long --switches=N waits for N leaves
    [[topology.switch]]             # SwitchName=s0 Nodes=node[1-32]
    name = "s0"
    nodes = "node[1-32]"
    [[topology.switch]]             # SwitchName=s2 Switches=s[0-1]
    name = "s2"
    switches = "s[0-1]"
                                    # or: topology_conf = "/etc/slurm/topology.conf" (Slurm's file)
                                    # blocks: [[topology.block]] name/nodes, block_sizes = [32, 64]
"""
from __future__ import annotations

import dataclasses
import difflib
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Annotated

import hostlist
import msgspec
from msgspec import Meta

from lingjun.topology import Topology, TopologyError

DEFAULT_PORT = 6917
DEFAULT_CONFIG_PATH = "/etc/lingjun/lingjun.toml"
ENFORCE_PART_LIMITS = ("NO", "ANY", "ALL")


# The agents' heartbeat interval when [controller] heartbeat_interval_s is
# not set: 5 s, and on a cluster of more than 5,000 configured nodes long
# enough that the controller reads about HEARTBEATS_PER_S of them a second
# (10 s at 10,000 nodes), but never more than a quarter of
# heartbeat_timeout_s. Slurm's choice in kind: its slurmctld pings each node
# every SlurmdTimeout/3 (100 s by default) over a tree, whatever the cluster's
# size. The timeout, and so how soon a silent node is DOWN, stays what it is
# (60 s by default) at every size; a bigger cluster only hears from each node
# less often within it (12 heartbeats a timeout at 5 s, 6 at 10 s). One
# heartbeat costs the controller 0.1-0.2 ms of its single core (the gRPC read
# in Python alone is about 0.12 ms): 1,000 a second is 10-20% of it.
HEARTBEAT_INTERVAL_S = 5.0
HEARTBEATS_PER_S = 1000.0

# What a fence needs beyond its grace: the supervisor waking at the lease's
# end, the SIGKILL, the kernel tearing the processes down, and the two hosts'
# clocks drifting apart over one heartbeat timeout (NTP keeps that to ms).
FENCE_SLACK_S = 2.0


class ConfigError(ValueError):
    """The configuration file cannot be used; the message says why."""


# Types with their ranges: msgspec checks each value against its field's type
# once, at parse (``_take``), and names the key that is wrong. A string where a
# number belongs, a bool for an int or a string for a list is refused, never
# coerced ("2" is not 2, and "ib" is not ["i", "b"]).
Seconds = Annotated[float, Meta(ge=0)]
PositiveSeconds = Annotated[float, Meta(gt=0)]
Count = Annotated[int, Meta(ge=0)]
Bytes = Annotated[int, Meta(ge=1024)]
PARTITION_STATES = ("UP", "DOWN", "DRAIN", "INACTIVE")
SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


@dataclass(frozen=True)
class GpuConfig:
    """One [[nodes.gpu]]: what the configuration says of one GPU of each of
    the table's nodes, over what the agent found (an unset key: the agent's)."""
    index: Count
    type: str = ""                   # "" = the node's gpu_type, else the agent's
    numa_node: Annotated[int, Meta(ge=-1)] | None = None
    nvlink: tuple[Count, ...] | None = None   # peer indices; [] = none
    nic: str | None = None           # the RDMA NIC under its PCIe switch; "" = none
    memory_mb: Count = 0
    pci_bus_id: str = ""


@dataclass(frozen=True)
class NodeConfig:
    name: str
    cpus: Count = 0                  # 0 = what the agent reports
    memory_mb: Count = 0             # 0 = what the agent reports
    gpus: Count = 0                  # 0 = what the agent reports (or how many gpu tables)
    features: tuple[str, ...] = ()
    weight: Count = 1
    gpu_type: str = ""               # GPU model ("a100") for --gres=gpu:TYPE:N; "" = untyped
    gpu: tuple[GpuConfig, ...] = ()  # per-GPU declarations ([[nodes.gpu]]), by index
    # Shared GPUs, Slurm's Gres=gpu:4,shard:8,mps:400: the node's shard count
    # and MPS count, spread evenly over its GPUs (8 shards on 4 GPUs: 2 each;
    # mps 400: 100 each, so --gres=mps:50 is half of one GPU). 0 = none.
    shards: Count = 0
    mps: Count = 0


@dataclass(frozen=True)
class PartitionConfig:
    name: str
    nodes: tuple[str, ...] | None = None   # None = every node
    default: bool = False
    state: str = "UP"
    max_time_min: int = -1
    default_time_min: int = -1
    max_nodes: Annotated[int, Meta(ge=-1)] = -1
    min_nodes: Count = 0
    priority_tier: Count = 1
    # PriorityJobFactor: the partition factor of its jobs' priority (priority/multifactor)
    priority_job_factor: Annotated[int, Meta(ge=0, le=65533)] = 1
    # PreemptMode of this partition's jobs ("" = [preempt] mode) and
    # GraceTime, seconds between the victim's signal and its end.
    preempt_mode: str = ""
    grace_time_s: Seconds = 0.0
    # Nodes held back for expedited restarts (--requeue=expedite): the last
    # ones of the partition that can take work (sched/spares.py)
    spare_nodes: Count = 0


@dataclass(frozen=True)
class ControllerConfig:
    listen: str = f"127.0.0.1:{DEFAULT_PORT}"
    address: str = ""                # how clients and agents reach it ("" = listen)
    state_dir: str = "/var/lib/lingjun"
    # 0: derived from the cluster's size (Config.heartbeat_interval)
    heartbeat_interval_s: Seconds = 0.0
    heartbeat_timeout_s: PositiveSeconds = 60.0
    kill_wait_s: Seconds = 30.0        # Slurm's KillWait: SIGTERM .. SIGKILL
    scheduler_interval_s: PositiveSeconds = 5.0
    synchronous: str = "FULL"        # SQLite synchronous pragma: FULL survives power loss
    job_requeue: bool = True         # Slurm's JobRequeue default
    min_job_age_s: Seconds = 300.0     # finished jobs stay visible to squeue this long
    # Slurm's MaxArraySize: array indices run from 0 to max_array_size - 1.
    max_array_size: Annotated[int, Meta(ge=1, le=4_000_001)] = 1001
    # Slurm's DependencyParameters=kill_invalid_depend: cancel a job whose
    # dependency can never be satisfied (sbatch --kill-on-invalid-dep overrides).
    kill_invalid_depend: bool = False
    # A requeued job pends with reason BeginTime this long. Slurm waits
    # cred_expire+1 (121 s), an artefact of its credentials; short here.
    requeue_delay_s: Seconds = 2.0
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
    # Slurm's MailProg: --mail-type's notices are sent by running
    # ``mail_prog -s SUBJECT -- USER`` (lingjund/service/mail.py); "" = none.
    mail_prog: str = "/usr/bin/mail"
    # HOST:PORT of the Prometheus page (/metrics) and the dashboard (lingjund/web/);
    # "" = none. Port 0 = any free one, written to STATE_DIR/metrics.address.
    metrics_address: str = ""
    # Slurm's SlurmUser: the unprivileged user the controller runs as ("" = whoever
    # starts it); lingjun restd refuses to run as this user or as root.
    user: str = ""

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
    reconnect_min_s: PositiveSeconds = 0.2
    reconnect_max_s: PositiveSeconds = 5.0
    # where the GPU device files (nvidia0, nvidia1, ...) are: a job's cgroup
    # denies it the ones of GPUs it was not given
    device_root: str = "/dev"
    # where the agent reads its GPUs' place in the PCI tree, their NUMA nodes
    # and the RDMA NICs beside them (bus/pci/devices, class/infiniband)
    sysfs_root: str = "/sys"
    # the CUDA MPS control daemon the agent starts (with -d) for a GPU before
    # its first --gres=mps job and tells to quit after its last
    mps_control: str = "nvidia-cuda-mps-control"
    # HOST:PORT of the agent's Prometheus page (/metrics); "" = none. Port 0 =
    # any free one, written to the agent's STATE_DIR/metrics.address.
    metrics_address: str = ""
    # lldpd's client: the agent reports the leaf switch it hears over LLDP at
    # registration ("" = do not ask; nothing is asked when it is not installed)
    lldpctl: str = "lldpctl"
    # each batch job's output lines also to the site's log pipeline: "" (off),
    # "journald" ("journald:/SOCKET" elsewhere) or "file:/PATH" (lingjun_agent/outputsink.py)
    output_sink: str = ""


JOURNAL_SOCKET = "/run/systemd/journal/socket"


def output_sink_target(text: str) -> tuple[str, str]:
    """[agent] output_sink as ("journald", socket) or ("file", path); ("", "") when off."""
    if not text:
        return "", ""
    kind, sep, where = text.partition(":")
    if kind == "journald":
        where = where if sep else JOURNAL_SOCKET
    elif kind != "file" or not sep:
        raise ConfigError(f'[agent] output_sink: {text!r} is not "journald", '
                          f'"journald:/SOCKET" or "file:/PATH"')
    if not where.startswith("/"):
        raise ConfigError(f"[agent] output_sink: {text!r}: the path must be absolute")
    return kind, where


@dataclass(frozen=True)
class NetProfileConfig:
    """One [[network.profile]]: a profile for the nodes of a hostlist."""
    nodes: tuple[str, ...]
    profile: object                  # lingjun.netprofile.Profile (base addresses)


@dataclass(frozen=True)
class NetworkConfig:
    rdma_sysfs_root: str = "/sys/class/infiniband"   # the agent's RDMA inventory reads here
    profiles: tuple[NetProfileConfig, ...] = ()

    def profile_for(self, node: str):
        """The node's own profile (its addresses offset by its place in the
        group's hostlist), or None when no profile names it."""
        from lingjun import netprofile     # here: most configurations have no [network]
        for group in self.profiles:
            if node in group.nodes:
                return netprofile.for_node(group.profile, group.nodes.index(node))
        return None


def _network(table: dict) -> NetworkConfig:
    from lingjun import netprofile     # here: most configurations have no [network]
    table = dict(table)
    groups: list[NetProfileConfig] = []
    owner: dict[str, str] = {}
    for i, t in enumerate(_tables(table, "profile", "network.profile")):
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


@dataclass(frozen=True)
class SchedulerConfig:
    """[scheduler]: Slurm's SchedulerType (backfill or not) and its SchedulerParameters,
    with Slurm 22.05's defaults and ranges."""
    backfill: bool = True                                   # sched/backfill; False: sched/builtin
    bf_window_min: Annotated[int, Meta(ge=1, le=43200)] = 1440
    bf_max_job_test: Annotated[int, Meta(ge=1, le=1_000_000)] = 500
    bf_resolution_s: Annotated[int, Meta(ge=1, le=3600)] = 60
    enable_user_top: bool = False                           # owners may scontrol top their jobs
    # Lend idle quota (lingjund/sched/lending.py): a job held back only by a GrpTRES
    # may run, as Borrowed, on what no other pending job can use, and is preempted
    # (requeued) when a job within its own limits needs it back.
    lend_idle_quota: bool = False


PRIORITY_TYPES = ("priority/multifactor", "priority/basic")


@dataclass(frozen=True)
class PriorityConfig:
    """[priority]: Slurm's PriorityType and its PriorityWeight*, PriorityMaxAge,
    PriorityFavorSmall.

    The default is priority/multifactor (Slurm's is priority/basic) so that a
    cluster made with ``lingjun up`` honours nice, age and the partition and QOS
    factors out of the box; the weights default to a site's usual choice rather
    than Slurm's zeros (with all weights 0 every job's priority is 1 and only
    nice would count). Job size and association are off (0) as in Slurm: whether
    big or small jobs go first is a site's choice. ``type = "priority/basic"``
    gives submission order, less nice."""
    type: str = "priority/multifactor"
    weight_age: Annotated[int, Meta(ge=0, le=0xFFFFFFFF)] = 1000
    weight_assoc: Annotated[int, Meta(ge=0, le=0xFFFFFFFF)] = 0
    weight_fairshare: Annotated[int, Meta(ge=0, le=0xFFFFFFFF)] = 10000
    weight_job_size: Annotated[int, Meta(ge=0, le=0xFFFFFFFF)] = 0
    weight_partition: Annotated[int, Meta(ge=0, le=0xFFFFFFFF)] = 1000
    weight_qos: Annotated[int, Meta(ge=0, le=0xFFFFFFFF)] = 1000
    max_age_min: Annotated[int, Meta(ge=1)] = 7 * 24 * 60   # PriorityMaxAge ("max_age" = "7-0")
    favor_small: bool = False                                # PriorityFavorSmall

    @property
    def multifactor(self) -> bool:
        return self.type == "priority/multifactor"


def _priority(table: dict) -> PriorityConfig:
    cfg = _take(dict(table), PriorityConfig, "[priority]",
                max_age=lambda v: ("max_age_min", _minutes(v, "[priority] max_age")))
    kind = cfg.type.lower()
    if "/" not in kind:
        kind = "priority/" + kind
    if kind not in PRIORITY_TYPES:
        raise ConfigError(f"[priority] type: {cfg.type!r} is not one of {', '.join(PRIORITY_TYPES)}")
    return replace(cfg, type=kind)


PREEMPT_TYPES = ("none", "partition_prio", "qos")
PREEMPT_MODES = ("OFF", "CANCEL", "REQUEUE")


@dataclass(frozen=True)
class PreemptConfig:
    """[preempt]: Slurm's PreemptType, PreemptMode and PreemptExemptTime."""
    type: str = "none"               # "none" | "partition_prio" | "qos" (preempt/none, preempt/...)
    mode: str = "OFF"                # cluster PreemptMode: partitions without their own take it
    exempt_time_s: Seconds = 0.0     # PreemptExemptTime: minimum run time before a job may be preempted

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
    return replace(cfg, type=kind, mode=mode)


@dataclass(frozen=True)
class AuthConfig:
    """The cluster key, the credential socket and TLS (see the module docstring)."""
    key_file: str = "/etc/lingjun/cluster.key"
    socket: str = "/run/lingjun/auth.sock"
    token_ttl_s: PositiveSeconds = 300.0
    handshake_max_skew_s: PositiveSeconds = 30.0
    controller_serves_socket: bool = True
    agent_serves_socket: bool = False
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    # Users whose processes on the controller's host may present other users'
    # tokens: lingjun restd's user there (it checks its own callers).
    token_relay_users: tuple[str, ...] = ()

    @property
    def tls(self) -> bool:
        """Whether clients (agents, commands) speak TLS to the controller."""
        return bool(self.tls_ca or self.tls_cert)


def _auth(table: dict) -> AuthConfig:
    a = _take(table, AuthConfig, "[auth]")
    if bool(a.tls_cert) != bool(a.tls_key):
        raise ConfigError("[auth] tls_cert and tls_key go together")
    return a


@dataclass(frozen=True)
class AuthzConfig:
    """[authz]: operators and the limits on one request.

    Operators are Slurm's "Operator" admin level: they may cancel, hold,
    release, update and requeue anyone's jobs, read anyone's script, and
    change node states. Root (uid 0) always is one.
    """
    operators: tuple[str, ...] = ()
    max_message_bytes: Bytes = 16 * 1024 * 1024
    max_script_bytes: Bytes = 4 * 1024 * 1024
    max_submit_jobs_per_user: Count = 0


@dataclass(frozen=True)
class LimitsConfig:
    """[limits]: how much of the controller one user may hold at once
    (lingjun/admission.py says why and how each limit is kept).

    ``connections`` and ``grpc_connections`` of 0 are worked out from the
    daemon's descriptor limit (``admission.Budget.of``)."""
    connections_per_user: Annotated[int, Meta(ge=1)] = 128
    requests_per_user: Annotated[int, Meta(ge=1)] = 32
    streams_per_user: Annotated[int, Meta(ge=1)] = 512
    first_byte_timeout_s: PositiveSeconds = 5.0
    connections: Count = 0
    grpc_connections: Count = 0


@dataclass(frozen=True)
class FaulttolConfig:
    """What happens to a job after a failure (lingjund/service/restarts.py).

    Whether a job is requeued after its node is lost follows --requeue /
    --no-requeue, else ``[controller] job_requeue`` (Slurm's JobRequeue).
    """
    restart_backoff_s: Seconds = 10.0      # wait before the first automatic restart
    restart_backoff_max_s: Seconds = 300.0  # the backoff doubles per restart up to this
    # shared path of LINGJUN_CHECKPOINT_DIR; "" = <state_dir>/checkpoints, which only root's
    # jobs can enter (the state dir is 0700): set it on any cluster with other users
    checkpoint_root: str = ""
    # Quarantine (lingjund/service/quarantine.py): a node implicated in a failed or
    # hung run is drained "suspect: ..." until its extended check passes; suspect
    # again within this window, it stays drained for a person
    suspect_window_s: Seconds = 86400.0
    suspect_check_bytes: Bytes = 16 << 20      # TCP bytes each way with each peer
    suspect_check_peers: Annotated[int, Meta(ge=1)] = 2   # healthy peers it tests with
    # Mbit/s a suspect must reach with every peer (TCP over the agents' network;
    # set it near what the fabric gives)
    suspect_check_min_mbps: Annotated[float, Meta(ge=0)] = 100.0
# XIDs that mean the GPU needs attention (Azure HPC health checks' list:
# 48 DBE, 63/64 page retirement / row remap, 74 NVLink, 79 fell off the bus, 92 high
# SBE, 94/95 contained/uncontained ECC, 119/120 GSP).
FATAL_XIDS = (48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 94, 95, 119, 120)
SANITY_PROBES = ("cpu", "memory", "disk", "clock", "processes", "gpu", "rdma", "nic", "kernel_xid")


@dataclass(frozen=True)
class SanityConfig:
    """[sanity]: the agents' node health probes (lingjun_agent/sanity/).

    Paths may hold ``{node}``, replaced by each agent's node name (so the
    local cluster's nodes, sharing one host, each get their own scratch).
    """
    enabled: bool = True
    interval_s: Seconds = 300.0        # periodic pass (NHC's usual 300 s); 0 = none
    jitter: Annotated[float, Meta(ge=0, lt=1)] = 0.1                # each wait is interval_s * (1 +- jitter)
    disabled: tuple[str, ...] = ()     # built-in probes not to run (names in SANITY_PROBES)
    severity: dict[str, str] = field(default_factory=dict)   # probe -> "drain" | "warn" (defaults: probes.py)
    timeout_s: PositiveSeconds = 10.0  # per probe
    prolog: bool = True                # probe a batch job's nodes before its script starts
    prolog_timeout_s: PositiveSeconds = 30.0     # no answer by then = that node failed its prolog
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
    # kernel messages read for the NVIDIA driver's "NVRM: Xid" lines (kernel_xid probe;
    # its failure makes the node a suspect: lingjund/service/quarantine.py); "" = none
    kernel_log: str = "/dev/kmsg"
    gpu_ecc_max: int = 0               # volatile uncorrected ECC errors tolerated
    gpu_require_persistence: bool = True
    rdma_devices: tuple[str, ...] = ()  # must be present; () = check those present, if any
    rdma_min_rate_gbps: float = 0.0
    nics: tuple[str, ...] = ()         # "NAME" or "NAME:MTU": up, carrier, and that MTU
    reachability: bool = True          # TCP all-to-all among a multi-node job's agents in its prolog
    reach_timeout_s: float = 2.0
    flap_window_s: float = 3600.0      # this many recoveries in the window: stays drained
    flap_count: Annotated[int, Meta(ge=1)] = 3
    nvml_module: str = "pynvml"        # the NVML binding's module name

    def path(self, p: str, node: str) -> str:
        return p.replace("{node}", node)


def _sanity(table: dict) -> SanityConfig:
    cfg = _take(dict(table), SanityConfig, "[sanity]")
    unknown = set(cfg.disabled) - set(SANITY_PROBES)
    if unknown:
        raise ConfigError(f"[sanity] disabled: unknown probe(s) {', '.join(sorted(unknown))}; "
                          f"built-in probes are {', '.join(SANITY_PROBES)}")
    for name, sev in cfg.severity.items():
        if sev not in ("drain", "warn"):
            raise ConfigError(f"[sanity] severity.{name}: {sev!r} is not drain or warn")
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
    purge_interval_s: PositiveSeconds = 3600.0
    purge_batch_jobs: Annotated[int, Meta(ge=1)] = 2000
    # Associations (sacctmgr) and fair share, as Slurm's AccountingStorageEnforce
    # ("associations", "limits", "qos"; limits and qos imply associations; none
    # by default, as Slurm's), TRESBillingWeights ("CPU=1.0,Mem=0.25G,GRES/gpu=16";
    # "" = a job's CPUs), PriorityDecayHalfLife ("7-0"; "0" = no decay),
    # PriorityUsageResetPeriod (NONE, DAILY, WEEKLY, MONTHLY, QUARTERLY, YEARLY)
    # and PriorityCalcPeriod (how often running jobs' usage is charged).
    enforce: tuple[str, ...] = ()
    tres_billing_weights: str = ""
    priority_decay_half_life: str = "7-0"
    priority_usage_reset_period: str = "NONE"
    usage_interval_s: PositiveSeconds = 60.0

    @property
    def purge_after_s(self) -> float | None:
        """The retention in seconds; None = keep forever."""
        return parse_purge_after(self.purge_job_after) if self.purge_job_after else None


def _accounting(table: dict) -> AccountingConfig:
    a = _take(dict(table), AccountingConfig, "[accounting]")
    try:
        a.purge_after_s
    except ValueError:
        raise ConfigError(f"[accounting] purge_job_after: invalid value {a.purge_job_after!r} "
                          "(want a number of hours, days or months: \"12months\", \"30days\", "
                          "\"720hours\")") from None
    enforce = tuple(e.strip().lower() for e in a.enforce if e.strip())
    bad = [e for e in enforce if e not in ENFORCE_WORDS]
    if bad:
        raise ConfigError(f"[accounting] enforce: {bad[0]!r} is not one of {', '.join(ENFORCE_WORDS)}")
    if ("limits" in enforce or "qos" in enforce or "safe" in enforce) and "associations" not in enforce:
        enforce = ("associations", *enforce)      # as Slurm: limits and qos imply associations
    period = a.priority_usage_reset_period.upper()
    if period not in RESET_PERIODS:
        raise ConfigError(f"[accounting] priority_usage_reset_period: {a.priority_usage_reset_period!r} "
                          f"is not one of {', '.join(RESET_PERIODS)}")
    _minutes(a.priority_decay_half_life, "priority_decay_half_life")
    for part in filter(None, (p.strip() for p in a.tres_billing_weights.split(","))):
        if not re.fullmatch(r"[A-Za-z][\w/:]*=\d+(\.\d*)?[KMGT]?", part):
            raise ConfigError(f"[accounting] tres_billing_weights: invalid entry {part!r} "
                              "(want e.g. \"CPU=1.0,Mem=0.25G,GRES/gpu=16\")")
    return replace(a, enforce=enforce, priority_usage_reset_period=period)


ENFORCE_WORDS = ("associations", "limits", "qos", "safe", "nojobs", "nosteps", "wckeys")
RESET_PERIODS = ("NONE", "NOW", "DAILY", "WEEKLY", "MONTHLY", "QUARTERLY", "YEARLY")


WEBHOOK_EVENTS = ("BEGIN", "END", "FAIL", "REQUEUE", "NODE_DOWN", "NODE_DRAIN", "NODE_UP")


@dataclass(frozen=True)
class WebhookConfig:
    """[[webhooks]]: an HTTP(S) endpoint told of job and node events as JSON,
    signed with HMAC-SHA256 of ``secret_file``'s contents (lingjund/service/webhooks.py).
    ``events``: which ones (default all of WEBHOOK_EVENTS)."""
    url: str = ""
    secret_file: str = ""
    events: tuple[str, ...] = WEBHOOK_EVENTS
    timeout_s: PositiveSeconds = 5.0
    max_attempts: Annotated[int, Meta(ge=1, le=100)] = 8
    backoff_s: PositiveSeconds = 1.0          # doubled after each failed attempt
    backoff_max_s: PositiveSeconds = 300.0
    queue_max: Annotated[int, Meta(ge=1)] = 10000    # undelivered events kept (oldest dropped)


def _webhooks(tables: list[dict]) -> tuple[WebhookConfig, ...]:
    out = []
    for i, t in enumerate(tables):
        where = f"[[webhooks]] #{i + 1}"
        w = _take(dict(t), WebhookConfig, where)
        if not w.url.startswith(("http://", "https://")):
            raise ConfigError(f"{where} url = {w.url!r}: want an http:// or https:// URL")
        bad = [e for e in w.events if e not in WEBHOOK_EVENTS]
        if bad:
            raise ConfigError(f"{where} events: unknown event(s) {', '.join(bad)} "
                              f"(known: {', '.join(WEBHOOK_EVENTS)})")
        out.append(w)
    return tuple(out)


@dataclass(frozen=True)
class SwitchConfig:
    """One [[topology.switch]] (topology.conf SwitchName=): a leaf over ``nodes``
    or a switch over ``switches``, both hostlist expressions."""
    name: str
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()
    link_speed: Annotated[int, Meta(ge=1)] = 1


@dataclass(frozen=True)
class BlockConfig:
    """One [[topology.block]] (topology.conf BlockName=)."""
    name: str
    nodes: tuple[str, ...] = ()


TOPOLOGY_PLUGINS = ("topology/tree", "topology/block", "topology/default")
# Slurm 22.05 calls no topology topology/none (later ones topology/default): both are read.
TOPOLOGY_NONE = "topology/none"


@dataclass(frozen=True)
class TopologyConfig:
    """[topology]: Slurm's TopologyPlugin and topology.conf, inline or read from
    ``topology_conf`` (a Slurm topology.conf, taken unchanged), and SchedulerParameters'
    max_switch_wait (seconds a --switches job waits for its leaves; Slurm's default 300)."""
    plugin: str = "topology/default"
    switch: tuple[SwitchConfig, ...] = ()
    block: tuple[BlockConfig, ...] = ()
    block_sizes: tuple[Annotated[int, Meta(ge=1)], ...] = ()
    topology_conf: str = ""
    max_switch_wait_s: Seconds = 300.0

    @cached_property
    def index(self) -> Topology | None:
        """The scheduler's index of it (built once per configuration); None for
        topology/default."""
        if self.plugin == "topology/tree":
            return Topology.tree([(s.name, s.nodes, s.switches, s.link_speed)
                                  for s in self.switch])
        if self.plugin == "topology/block":
            return Topology.block([(b.name, b.nodes) for b in self.block], self.block_sizes)
        return None


def read_topology_conf(text: str, where: str = "topology.conf") -> dict:
    """A Slurm topology.conf as [topology] keys: SwitchName= lines as switches,
    BlockName= lines as blocks, BlockSizes=; '#' starts a comment; keys in any case."""
    switches, blocks, sizes = [], [], []
    for k, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = {}
        for word in line.split():
            key, eq, value = word.partition("=")
            if not eq:
                raise ConfigError(f"{where}:{k}: {word!r} is not Key=Value")
            fields[key.lower()] = value
        if "switchname" in fields:
            entry = {"name": fields.pop("switchname")}
            for key, to in (("nodes", "nodes"), ("switches", "switches"),
                            ("linkspeed", "link_speed")):
                if key in fields:
                    v = fields.pop(key)
                    entry[to] = int(v) if to == "link_speed" and v.isdigit() else v
            switches.append(entry)
        elif "blockname" in fields:
            entry = {"name": fields.pop("blockname")}
            if "nodes" in fields:
                entry["nodes"] = fields.pop("nodes")
            blocks.append(entry)
        elif "blocksizes" in fields:
            try:
                sizes = [int(x) for x in fields.pop("blocksizes").split(",")]
            except ValueError:
                raise ConfigError(f"{where}:{k}: BlockSizes is not a list of counts") from None
        if fields:
            raise ConfigError(f"{where}:{k}: unknown key(s) {', '.join(sorted(fields))}")
    out: dict = {"switch": switches, "block": blocks}
    if sizes:
        out["block_sizes"] = sizes
    out["plugin"] = "topology/block" if blocks and not switches else "topology/tree"
    return out


def _topology(table: dict, nodes: list[NodeConfig], path: str) -> TopologyConfig:
    table = dict(table)
    conf = table.get("topology_conf", "")
    if conf:
        p = Path(conf) if Path(conf).is_absolute() or not path else Path(path).parent / conf
        try:
            text = p.read_text()
        except OSError as e:
            raise ConfigError(f"[topology] topology_conf: cannot read {p}: {e.strerror}") from None
        from_file = read_topology_conf(text, str(p))
        if table.get("switch") or table.get("block"):
            raise ConfigError("[topology]: switches or blocks both inline and in topology_conf")
        for key, value in from_file.items():
            if key != "plugin" or "plugin" not in table:
                table[key] = value

    def entries(kind: str, cls):
        def convert(value):
            if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
                raise ConfigError(f"[topology] {kind} = {value!r}: expected an array of "
                                  f"tables [[topology.{kind}]]")
            out = []
            for k, t in enumerate(value):
                t = dict(t)
                for key in ("nodes", "switches"):
                    if key in t:
                        t[key] = list(_expand(str(t[key])))
                out.append(dataclasses.asdict(_take(t, cls, f"[[topology.{kind}]] #{k + 1}")))
            return kind, out
        return convert

    cfg = _take(table, TopologyConfig, "[topology]", switch=entries("switch", SwitchConfig),
                block=entries("block", BlockConfig))
    plugin = cfg.plugin.lower()
    if not plugin.startswith("topology/"):
        plugin = "topology/" + plugin
    if plugin == TOPOLOGY_NONE:
        plugin = "topology/default"
    if plugin not in TOPOLOGY_PLUGINS:
        raise ConfigError(f"[topology] plugin: {cfg.plugin!r} is not one of "
                          f"{', '.join(TOPOLOGY_PLUGINS)}")
    cfg = replace(cfg, plugin=plugin)
    known = {n.name for n in nodes} or None
    try:
        if plugin == "topology/tree":
            if not cfg.switch:
                raise TopologyError("topology/tree: no switches ([[topology.switch]])")
            Topology.tree([(s.name, s.nodes, s.switches, s.link_speed) for s in cfg.switch],
                          known)
        elif plugin == "topology/block":
            Topology.block([(b.name, b.nodes) for b in cfg.block], cfg.block_sizes, known)
    except TopologyError as e:
        raise ConfigError(f"[topology] {e}") from None
    return cfg


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
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    priority: PriorityConfig = field(default_factory=PriorityConfig)
    authz: AuthzConfig = field(default_factory=AuthzConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    faulttol: FaulttolConfig = field(default_factory=FaulttolConfig)
    sanity: SanityConfig = field(default_factory=SanityConfig)
    accounting: AccountingConfig = field(default_factory=AccountingConfig)
    webhooks: tuple[WebhookConfig, ...] = ()
    topology: TopologyConfig = field(default_factory=TopologyConfig)

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

    @cached_property
    def heartbeat_interval(self) -> float:
        """Seconds between an agent's heartbeats: [controller]
        heartbeat_interval_s, or derived from the number of configured nodes
        (HEARTBEATS_PER_S)."""
        c = self.controller
        if c.heartbeat_interval_s > 0:
            return c.heartbeat_interval_s
        scaled = min(len(self._nodes_by_name) / HEARTBEATS_PER_S, c.heartbeat_timeout_s / 4)
        return max(HEARTBEAT_INTERVAL_S, scaled)

    @cached_property
    def heartbeats_per_s(self) -> float:
        """What the configured nodes' agents send the controller together."""
        return len(self._nodes_by_name) / self.heartbeat_interval

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


def _table(data: dict, key: str) -> dict:
    """The table ``[key]`` (empty when absent); anything else there is refused."""
    t = data.pop(key, {})
    if not isinstance(t, dict):
        raise ConfigError(f"{key} = {t!r}: expected a table [{key}]")
    return t


def _tables(data: dict, key: str, name: str = "") -> list[dict]:
    """The array of tables ``[[key]]`` (empty when absent)."""
    ts = data.pop(key, [])
    name = name or key
    if not isinstance(ts, list) or not all(isinstance(t, dict) for t in ts):
        raise ConfigError(f"{name} = {ts!r}: expected an array of tables [[{name}]]")
    return ts


def _unknown(where: str, keys, known) -> ConfigError:
    """Unknown keys, each with the nearest known one when there is one."""
    parts = []
    for k in sorted(keys):
        near = difflib.get_close_matches(str(k), sorted(known), n=1, cutoff=0.6)
        parts.append(f"{k} (did you mean {near[0]}?)" if near else str(k))
    return ConfigError(f"{where}: unknown key(s) {', '.join(parts)}")


def _take(table: dict, cls, where: str, **converters):
    """``cls`` from one TOML table: unknown keys refused, each value checked
    against its field's type and range (msgspec), errors naming the key."""
    known = set(cls.__dataclass_fields__)
    unknown = set(table) - known - set(converters)
    if unknown:
        raise _unknown(where, unknown, known | set(converters))
    args = {}
    for k, v in table.items():
        if k in converters:
            k2, v = converters[k](v)
            args[k2] = v
        else:
            args[k] = v
    try:
        return msgspec.convert(args, cls)
    except msgspec.ValidationError as e:
        raise ConfigError(_type_error(where, args, e)) from None


def _type_error(where: str, args: dict, e: msgspec.ValidationError) -> str:
    """msgspec's "Expected `float`, got `str` - at `$.key`" as
    "[controller] scheduler_interval_s = '2': expected `float`, got `str`"."""
    text = str(e)
    what, _, at = text.partition(" - at `$")
    key = at.rstrip("`").lstrip(".")
    if not key:
        return f"{where}: {what[:1].lower()}{what[1:]}"
    name = key.split("[", 1)[0].split(".", 1)[0]
    value = f" = {args[name]!r}" if name in args else ""
    return f"{where} {key}{value}: {what[:1].lower()}{what[1:]}"


def _gpu_list(value, where: str) -> list[dict]:
    """[[nodes.gpu]] tables, each checked on its own (unknown keys, types),
    so an error names the table: "[[nodes]] #1 gpu[2] numa_node = ..."."""
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise ConfigError(f"{where} gpu = {value!r}: expected an array of tables [[nodes.gpu]]")
    return [dataclasses.asdict(_take(dict(t), GpuConfig, f"{where} gpu[{k}]"))
            for k, t in enumerate(value)]


def _gpu_tables(node: NodeConfig, where: str) -> NodeConfig:
    """[[nodes.gpu]] checked against the node: each index once and below the
    node's GPU count (``gpus``, or the number of tables when it is not given),
    NVLink peers among those indices."""
    if not node.gpu:
        return node
    count = node.gpus or len(node.gpu)
    seen: set[int] = set()
    for g in node.gpu:
        if g.index in seen:
            raise ConfigError(f"{where} gpu: index {g.index} is declared twice")
        seen.add(g.index)
        if g.index >= count:
            raise ConfigError(f"{where} gpu: index {g.index} is not below the node's "
                              f"{count} GPUs (gpus = {node.gpus})")
        for p in g.nvlink or ():
            if p >= count or p == g.index:
                raise ConfigError(f"{where} gpu index {g.index}: nvlink peer {p} is not "
                                  f"another of the node's {count} GPUs")
    return replace(node, gpus=count, gpu=tuple(sorted(node.gpu, key=lambda g: g.index)))


def parse(text: str, path: str = "") -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path or 'config'}: {e}") from None
    controller = _take(_table(data, "controller"), ControllerConfig, "[controller]")
    enforce = controller.enforce_part_limits.upper()
    if enforce == "YES":            # Slurm's older spelling of ANY
        enforce = "ANY"
    if enforce not in ENFORCE_PART_LIMITS:
        raise ConfigError(f"[controller] enforce_part_limits: {controller.enforce_part_limits!r} "
                          f"is not one of {', '.join(ENFORCE_PART_LIMITS)}")
    controller = replace(controller, enforce_part_limits=enforce)
    if controller.synchronous.upper() not in SYNCHRONOUS:
        raise ConfigError(f"[controller] synchronous: {controller.synchronous!r} is not one of "
                          f"{', '.join(SYNCHRONOUS)}")
    agent = _take(_table(data, "agent"), AgentConfig, "[agent]")
    _check_address("[controller] metrics_address", controller.metrics_address)
    _check_address("[agent] metrics_address", agent.metrics_address)
    output_sink_target(agent.output_sink)
    nodes: list[NodeConfig] = []
    for i, t in enumerate(_tables(data, "nodes")):
        t = dict(t)
        names = _expand(str(t.pop("names", t.pop("name", ""))))
        if not names:
            raise ConfigError(f"[[nodes]] #{i + 1}: names (a hostlist) is required")
        where = f"[[nodes]] #{i + 1}"
        for name in names:
            node = _gpu_tables(_take(dict(t, name=name), NodeConfig, where,
                                     gpu=lambda v, w=where: ("gpu", _gpu_list(v, w))),
                               where)
            _check_shared_gpus(node, where)
            nodes.append(node)
    partitions: list[PartitionConfig] = []
    for i, t in enumerate(_tables(data, "partitions")):
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
        if part.state.upper() not in PARTITION_STATES:
            raise ConfigError(f"{where} state: {part.state!r} is not one of "
                              f"{', '.join(PARTITION_STATES)}")
        partitions.append(replace(part, preempt_mode=part.preempt_mode.upper(),
                                  state=part.state.upper()))
    _check_references(nodes, partitions)
    if partitions and not any(p.default for p in partitions):
        partitions[0] = PartitionConfig(**{**partitions[0].__dict__, "default": True})
    network = _network(_table(data, "network"))
    auth_conf = _auth(_table(data, "auth"))
    preempt = _preempt(_table(data, "preempt"))
    scheduler = _take(_table(data, "scheduler"), SchedulerConfig, "[scheduler]")
    priority = _priority(_table(data, "priority"))
    authz = _authz(_table(data, "authz"))
    limits = _take(_table(data, "limits"), LimitsConfig, "[limits]")
    faulttol = _take(_table(data, "faulttol"), FaulttolConfig, "[faulttol]")
    sanity = _sanity(_table(data, "sanity"))
    accounting = _accounting(_table(data, "accounting"))
    webhooks = _webhooks(_tables(data, "webhooks"))
    topology = _topology(_table(data, "topology"), nodes, path)
    cluster_name = data.pop("cluster_name", "lingjun")
    if not isinstance(cluster_name, str) or not cluster_name:
        raise ConfigError(f"cluster_name = {cluster_name!r}: expected a non-empty string")
    if data:
        raise _unknown(path or "config", data, TOP_LEVEL_KEYS)
    return Config(cluster_name=cluster_name, controller=controller, agent=agent,
                  nodes=tuple(nodes), partitions=tuple(partitions), path=path, network=network,
                  auth=auth_conf, preempt=preempt, scheduler=scheduler, priority=priority, authz=authz,
                  limits=limits, faulttol=faulttol,
                  sanity=sanity, accounting=accounting, webhooks=webhooks, topology=topology)


TOP_LEVEL_KEYS = ("cluster_name", "controller", "agent", "nodes", "partitions", "network", "auth",
                  "preempt", "scheduler", "priority", "authz", "limits", "faulttol", "sanity", "accounting",
                  "webhooks", "topology")


def _check_address(where: str, text: str) -> None:
    """"" (off) or HOST:PORT with a port number."""
    host, sep, port = text.rpartition(":")
    if text and not (sep and port.isdigit() and int(port) <= 65535):
        raise ConfigError(f"{where}: {text!r} is not HOST:PORT (\"127.0.0.1:0\": any free port)")


def _check_shared_gpus(node: NodeConfig, where: str) -> None:
    """Shards and MPS are spread evenly over the node's GPUs: a declared GPU
    count must divide them (one that comes from the agent is divided then)."""
    for key in ("shards", "mps"):
        n = getattr(node, key)
        if n and node.gpus and n % node.gpus:
            raise ConfigError(f"{where} {key} = {n}: not a multiple of gpus = {node.gpus} "
                              f"(they are spread evenly over the GPUs)")
        if n and n < node.gpus:
            raise ConfigError(f"{where} {key} = {n}: fewer than gpus = {node.gpus}")


def _check_references(nodes: list[NodeConfig], partitions: list[PartitionConfig]) -> None:
    """Names declared once; a partition names only declared nodes (when any
    are declared: with none, nodes are whatever agents register)."""
    seen: set[str] = set()
    for n in nodes:
        if n.name in seen:
            raise ConfigError(f"[[nodes]]: node {n.name} is declared twice")
        seen.add(n.name)
    names: set[str] = set()
    for i, p in enumerate(partitions):
        where = f"[[partitions]] #{i + 1} ({p.name})"
        if not p.name:
            raise ConfigError(f"[[partitions]] #{i + 1}: name is required")
        if p.name in names:
            raise ConfigError(f"{where}: partition {p.name} is declared twice")
        names.add(p.name)
        if nodes and p.nodes is not None:
            missing = [n for n in p.nodes if n not in seen]
            if missing:
                raise ConfigError(f"{where} nodes: {hostlist.collect_hostlist(missing)} "
                                  "not declared in [[nodes]]")
        if p.max_nodes >= 0 and p.min_nodes > p.max_nodes:
            raise ConfigError(f"{where}: min_nodes {p.min_nodes} is above max_nodes {p.max_nodes}")


def _authz(table: dict) -> AuthzConfig:
    return _take(dict(table), AuthzConfig, "[authz]")


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

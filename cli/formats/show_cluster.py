"""scontrol show partition, topology and config: the cluster-wide records,
from Slurm 22.05's src/api/partition_info.c (slurm_sprint_partition_info),
topo_info.c (slurm_print_topo_record) and config_info.c
(slurm_print_ctl_conf, whose key order SLURM_CONFIG_ORDER keeps).
"""
from __future__ import annotations

TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Sequence

from lingjun import slurm
if TYPE_CHECKING:     # hints only: the commands read our messages or protobuf's alike
    from lingjun.v1 import api_pb2


def _limit(v: int, none: str = "UNLIMITED") -> str:
    return none if v < 0 else str(v)


def scontrol_show_partition(parts: Sequence[api_pb2.PartitionInfo], oneliner: bool = False) -> str:
    out = []
    for p in parts:
        max_time = slurm.format_time_limit(p.max_time_min, "scontrol")
        def_time = "NONE" if p.default_time_min < 0 else slurm.format_time_limit(p.default_time_min, "scontrol")
        tres = [f"cpu={p.total_cpus}"]
        if p.total_memory_mb:
            tres.append(f"mem={p.total_memory_mb}M")
        tres += [f"node={p.total_nodes}", f"billing={p.total_cpus}"]
        lines = [
            f"PartitionName={p.name}",
            "AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL",
            f"AllocNodes=ALL Default={'YES' if p.default else 'NO'} QoS=N/A",
            f"DefaultTime={def_time} DisableRootJobs=NO ExclusiveUser=NO "
            f"GraceTime={p.grace_time_s} Hidden=NO",
            f"MaxNodes={_limit(p.max_nodes)} MaxTime={max_time} MinNodes={p.min_nodes} "
            "LLN=NO MaxCPUsPerNode=UNLIMITED",
            f"Nodes={slurm.compress_hostlist(p.node_names) or '(null)'}",
            f"PriorityJobFactor={job_factor(p)} PriorityTier={p.priority_tier or 1} RootOnly=NO ReqResv=NO "
            "OverSubscribe=NO",
            f"OverTimeLimit=NONE PreemptMode={p.preempt_mode or 'OFF'}",
            f"State={p.state or 'UP'} TotalCPUs={p.total_cpus} TotalNodes={p.total_nodes} "
            "SelectTypeParameters=NONE",
            "JobDefaults=(null)",
            "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED",
            f"TRES={','.join(tres)}",
        ]
        if oneliner:
            out.append(" ".join(lines) + "\n")
        else:
            out.append(lines[0] + "\n" + "".join(f"   {l}\n" for l in lines[1:]) + "\n")
    return "".join(out)


# The order scontrol show config prints its keys in (Slurm 22.05); others follow sorted.
SLURM_CONFIG_ORDER = (
    "AccountingStorageBackupHost", "AccountingStorageEnforce", "AccountingStorageHost",
    "AccountingStorageExternalHost", "AccountingStorageParameters", "AccountingStoragePort",
    "AccountingStorageTRES", "AccountingStorageType", "AccountingStorageUser",
    "AccountingStoreFlags", "AcctGatherEnergyType", "AcctGatherFilesystemType",
    "AcctGatherInterconnectType", "AcctGatherNodeFreq", "AcctGatherProfileType",
    "AllowSpecResourcesUsage", "AuthAltTypes", "AuthAltParameters", "AuthInfo", "AuthType",
    "BatchStartTimeout", "BcastExclude", "BcastParameters", "BOOT_TIME", "BurstBufferType",
    "CliFilterPlugins", "ClusterName", "CommunicationParameters", "CompleteWait",
    "CoreSpecPlugin", "CpuFreqDef", "CpuFreqGovernors", "CredType", "DebugFlags",
    "DefMemPerNode", "DependencyParameters", "DisableRootJobs", "EioTimeout",
    "EnforcePartLimits", "Epilog", "EpilogMsgTime", "EpilogSlurmctld", "ExtSensorsType",
    "ExtSensorsFreq", "FederationParameters", "FirstJobId", "GetEnvTimeout", "GresTypes",
    "GpuFreqDef", "GroupUpdateForce", "GroupUpdateTime", "HASH_VAL", "HealthCheckInterval",
    "HealthCheckNodeState", "HealthCheckProgram", "InactiveLimit", "InteractiveStepOptions",
    "JobAcctGatherFrequency", "JobAcctGatherType", "JobAcctGatherParams", "JobCompHost",
    "JobCompLoc", "JobCompPort", "JobCompType", "JobCompUser", "JobContainerType",
    "JobCredentialPrivateKey", "JobCredentialPublicCertificate", "JobDefaults",
    "JobFileAppend", "JobRequeue", "JobSubmitPlugins", "KillOnBadExit", "KillWait",
    "LaunchParameters", "LaunchType", "Licenses", "LogTimeFormat", "MailDomain", "MailProg",
    "MaxArraySize", "MaxDBDMsgs", "MaxJobCount", "MaxJobId", "MaxMemPerNode", "MaxNodeCount",
    "MaxStepCount", "MaxTasksPerNode", "MCSPlugin", "MCSParameters", "MessageTimeout",
    "MinJobAge", "MpiDefault", "MpiParams", "MULTIPLE_SLURMD", "NEXT_JOB_ID",
    "NodeFeaturesPlugins", "OverTimeLimit", "PluginDir", "PlugStackConfig", "PowerParameters",
    "PowerPlugin", "PreemptMode", "PreemptType", "PreemptExemptTime", "PrEpParameters",
    "PrEpPlugins", "PriorityParameters", "PrioritySiteFactorParameters",
    "PrioritySiteFactorPlugin", "PriorityDecayHalfLife", "PriorityCalcPeriod",
    "PriorityFavorSmall", "PriorityFlags", "PriorityMaxAge", "PriorityUsageResetPeriod",
    "PriorityType", "PriorityWeightAge", "PriorityWeightAssoc", "PriorityWeightFairShare",
    "PriorityWeightJobSize", "PriorityWeightPartition", "PriorityWeightQOS",
    "PriorityWeightTRES", "PrivateData", "ProctrackType", "Prolog",
    "PrologEpilogTimeout", "PrologSlurmctld", "PrologFlags", "PropagatePrioProcess",
    "PropagateResourceLimits", "PropagateResourceLimitsExcept", "RebootProgram",
    "ReconfigFlags", "RequeueExit", "RequeueExitHold", "ResumeFailProgram", "ResumeProgram",
    "ResumeRate", "ResumeTimeout", "ResvEpilog", "ResvOverRun", "ResvProlog",
    "ReturnToService", "RoutePlugin", "SchedulerParameters", "SchedulerTimeSlice",
    "SchedulerType", "ScronParameters", "SelectType", "SelectTypeParameters", "SlurmUser",
    "SlurmctldAddr", "SlurmctldDebug", "SlurmctldHost[0]", "SlurmctldLogFile", "SlurmctldPort",
    "SlurmctldSyslogDebug", "SlurmctldPrimaryOffProg", "SlurmctldPrimaryOnProg",
    "SlurmctldTimeout", "SlurmctldParameters", "SlurmdDebug", "SlurmdLogFile",
    "SlurmdParameters", "SlurmdPidFile", "SlurmdPort", "SlurmdSpoolDir", "SlurmdSyslogDebug",
    "SlurmdTimeout", "SlurmdUser", "SlurmSchedLogFile", "SlurmSchedLogLevel",
    "SlurmctldPidFile", "SlurmctldPlugstack", "SLURM_CONF", "SLURM_VERSION", "SrunEpilog",
    "SrunPortRange", "SrunProlog", "StateSaveLocation", "SuspendExcNodes", "SuspendExcParts",
    "SuspendProgram", "SuspendRate", "SuspendTime", "SuspendTimeout", "SwitchParameters",
    "SwitchType", "TaskEpilog", "TaskPlugin", "TaskPluginParam", "TaskProlog", "TCPTimeout",
    "TmpFS", "TopologyParam", "TopologyPlugin", "TrackWCKey", "TreeWidth", "UsePam",
    "UnkillableStepProgram", "UnkillableStepTimeout", "VSizeFactor", "WaitTime",
    "X11Parameters",
)


def scontrol_show_topology(switches) -> str:
    """scontrol show topology: one line per switch (Slurm 22.05's info_topo.c)."""
    out = []
    for s in switches:
        line = f"SwitchName={s.name} Level={s.level} LinkSpeed={s.link_speed}"
        if s.nodes:
            line += f" Nodes={s.nodes}"
        if s.switches:
            line += f" Switches={s.switches}"
        out.append(line + "\n")
    return "".join(out)


def job_factor(part) -> int:
    """A partition's PriorityJobFactor (1 when the controller did not say)."""
    return part.priority_job_factor if part.HasField("priority_job_factor") else 1


def scontrol_show_config(settings: dict[str, str], as_of: int) -> str:
    lines = [f"Configuration data as of {slurm.format_timestamp(as_of)}"]
    rank = {k: i for i, k in enumerate(SLURM_CONFIG_ORDER)}
    for key in sorted(settings, key=lambda k: (rank.get(k, len(rank)), k.lower())):
        lines.append(f"{key:<23} = {settings[key]}")
    return "\n".join(lines) + "\n"

"""Per-job and per-step cgroups: every process of a job on this node, found and killed.

Our proctrack/cgroup. Each job gets one cgroup in the v1 freezer hierarchy,
and each of its steps one below it, as Slurm lays them out::

    /sys/fs/cgroup/freezer/lingjun/<node>/job_<id>/
                                              step_batch/   the batch script
                                              step_0/       srun step 0 ...

(``create_step``): the job's cgroup holds the job to its share of the node,
a step's holds the step to its own (``srun --mem`` within the job's). The
OOM killer's count, peak memory and CPU time are read per step, so a step
that runs out of memory ends OUT_OF_MEMORY alone and the batch script goes
on; killing a step's cgroup kills its setsid and double-forked children,
killing the job's kills every step (``pids`` and ``remove`` take the whole
tree below a cgroup).

``<node>`` is the agent's identity (``procs.node_identity``: node name plus a
digest of its state dir), because several agents of a local cluster share a
host. A process started inside the cgroup cannot leave it (only root moves
processes), so ``setsid``, a double fork and ``env -i`` all stay found: the
marker in the environment (``procs``) does not survive ``env -i``, the
subreaper tree does not survive the agent's own tasks' orphans; the cgroup
survives both.

How processes get in. A supervisor (single-threaded) enters the cgroup,
starts the job's process, and leaves again (``inside``): the child is born
in it, and so is everything it ever starts. The supervisor itself must stay
outside, since killing freezes the cgroup. The agent (many threads) cannot do
that and moves a task in right after starting it (``join(cg, pid)``): a task
that forks within that instant leaves its child behind, which the marker
still finds. Supervisors of steps do it the supervisor's way.

How they are killed (``kill``): freeze the cgroup, SIGKILL every process in
it, thaw (frozen processes die on thaw), and again until it is empty, so a
fork bomb cannot outrun us. ``terminate`` sends SIGCONT and SIGTERM first
and waits the grace. ``remove`` drops the empty cgroup.

The calls, for a supervisor::

    cg = cgroups.create(node, job_id)        # None: no cgroups here
    with cgroups.inside(cg):
        proc = subprocess.Popen(...)         # born inside, with all it starts
    ...
    cgroups.terminate(cg, grace_s)           # or kill(cg): SIGKILL at once
    cgroups.remove(cg)

Where cgroups cannot be used (no v1 freezer mounted, not root) ``create``
returns None and the callers fall back to the marker and subreaper tree of
``procs``, with its one gap (``env -i setsid`` from a task that the agent runs
directly).

Limits. ``create(node, job_id, limits=Limits(...))`` also puts the job in
the same place of the other v1 hierarchies the host mounts, and holds it
there to what it was given on the node::

    memory   memory.limit_in_bytes (and memory.memsw.limit_in_bytes: no swap
             beyond it), the kernel's OOM killer acting inside the job only
    cpuset   cpuset.cpus = the job's CPUs, cpuset.mems = the parent's
    devices  devices.deny "c 195:N rwm" for each GPU device file not the job's
    pids     membership (counted), no limit
    cpuacct  membership: cpuacct.usage is the job's TotalCPU

``settings(limits)`` is that table as a pure function (the files and values
to write), ``apply`` writes it. A hierarchy the host lacks costs what it
holds (no memory: --mem is not enforced), said in one log line per
controller and process, never silently (``missing``). ``oom_kills`` reads
the OOM killer's count for the job (``oom_kill`` in memory.oom_control, or
``memory.failcnt`` on kernels without it), ``usage`` its peak memory and
CPU time from the cgroup's own accounting.

cgroup v2, chosen over v1 where usable (``probe_unified``: a v2 mount, at
/sys/fs/cgroup or a hybrid's /sys/fs/cgroup/unified, whose cgroup delegated
to the agent, its systemd unit's with Delegate=yes, lists memory, cpuset or
pids in cgroup.controllers): the same calls. The agent moves its own
processes into an ``agent`` leaf (v2 hands controllers down only from a
cgroup without processes; ``delegate``), each level down to a job enables
"+memory +cpuset +cpu +pids" in cgroup.subtree_control, and the job lives in
``<delegated>/lingjun/<node>/job_<id>/step_<step>`` with memory.max,
memory.swap.max 0 and cpuset.cpus; cpu.stat's usage, memory.peak and
memory.events' oom_kill are its accounting, cgroup.freeze the freezer. Device
files: v2 has no devices controller; as Slurm does, a BPF_CGROUP_DEVICE
program attached to the job's cgroup refuses the other jobs' GPU device
files (``devfilter``), and the job's steps inherit it. No usable v2 and no v1
freezer: ``create`` returns None and the agent says so in one log line.
"""
from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
FREEZER = ROOT / "freezer"
BASE = FREEZER / "lingjun"
POLL_S = 0.02
UNKILLABLE_TIMEOUT_S = 60.0
# v1 hierarchies a job is also put in, beside the freezer (see the docstring)
LIMITED = ("memory", "cpuset", "devices", "pids", "cpuacct")


@dataclass(frozen=True)
class Limits:
    """What a job may use on this node; each empty value: not limited."""
    memory_bytes: int = 0
    cpus: tuple[int, ...] = ()           # this host's CPUs (what cpuset and affinity take)
    cpu_ids: tuple[int, ...] = ()        # the same, as the node's CPU indices (the agent's book)
    deny_devices: tuple[str, ...] = ()   # "c 195:0": device files the job may not open

    @classmethod
    def from_json(cls, d: dict | None) -> "Limits | None":
        if d is None:
            return None
        return cls(memory_bytes=int(d.get("memory_bytes", 0)),
                   cpus=tuple(int(c) for c in d.get("cpus", ())),
                   cpu_ids=tuple(int(c) for c in d.get("cpu_ids", ())),
                   deny_devices=tuple(d.get("deny_devices", ())))


@dataclass(frozen=True)
class JobCgroup:
    """A job's cgroup on this node, or one of its steps' (``step``: "batch",
    "0", ...; "" for the job's own)."""
    path: Path                   # v1: in the freezer hierarchy; v2: in the unified one
    job_id: int
    # v1: the job's directory in each other hierarchy the host mounts
    limited: tuple[Path, ...] = field(default=(), compare=False)
    unified: bool = field(default=False, compare=False)
    cpus: tuple[int, ...] = field(default=(), compare=False)   # affinity of what starts inside
    step: str = field(default="", compare=False)
    # v2: the hierarchy's mount and the controllers enabled for jobs there
    mount: Path | None = field(default=None, compare=False)
    enabled: tuple[str, ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return str(self.path)

    @property
    def name(self) -> str:
        """StepId=12.batch as Slurm names it in its messages (the job alone: 12)."""
        return f"{self.job_id}.{self.step}" if self.step else str(self.job_id)

    def dirs(self) -> tuple[Path, ...]:
        return (self.path, *self.limited)

    def controller(self, name: str) -> Path | None:
        """The job's directory that holds ``name``'s files (None: not mounted)."""
        if self.unified:
            return self.path if name in self.enabled or name == "cpuacct" else None
        for d in self.limited:
            if _hierarchy_of(d) == name:
                return d
        return None


def node_dir(node: str, base: Path = BASE) -> Path:
    return Path(base) / node.replace("/", "_")


def job_path(node: str, job_id: int, base: Path = BASE) -> Path:
    return node_dir(node, base) / f"job_{job_id}"


# -- cgroup v2 -------------------------------------------------------------------
# Controllers a job's cgroup is held by in v2, in the order subtree_control
# takes them; "cpu" gives cpu.stat's usage, the rest hold the limits.
V2_CONTROLLERS = ("memory", "cpuset", "cpu", "pids")
AGENT_LEAF = "agent"      # v2: where the agent's own processes move (no internal processes)


@dataclass(frozen=True)
class Unified:
    """A cgroup v2 hierarchy that can hold jobs: its mount, the cgroup
    delegated to the agent (its own: the systemd unit's, Delegate=yes), and
    the controllers that cgroup may hand down. Jobs go below it::

        <delegated>/agent/                     the agent and its supervisors
        <delegated>/lingjun/<node>/job_<id>/step_<step>/
    """
    mount: Path
    delegated: Path
    controllers: tuple[str, ...]

    @property
    def base(self) -> Path:
        return self.delegated / "lingjun"


def probe_unified(root: Path = ROOT, self_cgroup: str | None = None) -> tuple[Unified | None, str]:
    """The v2 hierarchy jobs can be held in, or None and why not.

    ``root``: where cgroup file systems are mounted (v2 alone there, or a
    hybrid's v2 at ``root/unified``); ``self_cgroup``: the text of
    /proc/self/cgroup (its ``0::/path`` line names the delegated cgroup).
    Usable: the delegated cgroup lists at least one of the controllers that
    hold a job (memory, cpuset, pids) in its cgroup.controllers.
    """
    root = Path(root)
    if (root / "cgroup.controllers").exists():
        mount = root
    elif (root / "unified" / "cgroup.controllers").exists():
        mount = root / "unified"
    else:
        return None, f"no cgroup v2 hierarchy at {root}"
    if self_cgroup is None:
        try:
            self_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError as e:
            return None, f"cannot read /proc/self/cgroup: {e.strerror}"
    rel = next((line.split(":", 2)[2] for line in self_cgroup.splitlines()
                if line.startswith("0::")), None)
    if rel is None:
        return None, "this process is in no cgroup v2"
    delegated = mount / rel.strip().lstrip("/")
    try:
        have = (delegated / "cgroup.controllers").read_text().split()
    except OSError as e:
        return None, f"cannot read {delegated / 'cgroup.controllers'}: {e.strerror}"
    controllers = tuple(c for c in V2_CONTROLLERS if c in have)
    if not set(controllers) & {"memory", "cpuset", "pids"}:
        return None, (f"cgroup v2 at {mount} has no memory, cpuset or pids controller "
                      f"delegated to {delegated}")
    return Unified(mount, delegated, controllers), ""


_host_unified: list = []


def host_unified() -> Unified | None:
    """This host's usable v2 hierarchy (probed once per process), or None."""
    if not _host_unified:
        _host_unified.append(probe_unified()[0])
    return _host_unified[0]


def unified_host() -> bool:
    """Whether jobs here are held in cgroup v2 (chosen over v1 where usable)."""
    return host_unified() is not None


def _layout(base: Path, unified: Unified | None = None) -> tuple[Path, Unified | None]:
    """Where jobs go, and the v2 hierarchy when that is where."""
    if unified is None and Path(base) == BASE:
        unified = host_unified()
    if unified is not None:
        return unified.base, unified
    return Path(base), None


def delegate(u: Unified) -> None:
    """Make the delegated cgroup able to hand its controllers down: v2 lets a
    cgroup enable controllers for its children only while it holds no process
    itself, so the processes in it (the agent; at a restart, none) move to
    the ``agent`` leaf, as slurmd moves itself to its "system" cgroup. The
    mount's root is exempt from that rule and keeps its processes."""
    if u.delegated != u.mount:
        leaf = u.delegated / AGENT_LEAF
        leaf.mkdir(exist_ok=True)
        try:
            procs = (u.delegated / "cgroup.procs").read_text().split()
        except OSError:
            procs = []
        for pid in procs:
            with contextlib.suppress(ProcessLookupError):
                (leaf / "cgroup.procs").write_text(pid)
    _enable_v2_controllers(u, u.delegated)


def available(base: Path = BASE, unified: Unified | None = None) -> bool:
    """Whether this process can make and fill job cgroups under ``base``."""
    if os.geteuid() != 0:
        return False
    base, u = _layout(base, unified)
    probe = u.delegated if u is not None else Path(base).parent
    return (probe / "cgroup.procs").exists() and os.access(probe, os.W_OK)


def _hierarchy_of(d: Path) -> str:
    return d.relative_to(ROOT).parts[0]


def mounted(name: str) -> bool:
    return (ROOT / name / "cgroup.procs").exists()


def _limited_dirs(path: Path) -> tuple[Path, ...]:
    """The job's place in each other v1 hierarchy the host mounts (same relative path)."""
    try:
        rel = path.relative_to(FREEZER)
    except ValueError:
        return ()
    return tuple(ROOT / h / rel for h in LIMITED if mounted(h))


_said: set[str] = set()


def missing(what: str, why: str) -> None:
    """One log line per process for a limit this host cannot enforce: never silently."""
    if what not in _said:
        _said.add(what)
        log.warning("%s not enforced here: %s", what, why)


def _mkdir_cpuset(d: Path) -> None:
    """mkdir -p in the v1 cpuset hierarchy: a new cpuset is empty, and nothing
    can join it before its cpus and mems are set, so each new level copies its
    parent's."""
    missing_dirs = []
    p = d
    while not p.exists():
        missing_dirs.append(p)
        p = p.parent
    for p in reversed(missing_dirs):
        with contextlib.suppress(FileExistsError):
            p.mkdir()
        for name in ("cpuset.cpus", "cpuset.mems"):
            if not (p / name).read_text().strip():
                (p / name).write_text((p.parent / name).read_text().strip() or "\n")


def settings(limits: Limits, unified: bool, parent_mems: str = "") -> list[tuple[str, str, str]]:
    """(controller, file, value) to write for ``limits``, in order.

    >>> settings(Limits(memory_bytes=100 << 20, cpus=(0, 1), deny_devices=("c 195:0",)), False)[:3]
    [('memory', 'memory.limit_in_bytes', '104857600'), ('memory', 'memory.memsw.limit_in_bytes', '104857600'), ('cpuset', 'cpuset.cpus', '0-1')]
    """
    out: list[tuple[str, str, str]] = []
    cpus = cpu_list(limits.cpus)
    if unified:
        if limits.memory_bytes:
            out += [("memory", "memory.max", str(limits.memory_bytes)),
                    ("memory", "memory.swap.max", "0")]
        if cpus:
            out.append(("cpuset", "cpuset.cpus", cpus))
        return out
    if limits.memory_bytes:
        # memsw after the plain limit: the kernel refuses memsw below it
        out += [("memory", "memory.limit_in_bytes", str(limits.memory_bytes)),
                ("memory", "memory.memsw.limit_in_bytes", str(limits.memory_bytes))]
    if cpus:
        out.append(("cpuset", "cpuset.cpus", cpus))
        if parent_mems:
            out.append(("cpuset", "cpuset.mems", parent_mems))
    out += [("devices", "devices.deny", f"{d} rwm") for d in limits.deny_devices]
    return out


def cpu_list(cpus: Iterable[int]) -> str:
    """Kernel list format: (0, 1, 2, 5) -> "0-2,5"."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(set(cpus)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def apply(cg: JobCgroup, limits: Limits) -> None:
    """Write ``limits`` into the job's cgroup; what cannot be written is said, once."""
    mems = ""
    cpuset = cg.controller("cpuset")
    if cpuset is not None and not cg.unified:
        mems = (cpuset.parent / "cpuset.mems").read_text().strip()
    for controller, name, value in settings(limits, cg.unified, mems):
        d = cg.controller(controller)
        if d is None:
            missing(f"{controller} limits",
                    f"no {controller} controller for job cgroups on this host")
            continue
        if not cg.unified and not (d / name).exists():
            if name != "memory.memsw.limit_in_bytes":   # no swap accounting: the plain
                missing(name, f"no {name} in {d}")     # limit holds the job
            continue
        try:
            (d / name).write_text(value)
        except OSError as e:
            log.warning("job %s: cannot write %s to %s: %s", cg.name, value, d / name,
                        e.strerror)
    if limits.deny_devices and cg.unified:
        # v2 has no devices controller: a BPF_CGROUP_DEVICE program on the
        # job's cgroup refuses them, and its steps below inherit it.
        from lingjun_agent.launcher import devfilter
        try:
            devfilter.attach(cg.path, list(limits.deny_devices))
        except OSError as e:
            log.warning("job %s: cannot confine device files (%s): GPU device files of "
                        "other jobs stay openable (CUDA_VISIBLE_DEVICES still binds)",
                        cg.name, e.strerror or e)


def _enable_v2_controllers(u: Unified, *levels: Path) -> None:
    """v2: each of ``levels`` hands the delegated controllers down to its
    children (cgroup.subtree_control "+memory +cpuset +cpu +pids")."""
    want = " ".join(f"+{c}" for c in u.controllers)
    if not want:
        return
    for p in levels:
        try:
            (p / "cgroup.subtree_control").write_text(want)
        except OSError as e:
            log.warning("cannot enable controllers %s in %s: %s", want, p, e.strerror)


def _v2_levels(u: Unified, path: Path) -> list[Path]:
    """The cgroups from the delegated one down to ``path``'s parent."""
    rel = path.relative_to(u.delegated).parts
    return [u.delegated / Path(*rel[:i]) if i else u.delegated for i in range(len(rel))]


def create(node: str, job_id: int, base: Path = BASE,
           limits: Limits | None = None, unified: Unified | None = None) -> JobCgroup | None:
    """Make (or find) the job's cgroup, held to ``limits`` when given; None
    where cgroups are unavailable. In v2 (``unified``, or the host's when it
    has a usable one) the job's processes live in its steps' cgroups only
    (``create_step``): v2 keeps processes out of a cgroup that hands
    controllers down."""
    if not available(base, unified):
        return None
    base, u = _layout(base, unified)
    path = job_path(node, job_id, base)
    try:
        if u is not None:
            path.mkdir(parents=True, exist_ok=True)
            delegate(u)
            _enable_v2_controllers(u, *_v2_levels(u, path)[1:], path)
        else:
            path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        log.warning("job %d: cannot create cgroup %s (%s): tracking by marker only",
                    job_id, path, e.strerror)
        return None
    if u is not None:
        cg = JobCgroup(path, job_id, (), True, limits.cpus if limits else (),
                       mount=u.mount, enabled=u.controllers)
        if limits is not None:
            apply(cg, limits)
        return cg
    if limits is None:
        return JobCgroup(path, job_id, _existing(path), False)
    limited: list[Path] = []
    for d in _limited_dirs(path):
        try:
            if _hierarchy_of(d) == "cpuset":
                _mkdir_cpuset(d)
            else:
                d.mkdir(parents=True, exist_ok=True)
            limited.append(d)
        except OSError as e:
            log.warning("job %d: cannot create cgroup %s: %s", job_id, d, e.strerror)
    for h in ("memory", "cpuset", "devices"):
        if not mounted(h):
            missing(f"{h} limits", f"no v1 {h} hierarchy mounted at {ROOT / h}")
    cg = JobCgroup(path, job_id, tuple(limited), False, limits.cpus)
    apply(cg, limits)
    return cg


def step_dir_name(step: str) -> str:
    return f"step_{step}"


def create_step(job: JobCgroup | None, step: str,
                limits: Limits | None = None) -> JobCgroup | None:
    """The step's cgroup below its job's, as Slurm lays them out
    (``job_12/step_batch``, ``job_12/step_0``), in every hierarchy the job
    is in; None where the job has none. A step is held to its own share
    within the job's (``limits``: its --mem; nothing given: the job's limits
    hold it, as the parent's hold every child). In v1 a child cgroup starts
    with its parent's device list and CPUs, so the job's GPU denials and
    cpuset hold the step from its first moment."""
    if job is None:
        return None
    path = job.path / step_dir_name(step)
    try:
        path.mkdir(exist_ok=True)
    except OSError as e:
        log.warning("job %s: cannot create step cgroup %s: %s", job.name, path, e.strerror)
        return None
    limited: list[Path] = []
    for d in job.limited:
        sd = d / step_dir_name(step)
        try:
            if _hierarchy_of(d) == "cpuset":
                _mkdir_cpuset(sd)
            else:
                sd.mkdir(exist_ok=True)
            limited.append(sd)
        except OSError as e:
            log.warning("job %s: cannot create step cgroup %s: %s", job.name, sd, e.strerror)
    cg = JobCgroup(path, job.job_id, tuple(limited), job.unified, job.cpus, step=step,
                   mount=job.mount, enabled=job.enabled)
    if limits is not None:
        apply(cg, Limits(memory_bytes=limits.memory_bytes,
                         cpus=limits.cpus if job.unified else ()))
    return cg


def _existing(path: Path) -> tuple[Path, ...]:
    return tuple(d for d in _limited_dirs(path) if d.is_dir())


def find(node: str, job_id: int, base: Path = BASE) -> JobCgroup | None:
    """The job's cgroup if it exists."""
    base, u = _layout(base)
    path = job_path(node, job_id, base)
    if not (path / "cgroup.procs").exists():
        return None
    return _job(path, job_id, u, _cpus_of(path, u is not None))


def _job(path: Path, job_id: int, u: Unified | None, cpus: tuple[int, ...] = ()) -> JobCgroup:
    if u is not None:
        return JobCgroup(path, job_id, (), True, cpus, mount=u.mount, enabled=u.controllers)
    return JobCgroup(path, job_id, _existing(path), False, cpus)


def _cpus_of(path: Path, unified: bool) -> tuple[int, ...]:
    """The CPUs a job's cgroup holds it to (() when not pinned or unknown)."""
    if unified:
        d = path
    else:
        try:
            d = ROOT / "cpuset" / path.relative_to(FREEZER)
        except ValueError:
            return ()
    try:
        return parse_cpu_list((d / "cpuset.cpus").read_text())
    except (OSError, ValueError):
        return ()


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """ "0-2,5" -> (0, 1, 2, 5)."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def jobs(node: str, base: Path = BASE) -> list[JobCgroup]:
    """Every job cgroup of ``node``."""
    base, u = _layout(base)
    d = node_dir(node, base)
    try:
        names = os.listdir(d)
    except OSError:
        return []
    out = []
    for name in sorted(names):
        if name.startswith("job_") and name[4:].isdigit():
            out.append(_job(d / name, int(name[4:]), u))
    return out


def join(cg: JobCgroup | Path, pid: int = 0) -> None:
    """Move ``pid`` (0: the caller) and all its threads into the cgroup (in
    every hierarchy the job is in)."""
    dirs = cg.dirs() if isinstance(cg, JobCgroup) else (Path(cg),)
    for d in dirs:
        with open(d / "cgroup.procs", "w") as f:
            f.write(str(pid or os.getpid()))


def _current(dirs: Iterable[Path] = (FREEZER,)) -> tuple[Path, ...]:
    """Where the caller lives in the hierarchies of ``dirs`` (``inside`` returns it there)."""
    with open("/proc/self/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    out = []
    for d in dirs:
        if str(d).startswith(str(FREEZER)) or d == FREEZER:
            name = "freezer"
        else:
            try:
                name = _hierarchy_of(Path(d))
            except ValueError:
                name = ""
        root = ROOT / name if name in LIMITED or name == "freezer" else ROOT
        rel = "/"
        for _, controllers, r in lines:
            if (name and name in controllers.split(",")) or (root == ROOT and controllers == ""):
                rel = r
                break
        out.append(root / rel.lstrip("/"))
    return tuple(out)


def _current_v2(mount: Path) -> tuple[Path, ...]:
    """Where the caller lives in the v2 hierarchy mounted at ``mount``."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return (mount / line.rstrip("\n")[3:].lstrip("/"),)
    return (mount,)


@contextlib.contextmanager
def inside(cg: JobCgroup | None) -> Iterator[None]:
    """Run the block inside the job's cgroup (and on its CPUs), then return to
    where we were: a process forked in the block is born in it. Single-threaded
    callers only (it moves the whole process). ``None`` does nothing."""
    if cg is None:
        yield
        return
    home = _current_v2(cg.mount) if cg.unified and cg.mount else _current(cg.dirs())
    # the caller's own CPUs, given back after it left the job's cpuset (the
    # kernel keeps an affinity set inside as the caller's wish)
    affinity = os.sched_getaffinity(0)
    try:
        join(cg)
    except OSError as e:     # tracked by the marker instead; the job still runs
        log.warning("job %s: cannot enter cgroup %s: %s", cg.name, cg.path, e)
        for h in home:
            with contextlib.suppress(OSError):
                join(h)
        yield
        return
    try:
        with pinned(cg.cpus):
            yield
    finally:
        for h in home:
            join(h)
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, affinity)


@contextlib.contextmanager
def pinned(cpus: Iterable[int]) -> Iterator[None]:
    """Run the block with the caller's CPU affinity set to ``cpus`` (() : as
    it is), then set it back: a process forked in the block keeps them. The
    affinity holds where no cpuset does (a host without cgroups)."""
    cpus = tuple(cpus)
    if not cpus:
        yield
        return
    saved = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as e:
        log.warning("cannot pin to CPUs %s: %s", cpu_list(cpus), e.strerror)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, saved)


def _tree(d: Path) -> list[Path]:
    """``d`` and every cgroup below it, children before their parents."""
    out: list[Path] = []
    for top, dirs, _ in os.walk(d, topdown=False):
        out.append(Path(top))
    return out


def pids(cg: JobCgroup) -> list[int]:
    """Every process in the cgroup and in those below it (a job's steps)."""
    out: list[int] = []
    for d in _tree(cg.path):
        try:
            with open(d / "cgroup.procs") as f:
                out.extend(int(x) for x in f.read().split())
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno != errno.ENODEV:     # removed between the open and the read
                raise
    return out


def _state(cg: JobCgroup, value: str) -> None:
    """FROZEN or THAWED (v1 freezer.state; v2 cgroup.freeze 1 or 0)."""
    if cg.unified:
        name, value = "cgroup.freeze", "1" if value == "FROZEN" else "0"
    else:
        name = "freezer.state"
    with open(cg.path / name, "w") as f:
        f.write(value)


def _frozen(cg: JobCgroup) -> bool:
    if cg.unified:
        with open(cg.path / "cgroup.events") as f:
            return "frozen 1" in f.read()
    with open(cg.path / "freezer.state") as f:
        return f.read().strip() == "FROZEN"


def _freeze(cg: JobCgroup, timeout: float = 2.0) -> None:
    """Ask for FROZEN and wait for it (FREEZING while tasks are in the kernel)."""
    _state(cg, "FROZEN")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _frozen(cg):
            return
        time.sleep(0.005)


def signal_all(cg: JobCgroup, sig: int) -> int:
    """Send ``sig`` to every process in the cgroup; returns how many."""
    n = 0
    for pid in pids(cg):
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, sig)
            n += 1
        except ProcessLookupError:
            pass
    return n


def kill(cg: JobCgroup, unkillable_s: float = UNKILLABLE_TIMEOUT_S) -> bool:
    """SIGKILL everything in the cgroup, frozen so none can fork meanwhile.

    Returns once it is empty (True), or False after ``unkillable_s`` with
    processes still in it (uninterruptible sleep: Slurm's "Kill task failed").
    """
    give_up = time.monotonic() + unkillable_s
    while True:
        left = [p for p in pids(cg) if p != os.getpid()]
        if not left:
            return True
        if time.monotonic() > give_up:
            log.error("job %s: processes %s in %s survived SIGKILL", cg.name, left, cg.path)
            return False
        try:
            _freeze(cg)
            signal_all(cg, signal.SIGKILL)
        except FileNotFoundError:
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                _state(cg, "THAWED")
        time.sleep(POLL_S)


def signal_frozen(cg: JobCgroup, *sigs: int) -> int:
    """Send ``sigs`` to every process in the cgroup while it is frozen (no pid
    can exit and be reused meanwhile, none can fork); returns how many."""
    try:
        _freeze(cg)
        n = 0
        for sig in sigs:
            n = signal_all(cg, sig)
        return n
    except FileNotFoundError:
        return 0
    finally:
        with contextlib.suppress(FileNotFoundError):
            _state(cg, "THAWED")


def terminate(cg: JobCgroup, grace_s: float, unkillable_s: float = UNKILLABLE_TIMEOUT_S) -> bool:
    """SIGCONT and SIGTERM to all, ``grace_s`` to go, then ``kill``."""
    if signal_frozen(cg, signal.SIGCONT, signal.SIGTERM):
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(p != os.getpid() for p in pids(cg)):
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    return kill(cg, unkillable_s)


def remove(cg: JobCgroup, timeout: float = 2.0) -> bool:
    """Drop the (emptied) cgroup, in every hierarchy; the last exits may take
    a moment to leave it."""
    deadline = time.monotonic() + timeout
    ok = True
    for d in (sub for top in cg.dirs() for sub in _tree(top)):
        while True:
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() > deadline:
                    log.warning("job %s: cannot remove cgroup %s: %s", cg.name, d, e.strerror)
                    ok = False
                    break
                time.sleep(POLL_S)
    return ok


def remove_node(node: str, base: Path = BASE) -> None:
    """Drop the node's directory once no job cgroup is left in it."""
    base, u = _layout(base)
    d = node_dir(node, base)
    for path in (d, *(() if u else _limited_dirs(d))):
        with contextlib.suppress(OSError):
            os.rmdir(path)


def oom_kills(cg: JobCgroup) -> int:
    """How many processes of the job the kernel's OOM killer took (in its
    memory cgroup): ``oom_kill`` in memory.oom_control (v1, kernels since 4.13)
    or memory.events (v2); on older v1 kernels memory.failcnt, the times the
    job hit its limit. 0 where there is no memory cgroup."""
    d = cg.controller("memory")
    if d is None:
        return 0
    try:
        text = (d / ("memory.events" if cg.unified else "memory.oom_control")).read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    try:
        return int((d / "memory.failcnt").read_text())
    except (OSError, ValueError):
        return 0


@dataclass(frozen=True)
class Usage:
    """What the job used, from its cgroups' own accounting (0: not known)."""
    max_rss_kb: int = 0
    user_cpu_ms: int = 0
    system_cpu_ms: int = 0


def usage(cg: JobCgroup) -> Usage:
    """Peak memory (memory.max_usage_in_bytes, v2 memory.peak) and CPU time
    (cpuacct.usage split as usage_user/usage_sys, v2 cpu.stat) of everything
    the job ran here."""
    peak = user_ns = sys_ns = 0
    mem = cg.controller("memory")
    with contextlib.suppress(OSError, ValueError):
        if mem is not None:
            peak = int((mem / ("memory.peak" if cg.unified else
                               "memory.max_usage_in_bytes")).read_text())
    with contextlib.suppress(OSError, ValueError):
        if cg.unified:
            stat_ = dict(line.split() for line in (cg.path / "cpu.stat").read_text().splitlines())
            user_ns, sys_ns = int(stat_["user_usec"]) * 1000, int(stat_["system_usec"]) * 1000
        elif (acct := cg.controller("cpuacct")) is not None:
            # cpuacct.usage is the scheduler's exact runtime; the user/system
            # split (usage_user, usage_sys) is sampled at timer ticks and may
            # fall short of it by a tick per CPU, so it only apportions the total
            total = int((acct / "cpuacct.usage").read_text())
            user_ns = int((acct / "cpuacct.usage_user").read_text())
            sys_ns = int((acct / "cpuacct.usage_sys").read_text())
            split = user_ns + sys_ns
            user_ns = total * user_ns // split if split else total
            sys_ns = total - user_ns
    return Usage(max_rss_kb=peak // 1024, user_cpu_ms=user_ns // 1_000_000,
                 system_cpu_ms=sys_ns // 1_000_000)


def cpu_bind_env(cpus: Iterable[int]) -> dict[str, str]:
    """Slurm's variables for tasks bound to ``cpus`` (--cpu-bind's default,
    as task/affinity sets them): SLURM_CPU_BIND=quiet,mask_cpu:0x3."""
    mask = 0
    for c in cpus:
        mask |= 1 << c
    text = f"0x{mask:X}"
    return {"SLURM_CPU_BIND": f"quiet,mask_cpu:{text}", "SLURM_CPU_BIND_TYPE": "mask_cpu:",
            "SLURM_CPU_BIND_LIST": text, "SLURM_CPU_BIND_VERBOSE": "quiet"}


def gpu_device_denials(dev_root: str | Path, gpu_ids: Iterable[int]) -> tuple[str, ...]:
    """"c MAJOR:MINOR" of each GPU device file (``<dev_root>/nvidiaN``) that
    is not one of ``gpu_ids``: what the job may not open. nvidiactl and
    nvidia-uvm stay open to all, as under Slurm's ConstrainDevices."""
    mine = set(gpu_ids)
    out = []
    try:
        names = sorted(os.listdir(dev_root))
    except OSError:
        return ()
    for name in names:
        if not name.startswith("nvidia") or not name[6:].isdigit():
            continue
        if int(name[6:]) in mine:
            continue
        try:
            st = os.stat(Path(dev_root) / name)
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode):
            out.append(f"c {os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
    return tuple(out)

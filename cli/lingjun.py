"""lingjun: the cluster's own command.

    lingjun up [--nodes N] [--cpus C] [--memory-mb M] [--cluster-name NAME]
               [--partition-name NAME] [--state-dir DIR] [--port P]
               [--gpus G] [--gpu-type T] [--features NODES=F1,F2 ...]
               [--tls-cert PEM --tls-key PEM [--tls-ca PEM]] [--auth-socket PATH]
               [--sanity KEY=VALUE ...]          # [sanity] settings of the node probes
    lingjun down [--state-dir DIR]
    lingjun keygen PATH
    lingjun status
    lingjun net show [NODE]
    lingjun events JOB                  (cli/events.py)
    lingjun health [NODE] [--events N]
    lingjun restd [HOST:PORT | unix:/PATH]...   (lingjun_restd/: Slurm's REST API)
    lingjun logs [-f] [--rank N] JOB[.STEP]     (cli/logs.py)
    lingjun web                         the dashboard's URL, with your credential

``up`` starts a controller and N agents on this machine (node1..nodeN, each
agent with its own state dir and, as root, its own hostname; all on
loopback), waits until every node has registered, and leaves a pointer in
``$LINGJUN_HOME/local.json`` (default ``~/.lingjun``) through which sbatch,
squeue and the rest find it. ``down`` stops exactly what ``up`` started, by
PID (checked against each process's start time), and the jobs' processes.

``up`` makes the cluster key ``DIR/cluster.key`` (kept across runs
in the same state dir), and the controller serves users' credentials on
``DIR/auth.sock``; both go into the generated ``[auth]`` table and the
pointer. ``keygen`` writes a key for a real cluster (mode 0600, never over
an existing file).
"""
from __future__ import annotations

import argparse
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from lingjun.options import VERSION

import grpc
import psutil

from lingjun import auth, credential
from lingjun.client import Api, ControllerUnreachable, lingjun_home, local_pointer
from lingjun.endpoints import running_cluster_record
from lingjun.v1 import api_pb2
from lingjund import statedir

PROG = "lingjun"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _config_text(args, port: int, state: Path) -> str:
    return f"""# written by `lingjun up`: a local cluster of {args.nodes} nodes on this machine
cluster_name = "{args.cluster_name}"

[controller]
listen = "127.0.0.1:{port}"
state_dir = "{state / 'controller'}"
heartbeat_interval_s = {min(2.0, args.heartbeat_timeout / 3):g}
heartbeat_timeout_s = {args.heartbeat_timeout}
kill_wait_s = {args.kill_wait}
scheduler_interval_s = 2.0
max_array_size = {args.max_array_size}
metrics_address = "127.0.0.1:0"
{_mail_text(args)}{f'user = {json.dumps(args.controller_user)}' if args.controller_user else ""}
[agent]
state_dir = "{state / 'agents'}"
reconnect_max_s = 2.0
metrics_address = "127.0.0.1:0"
device_root = "{args.device_root}"
sysfs_root = "{args.sysfs_root}"
{f'mps_control = "{args.mps_control}"' if args.mps_control else ""}
lldpctl = "{args.lldpctl}"

{_nodes_text(args)}
{_sanity_text(args)}
[[partitions]]
name = "{args.partition_name}"
nodes = "ALL"
default = true
spare_nodes = {args.spare_nodes}

{_auth_text(args, state)}"""


def _mail_text(args) -> str:
    """[controller] mail_prog when --mail-prog names one (else the default, /usr/bin/mail)."""
    if args.mail_prog is None:
        return ""
    return f"mail_prog = {json.dumps(args.mail_prog)}\n"


# -- the local cluster's key, credential socket and (optional) TLS -----------
def _auth_socket_path(state: Path) -> str:
    """DIR/auth.sock, or a short path under /tmp when DIR is too deep for a
    unix socket's 108-byte address."""
    path = str(state / "auth.sock")
    if len(path.encode()) < 100:
        return path
    import hashlib
    return f"/tmp/lingjun-{hashlib.sha256(path.encode()).hexdigest()[:16]}.sock"


def _auth_text(args, state: Path) -> str:
    # The controller makes its socket: in a directory of its user's (DIR/run)
    # when it is not root, who owns DIR.
    home = state / "run" if args.controller_user else state
    sock = str(Path(args.auth_socket).absolute()) if args.auth_socket else _auth_socket_path(home)
    lines = ["[auth]", f'key_file = "{state / "cluster.key"}"', f'socket = "{sock}"']
    for name in ("tls_cert", "tls_key", "tls_ca"):
        value = getattr(args, name)
        if value:
            lines.append(f'{name} = "{Path(value).absolute()}"')
    if args.token_relay_user:
        lines.append(f"token_relay_users = {json.dumps(args.token_relay_user)}")
    return "\n".join(lines) + "\n"


def _ensure_key(path: Path, owner: "pwd.struct_passwd | None") -> None:
    """A key for the local cluster: made once, kept for the next `up` of the
    same dir; it belongs to the controller's user (root's agents read it too)."""
    if not path.exists():
        auth.write_key(path)
    if owner is not None:
        os.chown(path, owner.pw_uid, owner.pw_gid)
    elif os.geteuid() == 0:
        os.chown(path, 0, 0)    # an earlier `up` gave it to a --controller-user
    auth.load_key(path, frozenset({owner.pw_uid if owner else os.geteuid()}))


def cmd_keygen(args) -> int:
    try:
        auth.write_key(args.path)
    except auth.KeyFileError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"{PROG}: error: {args.path}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"Wrote a new cluster key to {args.path} (mode 0600). Install the same file, mode "
          f"0600, on the controller, owned by its user ([controller] user), and on every "
          f"agent, owned by root or that user, and name it in [auth] key_file.")
    return 0


def _node_features(args) -> dict[str, tuple[str, ...]]:
    """--features "node[1-2]=fast,ib" (repeatable) -> node -> features."""
    import hostlist
    out: dict[str, tuple[str, ...]] = {}
    for item in args.features or ():
        names, sep, feats = item.partition("=")
        if not sep:
            raise ValueError(f"--features {item!r}: want NODES=FEATURE[,FEATURE...]")
        for name in hostlist.expand_hostlist(names):
            out[name] = tuple(f for f in feats.split(",") if f)
    return out


def _nodes_text(args) -> str:
    """One [[nodes]] table per group of nodes with the same features."""
    import hostlist
    features = _node_features(args)
    groups: dict[tuple[str, ...], list[str]] = {}
    for i in range(1, args.nodes + 1):
        groups.setdefault(features.get(f"node{i}", ()), []).append(f"node{i}")
    out = []
    for feats, names in groups.items():
        lines = ["[[nodes]]", f'names = "{hostlist.collect_hostlist(names)}"',
                 f"cpus = {args.cpus}", f"memory_mb = {args.memory_mb}"]
        if args.gpus:
            lines.append(f"gpus = {args.gpus}")
        if args.gpu_type:
            lines.append(f'gpu_type = "{args.gpu_type}"')
        if args.shards:
            lines.append(f"shards = {args.shards}")
        if args.mps:
            lines.append(f"mps = {args.mps}")
        if feats:
            lines.append("features = [" + ", ".join(f'"{f}"' for f in feats) + "]")
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


# lingjun up --sanity KEY=VALUE --------------------------------------------
def _sanity_text(args) -> str:
    """A [sanity] table from --sanity KEY=VALUE (VALUE in TOML, or a bare
    string); "" when there is nothing to say. The local cluster's GPUs are
    declared, not real: with --gpus the gpu probe is off unless asked for."""
    items = _table_items(args.sanity, "--sanity")
    if args.gpus and "disabled" not in items:
        items["disabled"] = '["gpu"]'
    if not items:
        return ""
    return "[sanity]\n" + "".join(f"{k} = {v}\n" for k, v in items.items())


def _table_items(given, flag: str) -> dict[str, str]:
    """KEY=VALUE items (VALUE in TOML, or a bare string) as TOML lines' parts."""
    import tomllib
    items: dict[str, str] = {}
    for item in given or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} {item!r}: want KEY=VALUE")
        try:
            tomllib.loads(f"v = {value}")
        except tomllib.TOMLDecodeError:
            value = json.dumps(value)           # a bare word or path: a TOML string
        items[key.strip()] = value
    return items


def _alive(entry: dict) -> psutil.Process | None:
    """The process of ``entry`` if it still runs (a zombie, not yet reaped by
    whoever is its parent now, has ended)."""
    try:
        p = psutil.Process(entry["pid"])
        if (abs(p.create_time() - entry["create_time"]) < 0.5
                and p.status() != psutil.STATUS_ZOMBIE):
            return p
    except (psutil.Error, KeyError):
        pass
    return None


def _from_here(value: str) -> str:
    """A path given to `up` relative to where it was typed, made absolute (the
    daemons run from /); a bare program name stays one, looked up on PATH."""
    return str(Path(value).absolute()) if "/" in value else value


def _controller_user(name: str) -> "pwd.struct_passwd | None":
    """The user --controller-user names, when the controller must become it;
    None when it is "" or the caller. Raises ValueError saying what is wrong."""
    if not name:
        return None
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise ValueError(f"--controller-user {name}: no such user") from None
    if pw.pw_uid == os.geteuid():
        return None
    if os.geteuid() != 0:
        raise ValueError(f"--controller-user {name}: only root can start the controller "
                         f"as another user")
    return pw


def _check_reachable(state: Path, user: "pwd.struct_passwd") -> None:
    """Raises ValueError when ``user`` could not enter some directory above
    ``state`` (the default one is below root's home, which is 0700)."""
    for d in reversed(state.parents):
        try:
            st = d.stat()
        except FileNotFoundError:
            return                  # made below here by us, traversable
        if not st.st_mode & 0o001 and st.st_uid != user.pw_uid:
            raise ValueError(f"--controller-user {user.pw_name} cannot enter {d} (mode "
                             f"{st.st_mode & 0o777:04o}); give a --state-dir it can reach")


def _spawn(argv: list[str], log: Path, user: "pwd.struct_passwd | None" = None) -> dict:
    """Start a daemon of the local cluster, from "/": the caller's directory
    (a shared project dir, /tmp) is no place for a daemon to import from,
    so each is also run with ``-P`` (nothing prepended to its import path)."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)        # a log left by an earlier run, made before modes were kept
    ids = {}
    if user is not None:            # as that user, with its groups and no trace of ours
        ids = dict(user=user.pw_uid, group=user.pw_gid,
                   extra_groups=os.getgrouplist(user.pw_name, user.pw_gid),
                   env={**os.environ, "HOME": user.pw_dir, "USER": user.pw_name,
                        "LOGNAME": user.pw_name})
    with os.fdopen(fd, "ab") as f:
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             cwd="/", start_new_session=True, **ids)
    return {"pid": p.pid, "create_time": psutil.Process(p.pid).create_time(), "argv": argv}


def _read_cluster(state: Path | None) -> tuple[Path, dict] | None:
    candidates = [state / "cluster.json"] if state else [local_pointer()]
    for c in candidates:
        try:
            info = json.loads(c.read_text())
            return Path(info["state_dir"]), info
        except (OSError, ValueError, KeyError):
            continue
    return None


class _NotUp(Exception):
    """Why `lingjun up` stops (printed as "lingjun: error: ..."; exit 1)."""


def cmd_up(args) -> int:
    state = Path(args.state_dir or lingjun_home() / "local").absolute()
    try:
        runas = _check_up(args, state)
        _make_state_dir(state, runas)
        port = args.port or (6917 if _port_free(6917) else _free_port())
        if bool(args.tls_cert) != bool(args.tls_key):
            raise _NotUp("--tls-cert and --tls-key go together")
        try:
            _ensure_key(state / "cluster.key", runas)
        except auth.KeyFileError as e:
            raise _NotUp(str(e)) from None
        conf = state / "lingjun.toml"
        parsed = _write_config(args, port, state, conf)
        deadline = time.time() + args.timeout       # for the controller and the agents
        info, api = _start_controller(args, f"127.0.0.1:{port}", state, conf, parsed, runas,
                                      deadline)
        _start_agents(args, state, conf, info, api, deadline)
    except _NotUp as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    info["metrics"] = _metrics_addresses(parsed, info)
    (state / "cluster.json").write_text(json.dumps(info, indent=2))
    _say_if_repointed(state)
    local_pointer().parent.mkdir(parents=True, exist_ok=True)
    local_pointer().write_text(json.dumps(info, indent=2))
    address = info["address"]
    record = Path(running_cluster_record(address))
    record.parent.mkdir(exist_ok=True)
    record.write_text(json.dumps(info, indent=2))
    print(f"Local cluster '{args.cluster_name}' is up: controller {address}, "
          f"{args.nodes} nodes node[1-{args.nodes}] with {args.cpus} CPUs and {args.memory_mb} MB each.")
    print(f"State and logs: {state}")
    if "lingjund" in info["metrics"]:
        print(f"Metrics: http://{info['metrics']['lingjund']}/metrics (the agents': "
              f"{state}/cluster.json); the dashboard: `lingjun web` prints its URL")
    print(f"The commands (sbatch, squeue, ...) find it through {local_pointer()}; "
          f"elsewhere: export LINGJUN_CONTROLLER={address}")
    return 0


def _check_up(args, state: Path):
    """Refuse a second cluster on one state directory and impossible sizes;
    the controller's user (None: this one), checked to reach the state."""
    found = _read_cluster(state)
    if found and _alive(found[1]["processes"]["lingjund"]):
        raise _NotUp(f"a local cluster already runs from {state} "
                     f"(controller {found[1]['address']}); `lingjun down` stops it")
    busy = statedir.holder(state / "controller")
    if busy:
        raise _NotUp(f"state directory {state / 'controller'} is in use by {busy}; "
                     f"only one controller may own it")
    if args.nodes < 1 or args.cpus < 1 or args.memory_mb < 1:
        raise _NotUp("--nodes, --cpus and --memory-mb must be positive")
    try:
        runas = _controller_user(args.controller_user)
        if runas is not None:
            _check_reachable(state, runas)
    except ValueError as e:
        raise _NotUp(str(e)) from None
    return runas


def _make_state_dir(state: Path, runas) -> None:
    # Modes: the controller keeps its own directory 0700 (lingjund/statedir.py);
    # here the root is traversable but not listable, since users reach the
    # credential socket and (through agents/) their job scripts by path, and
    # the logs, which quote scripts' errors and users' requests, are root's.
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o711)
    (state / "logs").mkdir(mode=0o700, exist_ok=True)
    (state / "logs").chmod(0o700)
    (state / "agents").mkdir(mode=0o711, exist_ok=True)
    (state / "agents").chmod(0o711)
    if runas is not None:
        # The controller's own directories are its user's; the rest (logs,
        # agents' state, the config) stay root's. DIR/run holds its sockets.
        (state / "run").mkdir(mode=0o755, exist_ok=True)
        (state / "run").chmod(0o755)
        (state / "controller").mkdir(mode=0o700, exist_ok=True)
        for d in (state / "run", state / "controller"):
            for top, _, files in os.walk(d):
                for name in [top, *(os.path.join(top, f) for f in files)]:
                    os.chown(name, runas.pw_uid, runas.pw_gid, follow_symlinks=False)


def _write_config(args, port: int, state: Path, conf: Path):
    """The cluster's lingjun.toml from the options, parsed before it is
    written: a bad file is refused here, not in every daemon's log."""
    try:
        text = _config_text(args, port, state)
        if args.operator:
            text += "\n[authz]\noperators = [" + ", ".join(json.dumps(o) for o in args.operator) + "]\n"
        extra = Path(args.extra_config).read_text() if args.extra_config else ""
        # Checkpoints beside the controller's state, not in it: that is root's alone.
        faulttol = [] if "[faulttol]" in extra else [f'checkpoint_root = "{state / "checkpoints"}"']
        if args.restart_backoff is not None:
            faulttol.append(f"restart_backoff_s = {args.restart_backoff}")
        faulttol += [f"{k} = {v}" for k, v in _table_items(args.faulttol, "--faulttol").items()]
        if faulttol:
            text += "\n[faulttol]\n" + "\n".join(faulttol) + "\n"
        if extra:
            text += "\n" + extra
        from lingjun import config as configmod  # here: each subcommand loads only what it uses
        parsed = configmod.parse(text, str(conf))  # refuse a bad file here, not in every daemon's log
        conf.write_text(text)
        conf.chmod(0o644)           # the controller's user reads it too; it holds no secret
    except (OSError, ValueError) as e:
        raise _NotUp(str(e)) from None
    return parsed


def _start_controller(args, address: str, state: Path, conf: Path, parsed, runas,
                      deadline: float):
    """Start lingjund and wait until it answers; (cluster.json's record, an Api)."""
    py = sys.executable
    try:
        procs = {"lingjund": _spawn([py, "-P", "-m", "lingjund.daemon", "-c", str(conf)],
                                    state / "logs" / "lingjund.log", runas)}
    except OSError as e:            # e.g. this Python is in a directory the user cannot enter
        raise _NotUp(f"cannot start the controller as {args.controller_user}: {e}") from None
    tls_ca = parsed.auth.tls_ca or parsed.auth.tls_cert
    info = {"address": address, "state_dir": str(state), "config": str(conf),
            "nodes": [f"node{i}" for i in range(1, args.nodes + 1)], "processes": procs,
            "auth_socket": parsed.auth.socket, "tls_ca": tls_ca}
    (state / "cluster.json").write_text(json.dumps(info, indent=2))
    api = Api(address, socket_path=parsed.auth.socket, ca_file=tls_ca)
    while True:
        try:
            if not Path(parsed.auth.socket).exists():   # the controller makes it before it serves
                raise ControllerUnreachable("not yet")
            # bound is not yet listening: a connect between the two is refused
            credential.fetch_token(parsed.auth.socket)
            api.call("Ping", api_pb2.PingRequest(), timeout=1)
            return info, api
        except (ControllerUnreachable, credential.CredentialUnavailable):
            if time.time() > deadline or not _alive(procs["lingjund"]):
                _stop(info)
                raise _NotUp(f"the controller did not start; see {state}/logs/lingjund.log") from None
            time.sleep(0.1)


def _start_agents(args, state: Path, conf: Path, info: dict, api, deadline: float) -> None:
    """Start an agent per node and wait until all have registered (by the
    deadline the controller had: --timeout is for the whole cluster)."""
    py = sys.executable
    procs = info["processes"]
    info["agent_state_dirs"] = {n: str(state / "agents" / n) for n in info["nodes"]}
    for node in info["nodes"]:
        procs[node] = _spawn([py, "-P", "-m", "lingjun_agent.daemon", "-c", str(conf), "--node", node,
                              "--state-dir", info["agent_state_dirs"][node],
                              "--cpus", str(args.cpus), "--memory-mb", str(args.memory_mb),
                              "--own-hostname"], state / "logs" / f"{node}.log")
    (state / "cluster.json").write_text(json.dumps(info, indent=2))
    while True:
        nodes = api.call("GetNodes", api_pb2.GetNodesRequest()).nodes
        up = [n.name for n in nodes if not n.not_responding and n.state != "UNKNOWN"]
        if len(up) >= args.nodes:
            return
        if time.time() > deadline:
            _stop(info)
            raise _NotUp(f"only {len(up)} of {args.nodes} agents registered; see {state}/logs/")
        time.sleep(0.1)


def _say_if_repointed(state: Path) -> None:
    """Another local cluster that still runs loses the pointer its users'
    commands follow: say so, and how they reach it still (its address and
    its credential socket together: lingjun/endpoints.py takes no socket
    from a pointer that names another address)."""
    found = _read_cluster(None)
    if not found or found[0] == state or not _alive(found[1]["processes"]["lingjund"]):
        return
    old = found[1]
    print(f"{PROG}: warning: the local cluster in {old['state_dir']} ({old['address']}) still runs; "
          f"{local_pointer()} now names this one, so commands without LINGJUN_CONTROLLER reach "
          f"this one; commands with LINGJUN_CONTROLLER={old['address']} still reach that one.",
          file=sys.stderr)


def _metrics_addresses(parsed, info: dict) -> dict[str, str]:
    """Where the controller's and each agent's /metrics listen (each daemon
    writes STATE_DIR/metrics.address once it listens)."""
    files = {"lingjund": Path(parsed.controller.state_dir) / "metrics.address"}
    files.update((n, Path(d) / "metrics.address") for n, d in info["agent_state_dirs"].items())
    out = {}
    deadline = time.time() + 10
    for name, f in files.items():
        while True:
            try:
                out[name] = f.read_text().strip()
                break
            except OSError:
                if time.time() > deadline:
                    break
                time.sleep(0.05)
    return out


def _wait_gone(procs: list, timeout: float) -> list:
    """Those of ``procs`` still running after ``timeout`` s. A zombie has
    ended: one whose parent is not us (a daemon restarted by hand or by a
    test) stays a zombie until that parent reaps it, which psutil.wait_procs
    would wait out to the end."""
    def running(p) -> bool:
        try:
            return p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False
    deadline = time.monotonic() + timeout
    left = [p for p in procs if running(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if running(p)]
    return left


def _stop(info: dict) -> int:
    procs = info.get("processes", {})
    live = {name: p for name, entry in procs.items() if (p := _alive(entry))}
    # Agents first (so nothing relaunches), then the controller. A process
    # paused (SIGSTOP: a test freezing an agent, an operator's debugger) is
    # continued so that it sees the TERM now rather than be killed in 10 s.
    order = sorted(live, key=lambda n: n == "lingjund")
    for name in order:
        try:
            live[name].send_signal(signal.SIGTERM)
            live[name].send_signal(signal.SIGCONT)
        except psutil.Error:
            pass
    for p in _wait_gone(list(live.values()), 10.0):
        try:
            p.kill()
        except psutil.Error:
            pass
    # The jobs' processes (and each node's fence keeper) outlive agents by
    # design; `down` ends them too, every node's at once (each job gets its
    # grace of 2 s once, not once per node). The agent's launcher does it, as
    # a program of its own: the commands import nothing of the agent.
    nodes = info.get("agent_state_dirs", {})
    if nodes:
        subprocess.run([sys.executable, "-P", "-m", "lingjun_agent.launcher.teardown",
                        *(f"{node}={state_dir}" for node, state_dir in nodes.items())],
                       cwd="/", stdin=subprocess.DEVNULL, check=False)
    return len(live)


def cmd_down(args) -> int:
    found = _read_cluster(Path(args.state_dir).absolute() if args.state_dir else None)
    if not found:
        print(f"{PROG}: no local cluster is running", file=sys.stderr)
        return 1
    state, info = found
    n = _stop(info)
    for pointer in (local_pointer(), Path(running_cluster_record(info.get("address", "")))):
        try:
            if json.loads(pointer.read_text()).get("state_dir") == str(state):
                pointer.unlink()
        except (OSError, ValueError):
            pass
    print(f"Stopped {n} process(es) of the local cluster in {state}")
    return 0


def cmd_status(args) -> int:
    found = _read_cluster(Path(args.state_dir).absolute() if args.state_dir else None)
    if not found:
        print(f"{PROG}: no local cluster is running", file=sys.stderr)
        return 1
    state, info = found
    width = max(10, *map(len, info["processes"]))
    for name, entry in info["processes"].items():
        print(f"{name:{width}} pid {entry['pid']:>7}  {'running' if _alive(entry) else 'stopped'}")
    print(f"controller {info['address']}, state {state}")
    return 0


def cmd_net(args) -> int:
    """Desired vs live network state per node, as each agent last reported it."""
    from cli.formats import show_node  # here: each subcommand loads only what it uses
    from lingjun import slurm  # here: each subcommand loads only what it uses
    try:
        names = [args.node] if args.node else []
        nodes = Api().call("GetNodes", api_pb2.GetNodesRequest(names=names)).nodes
    except ControllerUnreachable as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except grpc.RpcError as e:
        print(f"{PROG}: error: {e.details()}", file=sys.stderr)
        return 1
    sys.stdout.write(show_node.net_show(sorted(nodes, key=lambda n: slurm.natural_key(n.name))))
    return 0


def cmd_events(args) -> int:
    from cli.events import events  # here: each subcommand loads only what it uses
    return events(args.job)


def dashboard_address() -> str:
    """HOST:PORT of the controller's dashboard: the local cluster's, else
    [controller] metrics_address of the config file ("" = not known)."""
    from lingjun import endpoints  # here: each subcommand loads only what it uses
    conf = os.environ.get("LINGJUN_CONF")
    if conf or os.path.exists(endpoints.SYSTEM_CONF):
        from lingjun import config  # here: only with a config file
        try:
            address = config.load(conf).controller.metrics_address
        except config.ConfigError:
            return ""
        return "" if address.endswith(":0") else address
    try:
        return json.loads(local_pointer().read_text())["metrics"]["lingjund"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def cmd_web(args) -> int:
    """The dashboard's URL with a token of the caller's (from the credential
    socket); the page keeps it as a cookie and drops it from the address."""
    from lingjun import credential  # here: each subcommand loads only what it uses
    from lingjun.endpoints import auth_socket  # here: each subcommand loads only what it uses
    address = dashboard_address()
    if not address:
        print(f"{PROG}: error: no dashboard: [controller] metrics_address is not set",
              file=sys.stderr)
        return 1
    try:
        token = credential.fetch_token(auth_socket())
    except credential.CredentialUnavailable as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    print(f"http://{address}/?token={token}")
    return 0


def cmd_health(args) -> int:
    """Each probe's last result, duration and time, per node."""
    from cli.formats import show_node  # here: each subcommand loads only what it uses
    from lingjun import slurm  # here: each subcommand loads only what it uses
    try:
        names = [args.node] if args.node else []
        reply = Api().call("GetSanityResults", api_pb2.GetSanityResultsRequest(
            names=names, events=args.events))
    except ControllerUnreachable as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except grpc.RpcError as e:
        print(f"{PROG}: error: {e.details()}", file=sys.stderr)
        return 1
    sys.stdout.write(show_node.health_show(sorted(reply.nodes, key=lambda n: slurm.natural_key(n.name))))
    return 0


def _version() -> str:
    """The installed package's version, and the Slurm its commands answer as."""
    from importlib import metadata
    try:
        mine = metadata.version("lingjun")
    except metadata.PackageNotFoundError:
        mine = "unknown (not installed)"
    return f"lingjun {mine} (commands compatible with {VERSION.strip()})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description="Lingjun cluster commands")
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a local cluster on this machine")
    up.add_argument("--nodes", type=int, default=4)
    up.add_argument("--cpus", type=int, default=2)
    up.add_argument("--memory-mb", type=int, default=2000)
    up.add_argument("--gpus", type=int, default=0, help="GPUs each node declares (for tests)")
    up.add_argument("--gpu-type", default="", help="the declared GPUs' type (--gres=gpu:TYPE:N)")
    up.add_argument("--sysfs-root", type=_from_here, default="/sys",
                    help="where the agents read their GPUs' PCI tree, NUMA nodes and NICs (tests)")
    up.add_argument("--shards", type=int, default=0,
                    help="GPU shards each node shares out (Slurm's shard count), for tests")
    up.add_argument("--mps", type=int, default=0,
                    help="MPS count each node shares out (100 per GPU is Slurm's habit), for tests")
    up.add_argument("--mps-control", type=_from_here, default="",
                    help="the MPS control daemon agents run (default nvidia-cuda-mps-control)")
    up.add_argument("--lldpctl", type=_from_here, default="", metavar="PATH",
                    help="lldpd's client the agents ask for their leaf switch (default: none)")
    up.add_argument("--device-root", type=_from_here, default="/dev",
                    help="where the agents find GPU device files nvidiaN (for tests: a fake /dev)")
    up.add_argument("--features", action="append", metavar="NODES=F1,F2",
                    help="node features (-C), e.g. node[1-2]=fast,ib; repeatable")
    up.add_argument("--state-dir")
    up.add_argument("--port", type=int, default=0, help="controller port (default 6917, or a free one)")
    up.add_argument("--cluster-name", default="local")
    up.add_argument("--partition-name", default="debug", help="the one partition, holding every node")
    up.add_argument("--spare-nodes", type=int, default=0, metavar="N",
                    help="nodes the partition holds back for expedited restarts (spare_nodes)")
    up.add_argument("--kill-wait", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL")
    up.add_argument("--heartbeat-timeout", type=float, default=30.0,
                    help="seconds of agent silence before a node is DOWN (Slurm's SlurmdTimeout)")
    up.add_argument("--timeout", type=float, default=30.0)
    up.add_argument("--max-array-size", type=int, default=1001,
                    help="array indices run from 0 to this minus one (Slurm's MaxArraySize)")
    down = sub.add_parser("down", help="stop the local cluster")
    down.add_argument("--state-dir")
    st = sub.add_parser("status", help="show the local cluster's processes")
    st.add_argument("--state-dir")
    net = sub.add_parser("net", help="network profiles: desired vs live per node")
    net.add_argument("action", choices=("show",))
    net.add_argument("node", nargs="?", help="one node (default: every node)")
    up.add_argument("--mail-prog", type=_from_here, metavar="PROG",
                    help="Slurm's MailProg for --mail-type (default /usr/bin/mail; \"\" = no mail)")
    up.add_argument("--extra-config", metavar="FILE",
                    help="TOML appended to the generated configuration (e.g. a [network] table)")
    # TLS for the API and the agent channel (PEM files); plaintext on loopback otherwise
    up.add_argument("--tls-cert", help="the controller's certificate (PEM)")
    up.add_argument("--tls-key", help="the controller's private key (PEM)")
    up.add_argument("--tls-ca", help="CA that signed --tls-cert (default: the certificate itself)")
    up.add_argument("--auth-socket", help="where the controller serves users' credentials "
                                          "(default DIR/auth.sock); its directory must let users in")
    up.add_argument("--token-relay-user", action="append", default=[], metavar="USER",
                    help="a user whose processes here may present other users' tokens "
                         "([auth] token_relay_users: lingjun restd's user); repeatable")
    kg = sub.add_parser("keygen", help="write a new cluster key (mode 0600; never overwrites)")
    kg.add_argument("path")
    # operators of the local cluster (an [authz] table; not with one in --extra-config)
    up.add_argument("--operator", action="append", default=[], metavar="USER",
                    help="a user who may act on anyone's jobs and change nodes; repeatable")
    up.add_argument("--controller-user", default="", metavar="USER",
                    help="run the controller as USER ([controller] user, Slurm's SlurmUser; "
                         "root only); the agents stay root")

    up.add_argument("--restart-backoff", type=float, metavar="S",
                    help="seconds before a job's first automatic restart ([faulttol] restart_backoff_s)")
    up.add_argument("--faulttol", action="append", metavar="KEY=VALUE",
                    help="a [faulttol] setting, e.g. suspect_window_s=600; repeatable")
    ev = sub.add_parser("events", help="what happened to a job and why (node lost, restarts, hangs)")
    ev.add_argument("job")

    up.add_argument("--sanity", action="append", metavar="KEY=VALUE",
                    help="a [sanity] setting for the node probes, e.g. interval_s=1.5; repeatable")
    sub.add_parser("web", help="print the dashboard's URL, with a credential of yours")
    hl = sub.add_parser("health", help="node health probes: each probe's last result")
    hl.add_argument("node", nargs="?", help="one node (default: every node)")
    hl.add_argument("--events", type=int, default=5, help="recent health events per node (0 = none)")
    lg = sub.add_parser("logs", help="a job's output: the batch output, or a running step's ranks, labelled")
    lg.add_argument("-f", "--follow", action="store_true", help="follow until the job (or step) ends")
    lg.add_argument("--rank", type=int, help="only this rank of the running step (labelled)")
    lg.add_argument("job", metavar="JOB[.STEP]")
    rd = sub.add_parser("restd", help="Slurm's REST API (slurmrestd v0.0.38) for this cluster",
                        add_help=False)
    rd.add_argument("rest", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if args.cmd == "logs":
        from cli.logs import logs  # here: the SDK only for lingjun logs
        return logs(args.job, args.follow, args.rank)
    if args.cmd == "restd":
        from lingjun_restd import daemon as restd     # here: the other subcommands need no aiohttp
        return restd.main(args.rest)
    return {"up": cmd_up, "down": cmd_down, "status": cmd_status, "net": cmd_net,
            "keygen": cmd_keygen, "events": cmd_events, "health": cmd_health,
            "web": cmd_web}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())

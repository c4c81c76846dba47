"""Where a command finds the controller and the credential socket, in the standard library only.

The controller's address comes from, in order: ``LINGJUN_CONTROLLER``, the
config file (``LINGJUN_CONF`` or /etc/lingjun/lingjun.toml, when it exists),
and the local cluster that ``lingjun up`` started (``$LINGJUN_HOME/local.json``, default ``~/.lingjun``).

The credential socket: ``LINGJUN_AUTH_SOCKET``, else ``[auth] socket`` of the
config file, else the local cluster's, else /run/lingjun/auth.sock; with
``[auth] tls_ca`` (or the local cluster's) the gRPC channel speaks TLS.

One cluster: the address and the socket come from the same place. Where
``LINGJUN_CONTROLLER`` names the controller, the config file's or the local
cluster's socket is taken only when that file names the same address (a
later ``lingjun up --state-dir X`` rewrites local.json while an earlier
cluster still runs: its socket is another cluster's, whose command socket
would act there and whose tokens this controller refuses); a running local
cluster's own record (``$LINGJUN_HOME/clusters/ADDRESS.json``) names its
socket while the pointer names another. Otherwise the
socket is ``LINGJUN_AUTH_SOCKET`` or the system's, and ``socket_is_the_clusters``
says False: the command then speaks gRPC to the address it was given,
never the command socket of whatever cluster serves that path.

``ControllerUnreachable`` is what every command turns into Slurm's own words
("Unable to contact slurm controller (connect failure)") and a non-zero exit.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache

DEFAULT_AUTH_SOCKET = "/run/lingjun/auth.sock"     # lingjun.config.AuthConfig.socket


def lingjun_home():
    """Where ``lingjun up`` leaves the pointer to the running local cluster (a Path)."""
    from pathlib import Path     # here: the commands' own path needs only the text
    return Path(_home())


def local_pointer():
    from pathlib import Path
    return Path(_pointer())


def _home() -> str:
    return os.environ.get("LINGJUN_HOME") or os.path.join(os.path.expanduser("~"), ".lingjun")


def _pointer() -> str:
    return os.path.join(_home(), "local.json")


def _read_pointer() -> dict:
    with open(_pointer(), "rb") as f:
        return json.loads(f.read())


def running_cluster_record(address: str) -> str:
    """The file naming the local cluster that serves ``address`` while it runs
    (``lingjun up`` writes it, ``lingjun down`` removes it): how a command told
    ``LINGJUN_CONTROLLER`` finds that cluster's socket after a later ``up``
    repointed local.json."""
    return os.path.join(_home(), "clusters", address.replace("/", "_") + ".json")


def _read_cluster_record(address: str) -> dict:
    with open(running_cluster_record(address), "rb") as f:
        return json.loads(f.read())


SYSTEM_CONF = "/etc/lingjun/lingjun.toml"
RPC_TIMEOUT_S = 30.0


class ControllerUnreachable(RuntimeError):
    pass


def controller_address() -> str:
    addr = os.environ.get("LINGJUN_CONTROLLER")
    if addr:
        return addr
    conf = os.environ.get("LINGJUN_CONF")
    if conf or os.path.exists(SYSTEM_CONF):
        from lingjun import config  # here: msgspec and the parser only where a config file is read
        try:
            return _config(conf).controller.connect_address
        except config.ConfigError as e:
            raise ControllerUnreachable(str(e)) from None
    try:
        return _read_pointer()["address"]
    except (OSError, ValueError, KeyError):
        pass
    from lingjun.config import DEFAULT_PORT  # here: the commands' common path loads no config module
    return f"127.0.0.1:{DEFAULT_PORT}"


def _config(path: str | None):
    """The config file, parsed once per process while it is unchanged: a
    command needs three of its settings, and parsing it expands every node
    (10,000 nodes: 40 ms each time)."""
    from lingjun import config  # here: msgspec and the parser only where a config file is read
    try:
        st = os.stat(path or config.config_path())
    except OSError:
        return config.load(path)        # its own words for a file it cannot read
    return _parsed(path, st.st_mtime_ns, st.st_size, st.st_ino)


@lru_cache(maxsize=4)
def _parsed(path: str | None, mtime_ns: int, size: int, inode: int):
    from lingjun import config  # here: msgspec and the parser only where a config file is read
    return config.load(path)


def _client_setting(env: str, key: str, local_key: str, default: str) -> str:
    """One [auth] setting for a command: the environment, the config file, the
    local cluster's pointer, the default: the order controller_address uses,
    from the file that gave the address (``_settings_source``)."""
    value = os.environ.get(env)
    if value is not None:
        return value
    kind, source = _settings_source()
    if kind == "config":
        return _auth_setting(source, key, default)
    if kind == "local":
        return str(source.get(local_key, default))
    return default


def _settings_source() -> tuple[str, object]:
    """Where the address came from, for the settings that must match it:
    ("config", PATH), ("local", the pointer's dict) or ("", None) when
    neither names the controller the command was told to reach."""
    told = os.environ.get("LINGJUN_CONTROLLER")
    conf = os.environ.get("LINGJUN_CONF")
    if conf or os.path.exists(SYSTEM_CONF):
        path = conf or SYSTEM_CONF
        if not told or _config_address(path) == told:
            return "config", path
        return "", None
    for read in (_read_pointer, lambda: _read_cluster_record(told)) if told else (_read_pointer,):
        try:
            local = read()
        except (OSError, ValueError):
            continue
        if isinstance(local, dict) and (not told or local.get("address") == told):
            return "local", local
    return "", None


def socket_is_the_clusters() -> bool:
    """Whether the credential socket (and the command socket beside it) is
    known to be the cluster's whose controller the command reaches: set in
    the environment, or from the same file as the address."""
    return "LINGJUN_AUTH_SOCKET" in os.environ or _settings_source()[0] != ""


def _toml(path: str) -> dict:
    """The config file as TOML only: a command needs a few strings, and checking
    the whole file (lingjun.config) costs it more than Slurm's whole run. A
    file that cannot be read is empty here; the daemons check it and refuse."""
    import tomllib
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, ValueError):
        return {}


def _config_address(path: str) -> str:
    """``[controller] address``, else ``listen`` (ControllerConfig.connect_address)."""
    ctl = _toml(path).get("controller", {})
    if not isinstance(ctl, dict):
        return ""
    from lingjun.config import DEFAULT_PORT  # here: the commands' common path loads no config module
    value = ctl.get("address") or ctl.get("listen") or f"127.0.0.1:{DEFAULT_PORT}"
    return value if isinstance(value, str) else ""


def _auth_setting(path: str, key: str, default: str) -> str:
    """``[auth] key`` of the config file; the default where it is not a string."""
    auth = _toml(path).get("auth", {})
    value = auth.get(key, default) if isinstance(auth, dict) else default
    return value if isinstance(value, str) else default


def beside_auth_socket(auth_socket: str, word: str) -> str:
    """A socket the same host serves beside the credential socket, named by
    ``word``: (/run/lingjun/auth.sock, "commands") -> /run/lingjun/auth.commands.sock."""
    head, tail = os.path.split(auth_socket)
    stem, dot, ext = tail.rpartition(".")
    name = f"{stem}.{word}.{ext}" if dot and stem else f"{tail}.{word}"
    return os.path.join(head, name)


def auth_socket() -> str:
    return _client_setting("LINGJUN_AUTH_SOCKET", "socket", "auth_socket", DEFAULT_AUTH_SOCKET)


def tls_ca() -> str:
    """PEM file of the CA that signed the controller's certificate ("" = plaintext)."""
    return _client_setting("LINGJUN_TLS_CA", "tls_ca", "tls_ca", "")

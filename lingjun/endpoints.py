"""Where a command finds the controller and the credential socket, in the standard library only.

The controller's address comes from, in order: ``LINGJUN_CONTROLLER``, the
config file (``LINGJUN_CONF`` or /etc/lingjun/lingjun.toml, when it exists),
and the local cluster that ``lingjun up`` started (``$LINGJUN_HOME/local.json``, default ``~/.lingjun``).

The credential socket: ``LINGJUN_AUTH_SOCKET``, else ``[auth] socket`` of the
config file, else the local cluster's, else /run/lingjun/auth.sock; with
``[auth] tls_ca`` (or the local cluster's) the gRPC channel speaks TLS.

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
        from lingjun import config
        try:
            return _config(conf).controller.connect_address
        except config.ConfigError as e:
            raise ControllerUnreachable(str(e)) from None
    try:
        return _read_pointer()["address"]
    except (OSError, ValueError, KeyError):
        pass
    from lingjun.config import DEFAULT_PORT
    return f"127.0.0.1:{DEFAULT_PORT}"


def _config(path: str | None):
    """The config file, parsed once per process while it is unchanged: a
    command needs three of its settings, and parsing it expands every node
    (10,000 nodes: 40 ms each time)."""
    from lingjun import config
    try:
        st = os.stat(path or config.config_path())
    except OSError:
        return config.load(path)        # its own words for a file it cannot read
    return _parsed(path, st.st_mtime_ns, st.st_size, st.st_ino)


@lru_cache(maxsize=4)
def _parsed(path: str | None, mtime_ns: int, size: int, inode: int):
    from lingjun import config
    return config.load(path)


def _client_setting(env: str, key: str, local_key: str, default: str) -> str:
    """One [auth] setting for a command: the environment, the config file, the
    local cluster's pointer, the default: the order controller_address uses."""
    value = os.environ.get(env)
    if value is not None:
        return value
    conf = os.environ.get("LINGJUN_CONF")
    if conf or os.path.exists(SYSTEM_CONF):
        return _auth_setting(conf or SYSTEM_CONF, key, default)
    try:
        return str(_read_pointer().get(local_key, default))
    except (OSError, ValueError, AttributeError):
        return default


def _auth_setting(path: str, key: str, default: str) -> str:
    """``[auth] key`` of the config file, read as TOML only: a command needs this
    one string, and checking the whole file (lingjun.config) costs it more than
    Slurm's whole run. A file that cannot be read gives the default, as before;
    the daemons check the file and refuse to start on it."""
    import tomllib
    try:
        with open(path, "rb") as f:
            value = tomllib.load(f).get("auth", {}).get(key, default)
    except (OSError, ValueError, AttributeError):
        return default
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

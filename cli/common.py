"""What every command shares: reaching the controller, Slurm's error words,
who the caller is."""
from __future__ import annotations

import grpc
import os
import pwd
import grp

from lingjun.client import Api

CONNECT_FAILURE = "Unable to contact slurm controller (connect failure)"


def make_api() -> Api:
    return Api()


def details(err: grpc.RpcError) -> str:
    """Slurm's text of a controller error (the gRPC status details)."""
    try:
        return err.details() or str(err.code())
    except Exception:  # noqa: BLE001 - a non-standard RpcError
        return str(err)


def is_not_found(err: grpc.RpcError) -> bool:
    try:
        return err.code() == grpc.StatusCode.NOT_FOUND
    except Exception:  # noqa: BLE001
        return False


def current_user() -> tuple[str, int, int, str]:
    """(user name, uid, gid, group name) of the caller."""
    uid, gid = os.getuid(), os.getgid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return user, uid, gid, group


def resolve_user(name: str) -> str | None:
    """A user name or uid as given to -u -> the user name; None when unknown."""
    try:
        return pwd.getpwnam(name).pw_name
    except KeyError:
        pass
    if name.isdigit():
        try:
            return pwd.getpwuid(int(name)).pw_name
        except KeyError:
            return None
    return None

"""Ordinary users for end-to-end tests: made with ``useradd``, removed after,
and a Python they can run our commands with.

The interpreter the suite runs under lives below /root, which other users
cannot enter, so a command run *as* alice needs an interpreter of her own
reach: ``user_python`` makes a venv of the system's ``/usr/bin/python3`` in a
world-readable temp dir, copies the project's dependencies into it from the
suite's own site-packages (same minor version, so the same wheels; no
download), points it at this tree with a ``.pth`` file (as ``pip install -e``
does) and writes the console scripts (``srun``, ``sbatch``, ``salloc``...).
Commands then run as real processes of that user, exec'd with the user's ids.
"""
from __future__ import annotations

import importlib.metadata as md
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TREE = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"
SKIP = {"lingjun", "pip", "win-inet-pton", "colorama"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _tree_requirements() -> list[str]:
    """The dependencies this tree's pyproject.toml names: the installed metadata
    may be an older checkout's (one added since is then not in it)."""
    import tomllib
    data = tomllib.loads((TREE / "pyproject.toml").read_text())
    return [re.split(r"[ ;<>=!~\[(]", r)[0] for r in data["project"]["dependencies"]]


def _dependencies(root: str = "lingjun") -> list[md.Distribution]:
    seen: dict[str, md.Distribution] = {}
    todo = [root, *_tree_requirements()]
    while todo:
        name = todo.pop()
        key = _norm(name)
        if key in seen or key in SKIP and name != root:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[key] = dist
        for req in dist.requires or []:
            if "extra ==" in req:
                continue
            todo.append(re.split(r"[ ;<>=!~\[(]", req)[0])
    return [d for k, d in seen.items() if k not in SKIP]


def make_user_python(where: Path) -> Path:
    """A venv of /usr/bin/python3 under ``where`` that runs this tree; its bin dir."""
    venv = where / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    for dist in _dependencies():
        for f in dist.files or []:
            if str(f).startswith(".."):
                continue              # scripts outside site-packages
            src = Path(dist.locate_file(f))
            if src.is_file() and "__pycache__" not in src.parts:
                dst = site / f
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
    (site / "lingjun-tree.pth").write_text(str(TREE) + "\n")
    bin_dir = venv / "bin"
    for ep in md.distribution("lingjun").entry_points:
        if ep.group != "console_scripts":
            continue
        module, func = ep.value.split(":")
        script = bin_dir / ep.name
        script.write_text(f"#!{bin_dir / 'python'}\nimport sys\nfrom {module} import {func}\n"
                          f"sys.exit({func}())\n")
        script.chmod(0o755)
    for p in [where, *where.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o055 if p.is_dir() else p.stat().st_mode | 0o044)
    return bin_dir


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    home: Path


def add_user(name: str, home: Path) -> User:
    subprocess.run(["useradd", "-M", "-N", "-s", "/bin/sh", "-d", str(home), name], check=True,
                   capture_output=True)
    pw = pwd.getpwnam(name)
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    return User(name, pw.pw_uid, pw.pw_gid, home)


def remove_user(name: str) -> None:
    subprocess.run(["userdel", name], capture_output=True)


def user_env(user: User, bin_dir: Path, address: str, auth_socket: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(user.home), "USER": user.name,
            "LOGNAME": user.name, "LANG": "C.UTF-8", "LINGJUN_CONTROLLER": address,
            "LINGJUN_AUTH_SOCKET": str(auth_socket)}


def popen_as(user: User, argv: list[str], env: dict[str, str], cwd: Path | None = None,
             **kw) -> subprocess.Popen:
    """Start ``argv`` as ``user`` (real ids and groups, as runuser does)."""
    return subprocess.Popen(
        argv, env=env, cwd=str(cwd or user.home), user=user.uid, group=user.gid,
        extra_groups=os.getgrouplist(user.name, user.gid), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def run_as(user: User, argv: list[str], env: dict[str, str], timeout: float = 60,
           cwd: Path | None = None) -> subprocess.CompletedProcess:
    p = popen_as(user, argv, env, cwd)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"{argv} as {user.name} did not end within {timeout}s\n"
                             f"stdout:\n{out}\nstderr:\n{err}") from None
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def world_readable_tmp(prefix: str) -> Path:
    d = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    d.chmod(0o755)
    return d


def start_restd(user: User, bin_dir: Path, env: dict[str, str], *listen: str,
                log: Path) -> subprocess.Popen:
    """``lingjun restd LISTEN...`` as ``user`` (it refuses root), its output in
    ``log``, once it answers on its first listen address."""
    out = open(log, "w")
    p = subprocess.Popen([str(bin_dir / "lingjun"), "restd", *listen], env=env, cwd=str(user.home),
                         user=user.uid, group=user.gid, extra_groups=os.getgrouplist(user.name, user.gid),
                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    out.close()
    first = listen[0]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise AssertionError(f"lingjun restd as {user.name} exited {p.returncode}:\n{log.read_text()}")
        try:
            if first.startswith("unix:"):
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(first[len("unix:"):])
            else:
                host, _, port = first.rpartition(":")
                socket.create_connection((host, int(port)), timeout=1).close()
            return p
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise AssertionError(f"lingjun restd as {user.name} not listening on {first} within 60 s:\n"
                         f"{log.read_text()}")


def stop(p: subprocess.Popen) -> None:
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()

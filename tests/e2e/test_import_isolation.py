"""Nothing the cluster runs imports from the directory it was started in, or
from the directory a user typed a command in.

A shared directory (a project dir, /tmp, a job's work dir an admin looks
into) is writable by others. Python puts the current directory first on
the import path of ``python -m MODULE`` and ``python -c``: a daemon started
that way from there imports whatever another user planted under the name of
a module it imports later (croniter on the first scrontab, a history reader
on the first sacct) or at once (lingjund itself), as root.

Here a world-writable directory holds a module named like every project
package and every dependency imported lazily; each, if imported, leaves a
marker (module, uid, pid) and then hands over to the real module, so the
cluster still works and every import shows. `lingjun up` is typed there,
and root and an ordinary user (made with useradd) drive the cluster from
there: a two-node job, scrontab, squeue (also --yaml), sacct, scontrol.
No marker may appear, and the programs the daemons run (MailProg, a
sanity drop-in in the job's prolog) run from /.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.e2e import users as u
from tests.e2e.conftest import Cluster, wait_for

TAG = str(os.getpid() % 100000)
USER = f"ljplant{TAG}"

# The project's packages, and what its daemons and commands import inside
# functions or by name (grep for indented imports and import_module).
PACKAGES = ("lingjund", "lingjun", "lingjun_agent", "lingjun_restd", "cli", "pygal",
            "grpc_reflection", "grpc_status", "pyroute2", "google", "grpc", "hostlist", "ctypes")
MODULES = ("croniter", "yaml", "jwt", "psutil", "pynvml")

# Leaves a marker, then imports the real module in its place with its own
# directory off the path for that moment (the import system returns what
# sys.modules holds at the end), so later imports can show too.
PLANT = """\
import importlib, os, sys
try:
    open(os.path.join({markers!r}, "%s.uid%d.pid%d" % (__name__, os.getuid(), os.getpid())),
         "w").close()
except OSError:
    pass
_path = sys.path[:]
sys.path[:] = [p for p in _path if os.path.realpath(p or ".") != {here!r}]
del sys.modules[__name__]
try:
    sys.modules[__name__] = importlib.import_module(__name__)
finally:
    sys.path[:] = _path
"""


def plant(where: Path, markers: Path) -> None:
    here = os.path.realpath(where)
    for name in PACKAGES:
        (where / name).mkdir()
        (where / name / "__init__.py").write_text(PLANT.format(markers=str(markers), here=here))
    for name in MODULES:
        (where / f"{name}.py").write_text(PLANT.format(markers=str(markers), here=here))


@pytest.fixture(scope="module")
def user():
    assert os.geteuid() == 0, "useradd and running commands as another user need root"
    home = Path(tempfile.mkdtemp(prefix="lj-plant-home-", dir="/tmp"))
    home.chmod(0o755)
    try:
        yield u.add_user(USER, home)
    finally:
        u.remove_user(USER)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def planted(user):
    """A fresh cluster per test, so that what a test drives is the first to
    need each lazy import (a cluster imports croniter once)."""
    root = Path(tempfile.mkdtemp(prefix="lj-plant-", dir="/tmp"))
    root.chmod(0o755)
    (root / "markers").mkdir()
    (root / "markers").chmod(0o1777)
    # MailProg and a sanity drop-in (run in each job's prolog) say where they run.
    (root / "probes.d").mkdir()
    for prog, name in ((root / "mail", "mail"), (root / "probes.d" / "where", "dropin")):
        prog.write_text(f"#!/bin/sh\necho {name} $(pwd) >> {root / 'ran-from'}\n")
        prog.chmod(0o755)
    c = Cluster(root, nodes=2, cpus=2, up_args=(
        "--mail-prog", str(root / "mail"), "--sanity", f"dropin_dir={root / 'probes.d'}"))
    c.markers, c.ran_from = root / "markers", root / "ran-from"
    c.user_bin = u.make_user_python(root / "python")
    c.work.chmod(0o1777)            # a shared directory: anyone may write here
    plant(c.work, c.markers)
    try:
        yield from c.serving()      # `lingjun up` with the planted directory as its cwd
    finally:
        shutil.rmtree(root, ignore_errors=True)


def imported(c: Cluster, since: frozenset[str] = frozenset()) -> list[str]:
    """The markers left (module.uidN.pidN), less those in ``since``."""
    return sorted(p.name for p in c.markers.iterdir() if p.name not in since)


def ran_from(c: Cluster) -> dict[str, set[str]]:
    """program -> the directories it was run in (MailProg, the drop-in)."""
    out: dict[str, set[str]] = {}
    for line in (c.ran_from.read_text().splitlines() if c.ran_from.exists() else []):
        name, where = line.split(" ", 1)
        out.setdefault(name, set()).add(where)
    return out


def assert_none_imported(c: Cluster, since: frozenset[str] = frozenset()) -> None:
    got = imported(c, since)
    assert not got, f"imported from the planted directory (module.uid.pid): {', '.join(got)}"


def test_the_started_daemons_import_nothing_from_the_starting_directory(planted):
    assert_none_imported(planted)


def test_root_drives_the_cluster_from_the_planted_directory(planted):
    c = planted
    before = frozenset(imported(c))
    jid = c.sbatch("-N", "2", "--mail-type=END", "--wrap", "srun hostname")
    assert c.wait_state(jid, ("COMPLETED", "FAILED"), timeout=60) == "COMPLETED"
    wait_for("the mail of the job's end", lambda: "mail" in ran_from(c), 30)
    tab = "#SCRON -o /dev/null\n*/5 * * * * true\n"
    assert c.run(["scrontab", "-"], input=tab).returncode == 0
    for cmd in (["scrontab", "-l"], ["scrontab", "-r"], ["squeue"], ["squeue", "--yaml"],
                ["sacct", "-a", "-X"], ["sacct", "-j", str(jid), "--json"],
                ["scontrol", "show", "hostnames", "node[1-2]"], ["sinfo"],
                ["scontrol", "show", "job", str(jid)]):
        p = c.run(cmd)
        assert p.returncode == 0, f"{cmd}: {p.stderr}"
    assert_none_imported(c, before)
    assert ran_from(c) == {"mail": {"/"}, "dropin": {"/"}}


def test_an_ordinary_user_drives_the_cluster_from_the_planted_directory(planted, user):
    c = planted
    before = frozenset(imported(c))
    env = u.user_env(user, c.user_bin, c.address, Path(c.info()["auth_socket"]))

    def run(*argv: str):
        p = u.run_as(user, [str(c.user_bin / argv[0]), *argv[1:]], env, cwd=c.work)
        assert p.returncode == 0, f"{argv} as {user.name}: {p.stderr}"
        return p.stdout

    jid = int(run("sbatch", "--parsable", "-N", "2", "--wrap", "srun hostname").strip())
    assert c.wait_state(jid, ("COMPLETED", "FAILED"), timeout=60) == "COMPLETED"
    tab = c.work / f"{user.name}.tab"
    tab.write_text("#SCRON -o /dev/null\n*/5 * * * * true\n")
    tab.chmod(0o644)
    run("scrontab", str(tab))
    run("scrontab", "-l")
    run("scrontab", "-r")
    run("squeue")
    run("squeue", "--yaml")
    run("sacct", "-X")
    run("sacct", "-j", str(jid), "--json")
    run("scontrol", "show", "hostnames", "node[1-2]")
    assert_none_imported(c, before)

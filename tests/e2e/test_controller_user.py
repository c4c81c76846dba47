"""The controller runs as an ordinary user (``lingjun up --controller-user``,
``[controller] user``, Slurm's SlurmUser) and the cluster works as before.

Root starts a local cluster whose controller is a user made with useradd;
the agents stay root. Another ordinary user submits a two-node job, runs
squeue and sacct; ``ps`` shows the controller under its user's uid, its
state and the cluster key belong to that user, and nothing of root's is
open to it. Started by someone who is neither root nor that user, lingjund
refuses in one line.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import psutil
import pytest

from lingjun import auth
from tests.e2e import users as u
from tests.e2e.conftest import Cluster, _free_port, wait_for

TAG = str(os.getpid() % 100000)
SLURMUSER, ALICE = f"ljctl{TAG}", f"ljusr{TAG}"


@pytest.fixture(scope="module")
def accounts():
    assert os.geteuid() == 0, "useradd and starting the controller as another user need root"
    home = Path(tempfile.mkdtemp(prefix="lj-ctluser-home-", dir="/tmp"))
    home.chmod(0o755)
    made = []
    try:
        for name in (SLURMUSER, ALICE):
            made.append(u.add_user(name, home / name))
        yield made
    finally:
        for m in made:
            u.remove_user(m.name)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(accounts):
    slurmuser, _ = accounts
    # Not below pytest's tmp dir (root's alone): the controller's user must reach its state.
    root = Path(tempfile.mkdtemp(prefix="lj-ctluser-", dir="/tmp"))
    root.chmod(0o755)
    c = Cluster(root, nodes=2, cpus=2, up_args=("--controller-user", slurmuser.name))
    # An interpreter every user may run (the suite's lives below /root); root's
    # `lingjun up` from it starts the controller, as slurmuser, with it.
    c.user_bin = u.make_user_python(root / "python")
    c.env["PATH"] = f"{c.user_bin}:{c.env['PATH']}"
    c.work.chmod(0o1777)
    try:
        yield from c.serving()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def controller(c: Cluster) -> psutil.Process:
    return psutil.Process(c.info()["processes"]["lingjund"]["pid"])


def test_ps_shows_the_controller_as_its_user_and_the_agents_as_root(cluster, accounts):
    slurmuser, _ = accounts
    ps = subprocess.run(["ps", "-o", "uid=,args=", "-p", str(controller(cluster).pid)],
                        capture_output=True, text=True, check=True).stdout.split(None, 1)
    assert (int(ps[0]), "lingjund.daemon" in ps[1]) == (slurmuser.uid, True), ps
    uids = controller(cluster).uids()
    assert (uids.real, uids.effective, uids.saved) == (slurmuser.uid,) * 3
    for node in ("node1", "node2"):
        p = psutil.Process(cluster.info()["processes"][node]["pid"])
        assert p.uids().effective == 0, f"{node}: want root, got uid {p.uids().effective}"


def test_its_state_and_the_key_are_its_users_alone(cluster, accounts):
    slurmuser, _ = accounts
    key = (cluster.state / "cluster.key").stat()
    assert (key.st_uid, stat.S_IMODE(key.st_mode)) == (slurmuser.uid, 0o600)
    d = cluster.state / "controller"
    for p in [d, *d.iterdir()]:
        st = p.lstat()
        assert st.st_uid == slurmuser.uid, f"{p}: owner uid {st.st_uid}"
        assert not stat.S_IMODE(st.st_mode) & 0o077, f"{p}: mode {stat.S_IMODE(st.st_mode):o}"
    logs = (cluster.state / "logs").stat()
    assert (logs.st_uid, stat.S_IMODE(logs.st_mode)) == (0, 0o700)


def test_an_ordinary_user_runs_a_two_node_job_squeue_and_sacct(cluster, accounts):
    _, alice = accounts
    c = cluster
    env = u.user_env(alice, c.user_bin, c.address, Path(c.info()["auth_socket"]))

    def run(*argv: str) -> str:
        p = u.run_as(alice, [str(c.user_bin / argv[0]), *argv[1:]], env, cwd=c.work)
        assert p.returncode == 0, f"{argv} as {alice.name}: rc {p.returncode}\n{p.stderr}"
        return p.stdout

    jid = int(run("sbatch", "--parsable", "-N", "2", "-o", f"{c.work}/two-%j.out", "--wrap",
                  "srun -l id -un").strip())
    assert c.wait_state(jid, ("COMPLETED", "FAILED"), timeout=60) == "COMPLETED"
    out = sorted((c.work / f"two-{jid}.out").read_text().split("\n"))
    assert out[-2:] == [f"0: {alice.name}", f"1: {alice.name}"], out
    assert run("squeue", "-h", "-u", alice.name, "-t", "all", "-o", "%i %T").split() \
        == [str(jid), "COMPLETED"]
    assert run("sacct", "-n", "-X", "-j", str(jid), "-o", "JobID,User,State,NNodes", "-P") \
        .split() == [f"{jid}|{alice.name}|COMPLETED|2"]


def test_lingjund_refuses_to_start_as_a_third_user(cluster, accounts, tmp_path):
    slurmuser, alice = accounts
    conf = Path(cluster.info()["config"])
    p = u.run_as(alice, [str(cluster.user_bin / "lingjund"), "-c", str(conf)],
                 {"PATH": "/usr/bin:/bin", "HOME": str(alice.home)}, cwd=Path("/"))
    assert p.returncode == 1, p
    assert p.stderr.strip().splitlines() == [
        f"lingjund: error: [controller] user is {slurmuser.name} (uid {slurmuser.uid}) but "
        f"lingjund runs as uid {alice.uid}; start it as {slurmuser.name}, or as root, which "
        f"becomes {slurmuser.name}"], p.stderr


def _bare_controller(c: Cluster, slurmuser, root: Path, prefix: list[str]) -> None:
    """lingjund alone (no `lingjun up`) on a fresh state dir under ``root``,
    started through ``prefix``; checks it serves as ``slurmuser``."""
    key = root / "cluster.key"
    auth.write_key(key)
    os.chown(key, slurmuser.uid, slurmuser.gid)
    port = _free_port()
    conf = root / "lingjun.toml"
    conf.write_text(f'[controller]\nlisten = "127.0.0.1:{port}"\nuser = "{slurmuser.name}"\n'
                    f'state_dir = "{root / "lib" / "lingjun"}"\n[auth]\nkey_file = "{key}"\n'
                    f'socket = "{root / "run" / "lingjun" / "auth.sock"}"\n')
    conf.chmod(0o644)
    with open(root / "lingjund.log", "w") as log:
        proc = subprocess.Popen([*prefix, str(c.user_bin / "lingjund"), "-c", str(conf)],
                                stdout=log, stderr=subprocess.STDOUT, cwd="/")
    try:
        wait_for("the credential socket", lambda: proc.poll() is not None
                 or (root / "run" / "lingjun" / "auth.sock").exists(), 30)
        assert proc.poll() is None, (root / "lingjund.log").read_text()
        # a user's token from it works: the controller reads its key and serves
        env = u.user_env(slurmuser, c.user_bin, f"127.0.0.1:{port}",
                         root / "run" / "lingjun" / "auth.sock")
        q = u.run_as(slurmuser, [str(c.user_bin / "squeue"), "-h"], env, cwd=Path("/"))
        assert (q.returncode, q.stderr) == (0, ""), q
        p = psutil.Process(proc.pid)
        assert (p.uids().real, p.uids().effective, p.uids().saved) == (slurmuser.uid,) * 3
        assert p.gids().effective == slurmuser.gid
        for d, mode in ((root / "lib" / "lingjun", 0o700), (root / "run" / "lingjun", 0o755)):
            st = d.stat()
            assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (slurmuser.uid, mode), d
    finally:
        proc.terminate()
        assert proc.wait(20) == 0, (root / "lingjund.log").read_text()


def test_lingjund_started_by_root_becomes_its_user(cluster, accounts):
    """As slurmctld does: root starts it, it makes its missing state and
    socket directories for its user, then runs as that user, groups included."""
    slurmuser, _ = accounts
    root = Path(tempfile.mkdtemp(prefix="lj-ctluser-bare-", dir="/tmp"))
    root.chmod(0o755)
    try:
        _bare_controller(cluster, slurmuser, root, [])
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.skipif(not shutil.which("setpriv"), reason="needs setpriv (util-linux)")
def test_lingjund_serves_as_its_unit_leaves_it(cluster, accounts):
    """lingjund.service: User=, no capability in the bounding set, no new
    privileges; systemd has made StateDirectory= and RuntimeDirectory= its
    user's. setpriv leaves it the same."""
    slurmuser, _ = accounts
    root = Path(tempfile.mkdtemp(prefix="lj-ctluser-unit-", dir="/tmp"))
    root.chmod(0o755)
    try:
        for d, mode in (("lib/lingjun", 0o700), ("run/lingjun", 0o755)):
            (root / d).mkdir(parents=True)
            (root / d).chmod(mode)
            os.chown(root / d, slurmuser.uid, slurmuser.gid)
        _bare_controller(cluster, slurmuser, root, [
            "setpriv", f"--reuid={slurmuser.uid}", f"--regid={slurmuser.gid}", "--init-groups",
            "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"])
    finally:
        shutil.rmtree(root, ignore_errors=True)

"""Files of a task are opened by the task's user (in the step supervisor,
launcher/taskd.py): the kernel's permission checks decide, so a path the user
may not write fails with the user's own EACCES, whatever ``..`` or symlink
leads there. Uses the system's
``nobody`` user; the agent (this test) is root, as on a real node."""
from __future__ import annotations

import os
import pwd
import stat
import time

import shutil
import tempfile
from pathlib import Path

import pytest

from lingjun_agent.launcher import steps, userfs

NOBODY = pwd.getpwnam("nobody")


@pytest.fixture
def dirs():
    """A directory only root may enter and one the user owns
    (under /tmp itself: pytest's tmp_path lies below a directory only root may enter)."""
    assert os.geteuid() == 0, "these tests show privilege dropping: run them as root"
    tmp_path = Path(tempfile.mkdtemp(prefix="userfs-", dir="/tmp"))
    tmp_path.chmod(0o755)
    try:
        yield _dirs(tmp_path)
    finally:
        shutil.rmtree(tmp_path)


def _dirs(tmp_path: Path):
    secret = tmp_path / "root-only"
    secret.mkdir(mode=0o700)
    (secret / "file").write_text("root's\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    os.chown(mine, NOBODY.pw_uid, NOBODY.pw_gid)
    return secret, mine


def _step(tmp: Path, argv: list[str], stdout_path: str, umask: str = "0027"):
    """One task as nobody under the step supervisor, its -o file ``stdout_path``;
    its exit and what it wrote to stderr through the agent's relay file."""
    spec = steps.StepSpec(job_id=1, step_id=0, node=f"userfs-{os.getpid()}", argv=tuple(argv),
                          env={"PATH": "/usr/bin:/bin", "SLURM_UMASK": umask}, work_dir="/tmp",
                          uid=NOBODY.pw_uid, gid=NOBODY.pw_gid,
                          tasks=(steps.TaskSpec(rank=0, stdout_path=stdout_path),))
    h = steps.start_step(tmp / "state", spec)
    deadline = time.monotonic() + 10
    err = b""
    while time.monotonic() < deadline:
        chunks, exits = h.read()
        err += b"".join(c[3] for c in chunks if c[1] == 2)
        if exits:
            steps.forget_step(h)
            return exits[0][1], err.decode()
        time.sleep(0.02)
    raise AssertionError("the task did not end")


def test_a_file_is_created_by_the_user_with_the_users_umask(dirs):
    _, mine = dirs
    res, _ = _step(mine.parent, ["echo", "hi"], str(mine / "out"))
    assert res.exit_code == 0
    st = os.stat(mine / "out")
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (NOBODY.pw_uid, NOBODY.pw_gid, 0o640)
    assert (mine / "out").read_text() == "hi\n"


@pytest.mark.parametrize("path", [
    "{secret}/new", "{mine}/../root-only/new", "{secret}/file",
], ids=["into a directory the user may not write", "escaping with ..",
        "an existing file of root's"])
def test_paths_the_user_may_not_write_fail_with_eacces(dirs, path):
    secret, mine = dirs
    before = sorted(os.listdir(secret))
    path = path.format(secret=secret, mine=mine)
    res, err = _step(mine.parent, ["echo", "hi"], path)
    assert (res.exit_code, res.error) == (1, f"Could not open output file {path}: "
                                             "Permission denied"), res
    assert err == f"slurmstepd: error: Could not open output file {path}: Permission denied\n"
    assert sorted(os.listdir(secret)) == before
    assert (secret / "file").read_text() == "root's\n"


def test_a_symlink_to_roots_file_does_not_lend_roots_rights(dirs):
    secret, mine = dirs
    os.symlink(secret / "file", mine / "link")
    res, _ = _step(mine.parent, ["echo", "hi"], str(mine / "link"))
    assert res.exit_code == 1
    assert (secret / "file").read_text() == "root's\n"


@pytest.mark.parametrize("text,want", [("0027", 0o027), ("077", 0o077), ("", 0o022),
                                       ("junk", 0o022), ("7777", 0o022)],
                         ids=["0027", "077", "unset", "not octal", "out of range"])
def test_umask_of(text, want):
    assert userfs.umask_of({"SLURM_UMASK": text} if text else {}) == want

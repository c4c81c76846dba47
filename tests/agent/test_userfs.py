"""Files of a task are opened by the task's user: the kernel's
permission checks decide, so a path the user may not write fails with the
user's own EACCES, whatever ``..`` or symlink leads there. Uses the system's
``nobody`` user; the agent (this test) is root, as on a real node."""
from __future__ import annotations

import os
import pwd
import stat

import shutil
import tempfile
from pathlib import Path

import pytest

from lingjun_agent.launcher import tasks, userfs

NOBODY = pwd.getpwnam("nobody")
ME = userfs.Ids(NOBODY.pw_uid, NOBODY.pw_gid, (NOBODY.pw_gid,), 0o027)
CREATE = os.O_WRONLY | os.O_CREAT | os.O_APPEND


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


def test_a_file_is_created_by_the_user_with_the_users_umask(dirs):
    _, mine = dirs
    [fd] = userfs.open_files([(str(mine / "out"), CREATE)], ME)
    os.write(fd, b"hi\n")
    os.close(fd)
    st = os.stat(mine / "out")
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (NOBODY.pw_uid, NOBODY.pw_gid, 0o640)


@pytest.mark.parametrize("path", [
    "{secret}/new", "{mine}/../root-only/new", "{secret}/file",
], ids=["into a directory the user may not write", "escaping with ..",
        "an existing file of root's"])
def test_paths_the_user_may_not_write_fail_with_eacces(dirs, path):
    secret, mine = dirs
    before = sorted(os.listdir(secret))
    [r] = userfs.open_files([(path.format(secret=secret, mine=mine), CREATE)], ME)
    assert isinstance(r, OSError) and r.errno == 13, r
    assert sorted(os.listdir(secret)) == before
    assert (secret / "file").read_text() == "root's\n"


def test_a_symlink_to_roots_file_does_not_lend_roots_rights(dirs):
    secret, mine = dirs
    os.symlink(secret / "file", mine / "link")
    with pytest.raises(PermissionError):
        tasks.TaskFiles(str(mine / "link"), "", NOBODY.pw_uid, NOBODY.pw_gid)
    tasks.TaskFiles.truncate({str(mine / "link")}, NOBODY.pw_uid, NOBODY.pw_gid)
    assert (secret / "file").read_text() == "root's\n"


def test_task_files_open_as_the_user_and_root_opens_anything(dirs):
    secret, mine = dirs
    files = tasks.TaskFiles(str(mine / "o"), str(mine / "o"), NOBODY.pw_uid, NOBODY.pw_gid)
    assert files.write(1, b"a") and files.write(2, b"b")
    files.close()
    assert (mine / "o").read_bytes() == b"ab" and os.stat(mine / "o").st_uid == NOBODY.pw_uid
    root = tasks.TaskFiles(str(secret / "r"), "", 0, 0)
    root.close()
    assert os.stat(secret / "r").st_uid == 0


@pytest.mark.parametrize("text,want", [("0027", 0o027), ("077", 0o077), ("", 0o022),
                                       ("junk", 0o022), ("7777", 0o022)],
                         ids=["0027", "077", "unset", "not octal", "out of range"])
def test_umask_of(text, want):
    assert userfs.umask_of({"SLURM_UMASK": text} if text else {}) == want

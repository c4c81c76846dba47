"""The agent's activity watch: the newest sign of life per job, from files and output."""
from __future__ import annotations

import os

from lingjun_agent.launcher import watch


def test_the_newest_of_output_heartbeat_file_and_relayed_output_counts(tmp_path):
    out, beat = tmp_path / "slurm-7.out", tmp_path / "hb"
    out.write_text("x")
    os.utime(out, (1000, 1000))
    w = watch.ActivityWatch()
    w.watch(7, watch.batch_paths(str(out), "", str(tmp_path), {watch.HEARTBEAT_VAR: str(beat)}))
    assert w.activity([7]) == {7: 1000}, "a heartbeat file not made yet does not count"
    beat.touch()
    os.utime(beat, (1500, 1500))
    assert w.activity([7]) == {7: 1500}
    w.touch(7, 2000.0)
    assert w.activity([7]) == {7: 2000.0}
    w.touch(7, 1900.0)
    assert w.activity([7]) == {7: 2000.0}, "an older sighting never moves it back"


def test_relative_output_paths_are_taken_in_the_work_dir(tmp_path):
    (tmp_path / "o.txt").write_text("x")
    os.utime(tmp_path / "o.txt", (1234, 1234))
    w = watch.ActivityWatch()
    w.watch(3, watch.batch_paths("o.txt", "", str(tmp_path), {}))
    assert w.activity([3]) == {3: 1234}


def test_dev_null_and_unknown_jobs_give_nothing():
    w = watch.ActivityWatch()
    w.watch(5, ["/dev/null", ""])
    assert w.activity([5, 6]) == {}
    w.touch(5, 10.0)
    w.forget(5)
    assert w.activity([5]) == {}


def test_the_checkpoint_dir_is_made_once_and_kept(tmp_path):
    d = tmp_path / "ckpt" / "12"
    env = {watch.CHECKPOINT_VAR: str(d)}
    watch.prepare_checkpoint_dir(env, os.getuid(), os.getgid())
    (d / "state").write_text("step 40")
    watch.prepare_checkpoint_dir(env, os.getuid(), os.getgid())
    assert (d / "state").read_text() == "step 40"
    assert d.stat().st_uid == os.getuid()


def test_each_rank_lives_by_its_own_output_and_heartbeat_file_and_only_the_quietest_are_told(tmp_path):
    hb = tmp_path / ".lingjun-heartbeat.d"
    hb.mkdir()
    env = {watch.HEARTBEAT_DIR_VAR: str(hb)}
    w = watch.ActivityWatch()
    w.watch_ranks(7, 0, {r: watch.rank_paths(env, str(tmp_path), r, "", "") for r in range(8)},
                  at=1000.0)
    for r in range(8):
        w.touch_rank(7, 0, r, 1000.0 + r)
    (hb / "rank.0").touch()
    os.utime(hb / "rank.0", (1100, 1100))       # rank 0 logs rarely but touches its file
    assert w.quiet_ranks(7) == [(0, 1, 1001.0), (0, 2, 1002.0), (0, 3, 1003.0), (0, 4, 1004.0)]
    w.forget_rank(7, 0, 1)                      # it exited: not silent
    w.touch_rank(7, 0, 2, 1200.0)
    assert [r for _, r, _ in w.quiet_ranks(7)] == [3, 4, 5, 6]
    assert w.activity([7]) == {7: 1200.0}, "a rank's output is the job's sign of life too"
    w.forget_step(7, 0)
    assert w.quiet_ranks(7) == []

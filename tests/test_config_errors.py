"""Malformed configuration files: each refused by `lingjund --check-config`
with the key's path, none accepted, none a traceback.

Each case is one mistake an operator makes in /etc/lingjun/lingjun.toml; the
controller must refuse to start on it (exit 1) and its one error line must
name where the mistake is, so it can be fixed without reading our code.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from lingjun import config

NODES = '[[nodes]]\nnames = "node[1-2]"\n'
PART = '[[partitions]]\nname = "p"\n'

CASES = [
    ("cluster_name = 5", "cluster_name = 5: expected a non-empty string"),
    ('[[webhooks]]\nurl = "ftp://x/"', "[[webhooks]] #1 url = 'ftp://x/': want an http:// or https:// URL"),
    ('[[webhooks]]\nurl = "http://x/"\nevents = ["DONE"]', "[[webhooks]] #1 events: unknown event(s) DONE"),
    ('[[webhooks]]\nurl = "http://x/"\ntimeout_s = 0', "[[webhooks]] #1 timeout_s = 0"),
    ('[controller]\nscheduler_interval_s = "2"',
     "[controller] scheduler_interval_s = '2': expected `float`, got `str`"),
    ("[controller]\nheartbeat_interval_s = -5",        # 0 is the default: derived from the size
     "[controller] heartbeat_interval_s = -5: expected `float` >= 0.0"),
    ("[controller]\nheartbeat_timeout_s = -1", "[controller] heartbeat_timeout_s = -1"),
    ('[controller]\nkill_wait_s = "30s"', "[controller] kill_wait_s = '30s': expected `float`"),
    ('[controller]\njob_requeue = "yes"', "[controller] job_requeue = 'yes': expected `bool`"),
    ("[controller]\nmax_array_size = 0", "[controller] max_array_size = 0: expected `int` >= 1"),
    ('[controller]\nsynchronous = "SOMETIMES"', "[controller] synchronous: 'SOMETIMES' is not one of"),
    ("[controller]\nenforce_part_limits = 1", "[controller] enforce_part_limits = 1: expected `str`"),
    ("[controller]\nlisten = 6917", "[controller] listen = 6917: expected `str`, got `int`"),
    ('[controler]\nlisten = "x"', "unknown key(s) controler (did you mean controller?)"),
    ("[controller]\nheartbeat_intervall_s = 5",
     "[controller]: unknown key(s) heartbeat_intervall_s (did you mean heartbeat_interval_s?)"),
    ("controller = 5", "controller = 5: expected a table [controller]"),
    (NODES + 'cpus = "4"', "[[nodes]] #1 cpus = '4': expected `int`, got `str`"),
    (NODES + 'features = "ib"', "[[nodes]] #1 features = 'ib': expected `array`, got `str`"),
    (NODES + "gpus = -1", "[[nodes]] #1 gpus = -1: expected `int` >= 0"),
    (NODES + "gpus = 4\nshards = 6",
     "[[nodes]] #1 shards = 6: not a multiple of gpus = 4 (they are spread evenly over the GPUs)"),
    (NODES + "gpus = 2\nmps = 301", "[[nodes]] #1 mps = 301: not a multiple of gpus = 2"),
    (NODES + "gpus = 1\nshards = -4", "[[nodes]] #1 shards = -4: expected `int` >= 0"),
    (NODES + 'gpus = 1\nmps = "100"', "[[nodes]] #1 mps = '100': expected `int`, got `str`"),
    ('[agent]\nmps_control = 1', "[agent] mps_control = 1: expected `str`, got `int`"),
    ('[[nodes]]\nnames = "node[1-"', "bad hostlist 'node[1-'"),
    ("[[nodes]]\ncpus = 4", "[[nodes]] #1: names (a hostlist) is required"),
    (NODES + "gpus = 4\n[[nodes.gpu]]\nindex = 1\n[[nodes.gpu]]\nindex = 1",
     "[[nodes]] #1 gpu: index 1 is declared twice"),
    (NODES + "gpus = 4\n[[nodes.gpu]]\nindex = 4",
     "[[nodes]] #1 gpu: index 4 is not below the node's 4 GPUs (gpus = 4)"),
    (NODES + "[[nodes.gpu]]\nindex = 1",            # one table, no gpus: one GPU, index 0
     "[[nodes]] #1 gpu: index 1 is not below the node's 1 GPUs (gpus = 0)"),
    (NODES + "gpus = 4\n[[nodes.gpu]]\nindex = 0\nnvlink = [0, 9]",
     "[[nodes]] #1 gpu index 0: nvlink peer 0 is not another of the node's 4 GPUs"),
    (NODES + '[[nodes.gpu]]\nindex = 0\nnuma_node = "0"',
     "[[nodes]] #1 gpu[0] numa_node = '0': expected `int | null`, got `str`"),
    (NODES + "[[nodes.gpu]]\nindex = 0\nnuma_node = -2",
     "[[nodes]] #1 gpu[0] numa_node = -2: expected `int` >= -1"),
    (NODES + "[[nodes.gpu]]\nnuma_node = 0", "[[nodes]] #1 gpu[0]: object missing required field `index`"),
    (NODES + "[[nodes.gpu]]\nindex = 0\nnvlnk = [1]",
     "[[nodes]] #1 gpu[0]: unknown key(s) nvlnk (did you mean nvlink?)"),
    (NODES + "gpu = 3", "[[nodes]] #1 gpu = 3: expected an array of tables [[nodes.gpu]]"),
    (NODES + '[[nodes.gpu]]\nindex = 0\nnvlink = "1,2"',
     "[[nodes]] #1 gpu[0] nvlink = '1,2': expected `array | null`, got `str`"),
    (NODES + NODES, "[[nodes]]: node node1 is declared twice"),
    ('nodes = ["node1"]', "expected an array of tables [[nodes]]"),
    (NODES + PART + 'nodes = "node[2-3]"',
     "[[partitions]] #1 (p) nodes: node3 not declared in [[nodes]]"),
    (PART + 'max_time = "forever"', "max_time:"),
    (PART + 'state = "OPEN"', "[[partitions]] #1 state: 'OPEN' is not one of UP, DOWN, DRAIN, INACTIVE"),
    (PART + 'default = "yes"', "[[partitions]] #1 default = 'yes': expected `bool`"),
    (PART + PART, "[[partitions]] #2 (p): partition p is declared twice"),
    ('[[partitions]]\nnodes = "ALL"', "[[partitions]] #1: object missing required field `name`"),
    (PART + "min_nodes = 4\nmax_nodes = 2", "[[partitions]] #1 (p): min_nodes 4 is above max_nodes 2"),
    (PART + "grace_time_s = -3", "[[partitions]] #1 grace_time_s = -3: expected `float` >= 0.0"),
    (PART + "nodez = \"ALL\"", "[[partitions]] #1: unknown key(s) nodez (did you mean nodes?)"),
    ('[preempt]\ntype = "magic"', "[preempt] type: 'magic' is not one of none, partition_prio"),
    ('[preempt]\nexempt_time_s = "1h"', "[preempt] exempt_time_s = '1h': expected `float`"),
    ("[auth]\ntoken_ttl_s = 0", "[auth] token_ttl_s = 0: expected `float` > 0.0"),
    ('[auth]\ntls_cert = "a.pem"', "[auth] tls_cert and tls_key go together"),
    ("[sanity]\njitter = 1.5", "[sanity] jitter = 1.5: expected `float` < 1.0"),
    ('[sanity]\ndisabled = ["gpu", "warp"]', "[sanity] disabled: unknown probe(s) warp"),
    ('[sanity]\nseverity = { gpu = "panic" }', "[sanity] severity.gpu: 'panic' is not drain or warn"),
    ("[sanity]\nseverity = { gpu = 3 }", "[sanity] severity[...] = {'gpu': 3}: expected `str`, got `int`"),
    ('[sanity]\nscratch_paths = "/scratch"', "[sanity] scratch_paths = '/scratch': expected `array`"),
    ("[faulttol]\nrestart_backoff_s = -1", "[faulttol] restart_backoff_s = -1: expected `float` >= 0.0"),
    ("[accounting]\npurge_batch_jobs = 0", "[accounting] purge_batch_jobs = 0: expected `int` >= 1"),
    ('[agent]\nreconnect_min_s = "fast"', "[agent] reconnect_min_s = 'fast': expected `float`"),
    ("[network]\nprofile = 3", "network.profile = 3: expected an array of tables [[network.profile]]"),
    ("not toml at all [", "Expected '=' after a key"),
    ('[controller]\nlisten = "x"\n[controller]\nlisten = "y"', "Cannot declare ('controller',) twice"),
]


@pytest.mark.parametrize("text, words", CASES, ids=[c[1][:60] for c in CASES])
def test_a_malformed_config_is_refused_naming_the_key(text, words):
    with pytest.raises(config.ConfigError) as e:
        config.parse(text + "\n", "/etc/lingjun/lingjun.toml")
    assert words in str(e.value), f"want {words!r} in {str(e.value)!r}"


def test_there_are_at_least_thirty_cases():
    assert len(CASES) >= 30


def test_check_config_says_what_is_wrong_and_fails_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[controller]\nscheduler_interval_s = "2"\n')
    r = subprocess.run([sys.executable, "-m", "lingjund.daemon", "--check-config", "-c", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r
    assert r.stderr.strip().splitlines() == [
        "lingjund: error: [controller] scheduler_interval_s = '2': expected `float`, got `str`"], r.stderr
    good = tmp_path / "good.toml"
    good.write_text(NODES + PART + 'nodes = "ALL"\n')
    r = subprocess.run([sys.executable, "-m", "lingjund.daemon", "--check-config", "-c", str(good)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    assert "2 nodes, 1 partitions; no errors" in r.stdout

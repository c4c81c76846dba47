"""`lingjun web`: the dashboard's URL with the caller's token, or why not."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading

from lingjun import auth
from lingjun.credential import CredentialServer


def web(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.lingjun", "web"], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=30)


def test_without_a_metrics_address_it_says_there_is_no_dashboard(tmp_path):
    conf = tmp_path / "lingjun.toml"
    conf.write_text('[controller]\nlisten = "127.0.0.1:7000"\n')
    p = web({"LINGJUN_CONF": str(conf)})
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == "lingjun: error: no dashboard: [controller] metrics_address is not set\n"


def test_it_prints_the_configured_address_with_a_token_from_the_credential_socket(tmp_path):
    key_file = tmp_path / "cluster.key"
    auth.write_key(key_file)
    key = auth.ClusterKey.load(key_file)
    sock = str(tmp_path / "auth.sock")
    conf = tmp_path / "lingjun.toml"
    conf.write_text(f'[controller]\nmetrics_address = "127.0.0.1:6920"\n'
                    f'[auth]\nkey_file = "{key_file}"\nsocket = "{sock}"\n')
    loop = asyncio.new_event_loop()
    server = CredentialServer(key, sock, 60)
    loop.run_until_complete(server.start())
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        p = web({"LINGJUN_CONF": str(conf), "LINGJUN_AUTH_SOCKET": sock})
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)
    assert p.returncode == 0, p.stderr
    url = p.stdout.strip()
    assert url.startswith("http://127.0.0.1:6920/?token=")
    who = auth.verify_token(key, url.partition("?token=")[2])
    assert (who.uid, who.gid) == (os.getuid(), os.getgid())

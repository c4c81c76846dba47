"""[[webhooks]]: job and node events POSTed as signed JSON, on a real local cluster.

The receivers are HTTP servers of the test on loopback that record what
they get: ``good`` answers 204; ``flaky`` answers 500 to the first two
attempts of each delivery; ``stuck`` takes 20 s to answer anything. Every
job event reaches ``good`` with a valid HMAC-SHA256 of the secret; ``flaky``
gets each event again until it accepts it (same delivery id); and ``stuck``
holds up nothing: jobs still start and end at once beside it.
"""
from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import threading
import time

import pytest

from tests.e2e.conftest import Cluster, wait_for

SECRET = b"s3cret-for-the-test"


class Receiver:
    def __init__(self, fail_first: int = 0, delay_s: float = 0.0):
        self.got: list[dict] = []
        self.attempts: dict[str, int] = {}
        self.lock = threading.Lock()
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if delay_s:
                    time.sleep(delay_s)
                did = self.headers.get("X-Lingjun-Delivery", "")
                with rec.lock:
                    n = rec.attempts[did] = rec.attempts.get(did, 0) + 1
                    rec.got.append({"headers": dict(self.headers), "body": body, "attempt": n})
                self.send_response(500 if n <= fail_first else 204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self, job: int | None = None, node: str | None = None) -> list[dict]:
        with self.lock:
            out = [json.loads(g["body"]) for g in self.got]
        if job is not None:
            out = [e for e in out if e.get("job", {}).get("job_id") == job]
        if node is not None:
            out = [e for e in out if e.get("node", {}).get("name") == node]
        return out

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def hooked(tmp_path_factory):
    root = tmp_path_factory.mktemp("webhooks")
    secret = root / "webhook.secret"
    secret.write_bytes(SECRET + b"\n")
    secret.chmod(0o600)
    good, flaky, stuck = Receiver(), Receiver(fail_first=2), Receiver(delay_s=20)
    extra = root / "extra.toml"
    extra.write_text(
        f'[[webhooks]]\nurl = "{good.url}"\nsecret_file = "{secret}"\n'
        f'[[webhooks]]\nurl = "{flaky.url}"\nsecret_file = "{secret}"\nevents = ["END", "FAIL"]\n'
        f'backoff_s = 0.2\n'
        f'[[webhooks]]\nurl = "{stuck.url}"\ntimeout_s = 30\n')
    c = Cluster(root, nodes=2, up_args=("--extra-config", str(extra)))
    c.up()
    try:
        c.wait_nodes_up()
        yield c, good, flaky, stuck
    finally:
        c.down()
        for r in (good, flaky, stuck):
            r.close()


def valid(g: dict) -> bool:
    want = "sha256=" + hmac.new(SECRET, g["body"], hashlib.sha256).hexdigest()
    return hmac.compare_digest(g["headers"].get("X-Lingjun-Signature-256", ""), want)


def test_begin_requeue_and_end_arrive_signed(hooked):
    c, good, _, _ = hooked
    job = c.sbatch("-J", "hooked", "-o", "/dev/null", "--requeue", "--wrap", "sleep 3")
    c.wait_state(job, "RUNNING")
    wait_for("BEGIN", lambda: [e for e in good.events(job) if e["event"] == "BEGIN"], 15)
    c.run(["scontrol", "requeue", str(job)], check=True)
    c.wait_state(job, "COMPLETED", timeout=60)
    wait_for("END", lambda: [e for e in good.events(job) if e["event"] == "END"], 15)
    events = [e["event"] for e in good.events(job)]
    assert events[:2] == ["BEGIN", "REQUEUE"] and events[-2:] == ["BEGIN", "END"], events
    mine = [g for g in good.got if json.loads(g["body"]).get("job", {}).get("job_id") == job]
    assert mine and all(valid(g) for g in mine), "every delivery carries a valid signature"
    assert all(g["headers"]["X-Lingjun-Event"] == json.loads(g["body"])["event"] for g in mine)
    end = good.events(job)[-1]
    assert end["job"]["job_state"] == "COMPLETED" and end["job"]["name"] == "hooked"
    assert end["job"]["exit_code"] == 0 and end["job"]["restarts"] == 1
    assert end["cluster"] == "local" and end["job"]["nodes"].startswith("node")


def test_a_failure_is_fail_and_a_bad_signature_would_show(hooked):
    c, good, _, _ = hooked
    job = c.sbatch("-o", "/dev/null", "--wrap", "exit 3")
    c.wait_state(job, "FAILED")
    (fail,) = wait_for("FAIL", lambda: [g for g in good.got
                                        if json.loads(g["body"]).get("job", {}).get("job_id") == job
                                        and json.loads(g["body"])["event"] == "FAIL"], 15)
    assert valid(fail) and json.loads(fail["body"])["job"]["exit_code"] == 3
    forged = dict(fail, body=fail["body"].replace(b'"exit_code":3', b'"exit_code":0'))
    assert not valid(forged)


def test_a_failing_receiver_gets_the_event_again_until_it_takes_it(hooked):
    c, _, flaky, _ = hooked
    job = c.sbatch("-o", "/dev/null", "--wrap", "true")
    c.wait_state(job, "COMPLETED")
    wait_for("three attempts", lambda: len([g for g in flaky.got if json.loads(g["body"])
                                            .get("job", {}).get("job_id") == job]) >= 3, 20)
    time.sleep(1.0)                                # and no fourth: the third was taken
    tries = [g for g in flaky.got if json.loads(g["body"]).get("job", {}).get("job_id") == job]
    assert [t["attempt"] for t in tries] == [1, 2, 3]
    assert len({t["headers"]["X-Lingjun-Delivery"] for t in tries}) == 1, "one delivery id"
    assert [json.loads(t["body"])["event"] for t in tries] == ["END"] * 3, "BEGIN not asked for"


def test_a_stuck_receiver_holds_up_no_job(hooked):
    c, _, _, stuck = hooked
    t0 = time.monotonic()
    jobs = [c.sbatch("-o", "/dev/null", "--wrap", "true") for _ in range(3)]
    for j in jobs:
        c.wait_state(j, "COMPLETED", timeout=30)
    assert time.monotonic() - t0 < 15, "jobs waited for a webhook"
    assert c.run(["scontrol", "ping"], check=True).returncode == 0


def test_node_drain_and_resume(hooked):
    c, good, _, _ = hooked
    c.run(["scontrol", "update", "NodeName=node2", "State=DRAIN", "Reason=fan broken"], check=True)
    drained = wait_for("NODE_DRAIN", lambda: [e for e in good.events(node="node2")
                                              if e["event"] == "NODE_DRAIN"], 15)
    assert drained[0]["node"] == {"name": "node2", "node_state": "DRAIN", "reason": "fan broken"}
    c.run(["scontrol", "update", "NodeName=node2", "State=RESUME"], check=True)
    wait_for("NODE_UP", lambda: [e for e in good.events(node="node2") if e["event"] == "NODE_UP"], 15)

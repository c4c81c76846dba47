"""lingjun restd as a hostile user meets it, in front of a real local cluster.

Two ordinary users made with ``useradd`` (alice runs restd, bob does not),
their commands and restd run as real processes of theirs through a venv of
the system's python (tests/e2e/users.py). What is shown:

- restd refuses to start as root or as the controller's user, in
  slurmrestd's words, exit 1;
- a token presented over the unix socket by a process of another uid is
  refused: bob holding alice's token cannot cancel her job;
- one user's idle connections do not keep another's request out;
- at least 200 malformed requests, a fixed list (every case a user found)
  and generated ones (hypothesis), sent over real sockets, are each answered
  with a 4xx code and slurmrestd's error document, while a valid request is
  served, throughout, in under 100 ms.

slurmrestd's error document is JSON ``{"meta": ..., "errors": [{"error":
...}, ...]}``; for a URL it does not serve (unknown path or method)
slurmrestd answers 404 with one text line instead, and so does restd.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lingjun_restd import daemon as restd_module
from tests.e2e import users
from tests.e2e.rawhttp import exchange, slowloris
from tests.e2e.conftest import BIN, Cluster, _free_port

TAG = str(os.getpid() % 100000)
ALICE, BOB = f"ljra{TAG}", f"ljrb{TAG}"
BASE = "/slurm/v0.0.38"
NOT_FOUND = b"Unable find requested URL. Please view /openapi/v3 for API reference."
LATENCY_LIMIT_S = 0.1
# the suite runs three test files at once on two cores: one probe in twenty may wait
# for a core; none may wait as long as another user's command is allowed to (1 s)
WORST_S = 1.0


@pytest.fixture(scope="module")
def site():
    """A cluster, alice and bob, and alice's restd on a unix socket and a TCP port."""
    assert os.geteuid() == 0, "creating users needs root"
    root = users.world_readable_tmp("lj-restd-")
    c = Cluster(root, nodes=2, cpus=2)
    made = []
    try:
        for name in (ALICE, BOB):
            made.append(users.add_user(name, root / name))
        bin_dir = users.make_user_python(root / "python")
        c.up_args = ("--token-relay-user", ALICE)      # alice's restd relays others' tokens
        c.up()
        c.wait_nodes_up()
        env = {u.name: users.user_env(u, bin_dir, c.address, c.state / "auth.sock") for u in made}
        alice, bob = made
        sock = str(alice.home / "restd.sock")
        port = _free_port()
        p = users.start_restd(alice, bin_dir, env[ALICE], f"unix:{sock}", f"127.0.0.1:{port}",
                              log=root / "restd.log")
        try:
            yield Site(c, bin_dir, alice, bob, env, sock, port, root / "restd.log")
        finally:
            users.stop(p)
    finally:
        c.down()
        for u in made:
            users.remove_user(u.name)
        shutil.rmtree(root, ignore_errors=True)


class Site:
    def __init__(self, cluster, bin_dir, alice, bob, env, sock, port, log):
        self.cluster, self.bin_dir, self.alice, self.bob = cluster, bin_dir, alice, bob
        self.env, self.sock, self.port, self.log = env, sock, port, log
        self.tokens: dict[str, str] = {}

    def token(self, user: users.User) -> str:
        if user.name not in self.tokens:
            out = users.run_as(user, [str(self.bin_dir / "scontrol"), "token"], self.env[user.name])
            assert out.stdout.startswith("SLURM_JWT="), out
            self.tokens[user.name] = out.stdout.strip().split("=", 1)[1]
        return self.tokens[user.name]

    def curl_as(self, user: users.User, token_of: users.User, *args: str) -> tuple[int, str]:
        """curl over the unix socket as ``user``, presenting ``token_of``'s token."""
        p = users.run_as(user, ["curl", "-s", "-w", "\n%{http_code}", "--unix-socket", self.sock,
                                "-H", f"X-SLURM-USER-NAME: {token_of.name}",
                                "-H", f"X-SLURM-USER-TOKEN: {self.token(token_of)}", *args],
                         self.env[user.name])
        assert p.returncode == 0, p.stderr
        body, _, code = p.stdout.rpartition("\n")
        return int(code), body


# -- who may run it, who may use a token -------------------------------------------------


def _restd(argv_env_user, listen: str) -> subprocess.CompletedProcess:
    argv, env, user = argv_env_user
    kw = {} if user is None else dict(user=user.uid, group=user.gid, extra_groups=[])
    p = subprocess.Popen([*argv, "restd", listen], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd="/", **kw)
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"lingjun restd as {user.name if user else 'root'} was still "
                             f"running after 30 s; want a refusal\n{err}") from None
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def test_restd_refuses_to_run_as_root_in_slurmrestds_words(site):
    p = _restd(([f"{BIN}/lingjun"], site.cluster.env, None), f"unix:{site.cluster.root}/root.sock")
    assert (p.returncode, p.stderr) == (
        1, "lingjun restd: fatal: lingjun restd should not be run as the root user.\n")
    assert not Path(f"{site.cluster.root}/root.sock").exists()


def test_restd_refuses_to_run_as_the_controllers_user(site):
    conf = site.cluster.root / "slurmuser.toml"
    conf.write_text(f'[controller]\nuser = "{BOB}"\n')
    conf.chmod(0o644)
    env = {**site.env[BOB], "LINGJUN_CONF": str(conf)}
    p = _restd(([str(site.bin_dir / "lingjun")], env, site.bob), f"unix:{site.bob.home}/b.sock")
    assert p.returncode == 1 and p.stderr.startswith(
        "lingjun restd: fatal: lingjun restd should not be run as SlurmUser"), p.stderr


def test_bob_with_alices_token_over_the_unix_socket_cannot_cancel_her_job(site):
    c = site.cluster
    out = users.run_as(site.alice, [str(site.bin_dir / "sbatch"), "--parsable", "--hold",
                                    "--wrap", "true"], site.env[ALICE])
    assert out.returncode == 0, out.stderr
    job_id = int(out.stdout.strip())
    code, body = site.curl_as(site.bob, site.alice, "-X", "DELETE", f"http://x{BASE}/job/{job_id}")
    assert (code, json.loads(body)["errors"]) == (
        401, [{"error": "Protocol authentication error", "errno": 1007}])
    code, body = site.curl_as(site.bob, site.alice, f"http://x{BASE}/jobs")
    assert code == 401, body
    assert c.state_of(job_id) == "PENDING"
    code, body = site.curl_as(site.alice, site.alice, "-X", "DELETE", f"http://x{BASE}/job/{job_id}")
    assert (code, json.loads(body)["errors"]) == (200, [])
    c.wait_state(job_id, "CANCELLED")


def test_bob_with_his_own_token_is_served_by_alices_restd_on_the_controllers_host(site):
    """alice's restd is [auth] token_relay_users: the controller takes bob's
    token from her process, and her restd took it from bob's (the kernel said so)."""
    c = site.cluster
    out = users.run_as(site.bob, [str(site.bin_dir / "sbatch"), "--parsable", "--hold",
                                  "--wrap", "true"], site.env[BOB])
    assert out.returncode == 0, out.stderr
    job_id = int(out.stdout.strip())
    code, body = site.curl_as(site.bob, site.bob, f"http://x{BASE}/job/{job_id}")
    assert code == 200, body
    assert [j["user_name"] for j in json.loads(body)["jobs"]] == [BOB]
    code, body = site.curl_as(site.bob, site.bob, "-X", "DELETE", f"http://x{BASE}/job/{job_id}")
    assert (code, json.loads(body)["errors"]) == (200, []), body
    c.wait_state(job_id, "CANCELLED")


HOLD_CONNECTIONS = """
import select, socket, sys, time
socks = []
for _ in range(int(sys.argv[2])):
    if sys.argv[1].startswith("/"):
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
    else:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    socks.append(s)
time.sleep(0.5)
answered, _, _ = select.select(socks, [], [], 0)
refused = sum(s.recv(4096).startswith(b"HTTP/1.1 503") for s in answered)
print(len(socks) - len(answered), refused, flush=True)
time.sleep(float(sys.argv[3]))
"""


@pytest.mark.parametrize("over", ["unix socket", "TCP"])
def test_one_users_idle_connections_do_not_keep_anothers_request_out(site, over):
    """bob opens more idle connections than one peer may hold (over TCP from
    this host a peer is the uid owning the socket, not the shared address):
    the extra ones are answered 503 at once; alice's request meanwhile is
    served, over the same kind of socket."""
    per_peer = restd_module.LIMITS.max_connections_per_peer
    script = site.bob.home / "hold.py"
    script.write_text(HOLD_CONNECTIONS)
    where = site.sock if over == "unix socket" else str(site.port)
    p = users.popen_as(site.bob, [str(site.bin_dir / "python"), str(script), where,
                                  str(per_peer + 10), "5"], site.env[BOB])
    try:
        held, refused = map(int, p.stdout.readline().split())
        assert (held, refused) == (per_peer, 10)
        t0 = time.monotonic()
        if over == "unix socket":
            code, body = site.curl_as(site.alice, site.alice, f"http://x{BASE}/ping")
        else:
            r = users.run_as(site.alice, ["curl", "-s", "-w", "\n%{http_code}", "-H",
                                          f"X-SLURM-USER-TOKEN: {site.token(site.alice)}",
                                          f"http://127.0.0.1:{site.port}{BASE}/ping"], site.env[ALICE])
            body, _, code = r.stdout.rpartition("\n")
            code = int(code)
        assert code == 200, body
        assert time.monotonic() - t0 < 2
    finally:
        users.stop(p)


# -- malformed requests ------------------------------------------------------------------


class Probe:
    """A valid request (GET ping with alice's token, over TCP), sent every 50 ms
    from a thread while the malformed ones go; its latencies."""

    def __init__(self, port: int, token: str):
        self.port, self.token = port, token
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        raw = (f"GET {BASE}/ping HTTP/1.1\r\nHost: x\r\nX-SLURM-USER-TOKEN: {self.token}\r\n"
               f"Connection: close\r\n\r\n").encode()
        while not self.stop.is_set():
            t0 = time.monotonic()
            status, _, body = exchange(("127.0.0.1", self.port), raw)
            self.latencies.append(time.monotonic() - t0)
            if status != 200:
                self.failures.append(f"{status} {body[:200]!r}")
            self.stop.wait(0.05)


@pytest.fixture(scope="module")
def probe(site):
    pr = Probe(site.port, site.token(site.alice))
    pr.thread.start()
    yield pr
    pr.stop.set()
    pr.thread.join(10)


SENT: list[tuple[str, int]] = []        # (case, status) of every malformed request sent


def refusal_problem(status: int, ctype: bytes, body: bytes) -> str | None:
    """Why this is not slurmrestd's refusal of a malformed request (None when it is)."""
    if not 400 <= status < 500:
        return f"status {status}, want 4xx: {body[:300]!r}"
    if status == 404 and ctype.startswith(b"text/plain"):
        return None if body == NOT_FOUND else f"404 text is not slurmrestd's: {body[:200]!r}"
    if not ctype.startswith(b"application/json"):
        return f"Content-Type {ctype!r}, want application/json: {body[:200]!r}"
    try:
        doc = json.loads(body)
    except ValueError:
        return f"not JSON: {body[:200]!r}"
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if not (isinstance(errors, list) and errors and all(isinstance(e.get("error"), str) for e in errors)
            and "meta" in doc):
        return f"not slurmrestd's error document: {doc!r:.300}"
    return None


def send(site, case: str, raw: bytes, over_unix: bool = False) -> str | None:
    where = site.sock if over_unix else ("127.0.0.1", site.port)
    status, ctype, body = exchange(where, raw)
    SENT.append((case, status))
    why = refusal_problem(status, ctype, body)
    return f"{case}: {why}" if why else None


def request(method: str, path: str, token: str, body: bytes | None = None,
            headers: tuple[str, ...] = ()) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: x", f"X-SLURM-USER-TOKEN: {token}", *headers]
    if body is not None and not any(h.lower().startswith(("content-length", "transfer-encoding"))
                                     for h in headers):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape") + (body or b"")


def submit(token: str, doc_text: str | bytes, **kw) -> bytes:
    body = doc_text if isinstance(doc_text, bytes) else doc_text.encode("utf-8", "surrogatepass")
    return request("POST", f"{BASE}/job/submit", token, body, **kw)


SCRIPT = json.dumps("#!/bin/sh\ntrue\n")


def fixed_cases(token: str) -> list[tuple[str, bytes]]:
    """Every malformed request a user was seen to send, and their kin."""
    job = lambda props: submit(token, f'{{"script": {SCRIPT}, "job": {props}}}')  # noqa: E731
    head = lambda *lines: ("\r\n".join(lines) + "\r\n\r\n").encode()  # noqa: E731
    return [
        ("negative Content-Length", head(f"POST {BASE}/job/submit HTTP/1.1", "Host: x",
                                         f"X-SLURM-USER-TOKEN: {token}", "Content-Length: -1")),
        ("non-numeric Content-Length", head(f"POST {BASE}/job/submit HTTP/1.1", "Host: x",
                                            "Content-Length: abc")),
        ("Content-Length and chunked", head(f"POST {BASE}/job/submit HTTP/1.1", "Host: x",
                                            "Content-Length: 3", "Transfer-Encoding: chunked") + b"zz\r\n"),
        ("a bad chunk size", head(f"POST {BASE}/job/submit HTTP/1.1", "Host: x",
                                  f"X-SLURM-USER-TOKEN: {token}", "Transfer-Encoding: chunked")
         + b"zz\r\nabc\r\n0\r\n\r\n"),
        ("a body over the limit", head(f"POST {BASE}/job/submit HTTP/1.1", "Host: x",
                                       f"X-SLURM-USER-TOKEN: {token}", "Content-Length: 17000000")),
        ('"environment": [1]', job('{"environment": [1]}')),
        ('"environment": "x"', job('{"environment": "x"}')),
        ('"environment": {"A": {}}', job('{"environment": {"A": {}}}')),
        ('"time_limit": "abc"', job('{"time_limit": "abc"}')),
        ('"time_limit": 1e999', job('{"time_limit": 1e999}')),
        ('"time_limit": NaN', job('{"time_limit": NaN}')),
        ('"time_limit": [10]', job('{"time_limit": [10]}')),
        ('"nodes": {"a": 1}', job('{"nodes": {"a": 1}}')),
        ('"argv": {"a": 1}', job('{"argv": {"a": 1}}')),
        ('"current_working_directory": []', job('{"current_working_directory": []}')),
        ("100,000 nested [", submit(token, "[" * 100_000)),
        ("100,000 nested { in a job", submit(token, f'{{"script": {SCRIPT}, "job": ' + '{"a":' * 100_000)),
        ("a lone surrogate, escaped", submit(token, '{"script": "#!/bin/sh\\n\\ud800", "job": {}}')),
        ("a lone surrogate in a property", job('{"name": "\\udfff"}')),
        ("a lone surrogate, raw", submit(token, b'{"script": "#!/bin/sh\\n\xed\xa0\x80", "job": {}}')),
        ("bytes that are not UTF-8", submit(token, b'{"script": "\xff\xfe"}')),
        ("bad JSON", submit(token, '{"script": ')),
        ("JSON with a trailing comma", submit(token, f'{{"script": {SCRIPT},}}')),
        ("a number with 5,000 digits", job('{"nodes": ' + "9" * 5000 + "}")),
        ("the body a list", submit(token, "[]")),
        ("the body a string", submit(token, '"x"')),
        ("an empty body", submit(token, b"")),
        ("job a list", submit(token, f'{{"script": {SCRIPT}, "job": []}}')),
        ("script a number", submit(token, '{"script": 5, "job": {}}')),
        ("a job id of 10^23", request("GET", f"{BASE}/job/{10**23}", token)),
        ("DELETE a job id of 10^23", request("DELETE", f"{BASE}/job/{10**23}", token)),
        ("a job id of 2^32", request("GET", f"{BASE}/job/{2**32}", token)),
        ("a job id of 0", request("DELETE", f"{BASE}/job/0", token)),
        ("a job id of -1", request("GET", f"{BASE}/job/-1", token)),
        ("a job id in Arabic digits", request("GET", f"{BASE}/job/{quote('١٢')}", token)),
        ("a signal that is none", request("DELETE", f"{BASE}/job/1?signal=SIGFROB", token)),
        ("a signal of 10^30", request("DELETE", f"{BASE}/job/1?signal={10**30}", token)),
        ("an unknown path", request("GET", "/nope", token)),
        ("an unknown endpoint", request("GET", f"{BASE}/frobnicate", token)),
        ("an unknown method", request("PATCH", f"{BASE}/jobs", token)),
        ("TRACE", request("TRACE", f"{BASE}/jobs", token)),
        ("a huge header", request("GET", f"{BASE}/jobs", token, headers=("X-Big: " + "a" * 20000,))),
        ("500 headers", request("GET", f"{BASE}/jobs", token,
                                headers=tuple(f"X-H{i}: v" for i in range(500)))),
        ("a huge request line", request("GET", "/" + "a" * 20000, token)),
        ("no token", request("GET", f"{BASE}/jobs", "")),
        ("a token of bytes that are not ASCII", request("GET", f"{BASE}/jobs", "\udcff\udcfe.x.y")),
        ("a token with a uid of 10^30", request("GET", f"{BASE}/jobs", "e30.eyJ1aWQiOiAxMDAwMDAwMDAw"
                                                "MDAwMDAwMDAwMDAwMDAwMDAwMDAwMDB9.x")),
        ("a forged token", request("GET", f"{BASE}/jobs", "e30.eyJ1aWQiOiAwfQ.forged")),
        ("a user name that is not the token's", request("GET", f"{BASE}/jobs", token,
                                                        headers=("X-SLURM-USER-NAME: root",))),
        ("a TLS hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40 + b"\r\n\r\n"),
        ("a request line of one word", b"GET\r\n\r\n"),
        ("HTTP/9.9", f"GET {BASE}/ping HTTP/9.9\r\nHost: x\r\n\r\n".encode()),
        ("no Host", f"GET {BASE}/ping HTTP/1.1\r\nX-SLURM-USER-TOKEN: {token}\r\n\r\n".encode()),
        ("a NUL in a header", f"GET {BASE}/ping HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n".encode()),
        ("a space before a colon", f"GET {BASE}/ping HTTP/1.1\r\nHost : x\r\n\r\n".encode()),
    ]


def test_fixed_malformed_requests_are_each_answered_4xx_in_slurmrestds_words(site, probe):
    token = site.token(site.alice)
    problems = [why for case, raw in fixed_cases(token) for why in [send(site, case, raw)] if why]
    problems += [why for case, raw in fixed_cases(token)[:12]
                 for why in [send(site, case + " (unix socket)", raw, over_unix=True)] if why]
    assert not problems, "\n".join(problems)


def test_a_slowloris_head_is_answered_408_and_closed(site, probe):
    head_s = restd_module.LIMITS.head_s
    data, elapsed = slowloris(("127.0.0.1", site.port), f"GET {BASE}/ping HTTP/1.1", head_s)
    SENT.append(("slowloris", int(data.split()[1]) if data else 0))
    assert data.startswith(b"HTTP/1.1 408 "), data[:300]
    _, _, body = data.partition(b"\r\n\r\n")
    assert refusal_problem(408, b"application/json", body) is None, body
    assert head_s - 1 <= elapsed <= head_s + 3


# Generated: bodies whose job has at least one property of a type it cannot have.
_PROPS = sorted(k for k in restd_module.JOB_PROPERTIES if k != "hold")
_wrong = st.one_of(st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                        max_size=2))
_scalar = st.one_of(st.text(max_size=8), st.integers(), st.booleans(), st.none())
_bad_job = st.tuples(st.dictionaries(st.sampled_from(_PROPS), _wrong, min_size=1, max_size=3),
                     st.dictionaries(st.sampled_from(_PROPS), _scalar, max_size=3)).map(
    lambda t: {**t[1], **t[0]})


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(job=_bad_job, script=st.one_of(st.just("#!/bin/sh\ntrue\n"), st.text(min_size=1, max_size=20)))
def test_generated_submissions_with_a_property_of_a_wrong_type_are_400(site, probe, job, script):
    raw = submit(site.token(site.alice), json.dumps({"script": script, "job": job}))
    why = send(site, "generated submission", raw)
    assert why is None, f"{why}\n{job!r}"


_bad_id = st.one_of(st.integers(min_value=2**32, max_value=10**40).map(str),
                    st.integers(max_value=0).map(str),
                    st.text(min_size=1, max_size=12).filter(lambda t: not (t.isascii() and t.isdigit())))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(method=st.sampled_from(["GET", "DELETE"]), job_id=_bad_id)
def test_generated_job_ids_no_job_can_have_are_4xx(site, probe, method, job_id):
    raw = request(method, f"{BASE}/job/{quote(job_id, safe='')}", site.token(site.alice))
    why = send(site, "generated job id", raw)
    assert why is None, f"{why}\n{job_id!r}"


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(junk=st.binary(min_size=1, max_size=200).filter(lambda b: b"\r\n\r\n" not in b and b"\n\n" not in b))
def test_generated_garbage_heads_are_4xx(site, probe, junk):
    why = send(site, "generated garbage", junk + b"\r\n\r\n")
    assert why is None, f"{why}\n{junk!r}"


def test_a_valid_request_was_served_in_under_100_ms_throughout(site, probe):
    """The figures: how many malformed requests were sent, the valid request's latency."""
    lat = sorted(probe.latencies)
    print(f"\nmalformed requests sent: {len(SENT)}; valid requests meanwhile: {len(lat)}, "
          f"latency median {lat[len(lat) // 2] * 1000:.1f} ms, max {lat[-1] * 1000:.1f} ms")
    assert len(SENT) >= 200, f"only {len(SENT)} malformed requests were sent"
    assert not probe.failures, probe.failures[:5]
    p95 = lat[int(len(lat) * 0.95)]
    assert len(lat) >= 20 and p95 < LATENCY_LIMIT_S and lat[-1] < WORST_S, \
        (f"95th percentile {p95 * 1000:.1f} ms (want < {LATENCY_LIMIT_S * 1000:.0f} ms), "
         f"max {lat[-1] * 1000:.1f} ms (want < {WORST_S * 1000:.0f} ms)")
    log = site.log.read_text()
    assert "Traceback" not in log, log[-3000:]
    assert len(log.splitlines()) < 60, f"{len(log.splitlines())} log lines for {len(SENT)} refusals"

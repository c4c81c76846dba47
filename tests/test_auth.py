"""The cluster key file, user tokens, agent proofs and the credential socket."""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import shutil
import tempfile
import threading
import time

import jwt
import pytest

from lingjun import auth, config, credential
from cli import lingjun as lingjun_cmd


# -- key file -------------------------------------------------------------------------

def test_keygen_writes_a_private_random_key_and_never_overwrites(tmp_path, capsys):
    path = tmp_path / "cluster.key"
    assert lingjun_cmd.main(["keygen", str(path)]) == 0
    data = path.read_bytes()
    assert len(data) >= 32
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    assert auth.load_key(path) == data
    assert lingjun_cmd.main(["keygen", str(path)]) == 1
    assert "already exists" in capsys.readouterr().err
    assert path.read_bytes() == data, "a second keygen changed the key"


def test_two_keys_differ(tmp_path):
    auth.write_key(tmp_path / "a")
    auth.write_key(tmp_path / "b")
    assert (tmp_path / "a").read_bytes() != (tmp_path / "b").read_bytes()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660], ids=["group-readable", "world-readable",
                                                              "group-writable"])
def test_a_key_others_can_read_is_refused_with_the_fix(tmp_path, mode):
    path = tmp_path / "k"
    auth.write_key(path)
    os.chmod(path, mode)
    with pytest.raises(auth.KeyFileError) as e:
        auth.load_key(path)
    assert "readable by group or others" in str(e.value) and f"chmod 600 {path}" in str(e.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_root_trusts_a_key_of_the_controllers_user_and_of_no_one_else(tmp_path):
    """The controller's user owns the key on its host (it must read it); an
    agent there is root and takes that key, named by [controller] user."""
    path = tmp_path / "k"
    auth.write_key(path)
    os.chown(path, 65534, 65534)            # nobody, standing in for the controller's user
    with pytest.raises(auth.KeyFileError, match="belongs to uid 65534"):
        auth.load_key(path)
    assert auth.key_owners("nobody") == {0, 65534}
    assert auth.load_key(path, auth.key_owners("nobody")) == path.read_bytes()
    assert auth.key_owners("no-such-user-here") == {0}
    with pytest.raises(auth.KeyFileError, match="belongs to uid 65534"):
        auth.load_key(path, auth.key_owners("root"))


def test_a_missing_or_short_key_is_refused_with_what_to_do(tmp_path):
    with pytest.raises(auth.KeyFileError, match="lingjun keygen"):
        auth.load_key(tmp_path / "none")
    short = tmp_path / "short"
    short.write_bytes(b"x" * 8)
    os.chmod(short, 0o600)
    with pytest.raises(auth.KeyFileError, match="at least 32"):
        auth.load_key(short)


# -- user tokens ----------------------------------------------------------------------

KEY = auth.ClusterKey.from_bytes(b"k" * 64)
OTHER = auth.ClusterKey.from_bytes(b"o" * 64)


def test_a_token_says_who_it_was_minted_for():
    tok = auth.mint_token(KEY, 1001, 1002, ttl_s=60)
    assert auth.verify_token(KEY, tok) == auth.Identity(uid=1001, gid=1002)


def test_two_tokens_for_the_same_user_differ():
    assert auth.mint_token(KEY, 5, 5, 60) != auth.mint_token(KEY, 5, 5, 60)


def test_an_expired_token_is_refused():
    tok = auth.mint_token(KEY, 1001, 1001, ttl_s=5, now=time.time() - 60)
    with pytest.raises(auth.AuthError, match="expired"):
        auth.verify_token(KEY, tok)


def test_a_token_expires_after_its_ttl():
    now = time.time()
    tok = auth.mint_token(KEY, 1, 1, ttl_s=30, now=now)
    assert auth.verify_token(KEY, tok, now=now + 29).uid == 1
    with pytest.raises(auth.AuthError, match="expired"):
        auth.verify_token(KEY, tok, now=now + 31)


@pytest.mark.parametrize("forge", [
    lambda: auth.mint_token(OTHER, 0, 0, 60),
    lambda: jwt.encode({"uid": 0, "gid": 0, "exp": int(time.time()) + 60}, "secret" * 6, algorithm="HS256"),
    lambda: jwt.encode({"uid": 0, "gid": 0, "exp": int(time.time()) + 60}, None, algorithm="none"),
    lambda: _swap_payload(auth.mint_token(KEY, 1001, 1001, 60), {"uid": 0, "gid": 0,
                                                                   "exp": int(time.time()) + 60}),
    lambda: jwt.encode({"uid": 0, "gid": 0}, KEY.token, algorithm="HS256"),
    lambda: jwt.encode({"uid": "0", "gid": 0, "exp": int(time.time()) + 60}, KEY.token, algorithm="HS256"),
    lambda: jwt.encode({"uid": 2**31, "gid": 0, "exp": int(time.time()) + 60}, KEY.token, algorithm="HS256"),
    lambda: jwt.encode({"uid": -1, "gid": 0, "exp": int(time.time()) + 60}, KEY.token, algorithm="HS256"),
    lambda: "not a token",
    lambda: auth.proof_mac(KEY, b"n" * 32, "node1", 0).hex(),
], ids=["signed with another cluster's key", "signed with a guessed key", "alg none",
        "payload swapped under a real signature", "no expiry", "uid not a number", "uid past int32",
        "a negative uid", "garbage",
        "an agent MAC offered as a token"])
def test_a_forged_token_is_refused(forge):
    with pytest.raises(auth.AuthError):
        auth.verify_token(KEY, forge())


def _swap_payload(token: str, claims: dict) -> str:
    head, _, sig = token.split(".")
    body = jwt.utils.base64url_encode(jwt.api_jws.json.dumps(claims).encode()).decode()
    return f"{head}.{body}.{sig}"


# -- agent proofs ---------------------------------------------------------------------

def _proof(key, nonce, node="node1", time_ms=None):
    t = int(time.time() * 1000) if time_ms is None else time_ms
    return dict(node=node, nonce=nonce, time_ms=t, mac=auth.proof_mac(key, nonce, node, t))


def test_a_proof_with_the_key_verifies_once():
    book = auth.NonceBook()
    nonce = book.issue()
    p = _proof(KEY, nonce)
    auth.verify_proof(KEY, nonce, book, max_skew_s=30, **p)
    with pytest.raises(auth.AuthError, match="replayed"):
        auth.verify_proof(KEY, nonce, book, max_skew_s=30, **p)


def test_a_proof_for_another_challenge_is_a_replay():
    book = auth.NonceBook()
    first, second = book.issue(), book.issue()
    captured = _proof(KEY, first)
    with pytest.raises(auth.AuthError, match="replayed"):
        auth.verify_proof(KEY, second, book, max_skew_s=30, **captured)


def test_a_proof_with_another_key_is_refused():
    book = auth.NonceBook()
    nonce = book.issue()
    with pytest.raises(auth.AuthError, match="wrong MAC"):
        auth.verify_proof(KEY, nonce, book, max_skew_s=30, **_proof(OTHER, nonce))


def test_a_proof_for_another_node_name_is_refused():
    book = auth.NonceBook()
    nonce = book.issue()
    p = _proof(KEY, nonce, node="node1")
    p["node"] = "node2"
    with pytest.raises(auth.AuthError, match="wrong MAC"):
        auth.verify_proof(KEY, nonce, book, max_skew_s=30, **p)


def test_a_proof_from_a_clock_past_the_skew_is_refused():
    book = auth.NonceBook()
    nonce = book.issue()
    old = int((time.time() - 120) * 1000)
    with pytest.raises(auth.AuthError, match="clock skew"):
        auth.verify_proof(KEY, nonce, book, max_skew_s=30, **_proof(KEY, nonce, time_ms=old))


def test_a_stale_challenge_cannot_be_answered():
    clock = [100.0]
    book = auth.NonceBook(lifetime_s=10, clock=lambda: clock[0])
    nonce = book.issue()
    clock[0] += 11
    with pytest.raises(auth.AuthError, match="expired"):
        auth.verify_proof(KEY, nonce, book, max_skew_s=30, **_proof(KEY, nonce))


# -- the credential socket ------------------------------------------------------------

@pytest.fixture
def socket_server():
    """A CredentialServer on its own loop in a thread; yields the socket path
    (in a directory every user may enter, as /run/lingjun is)."""
    where = tempfile.mkdtemp(prefix="lingjun-auth-")
    os.chmod(where, 0o755)
    path = os.path.join(where, "auth.sock")
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    server = credential.CredentialServer(KEY, path, ttl_s=60)
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    yield path
    asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    t.join(10)
    shutil.rmtree(where, ignore_errors=True)


def test_the_socket_signs_the_callers_own_uid(socket_server):
    assert oct(os.stat(socket_server).st_mode & 0o777) == oct(0o666)
    who = auth.verify_token(KEY, credential.fetch_token(socket_server))
    assert (who.uid, who.gid) == (os.getuid(), os.getgid())


def test_the_socket_signs_the_kernels_uid_not_the_callers_wish(socket_server):
    """A child that drops to nobody gets a token for nobody, whatever it would like."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: become nobody, ask, hand the token back
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            os.write(w, credential.fetch_token(socket_server).encode())
        finally:
            os._exit(0)
    os.close(w)
    token = b""
    while chunk := os.read(r, 4096):
        token += chunk
    os.close(r)
    os.waitpid(pid, 0)
    who = auth.verify_token(KEY, token.decode())
    assert (who.uid, who.gid) == (65534, 65534)


def test_a_second_daemon_does_not_steal_a_served_socket(socket_server):
    with pytest.raises(OSError, match="already serves"):
        asyncio.run(credential.CredentialServer(KEY, socket_server, ttl_s=60).start())
    assert auth.verify_token(KEY, credential.fetch_token(socket_server)).uid == os.getuid()


def test_no_socket_is_a_clear_error(tmp_path):
    with pytest.raises(credential.CredentialUnavailable, match="No such file"):
        credential.fetch_token(str(tmp_path / "none.sock"))


# -- config ---------------------------------------------------------------------------

def test_auth_config_defaults_and_refusals():
    a = config.parse("").auth
    assert (a.key_file, a.socket, a.tls) == ("/etc/lingjun/cluster.key", "/run/lingjun/auth.sock", False)
    with pytest.raises(config.ConfigError, match="go together"):
        config.parse('[auth]\ntls_cert = "/c.pem"\n')
    with pytest.raises(config.ConfigError, match="unknown key"):
        config.parse('[auth]\nkey = "/c.pem"\n')


# -- the controller's proof (the agent checks it before proving anything) ---------------

def test_the_controllers_answer_to_the_agents_hello_verifies():
    hello, nonce = auth.new_nonce(), auth.new_nonce()
    mac = auth.controller_proof_mac(KEY, hello, nonce, "node1")
    auth.verify_controller_proof(KEY, hello, nonce, "node1", mac)


@pytest.mark.parametrize("forge", [
    lambda h, n: auth.controller_proof_mac(auth.ClusterKey.from_bytes(b"x" * 64), h, n, "node1"),
    lambda h, n: auth.controller_proof_mac(KEY, auth.new_nonce(), n, "node1"),
    lambda h, n: auth.controller_proof_mac(KEY, h, n, "node2"),
    lambda h, n: auth.proof_mac(KEY, h, "node1", 0),
    lambda h, n: hmac.new(KEY.agent, b"|".join((h.hex().encode(), n.hex().encode(), b"node1")),
                          hashlib.sha256).digest(),
    lambda h, n: b"",
], ids=["another cluster's controller", "an answer to another hello (replayed)",
        "an answer for another node", "an agent's proof offered back",
        "the same message under the agent's key", "no answer at all"])
def test_a_controller_without_the_key_is_refused(forge):
    hello, nonce = auth.new_nonce(), auth.new_nonce()
    with pytest.raises(auth.AuthError):
        auth.verify_controller_proof(KEY, hello, nonce, "node1", forge(hello, nonce))

"""For in-process servers: a cluster key and channels whose calls carry a token.

Tests that talk to ``build_server`` directly have no credential socket; they
hold the key themselves and sign a token for the uid the test plays.
"""
from __future__ import annotations

import itertools
import secrets

import grpc

from lingjun import auth
from lingjun.client import _Details
from lingjund.transport.authn import ServerAuth


def random_key() -> auth.ClusterKey:
    return auth.ClusterKey.from_bytes(secrets.token_bytes(auth.KEY_BYTES))


def server_auth(key: auth.ClusterKey | None = None) -> ServerAuth:
    return ServerAuth(key=key or random_key())


def claimed(request) -> tuple[int, int]:
    """The uid/gid a request claims (requester_uid, else its spec's uid/gid; root
    when it claims none): what the service tests were written to play."""
    if not hasattr(request, "DESCRIPTOR"):     # raw bytes (a fuzz test's payload): root
        return 0, 0
    fields = request.DESCRIPTOR.fields_by_name
    uid = gid = 0
    named = [f for f in fields if f == "requester_uid" or f.endswith("_requester_uid")]
    if named and (getattr(request, named[0]) or "spec" not in fields):
        uid = gid = getattr(request, named[0])
    elif "spec" in fields and request.HasField("spec"):
        uid, gid = request.spec.uid, request.spec.gid
    # No kernel hands out a negative uid: a request claiming one is signed as root's.
    return (uid, gid) if uid >= 0 and gid >= 0 else (0, 0)


class SigningInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                         grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Attaches a freshly minted token to every call: for ``uid``/``gid``, or,
    when uid is None, for whoever each unary request claims to be."""

    def __init__(self, key: auth.ClusterKey, uid: int | None = None, gid: int | None = None):
        self.key, self.uid, self.gid = key, uid, gid

    def _d(self, d, request=None):
        if self.uid is not None:
            uid, gid = self.uid, self.gid if self.gid is not None else self.uid
        else:
            uid, gid = claimed(request) if request is not None else (0, 0)
        md = list(d.metadata or ()) + [(auth.TOKEN_METADATA, auth.mint_token(self.key, uid, gid, 60))]
        return _Details(d.method, d.timeout, md, d.credentials, getattr(d, "wait_for_ready", None),
                        getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._d(details, request), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._d(details, request), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._d(details), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        if self.uid is not None:
            return continuation(self._d(details), request_iterator)
        # Sign as whoever the stream's first message claims (an Allocate stream's opening).
        first = next(iter(request_iterator), None)
        rest = itertools.chain([] if first is None else [first], request_iterator)
        return continuation(self._d(details, first), rest)


def signed_channel(address: str, key: auth.ClusterKey, uid: int | None = None,
                   gid: int | None = None) -> grpc.Channel:
    return grpc.intercept_channel(grpc.insecure_channel(address), SigningInterceptor(key, uid, gid))

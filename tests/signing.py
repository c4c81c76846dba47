"""For in-process servers: a cluster key and channels whose calls carry a token.

Tests that talk to ``build_server`` directly have no credential socket; they
hold the key themselves and sign a token for the uid the test plays.
"""
from __future__ import annotations

import secrets

import grpc

from lingjun import auth
from lingjun.client import _Details
from lingjund.transport.authn import ServerAuth


def test_key() -> auth.ClusterKey:
    return auth.ClusterKey.from_bytes(secrets.token_bytes(auth.KEY_BYTES))


def server_auth(key: auth.ClusterKey | None = None) -> ServerAuth:
    return ServerAuth(key=key or test_key())


class SigningInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                         grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Attaches a freshly minted token for ``uid``/``gid`` to every call."""

    def __init__(self, key: auth.ClusterKey, uid: int = 0, gid: int = 0):
        self.key, self.uid, self.gid = key, uid, gid

    def _d(self, d):
        md = list(d.metadata or ()) + [(auth.TOKEN_METADATA, auth.mint_token(self.key, self.uid, self.gid, 60))]
        return _Details(d.method, d.timeout, md, d.credentials, getattr(d, "wait_for_ready", None),
                        getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._d(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._d(details), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._d(details), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._d(details), request_iterator)


def signed_channel(address: str, key: auth.ClusterKey, uid: int = 0, gid: int = 0) -> grpc.Channel:
    return grpc.intercept_channel(grpc.insecure_channel(address), SigningInterceptor(key, uid, gid))

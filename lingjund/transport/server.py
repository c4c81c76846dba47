"""Build the gRPC server: SlurmApi, AgentService, health and reflection.

``build_server`` returns the server and the port it bound, so tests listen
on port 0 and read back the port. ``auth`` holds the cluster key
both services authenticate with and, when configured, the TLS credentials
the port is served with; the local cluster serves plaintext on loopback.
"""
from __future__ import annotations

import errno
import logging
import os

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from lingjun import procnet
from lingjun.admission import Admission
from lingjun.v1 import agent_pb2, agent_pb2_grpc, api_pb2, api_pb2_grpc
from lingjund.service.context import Controller
from lingjund.transport.agent import AgentServicer
from lingjund.transport.api import SlurmApiServicer
from lingjund.transport.authn import AuthnInterceptor, ServerAuth, relay_uids
from lingjund.transport.validate import DecodeGuard

# The services whose health is reported by name ("" is the server overall).
SERVICES = (
    api_pb2.DESCRIPTOR.services_by_name["SlurmApi"].full_name,
    agent_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name,
)
MAX_MESSAGE_BYTES = 16 * 1024 * 1024      # the default of [authz] max_message_bytes
# Calls queued in gRPC core before the loop takes them: room for every agent
# of a large cluster reconnecting at once, plus the commands of its users.
PENDING_CALLS = 65_536
# A connection must finish its handshake (TLS, HTTP/2's settings) this soon.
HANDSHAKE_TIMEOUT_MS = 10_000
# A connection with no call this long is closed (a GOAWAY: the client's
# channel reconnects at its next call). An agent always holds a stream.
CONNECTION_IDLE_MS = 120_000
# Calls one connection may carry at once; more wait in the client's channel.
# The agent's relay of its users' commands is the busiest one (and
# bench/sim's --per-channel, which puts that many agents' streams on one).
STREAMS_PER_CONNECTION = 1024


def build_server(ctl: Controller, listen: str, auth: ServerAuth,
                 api: SlurmApiServicer | None = None,
                 timer: grpc.aio.ServerInterceptor | None = None,
                 admission: Admission | None = None,
                 ) -> tuple[grpc.aio.Server, int, health.aio.HealthServicer]:
    """``api``: the SlurmApi servicer to serve (one is made when None); the
    daemon passes the one its local command socket answers through too.
    ``timer``: an interceptor that times calls (lingjund/metrics.py), put
    outermost so decoding and authentication count too. ``admission``: what
    each user may hold (lingjun/admission.py), shared with the daemon's unix
    doors; one of [limits] and this process's descriptor limit when None."""
    if admission is None:
        admission = Admission.for_daemon(ctl.config.limits, logging.getLogger("lingjund.admission"))
    # DecodeGuard first: the authentication check must see decoded requests.
    authn = AuthnInterceptor(auth.key, admission=admission,
                             relays=relay_uids(ctl.config.auth.token_relay_users))
    chain = [DecodeGuard(), authn] if timer is None else [timer, DecodeGuard(), authn]
    server = grpc.aio.server(interceptors=chain, options=[
        ("grpc.max_receive_message_length", ctl.config.authz.max_message_bytes),
        ("grpc.max_send_message_length", 64 * 1024 * 1024),
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ("grpc.keepalive_permit_without_calls", 1),
        # One controller per port: with gRPC's default SO_REUSEPORT a second
        # server binds the same port and silently takes half the connections.
        ("grpc.so_reuseport", 0),
        # New calls wait in gRPC core until the asyncio server asks for them,
        # one at a time from this loop; past max_pending_requests (default
        # 1,000; hard limit 3,000) core cancels them, and a cluster's agents
        # reconnecting at once (a controller restart) came back CANCELLED by
        # the thousand before the handshake. Let them queue: each is one
        # stream of one agent. Core also cancels a call left waiting longer
        # than max_unrequested_time (default 30 s): a loop busy with a long
        # pass while thousands connect takes them more slowly than that.
        ("grpc.server.max_pending_requests", PENDING_CALLS),
        ("grpc.server.max_pending_requests_hard_limit", PENDING_CALLS),
        ("grpc.server_max_unrequested_time_in_server", 300),
        # Descriptors: gRPC connections are counted for everyone together
        # (grpc-python says who calls only per call, not per connection:
        # lingjun/admission.py), past the cap core closes new ones at once;
        # one that never finishes its handshake, or makes no call for a
        # while, is closed. Calls are counted per user in AuthnInterceptor.
        ("grpc.max_allowed_incoming_connections", admission.budget.grpc_connections),
        ("grpc.server_handshake_timeout_ms", HANDSHAKE_TIMEOUT_MS),
        ("grpc.max_connection_idle_ms", CONNECTION_IDLE_MS),
        ("grpc.max_concurrent_streams", STREAMS_PER_CONNECTION),
    ])
    # GetJobs (squeue) and GetAccounting (sacct, from the history readers) may
    # answer with bytes encoded already: those are sent as they are
    api_pb2_grpc.add_SlurmApiServicer_to_server(api or SlurmApiServicer(ctl), _EncodedReplies(server))
    agent_pb2_grpc.add_AgentServiceServicer_to_server(AgentServicer(ctl, auth), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = (
        *SERVICES,
        health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        reflection.SERVICE_NAME,
    )
    reflection.enable_server_reflection(names, server)
    try:
        if auth.tls is not None:
            port = server.add_secure_port(listen, auth.tls)
        else:
            port = server.add_insecure_port(listen)
    except RuntimeError:     # grpc's words name no cause; the usual one is a taken port
        port = 0
    if port == 0:
        raise OSError(errno.EADDRINUSE, _bind_failure(listen))
    authn.server_port = port        # loopback callers' sockets are found by it
    return server, port, health_servicer


ENCODED_REPLY_METHODS = frozenset({"GetJobs", "GetAccounting"})


def _serialize_or_pass(serialize):
    def serializer(reply):
        return reply if isinstance(reply, bytes) else serialize(reply)
    return serializer


def _pass_encoded(method: str, handler):
    """``handler`` of SlurmApi's ``method``, whose replies may come encoded
    already (bytes: GetJobs for squeue, GetAccounting's pages from the
    history readers) and are then sent as they are."""
    if handler is None or method.rsplit("/", 1)[-1] not in ENCODED_REPLY_METHODS:
        return handler
    return handler._replace(response_serializer=_serialize_or_pass(handler.response_serializer))


class _EncodedReply(grpc.GenericRpcHandler):
    def __init__(self, inner: grpc.GenericRpcHandler):
        self.inner = inner

    def service(self, handler_call_details):
        return _pass_encoded(handler_call_details.method, self.inner.service(handler_call_details))


class _EncodedReplies:
    """The server as add_SlurmApiServicer_to_server sees it: SlurmApi's
    handlers registered with _pass_encoded's serializer."""

    def __init__(self, server: grpc.aio.Server):
        self.server = server

    def add_generic_rpc_handlers(self, handlers) -> None:
        self.server.add_generic_rpc_handlers(tuple(_EncodedReply(h) for h in handlers))

    def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
        self.server.add_registered_method_handlers(
            service, {m: _pass_encoded(m, h) for m, h in handlers.items()})


def _bind_failure(listen: str) -> str:
    """Why ``listen`` could not be bound, naming the process that listens there."""
    _, _, port = listen.rpartition(":")
    holders = procnet.listener_pids(int(port)) if port.isdigit() else []
    if holders:
        who = ", ".join(procnet.describe_pid(p) for p in holders if p != os.getpid())
        return f"cannot listen on {listen}: address already in use by {who}"
    return f"cannot listen on {listen}: address already in use or not available"

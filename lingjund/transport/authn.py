"""Who is calling: every SlurmApi call carries a token; the token, not the request, says who.

Design (DESIGN.md "Security" is read-only, so the defence lives here)
--------------------------------------------------------------------
*Why peer credentials and signed tokens.* A uid in a request is whatever the
client wrote. The kernel, though, knows which user owns the process at the
other end of a unix socket (``SO_PEERCRED``) and no process can lie about
it. So a key-holding daemon serves a unix socket (``lingjun/credential.py``),
reads the caller's uid/gid from the kernel and hands back a token signed with
the cluster key: ``{uid, gid, exp, nonce}``. The command sends it as gRPC
metadata (``lingjun-credential``); here, on every SlurmApi call, the
controller verifies the signature and the expiry before anything else runs.
This is munge's design (munged reads SO_PEERCRED and signs a credential with
the key every host shares), so it works the same from a login node: the
agent there serves the socket (``[auth] agent_serves_socket``). The gRPC
port itself can stay TCP, with TLS when configured; a token is no secret
worth stealing beyond its ``token_ttl_s``, exactly as a munge credential
may be replayed until it expires.

We did not make the controller read SO_PEERCRED from the gRPC connection
itself: that only works for callers on the controller's host over a unix
socket, and grpc-python does not expose the peer's socket to an
interceptor; the token works over any transport.

*A token is good only in the hands of the uid it names.* A token can leak
(a job's environment, a log, a core file) and is replayable until it
expires (``token_ttl_s``, five minutes by default, as munge's TTL). So for
a client on this host (loopback TCP, or one of this host's own addresses)
the controller also asks the kernel who owns the client's end of the
connection: the ``uid`` column of the
``/proc/net/tcp{,6}`` row whose local address is the client's peer address
and whose remote port is ours (``lingjun/procnet.py``). A token whose uid
differs is refused as a forged one is; root's processes may present any
token (root could become that user anyway), so root's own requests and
tools acting for users keep working, and so may the users named in
``[auth] token_relay_users``: lingjun restd's own user on this host, which
relays its callers' tokens (on its unix socket it checks the caller's uid
against the token's itself), as a restd on another host does. No row (the connection already gone)
refuses too. For remote peers (login nodes, other hosts) the kernel here
cannot say, and the token alone decides, as before: that is munge's model,
and TLS (``[auth] tls_cert``) keeps tokens off the wire. The cost is one
netlink query per call from this host (about 50 microseconds; the tables
are read only when it finds nothing); remote calls cost nothing more.

*Why overwrite fields by name.* The messages predate authentication and
carry the caller's identity in fields the client fills in (``JobSpec.uid``,
``requester_uid``...). Rather than trust them, or teach every service
function to read the identity from somewhere new, the interceptor
overwrites them, recursively, by name: ``requester_uid`` and ``requester``
anywhere, ``uid``/``gid``/``user``/``group`` of a ``JobSpec``. The service
layer keeps reading the request and gets the truth; a field added later
with one of these names is covered without a change here. No flag of any
command can claim another uid: whatever it sends is replaced.

*Where munge would plug in.* ``verify`` below is the one place a credential
becomes an ``Identity``. A munge backend would accept a second metadata key
carrying a munge credential and turn it into an Identity with ``unmunge``
(or libmunge through ctypes); the client side would call ``munge -n``
instead of reading our socket. Not built: the local socket covers one
host, and agents serving the socket cover login nodes.

The interceptor must see decoded messages: in ``grpc.aio.server(interceptors=
[...])`` the first is outermost, so one that decodes requests itself goes
before this one.

*How much one user may hold.* Once the caller is known, the call counts
against that user's ``[limits] requests_per_user`` (unary calls, the
command socket's included) or ``streams_per_user`` (srun, salloc, sacct,
WatchJobs) in the daemon's ``admission.Admission``; over it the call ends
at once with RESOURCE_EXHAUSTED and Slurm's words for its rate limit,
before any service code runs. Root and the controller's own user are not
limited per user. What gRPC cannot count per user (its connections) is
said in lingjun/admission.py.

A missing, forged or expired token ends the call with UNAUTHENTICATED and
Slurm's words, "Protocol authentication error", before any service code
runs. Health checks and reflection stay open (load balancers, grpcurl);
the agent channel authenticates itself (``transport/agent.py``).
"""
from __future__ import annotations

import contextvars
import logging
import pwd
from dataclasses import dataclass

import grpc
from google.protobuf.message import Message

from lingjun import admission as admission_mod
from lingjun import auth, procnet, slurm
from lingjund.transport import status

log = logging.getLogger("lingjund.authn")

API_PREFIX = "/lingjun.v1.SlurmApi/"
# The identity of the call being served, for code that has no request field
# to read it from (set by the interceptor for the duration of the call).
CALLER: contextvars.ContextVar[auth.Identity | None] = contextvars.ContextVar("caller", default=None)


@dataclass(frozen=True)
class ServerAuth:
    """What the servers need to authenticate: the cluster's derived keys, the
    agents' allowed clock skew, and TLS credentials (None = plaintext)."""
    key: auth.ClusterKey
    handshake_max_skew_s: float = 30.0
    tls: grpc.ServerCredentials | None = None

    @classmethod
    def from_config(cls, cfg) -> "ServerAuth":
        """From [auth]; raises auth.KeyFileError or OSError (unreadable TLS files)."""
        a = cfg.auth
        tls = None
        if a.tls_cert:
            with open(a.tls_cert, "rb") as c, open(a.tls_key, "rb") as k:
                pair = (k.read(), c.read())
            tls = grpc.ssl_server_credentials([pair])
        return cls(key=auth.ClusterKey.load(a.key_file), handshake_max_skew_s=a.handshake_max_skew_s,
                   tls=tls)


def overwrite_identity(msg: Message, who: auth.Identity) -> None:
    """Replace every identity field of ``msg`` (and of the messages it holds) with ``who``."""
    user, group = slurm.account_names(who.uid, who.gid)
    _overwrite(msg, who, user, group)


def _repeated(f) -> bool:
    # protobuf 7 dropped FieldDescriptor.label; 5.x has no is_repeated.
    return f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED


def _overwrite(msg: Message, who: auth.Identity, user: str, group: str) -> None:
    desc = msg.DESCRIPTOR
    fields = desc.fields_by_name
    for name in fields:      # requester_uid, and e.g. AllocationRequest.requester_uid
        if name == "requester_uid" or name.endswith("_requester_uid"):
            setattr(msg, name, who.uid)
    if "requester" in fields and fields["requester"].type == fields["requester"].TYPE_STRING:
        setattr(msg, "requester", user)
    if desc.name == "JobSpec":
        msg.uid, msg.gid, msg.user, msg.group = who.uid, who.gid, user, group
    for f in desc.fields:
        if f.type != f.TYPE_MESSAGE:
            continue
        if f.message_type.GetOptions().map_entry:
            continue
        if _repeated(f):
            for item in getattr(msg, f.name):
                _overwrite(item, who, user, group)
        elif msg.HasField(f.name):
            _overwrite(getattr(msg, f.name), who, user, group)


async def _rewritten(request_iterator, who: auth.Identity):
    """A client stream's messages, each with the caller's identity written in."""
    async for request in request_iterator:
        overwrite_identity(request, who)
        yield request


def verify(key: auth.ClusterKey, metadata) -> auth.Identity:
    """The caller's identity from the call's metadata; AuthError when there is none."""
    tokens = [v for k, v in (metadata or ()) if k == auth.TOKEN_METADATA]
    if len(tokens) != 1:
        raise auth.AuthError("no credential" if not tokens else "more than one credential")
    token = tokens[0]
    if isinstance(token, bytes):
        token = token.decode(errors="replace")
    return auth.verify_token(key, token)


def _peer(context) -> str:
    try:
        return context.peer()
    except Exception:  # noqa: BLE001 - only for the log line
        return "?"


def peer_mismatch(peer: str, who: auth.Identity, server_port: int | None,
                  relays: frozenset[int] = frozenset()) -> str | None:
    """Why a token for ``who`` must not be taken from ``peer`` (gRPC's peer string), or None.

    Only TCP peers on this host are checked (see the module docstring);
    processes of root and of the ``relays`` uids may present any token."""
    addr = procnet.parse_peer(peer)
    if addr is None or not server_port or not procnet.is_this_host(addr[0]):
        return None
    uid = procnet.socket_uid(addr, server_port)
    if uid is None:
        return f"no socket of this host is the peer {peer} (connection gone?)"
    if uid != who.uid and uid != ROOT_UID and uid not in relays:
        return f"a token for uid {who.uid} presented by a process of uid {uid}"
    return None


ROOT_UID = 0


def relay_uids(names: tuple[str, ...]) -> frozenset[int]:
    """The uids of ``[auth] token_relay_users``; a name this host does not
    know is left out, and said so."""
    uids = set()
    for name in names:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            log.error("[auth] token_relay_users: no user %r on this host; ignored", name)
    return frozenset(uids)
# Slurm's name for a call its rate limit turned away (slurm_errno.h), the ErrorInfo reason.
RATE_LIMITED_REASON = "SLURMCTLD_COMMUNICATIONS_BACKOFF"


class AuthnInterceptor(grpc.aio.ServerInterceptor):
    """Verifies the token of every SlurmApi call and rewrites the request's identity fields.

    ``server_port`` is the port the server bound (set by ``build_server``
    once it is known): loopback callers are matched against it.
    ``admission``: the daemon's counts of each user's calls (None: unlimited)."""

    def __init__(self, key: auth.ClusterKey, server_port: int | None = None,
                 admission: admission_mod.Admission | None = None,
                 relays: frozenset[int] = frozenset()):
        self.key = key
        self.server_port = server_port
        self.admission = admission
        self.relays = relays

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        if handler is None or not details.method.startswith(API_PREFIX):
            return handler
        if handler.request_deserializer is None:
            # An outer interceptor decodes requests itself (validate's DecodeGuard):
            # we would get bytes we cannot rewrite. Order them [that one, this one].
            raise RuntimeError("AuthnInterceptor must come after any interceptor that decodes requests")
        key, method = self.key, details.method
        metadata = details.invocation_metadata
        server_port = self.server_port
        admission = self.admission
        relays = self.relays
        is_stream = bool(handler.request_streaming or handler.response_streaming)

        async def admit(context, who: auth.Identity) -> None:
            """Count the call against its caller; over the limit, end it."""
            why = admission.begin(who.uid, is_stream) if admission is not None else None
            if why is None:
                return
            admission.refusals.note(who.uid, "streams by gRPC" if is_stream else "calls by gRPC",
                                    why)
            await status.abort_with(context, status.rich_status(
                grpc.StatusCode.RESOURCE_EXHAUSTED, admission_mod.RATE_LIMITED, RATE_LIMITED_REASON))

        def done(who: auth.Identity) -> None:
            if admission is not None:
                admission.end(who.uid, is_stream)

        async def identify(context) -> auth.Identity:
            try:
                who = verify(key, metadata)
                why = peer_mismatch(_peer(context), who, server_port, relays)
                if why:
                    raise auth.AuthError(why)
                return who
            except auth.AuthError as e:
                log.warning("refused %s from %s: %s", method, _peer(context), e)
                await status.abort_with(context, status.rich_status(
                    grpc.StatusCode.UNAUTHENTICATED, auth.AUTH_ERROR, status.AUTHENTICATION))
                raise  # not reached: abort raises

        if handler.unary_unary:
            inner_uu = handler.unary_unary

            async def unary_unary(request, context):
                who = await identify(context)
                await admit(context, who)
                try:
                    overwrite_identity(request, who)
                    token = CALLER.set(who)
                    try:
                        return await inner_uu(request, context)
                    finally:
                        CALLER.reset(token)
                finally:
                    done(who)
            return grpc.unary_unary_rpc_method_handler(
                unary_unary, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)

        if handler.unary_stream:
            inner_us = handler.unary_stream

            async def unary_stream(request, context):
                who = await identify(context)
                await admit(context, who)
                try:
                    overwrite_identity(request, who)
                    CALLER.set(who)      # this generator runs in its own task: no reset needed
                    async for event in inner_us(request, context):
                        yield event
                finally:
                    done(who)
            return grpc.unary_stream_rpc_method_handler(
                unary_stream, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)

        if handler.stream_stream:
            inner_ss = handler.stream_stream

            async def stream_stream(request_iterator, context):
                who = await identify(context)
                await admit(context, who)
                try:
                    CALLER.set(who)
                    async for event in inner_ss(_rewritten(request_iterator, who), context):
                        yield event
                finally:
                    done(who)
            return grpc.stream_stream_rpc_method_handler(
                stream_stream, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)

        if handler.stream_unary:
            inner_su = handler.stream_unary

            async def stream_unary(request_iterator, context):
                who = await identify(context)
                await admit(context, who)
                try:
                    CALLER.set(who)
                    return await inner_su(_rewritten(request_iterator, who), context)
                finally:
                    done(who)
            return grpc.stream_unary_rpc_method_handler(
                stream_unary, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        return handler

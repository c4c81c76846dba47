"""The kernel's TCP tables read back: who owns a socket, who listens on a port."""
from __future__ import annotations

import os
import socket

import pytest

from lingjun import procnet


def _pair(family: int, host: str):
    server = socket.socket(family)
    server.bind((host, 0))
    server.listen()
    client = socket.create_connection((host, server.getsockname()[1]))
    return server, client


@pytest.mark.parametrize("family,host", [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")],
                         ids=["IPv4 loopback", "IPv6 loopback"])
def test_the_owner_of_a_client_socket_and_the_listener_of_a_port(family, host):
    try:
        server, client = _pair(family, host)
    except OSError as e:
        pytest.skip(f"no {host} here: {e}")
    with server, client:
        port = server.getsockname()[1]
        peer = f"ipv4:{host}:{client.getsockname()[1]}" if family == socket.AF_INET \
            else f"ipv6:[{host}]:{client.getsockname()[1]}"
        addr = procnet.parse_peer(peer)
        assert addr == (host, client.getsockname()[1])
        assert procnet.is_loopback(addr[0])
        assert procnet.socket_uid(addr, port) == os.geteuid()
        # the kernel's direct answer (sock_diag) and its table agree
        row = [s for s in procnet.sockets(local_port=addr[1]) if s.remote[1] == port]
        assert [r.uid for r in row] == [procnet._diag_uid(addr, (host, port))] == [os.geteuid()]
        assert procnet.socket_uid(addr, port + 1 if port < 65535 else port - 1) is None
        assert procnet.listener_pids(port) == [os.getpid()]
        assert procnet.describe_pid(os.getpid()).startswith(f"pid {os.getpid()} (")


@pytest.mark.parametrize("peer,want", [
    ("ipv6:[::ffff:127.0.0.1]:5000", ("127.0.0.1", 5000)),
    ("unix:/run/lingjun/auth.sock", None),
    ("ipv4:not-an-address:1", None),
], ids=["a v4-mapped peer is its IPv4 address", "a unix peer has no address", "garbage"])
def test_grpc_peer_strings(peer, want):
    assert procnet.parse_peer(peer) == want

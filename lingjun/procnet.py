"""Who owns a TCP socket on this host, from the kernel's tables in /proc.

``/proc/net/tcp`` and ``/proc/net/tcp6`` list every TCP socket of the
host's network namespace, one row each::

    sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
     0: 0100007F:1B0D 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 123456

Addresses are hex in the host's byte order (IPv4: one 32-bit word; IPv6:
four), ports big-endian hex; ``st`` 0A is LISTEN, 01 ESTABLISHED; ``uid`` is
the effective uid of the process that created the socket, which it cannot
choose. Two uses:

* the controller asks which uid owns the *client* end of a connection
  from this host (``socket_uid``; ``is_this_host``): the row whose local address is the client's
  address and whose remote is the server's (``lingjund/transport/authn.py``);
* a second controller that cannot bind says who listens there
  (``listener_pids``: the LISTEN row's inode, then the process holding
  ``socket:[inode]`` among /proc/*/fd).

Reading the tables costs about 8 ms per thousand sockets, too much for
every call from this host; so ``socket_uid`` first asks the kernel for the
one socket by its addresses over netlink (sock_diag, the interface ``ss``
uses: about 50 microseconds whatever the number of sockets) and reads the
tables only when that finds nothing (a client that dialled another local
address than its own, or a v4-mapped IPv6 socket).
"""
from __future__ import annotations

import ipaddress
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

LISTEN = 0x0A
TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


@dataclass(frozen=True)
class TcpSocket:
    local: tuple[str, int]
    remote: tuple[str, int]
    state: int
    uid: int
    inode: int


def _address(field: str) -> tuple[str, int]:
    host, port = field.split(":")
    raw = bytes.fromhex(host)
    # each 32-bit word is in host byte order
    words = [struct.unpack("=I", raw[i:i + 4])[0] for i in range(0, len(raw), 4)]
    packed = b"".join(struct.pack("!I", w) for w in words)
    ip = ipaddress.ip_address(packed)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(port, 16)


def sockets(tables: tuple[str, ...] = TABLES, local_port: int | None = None) -> list[TcpSocket]:
    """Every TCP socket of the tables, or only those bound to ``local_port``
    (filtered on the raw text first: a host may hold tens of thousands)."""
    out = []
    needle = f":{local_port:04X} " if local_port is not None else None
    for table in tables:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            if needle is not None and needle not in line:
                continue
            f = line.split()
            if len(f) < 10:
                continue
            try:
                out.append(TcpSocket(_address(f[1]), _address(f[2]), int(f[3], 16), int(f[7]), int(f[9])))
            except ValueError:
                continue
    return out


def _same_host(a: str, b: str) -> bool:
    return ipaddress.ip_address(a) == ipaddress.ip_address(b)


# sock_diag (netlink): ask the kernel for one TCP socket by its addresses.
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NOCOOKIE = 0xFFFFFFFF


def _diag_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid of the TCP socket bound to ``client`` and connected to ``server``,
    by one exact sock_diag query (microseconds, whatever the number of sockets);
    None when the kernel knows no such socket or cannot be asked."""
    ip = ipaddress.ip_address(client[0])
    family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
    def addr(host: str) -> bytes:
        return ipaddress.ip_address(host).packed.ljust(16, b"\0")
    req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF)
    req += struct.pack("!HH", client[1], server[1]) + addr(client[0]) + addr(server[0])
    req += struct.pack("=III", 0, _NOCOOKIE, _NOCOOKIE)
    msg = struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + req
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
            nl.settimeout(1.0)
            nl.send(msg)
            data = nl.recv(65536)
    except OSError:
        return None
    if len(data) < 16:
        return None
    _, kind, _, _, _ = struct.unpack_from("=IHHII", data)
    if kind == _NLMSG_ERROR or kind != _SOCK_DIAG_BY_FAMILY or len(data) < 16 + 72:
        return None
    # inet_diag_msg: 4 bytes, the 48-byte id, expires, rqueue, wqueue, uid, inode
    return struct.unpack_from("=I", data, 16 + 4 + 48 + 12)[0]


def socket_uid(client: tuple[str, int], server_port: int) -> int | None:
    """The uid owning the client end of a TCP connection to this host's
    ``server_port`` from ``client`` (host, port); None when no row matches
    (the connection is gone, or it is not in this network namespace).

    First one exact sock_diag query for the usual case of a connection from
    this host to the address it came from (127.0.0.1 to 127.0.0.1, or the
    host's own address to itself); else a scan of the /proc tables."""
    uid = _diag_uid(client, (client[0], server_port))
    if uid is not None:
        return uid
    for s in sockets(local_port=client[1]):
        if s.local[1] == client[1] and s.remote[1] == server_port and _same_host(s.local[0], client[0]):
            return s.uid
    return None


def is_loopback(host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


_OWN: tuple[float, frozenset[str]] = (0.0, frozenset())


def is_this_host(host: str, max_age_s: float = 30.0) -> bool:
    """Is ``host`` loopback or one of this host's interface addresses (a caller
    connecting to our external address from this very host)? The interface
    list is read again after ``max_age_s``."""
    global _OWN
    if is_loopback(host):
        return True
    import time
    import psutil
    now = time.monotonic()
    if now - _OWN[0] > max_age_s:
        addrs = set()
        for entries in psutil.net_if_addrs().values():
            for a in entries:
                if a.family in (socket.AF_INET, socket.AF_INET6):
                    addrs.add(a.address.split("%")[0])
        _OWN = (now, frozenset(addrs))
    try:
        return str(ipaddress.ip_address(host)) in _OWN[1]
    except ValueError:
        return False


def listener_pids(port: int) -> list[int]:
    """Pids of the processes holding a socket that listens on ``port``."""
    inodes = {f"socket:[{s.inode}]" for s in sockets() if s.state == LISTEN and s.local[1] == port}
    pids = []
    if not inodes:
        return pids
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fds = list((d / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in inodes:
                    pids.append(int(d.name))
                    break
            except OSError:         # closed meanwhile
                continue
    return pids


def describe_pid(pid: int) -> str:
    """``pid 123 (python3 -m lingjund.daemon -c x.toml)``, the command line where readable."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        cmd = " ".join(a.decode(errors="replace") for a in argv if a)
    except OSError:
        cmd = ""
    return f"pid {pid} ({cmd})" if cmd else f"pid {pid}"


def parse_peer(peer: str) -> tuple[str, int] | None:
    """gRPC's ``context.peer()`` ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000") as (host, port)."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return None
    host, _, port = rest.rpartition(":")
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return str(ip), int(port)
    except ValueError:
        return None

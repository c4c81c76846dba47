"""Is the path through an uplink alive? ICMP echo through each NIC of a probed pair.

Carrier says the cable is in; it does not say the switch behind it forwards.
For an uplink with ``probe`` set, the watcher sends one echo request through
each of its two NICs every ``probe_interval_s`` (a send socket per NIC, bound
to it with SO_BINDTODEVICE, so the kernel takes that NIC's route even while
it is the standby) and counts a NIC healthy while some echo sent through it
was answered within the last ``probe_timeout_s``. Replies are matched by ICMP
id and sequence on one receiving socket, whichever NIC they come back by (the
far side routes its answers as it likes).

The probe only sends on the interval and wakes the watcher's ``select`` with
its answers; the watcher re-plans only when a NIC's health changes.
"""
from __future__ import annotations

import os
import socket
import struct

ICMP_ECHO, ICMP_ECHOREPLY = 8, 0
SOL_RAW, ICMP_FILTER = 255, 1


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def echo_request(ident: int, seq: int) -> bytes:
    body = b"lingjun-uplink-probe"
    head = struct.pack("!BBHHH", ICMP_ECHO, 0, 0, ident, seq)
    return struct.pack("!BBHHH", ICMP_ECHO, 0, _checksum(head + body), ident, seq) + body


class Prober:
    """Echo requests through named NICs; which NIC answered last when."""

    def __init__(self, now: float):
        self.ident = os.getpid() & 0xFFFF
        self.seq = 0
        self.recv = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        self.recv.setblocking(False)
        self.send_socks: dict[str, socket.socket] = {}
        self.sent: dict[int, str] = {}          # seq -> the NIC it went through
        self.last_ok: dict[str, float] = {}
        self.started = now

    def fileno(self) -> int:
        return self.recv.fileno()

    def _sock(self, ifname: str) -> socket.socket:
        s = self.send_socks.get(ifname)
        if s is None:
            s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
            s.setblocking(False)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
            # This socket only sends: drop every ICMP type on its receive side.
            s.setsockopt(SOL_RAW, ICMP_FILTER, struct.pack("I", 0xFFFFFFFF))
            self.send_socks[ifname] = s
        return s

    def send(self, ifname: str, target: str) -> None:
        self.seq = (self.seq + 1) & 0xFFFF
        self.sent[self.seq] = ifname
        if len(self.sent) > 4096:              # answers that never came
            for k in list(self.sent)[:2048]:
                del self.sent[k]
        try:
            self._sock(ifname).sendto(echo_request(self.ident, self.seq), (target, 0))
        except OSError:
            pass                               # no route, link down: no answer, and that says it

    def receive(self, now: float) -> None:
        while True:
            try:
                pkt = self.recv.recv(2048)
            except (BlockingIOError, InterruptedError):
                return
            ihl = (pkt[0] & 0x0F) * 4
            if len(pkt) < ihl + 8:
                continue
            typ, _, _, ident, seq = struct.unpack("!BBHHH", pkt[ihl:ihl + 8])
            if typ == ICMP_ECHOREPLY and ident == self.ident and seq in self.sent:
                self.last_ok[self.sent.pop(seq)] = now

    def healthy(self, ifname: str, now: float, timeout_s: float) -> bool:
        """Answered within ``timeout_s``; a NIC is given that long from the start."""
        return now - self.last_ok.get(ifname, self.started) <= timeout_s

    def forget(self, ifnames: set[str]) -> None:
        for name in set(self.send_socks) - ifnames:
            self.send_socks.pop(name).close()

    def close(self) -> None:
        for s in self.send_socks.values():
            s.close()
        self.send_socks.clear()
        self.recv.close()

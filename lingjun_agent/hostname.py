"""Give a local-cluster agent its own hostname (a UTS namespace).

All nodes of ``lingjun up`` share one host; so that ``srun hostname`` shows
node1..node4 as it would on real nodes, each agent (when root) moves into
a new UTS namespace named for its node before it starts any thread. Every
process it launches inherits it. On bare metal this is never used.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import socket

CLONE_NEWUTS = 0x04000000
log = logging.getLogger("lingjun_agent")


def become(name: str) -> bool:
    if os.geteuid() != 0:
        log.warning("not root: node %s keeps the host name %s", name, socket.gethostname())
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.unshare(CLONE_NEWUTS) != 0:
        log.warning("unshare(CLONE_NEWUTS) failed: %s", os.strerror(ctypes.get_errno()))
        return False
    raw = name.encode()
    if libc.sethostname(raw, len(raw)) != 0:
        log.warning("sethostname failed: %s", os.strerror(ctypes.get_errno()))
        return False
    return True

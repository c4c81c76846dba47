"""How a daemon's door turns a caller away, in the words both ends share.

The doors (the command socket's server, the credential socket, gRPC's
admission; ``lingjun/admission.py`` decides) send these, and the commands'
clients (``lingjun/command_socket.py``, ``lingjun/credential.py``) read them
and retry. They live in a module of their own, below both, so that neither
end imports the other for a few words: the client of the command socket
reaches gRPC through ``lingjun/client.py``, which asks the credential socket
for a token, and the credential socket's server uses the admission.
"""
from __future__ import annotations

UNAVAILABLE = "UNAVAILABLE"
# A door's answer when the caller holds too much of the daemon already
# (lingjun/admission.py): the status, and Slurm's words when slurmctld's rate
# limit turns a call away (SLURMCTLD_COMMUNICATIONS_BACKOFF).
RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
RATE_LIMITED = "Rate limit exceeded, please retry momentarily"
# Seconds a command waits before each retry of a refused call, as Slurm's
# commands sleep and retry when told to back off. The door refuses before it
# reads anything of the call, so a retry never does anything twice.
RETRY_DELAYS_S = (0.2, 0.5, 1.0)

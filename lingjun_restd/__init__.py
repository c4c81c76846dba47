"""lingjun_restd: Slurm's REST API (slurmrestd 22.05's v0.0.38) for a Lingjun cluster.

A daemon of its own, as Slurm's slurmrestd is beside slurmctld and slurmd
(here lingjund and lingjun_agent): it parses HTTP and writes JSON away from
the controller's loop and holds no key (daemon.py says why). It sits above
the commands: its documents are the commands' --json writers
(cli/formats_json.py) and a submission goes through sbatch's option table,
so REST and the commands accept, refuse and print alike.

`lingjun restd` starts it; `python -m lingjun_restd.daemon` does too.
"""

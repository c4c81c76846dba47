"""The Slurm commands, one module each (cli/sbatch.py, cli/squeue.py...), and what they share.

Loading its modules is most of what a command costs (bench/README.md), and
Python's cyclic collector runs about ten times over the objects those imports
make, none of them garbage worth the scan: 1.1 ms of a 20 ms sbatch,
measured with ``bench/command_latency.py``'s install. So when this process is
one of the commands' console scripts (``from cli.sbatch import main``), the
collector is paused while the command loads, and ``cli.common.run`` freezes
what was loaded (``gc.freeze``: it is never garbage) and resumes collecting
before the command's body runs. Anything else that imports the package (the
SDK, ``lingjun restd``, tests) keeps its collector as it was.
"""
import gc
import os
import sys

# The console scripts of pyproject.toml's [project.scripts] that are commands.
COMMANDS = frozenset({"sbatch", "srun", "salloc", "squeue", "scancel", "sinfo", "scontrol", "sacct",
                      "scrontab", "sattach", "sprio", "sacctmgr", "sshare"})

collector_paused = False
_script = os.path.basename(sys.argv[0]) if getattr(sys, "argv", None) else ""
if gc.isenabled() and _script in COMMANDS:
    gc.disable()
    collector_paused = True


def resume_collector() -> None:
    """Resume the collector that loading a command paused (once; otherwise nothing)."""
    global collector_paused
    if collector_paused:
        collector_paused = False
        gc.freeze()
        gc.enable()

"""What a batch job hands on to its steps through the environment reaches srun:
the job's SLURM_NTASKS / SLURM_NNODES shape a bare srun, a variable the script
sets itself is srun's input too, and the job's name does not name its steps
(srun.1: SLURM_JOB_NAME is ignored inside an allocation). Real jobs on a real
local cluster."""
from __future__ import annotations

import re


def test_srun_inside_a_job_reads_the_variables_the_job_hands_on(cluster):
    body = "\n".join([
        "echo bare $(srun hostname | wc -l)",
        "echo ntasks2 $(SLURM_NTASKS=2 SLURM_NPROCS=2 srun hostname | wc -l)",
        "echo one-node $(srun -N1 hostname | wc -l)",
        "echo limit $(SLURM_TIMELIMIT=0 srun -n1 true && echo ok)",
        "echo bad $(SLURM_TIMELIMIT=soon srun -n1 true 2>&1)",
    ])
    script = cluster.work / "shape.sh"
    script.write_text(f"#!/bin/sh\n#SBATCH -o shape-%j.out\n{body}\n")
    jid = cluster.sbatch("-N", "2", "-n", "4", "-J", "shapejob", str(script))
    state = cluster.wait_state(jid, ("COMPLETED", "FAILED", "CANCELLED"), timeout=120)
    out = (cluster.work / f"shape-{jid}.out").read_text()
    assert state == "COMPLETED", out
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert lines["bare"] == "4", out              # the job's 4 tasks over its 2 nodes
    assert lines["ntasks2"] == "2", out           # SLURM_NTASKS is srun's -n
    assert lines["one-node"] == "1", out          # a command line's shape is taken whole
    assert lines["limit"] == "ok", out            # SLURM_TIMELIMIT=0: no limit, as -t 0
    assert lines["bad"] == "srun: error: Invalid --time specification", out
    p = cluster.run(["sacct", "-j", str(jid), "-n", "-P", "-o", "JobID,JobName"], check=True)
    steps = [n for i, n in (line.split("|") for line in p.stdout.splitlines())
             if re.fullmatch(rf"{jid}\.\d+", i)]
    assert steps and "shapejob" not in steps, p.stdout

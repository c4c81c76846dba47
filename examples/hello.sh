#!/bin/bash
#SBATCH --job-name=hello
#SBATCH --time=5
# Runs one task on every node of the allocation and shows its rank.
echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST ($SLURM_JOB_NUM_NODES nodes)"
srun bash -c 'echo "rank $SLURM_PROCID of $SLURM_NTASKS on $(hostname)"'

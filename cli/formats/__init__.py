"""Output formatting for the Slurm commands: pure functions from api_pb2
messages to the text Slurm 22.05 prints, one module per output family.

A command imports only the family it prints (squeue does not load sacct's
tables; scontrol loads show_* only for `show`): the commands' start-up is
kept lean (bench/README.md), so this package's own import loads nothing.

    fields        %-format strings and -O tokens (squeue, sinfo)
    units         times and sizes, shared by every family
    jobs          job facts more than one view prints (run time, GPUs, arrays)
    squeue        squeue -o / -O / -l / --start
    show_job      scontrol show job
    show_node     scontrol show node; lingjun health show / net show
    show_cluster  scontrol show partition / topology / config
    sinfo         sinfo -o / -O / -l / -N / -s / -R
    sacct         sacct --format / -l / -b / -p
"""

"""The `slurm` backend: a Slurm 22.05+ cluster through its CLI (locally or over SSH to a login node) and slurmrestd.

settings.py  the cluster's connection keys
cli.py       sbatch/squeue/sinfo/scontrol/scancel/sacct/sacctmgr, locally or over SSH; errors classified
rest.py      slurmrestd (OpenAPI v0.0.38, JWT) for reads, submission and cancel
parse.py     Slurm's JSON (the same shape from `squeue --json` and REST) into the console's types
script.py    the sbatch script of a WorkloadSpec, and REST's job description from its #SBATCH lines
accounts.py  quota push: sacctmgr operations, a dry-run diff against `sacctmgr show`, then apply
backend.py   SlurmBackend, the Backend interface over the above
"""

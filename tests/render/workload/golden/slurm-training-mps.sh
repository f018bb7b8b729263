#!/bin/bash
#SBATCH --job-name=rl-eval
#SBATCH --account=acme_train
#SBATCH --qos=training
#SBATCH --partition=gpu
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --gres=mps:25
#SBATCH --time=0-01:00:00
#SBATCH --output=/var/log/gpu-console/rl-eval-%j.out
#SBATCH --requeue
#
# Training job rl-eval, rendered by the GPU console. Every value below is one shell-quoted word:
# nothing a user typed is interpreted by the shell.
#
# Caveats:
# - containers 'none': the job runs on the nodes' own software; the image
#   nvcr.io/nvidia/pytorch:24.08-py3 is not used
# - MPS: gres/mps:25 per worker, 25% of one GPU (1/4); the nodes must have GresTypes mps with Count
#   100 per GPU, a prolog that starts the MPS server, and gres/mps in AccountingStorageTRES for the
#   usage to be metered. An MPS server serves one user: jobs of other users on the GPU are time-
#   sliced with it
# - Slurm requeues the job on node failure or preemption; it has no per-job retry count
set -euo pipefail

mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head_node="${nodes[0]}"
srun --kill-on-bad-exit=1 torchrun --nnodes="$SLURM_NNODES" --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint="$head_node:29500" --rdzv-id="$SLURM_JOB_ID" --max-restarts=0 --no-python -- python lora.py

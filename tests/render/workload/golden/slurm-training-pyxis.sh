#!/bin/bash
#SBATCH --job-name=pretrain-8b
#SBATCH --account=acme_train
#SBATCH --qos=training
#SBATCH --partition=gpu
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:a100:8
#SBATCH --time=2-00:00:00
#SBATCH --output=/var/log/gpu-console/pretrain-8b-%j.out
#SBATCH --requeue
#
# Training job pretrain-8b, rendered by the GPU console. Every value below is one shell-quoted word:
# nothing a user typed is interpreted by the shell.
#
# Caveats:
# - containers 'pyxis': every srun step runs in the image (the pyxis SPANK plugin with enroot)
# - Slurm requeues the job on node failure or preemption; it has no per-job retry count
set -euo pipefail

export NCCL_DEBUG=WARN
export WANDB_PROJECT=8b
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head_node="${nodes[0]}"
srun --kill-on-bad-exit=1 '--container-image=nvcr.io#nvidia/pytorch:24.08-py3' --container-mounts=/lustre/datasets:/data:ro,/lustre/ckpt:/ckpt torchrun --nnodes="$SLURM_NNODES" --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint="$head_node:29500" --rdzv-id="$SLURM_JOB_ID" --max-restarts=0 --no-python -- python -m train --config configs/8b.yaml --steps 100000

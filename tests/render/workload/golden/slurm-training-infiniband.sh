#!/bin/bash
#SBATCH --job-name=pretrain-8b
#SBATCH --account=acme_train
#SBATCH --qos=training
#SBATCH --partition=gpu
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:a100:8,ib:1
#SBATCH --time=2-00:00:00
#SBATCH --output=/var/log/gpu-console/pretrain-8b-%j.out
#SBATCH --requeue
#
# Training job pretrain-8b, rendered by the GPU console. Every value below is one shell-quoted word:
# nothing a user typed is interpreted by the shell.
#
# Caveats:
# - containers 'none': the job runs on the nodes' own software; the image
#   nvcr.io/nvidia/pytorch:24.08-py3 is not used
# - containers 'none': the volumes are not mounted; the job sees the nodes' file systems
# - RDMA (network auto: the workload spans nodes of the h100 pool gpu, whose fabric is infiniband):
#   NCCL_IB_DISABLE=0, NCCL_IB_HCA==mlx5_0:1,mlx5_1:1, NCCL_SOCKET_IFNAME==ib0
# - the fabric's GRES ib:1 is requested on every node beside the GPUs
# - RDMA needs an unlimited locked-memory limit: slurm.conf PropagateResourceLimitsExcept=MEMLOCK
#   keeps the submitting process's limit out of the job
# - Slurm requeues the job on node failure or preemption; it has no per-job retry count
set -euo pipefail

export NCCL_IB_DISABLE=0
export NCCL_IB_HCA==mlx5_0:1,mlx5_1:1
export NCCL_SOCKET_IFNAME==ib0
export NCCL_DEBUG=WARN
export WANDB_PROJECT=8b
[ "$(ulimit -l)" = unlimited ] || echo "gpu-console: the locked-memory limit is $(ulimit -l) KiB: the NCCL RDMA transport needs it unlimited (slurm.conf PropagateResourceLimitsExcept=MEMLOCK)" >&2
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head_node="${nodes[0]}"
srun --kill-on-bad-exit=1 torchrun --nnodes="$SLURM_NNODES" --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint="$head_node:29500" --rdzv-id="$SLURM_JOB_ID" --max-restarts=0 --no-python -- python -m train --config configs/8b.yaml --steps 100000

#!/bin/bash
#SBATCH --job-name=llama-70b
#SBATCH --account=acme_train
#SBATCH --qos=training
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:a100:4
#SBATCH --time=7-00:00:00
#SBATCH --array=0-1
#SBATCH --output=/var/log/gpu-console/llama-70b-%A_%a.out
#
# Inference service llama-70b, rendered by the GPU console. Every value below is one shell-quoted word:
# nothing a user typed is interpreted by the shell.
#
# Caveats:
# - containers 'pyxis': every srun step runs in the image (the pyxis SPANK plugin with enroot)
# - scancel sends SIGTERM, which the script forwards to the engine; Slurm's KillWait (not the spec's
#   60 s drain) bounds how long in-flight requests get
set -uo pipefail  # no -e: the script handles the engine's exit itself

export VLLM_LOGGING_LEVEL=INFO
health_url=http://127.0.0.1:8000/health
srun --kill-on-bad-exit=1 --container-image=vllm/vllm-openai:v0.11.0 --container-mounts=/lustre/models/llama:/models:ro vllm serve meta-llama/Llama-3.1-70B-Instruct --host 0.0.0.0 --port 8000 --tensor-parallel-size 4 --pipeline-parallel-size 1 --max-model-len 32768 --gpu-memory-utilization 0.9 &
server_pid=$!
# scancel / preemption: pass SIGTERM on to the engine so it can finish in-flight requests.
trap 'kill -TERM "$server_pid" 2>/dev/null; wait "$server_pid"; exit 143' TERM INT
deadline=$((SECONDS + 600))
until curl -fsS -o /dev/null "$health_url"; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    wait "$server_pid"; status=$?
    echo "gpu-console: the engine exited (status $status) before it became healthy" >&2
    exit $(( status == 0 ? 1 : status ))
  fi
  if (( SECONDS >= deadline )); then
    echo "gpu-console: the engine was not healthy after 600 s" >&2
    kill -TERM "$server_pid"; wait "$server_pid"
    exit 1
  fi
  sleep 10
done
echo "gpu-console: the engine is healthy at $health_url"
wait "$server_pid"; status=$?
echo "gpu-console: the engine stopped (status $status); a service is not meant to exit" >&2
exit $(( status == 0 ? 1 : status ))

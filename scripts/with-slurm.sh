#!/usr/bin/env bash
# Run a command (the test suite) with the local Slurm cluster up, and stop the cluster afterwards, also when
# the command fails or is interrupted. A cluster that was already running is left running.
#   scripts/with-slurm.sh .venv/bin/python -m pytest
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if "$here/slurm-local.sh" status >/dev/null 2>&1; then
  started=0
else
  started=1
fi
stop_cluster() { if [ "$started" -eq 1 ]; then "$here/slurm-local.sh" stop || true; fi; }
trap stop_cluster EXIT
trap 'exit 130' INT TERM
# start prints `export SLURM_CONF=... SLURM_RESTD_URL=...`; a failed start fails the run (set -e).
eval "$("$here/slurm-local.sh" start)"
"$@"

#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite against the real HOL Light.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The Slurm and Dask tests run against a real single-node Slurm (slurm/);
# it is stopped whatever happens to pytest.
if [ "$(id -u)" = 0 ]; then
    bash slurm/start-dev-cluster.sh
    trap 'bash slurm/stop-dev-cluster.sh' EXIT
fi
# --durations: where CI's minutes go (the aim is under 35 of them).
.venv/bin/pytest -q -ra --durations=20 "$@"

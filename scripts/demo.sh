#!/usr/bin/env bash
# The main job: sweep the shipped example corpus on the local executor.
# Run it again to see a resumed sweep skip everything already recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/proofbatch run examples/hol_light_demo \
    --category-timeouts examples/hol_light_demo/timeouts.json \
    --workers 2 --out "${OUT:-out/demo}" "$@"

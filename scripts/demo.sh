#!/usr/bin/env bash
# The main job: sweep the shipped example corpus on the local executor.
# Run it again to see a resumed sweep skip everything already recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Limits come from the shipped timeout map (profiles/hol_light_demo), then,
# for the problems it has no entry for, from the corpus's category limits.
exec .venv/bin/proofbatch run examples/hol_light_demo \
    --timeout-map timeout_maps/hol_light_demo.json \
    --category-timeouts examples/hol_light_demo/timeouts.json \
    --workers 2 --out "${OUT:-out/demo}" "$@"

#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite against the real HOL Light.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/pytest -q -ra "$@"

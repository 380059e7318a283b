#!/usr/bin/env bash
# Run the whole test suite (sets lbench up first; the engine build is cached).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"

#!/usr/bin/env bash
# Installs what is needed, builds, and runs the whole test suite (GPU tests skip cleanly
# where no CUDA device is usable).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh "$@"
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600

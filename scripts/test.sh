#!/usr/bin/env bash
# Installs what is needed, builds, and runs the whole test suite (GPU tests skip cleanly
# where no CUDA device is usable), then the sanitizer part (scripts/sanitize.sh: a soak and
# the fuzz targets under AddressSanitizer + UndefinedBehaviorSanitizer, a fixed budget).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh "$@"
# The kernels also compile for sm_80, the oldest architecture the image carries.
bash scripts/check-cuda-archs.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600
# The soak against the sanitized daemon and the fuzz targets, on a fixed budget.
bash scripts/sanitize.sh

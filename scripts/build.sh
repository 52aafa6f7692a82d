#!/usr/bin/env bash
# Configures and builds gpupipe in ./build (CUDA backend where nvcc is found).
# Extra arguments go to CMake's configure step, e.g. -DGPUPIPE_CUDA=OFF.
# GPUPIPE_BUILD_TARGETS limits the build to some targets, e.g. "gpupiped gpupipe".
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
elif [ $# -gt 0 ]; then
  cmake -S . -B build "$@"
fi
# shellcheck disable=SC2086
cmake --build build -j"$(nproc)" ${GPUPIPE_BUILD_TARGETS:+--target $GPUPIPE_BUILD_TARGETS}

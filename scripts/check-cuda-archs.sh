#!/usr/bin/env bash
# Compiles the CUDA kernels for the oldest architecture the image carries (sm_80, through
# ptxas), so that code needing sm_90 without a guard fails here rather than in the image build
# or at JIT time on a user's GPU. The main build compiles for one architecture (sm_90) only.
# Skipped where there is no nvcc. usage: scripts/check-cuda-archs.sh [ARCHS] (default 80-real)
set -euo pipefail
cd "$(dirname "$0")/.."
archs=${1:-80-real}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ ! -x "$nvcc" ]; then
  echo "check-cuda-archs: no nvcc: skipped"
  exit 0
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
mkdir -p build-archcheck
cmake -S . -B build-archcheck "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DGPUPIPE_CUDA=ON \
  -DGPUPIPE_BUILD_TESTS=OFF -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$archs" \
  > build-archcheck/configure.log 2>&1 || { cat build-archcheck/configure.log; exit 1; }
cmake --build build-archcheck -j"$(nproc)" --target gpupipe_kernels_cuda
echo "check-cuda-archs: the kernels compile for $archs"

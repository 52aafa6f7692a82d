#!/usr/bin/env bash
# Installs the build and test dependencies of gpupipe from the distribution's packages.
# Supported: Debian 12 (bookworm) and Ubuntu 24.04 (noble). Run as root or with sudo available.
# The CUDA toolkit is optional and not installed here: without it the build is CPU-only.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgtest-dev libgmock-dev nlohmann-json3-dev
  libjemalloc-dev  # the daemon's and the CLI's allocator (cmake/GpupipeAllocator.cmake)
  python3 python3-numpy python3-grpcio python3-protobuf python3-pytest python3-venv procps
  python3-yaml  # deploy/check_deploy.py, the deployment files' checker
  clang libclang-rt-dev openssl
  prometheus  # promtool and a Prometheus server, for the metrics endpoint's tests
)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
  sudo_cmd=(sudo)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update
"${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"

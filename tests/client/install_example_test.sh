#!/usr/bin/env bash
# Installs the build's C++ client package into a scratch prefix, builds client/examples/cpp
# against it with find_package(gpupipe CONFIG), and runs the example against a CPU daemon.
# usage: install_example_test.sh BUILD_DIR SOURCE_DIR GPUPIPED
set -euo pipefail
build=$1 src=$2 daemon=$3
scratch=$(mktemp -d /tmp/gpupipe-install-XXXXXX)
trap 'kill $pid 2>/dev/null || true; rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" > "$scratch/install.log"
test -f "$scratch/prefix/lib/cmake/gpupipe/gpupipeConfig.cmake"
test -f "$scratch/prefix/include/gpupipe/client/job_client.h"
cmake -S "$src/client/examples/cpp" -B "$scratch/example" -G Ninja \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" > "$scratch/configure.log"
cmake --build "$scratch/example" > "$scratch/build.log"
"$daemon" --backend cpu --listen 127.0.0.1:0 --metrics-listen '' 2> "$scratch/daemon.log" &
pid=$!
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$scratch/daemon.log" | head -1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$scratch/daemon.log"; exit 1; }
out=$("$scratch/example/relu_example" "127.0.0.1:$port")
echo "$out"
# affine(2, 1) then relu of -2 -1 0 1 2 3
[[ "$out" == "0 0 1 3 5 7 (cpu,"* ]]

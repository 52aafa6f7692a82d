#!/usr/bin/env bash
# Installs what is needed, builds, then runs the main job: starts gpupiped, submits
# `affine(alpha=2,beta=1) | relu | softmax` on a random 4 x 8 tensor with the gpupipe CLI,
# shows the result, and stops the daemon.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
GPUPIPE_BUILD_TARGETS="gpupiped gpupipe" bash scripts/build.sh

work=$(mktemp -d)
port=${GPUPIPE_DEMO_PORT:-50051}
trap 'kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; rm -rf "$work"' EXIT

./build/bin/gpupiped --listen "127.0.0.1:$port" --metrics-listen 127.0.0.1:0 --backend auto 2> "$work/daemon.log" &
daemon=$!
for _ in $(seq 100); do
  grep -q "listening on" "$work/daemon.log" && break
  kill -0 "$daemon" 2>/dev/null || { cat "$work/daemon.log"; exit 1; }
  sleep 0.1
done
cat "$work/daemon.log"

/usr/bin/python3 -c "
import numpy as np
x = np.random.default_rng().standard_normal((4, 8), dtype=np.float32)
np.save('$work/x.npy', x)
print('input x (4 x 8 float32):'); print(x)"

echo
echo "\$ gpupipe submit --input x.npy --ops 'affine(alpha=2,beta=1) | relu | softmax' --output y.npy"
./build/bin/gpupipe --target "127.0.0.1:$port" submit --input "$work/x.npy" \
  --ops 'affine(alpha=2,beta=1) | relu | softmax' --output "$work/y.npy"

/usr/bin/python3 -c "
import numpy as np
x = np.load('$work/x.npy'); y = np.load('$work/y.npy')
z = np.maximum(2 * x + 1, 0); ref = np.exp(z - z.max(-1, keepdims=True)); ref /= ref.sum(-1, keepdims=True)
np.set_printoptions(precision=4, suppress=True)
print(); print('result y:'); print(y)
print('max |y - numpy reference| =', float(np.abs(y - ref).max()))"

echo
echo "\$ gpupipe stats"
./build/bin/gpupipe --target "127.0.0.1:$port" stats

kill -TERM "$daemon"; wait "$daemon" || true
tail -n 3 "$work/daemon.log"

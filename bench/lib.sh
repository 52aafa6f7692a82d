# Shared by bench/*/run.sh (source it): finding a benchmark binary, naming the commit it was
# built from, and recording where and when a run took place.

# bench_find_binary NAME [DIR]: prints the path of the executable NAME found in DIR (a bundle
# from scripts/make-bundle.sh, or a directory holding NAME), else in the repository's .bundle,
# build/bin or build-bench/bin. Fails with a message when there is none.
bench_find_binary() {
  local name=$1 given=${2:-} repo d
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  for d in "$given" "$repo/.bundle" "$repo/build/bin" "$repo/build-bench/bin"; do
    [ -n "$d" ] || continue
    if [ -x "$d/$name" ]; then echo "$d/$name"; return 0; fi
    if [ -x "$d/bin/$name" ]; then echo "$d/bin/$name"; return 0; fi
  done
  echo "run.sh: $name not found (give the bundle or bin directory)" >&2
  return 1
}

# bench_commit BINARY: the commit the measured binary was built from. GPUPIPE_COMMIT wins;
# then the COMMIT file scripts/make-bundle.sh writes beside a bundle's bin/ (a checkout copied
# to a GPU host may carry a stale .git); then the checkout's HEAD, marked when it has
# uncommitted changes.
bench_commit() {
  local bin=$1 repo commit=${GPUPIPE_COMMIT:-}
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  if [ -z "$commit" ] && [ -f "$(dirname "$bin")/../COMMIT" ]; then
    commit=$(cat "$(dirname "$bin")/../COMMIT")
  fi
  if [ -z "$commit" ] && git -C "$repo" rev-parse --short HEAD >/dev/null 2>&1; then
    commit=$(git -C "$repo" rev-parse --short HEAD)
    [ -n "$(git -C "$repo" status --porcelain 2>/dev/null)" ] && commit="$commit (with uncommitted changes)"
  fi
  echo "${commit:-unknown}"
}

# bench_write_meta FILE BINARY: writes FILE, the run's JSON metadata the reports read: commit
# (bench_commit), date (UTC), gpu (nvidia-smi name and driver, empty without one), nvidia_smi
# (the same, labelled), cpu (model name) and host_cores.
bench_write_meta() {
  local file=$1 bin=$2 gpu cpu
  gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
  cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
  python3 - "$file" "$(bench_commit "$bin")" "$gpu" "$cpu" "$(nproc)" <<'PY'
import json, sys, datetime
json.dump({"commit": sys.argv[2],
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "gpu": sys.argv[3],
           "nvidia_smi": ("name, driver: " + sys.argv[3]) if sys.argv[3] else "",
           "cpu": sys.argv[4], "host_cores": sys.argv[5]},
          open(sys.argv[1], "w"))
PY
}

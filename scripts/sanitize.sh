#!/usr/bin/env bash
# The sanitizer part of the test suite, on a fixed budget: builds the `asan` preset (CPU
# backend, clang, AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer targets) in
# ./build-asan, runs the soak test against the sanitized daemon for SOAK_SECONDS (default 60),
# then each fuzz target for FUZZ_SECONDS (default 20) from its committed corpus. Any sanitizer
# report, failed assertion or fuzzer crash fails the script. FUZZ_RUNS=N runs each target for N
# executions instead (a long run); new corpus entries land in build-asan/fuzz-corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
soak_seconds=${SOAK_SECONDS:-60}
fuzz_seconds=${FUZZ_SECONDS:-20}
fuzzers=(request_fuzz ops_grammar_fuzz npy_fuzz)

if [ ! -f build-asan/CMakeCache.txt ]; then
  cmake --preset asan
fi
cmake --build build-asan -j"$(nproc)" --target gpupiped gpupipe soak_test "${fuzzers[@]}"

# halt_on_error: the first report fails the run; a daemon's report ends it with a non-zero exit
# that the soak test sees.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

echo "sanitize: soak for ${soak_seconds} s"
# (bounded: a soak that hangs fails rather than holding the run)
# The daemon's idle timeouts get 3 s (1 s unsanitized): the sanitized clients, slowed as much as
# the daemon, must not look idle to it while they read (soak_test.cc, IdleTimeoutSeconds).
GPUPIPE_SOAK_SECONDS=$soak_seconds GPUPIPE_SOAK_RSS_BAND_MIB=${SOAK_RSS_BAND_MIB:-512} \
  GPUPIPE_SOAK_IDLE_SECONDS=${SOAK_IDLE_SECONDS:-3} \
  timeout $((soak_seconds * 2 + 300)) build-asan/tests/integration/soak_test

for f in "${fuzzers[@]}"; do
  mkdir -p "build-asan/fuzz-corpus/$f"
  if [ -n "${FUZZ_RUNS:-}" ]; then limit=(-runs="$FUZZ_RUNS"); else limit=(-max_total_time="$fuzz_seconds"); fi
  echo "sanitize: fuzz $f (${limit[0]})"
  "build-asan/tests/fuzz/$f" "${limit[@]}" -print_final_stats=1 -artifact_prefix="build-asan/" \
    "build-asan/fuzz-corpus/$f" "tests/fuzz/corpus/$f" 2>&1 |
    grep -E '^(stat::number_of_executed_units|Done|==[0-9]+==|SUMMARY|#[0-9]+ +DONE)|ERROR|crash' || true
  test "${PIPESTATUS[0]}" -eq 0
done
echo "sanitize: clean"

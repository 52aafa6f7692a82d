#!/usr/bin/env bash
# Makes a portable bundle of gpupipe from a build tree: the daemon, the CLI and the test
# binaries in bin/, every shared library they need that glibc does not provide in lib/, all
# stripped. Executables carry an $ORIGIN/../lib RPATH (see CMakeLists.txt), so the bundle runs
# on a GPU host that has no gRPC installed; the CUDA runtime is linked statically and loads the
# host's driver (libcuda.so.1) at run time.
#
# usage: scripts/make-bundle.sh [BUILD_DIR] [OUT_DIR]    (defaults: build, .bundle)
set -euo pipefail
build=${1:-build}
out=${2:-.bundle}
[ -x "$build/bin/gpupiped" ] || { echo "make-bundle: $build/bin/gpupiped not built" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
binaries=("$build/bin/gpupiped" "$build/bin/gpupipe")
for b in planner_bench kernels_bench engine_bench rpc_bench small_jobs_bench dataplane_bench; do [ -x "$build/bin/$b" ] && binaries+=("$build/bin/$b"); done
while IFS= read -r -d '' t; do binaries+=("$t"); done < <(find "$build/tests" -maxdepth 2 -type f \
  -perm -u+x -name '*_test' -print0)
for b in "${binaries[@]}"; do cp "$b" "$out/bin/"; done

# Libraries the host's glibc and driver provide are left out; everything else travels.
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libcuda|libnvidia)\.'
for b in "$out"/bin/*; do
  ldd "$b" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
  done
done
strip --strip-unneeded "$out"/bin/* "$out"/lib/* 2>/dev/null || true
# The commit the bundle was built from, for benchmark reports made on the GPU host (where a
# copied checkout's .git may be stale).
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && commit="$commit (with uncommitted changes)"
echo "$commit" > "$out/COMMIT"
# A file used by the CLI tests travels with the tests.
mkdir -p "$out/testdata" && cp tests/client/data/u2.npy "$out/testdata/"
# The Python client's generated modules (the package itself is client/python).
if [ -d "$build/python/gpupipe" ]; then mkdir -p "$out/python" && cp -r "$build/python/gpupipe" "$out/python/"; fi
echo "make-bundle: $(ls "$out/bin" | wc -l) binaries, $(ls "$out/lib" | wc -l) libraries, $(du -sh "$out" | cut -f1) in $out"

// The `auto` staging choice (Staging::kAuto) as data: which strategy and depth each op family
// uses for an element type and size class. Host-only; the dispatch code of each op resolves
// kAuto through ResolveStaging before it sizes its grid, so Describe* reports the resolved
// strategy.
//
// Provenance. Entries come from the kernels benchmark on the H200: bench/kernels/run.sh times
// every strategy x stages x size, and its report (bench/results/kernels-h200.md, section
// "Winners for the `auto` staging table", also auto-staging.json) lists the winner per op,
// dtype and size class, the same keys as here, with its time, the runner-up and the run. A
// family, type and size class the benchmark did not measure uses `direct` (the baseline,
// vectorized plain loads) without claiming a measurement. Measured entries go below the
// defaults (later entries win), between the BEGIN / END markers, which
// bench/kernels/make_staging_table.py rewrites from a run's auto-staging.json: each entry names
// the case that decided it and cites that section, and a winner within the generator's noise
// bound of `direct` keeps `direct` (differences that small are run-to-run spread, and direct is
// the simplest path).
#pragma once

#include <cstdint>

#include "kernels/common/element_type.h"
#include "kernels/cuda/device_caps.h"
#include "kernels/cuda/ops.h"

namespace gpupipe::kernels::cuda::tuning {

// Op families whose load loop can stage (their kernels stream long contiguous runs).
enum class StagingFamily {
  kElementwise,  // Elementwise
  kRowReduce,    // RowReduce over long rows (the block path; short rows never stage)
};

// The benchmark's size classes (SizeClass() in bench/kernels/kernels_bench.cc).
enum class SizeClass {
  kAny,           // an entry for every class
  kElementwise,   // the elementwise family, any length
  kShortRows,     // cols <= 8192
  kFewLongRows,   // longer rows, fewer of them than multiprocessors (rows split over blocks)
  kManyLongRows,  // longer rows, at least one per multiprocessor
};

inline SizeClass SizeClassOf(StagingFamily family, int64_t rows, int64_t cols,
                             int multiprocessors) {
  if (family == StagingFamily::kElementwise) return SizeClass::kElementwise;
  if (cols <= 8192) return SizeClass::kShortRows;
  return rows < multiprocessors ? SizeClass::kFewLongRows : SizeClass::kManyLongRows;
}

struct StagingTableEntry {
  StagingFamily family;
  ElementType type;
  SizeClass size_class;
  Staging staging;  // never kAuto
  int stages;       // kMinStages..kMaxStages, or 0 to keep LaunchConfig::stages
  const char* provenance;
};

// `direct` for every size class of (family, type), claiming no measurement.
constexpr StagingTableEntry Unmeasured(StagingFamily family, ElementType type) {
  return {family, type, SizeClass::kAny, Staging::kDirect, 0,
          "default until measured (bench/results/kernels-h200.md)"};
}

// Defaults first, measured entries after them; the last matching entry wins.
inline constexpr StagingTableEntry kStagingTable[] = {
    Unmeasured(StagingFamily::kElementwise, ElementType::kFloat32),
    Unmeasured(StagingFamily::kElementwise, ElementType::kFloat64),
    Unmeasured(StagingFamily::kElementwise, ElementType::kFloat16),
    Unmeasured(StagingFamily::kElementwise, ElementType::kInt32),
    Unmeasured(StagingFamily::kRowReduce, ElementType::kFloat32),
    Unmeasured(StagingFamily::kRowReduce, ElementType::kFloat64),
    Unmeasured(StagingFamily::kRowReduce, ElementType::kFloat16),
    Unmeasured(StagingFamily::kRowReduce, ElementType::kInt32),
    // BEGIN measured entries: written by bench/kernels/make_staging_table.py from a run's
    // auto-staging.json; edit the run, not these lines.
    // affine, float32, 2^0 x 2^28 (elementwise): direct won.
    {StagingFamily::kElementwise, ElementType::kFloat32, SizeClass::kElementwise,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // affine, float64, 2^0 x 2^26 (elementwise): direct won.
    {StagingFamily::kElementwise, ElementType::kFloat64, SizeClass::kElementwise,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // affine, float16, 2^0 x 2^26 (elementwise): direct won.
    {StagingFamily::kElementwise, ElementType::kFloat16, SizeClass::kElementwise,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // affine, int32, 2^0 x 2^26 (elementwise): direct won.
    {StagingFamily::kElementwise, ElementType::kInt32, SizeClass::kElementwise,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // sum-row, float32, 2^0 x 2^28 (few-long-rows): direct won.
    {StagingFamily::kRowReduce, ElementType::kFloat32, SizeClass::kFewLongRows,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // sum-rows, float32, 2^14 x 2^14 (many-long-rows): direct won.
    {StagingFamily::kRowReduce, ElementType::kFloat32, SizeClass::kManyLongRows,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // sum-rows, float64, 2^13 x 2^13 (short-rows): direct won.
    {StagingFamily::kRowReduce, ElementType::kFloat64, SizeClass::kShortRows,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // sum-row, float64, 2^0 x 2^26 (few-long-rows): direct won. Also measured: min-row direct,
    // max-row direct.
    {StagingFamily::kRowReduce, ElementType::kFloat64, SizeClass::kFewLongRows,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // sum-long-rows, float64, 2^12 x 2^14 (many-long-rows): direct won. Also measured:
    // max-long-rows direct.
    {StagingFamily::kRowReduce, ElementType::kFloat64, SizeClass::kManyLongRows,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // sum-rows, float16, 2^13 x 2^13 (short-rows): direct won.
    {StagingFamily::kRowReduce, ElementType::kFloat16, SizeClass::kShortRows,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // sum-row, float16, 2^0 x 2^26 (few-long-rows): direct won. Also measured: min-row direct,
    // max-row direct.
    {StagingFamily::kRowReduce, ElementType::kFloat16, SizeClass::kFewLongRows,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // sum-long-rows, float16, 2^12 x 2^14 (many-long-rows): direct won. Also measured:
    // max-long-rows direct.
    {StagingFamily::kRowReduce, ElementType::kFloat16, SizeClass::kManyLongRows,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // sum-rows, int32, 2^13 x 2^13 (short-rows): direct won.
    {StagingFamily::kRowReduce, ElementType::kInt32, SizeClass::kShortRows,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // sum-row, int32, 2^0 x 2^26 (few-long-rows): direct won. Also measured: min-row direct,
    // max-row direct.
    {StagingFamily::kRowReduce, ElementType::kInt32, SizeClass::kFewLongRows,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // sum-long-rows, int32, 2^12 x 2^14 (many-long-rows): direct won. Also measured: max-long-rows
    // direct.
    {StagingFamily::kRowReduce, ElementType::kInt32, SizeClass::kManyLongRows,
     Staging::kDirect, 0,
     "bench/results/kernels-h200.md, Winners for the `auto` staging table"},
    // END measured entries
};

struct StagingChoice {
  Staging staging;
  int stages;
};

// The strategy and depth a launch with `config` uses for `rows` x `cols` (elementwise: 1 x n):
// config's own unless it asks for kAuto, then the last table entry for (family, type) whose
// size class matches; direct where none does. The table was measured on an sm_90 device: an
// entry naming kBulk on a config.arch below kBulkCopyArch (which has no bulk copies) gives
// direct, the strategy the table falls back to wherever it has no measurement.
inline StagingChoice ResolveStaging(const LaunchConfig& config, StagingFamily family,
                                    ElementType type, int64_t rows, int64_t cols) {
  if (config.staging != Staging::kAuto) return {config.staging, config.stages};
  const SizeClass size_class = SizeClassOf(family, rows, cols, config.multiprocessors);
  StagingChoice choice{Staging::kDirect, config.stages};
  for (const StagingTableEntry& e : kStagingTable) {
    if (e.family == family && e.type == type &&
        (e.size_class == SizeClass::kAny || e.size_class == size_class)) {
      choice = {e.staging, e.stages > 0 ? e.stages : config.stages};
    }
  }
  if (choice.staging == Staging::kBulk && ResolveArch(config.arch) < kBulkCopyArch) {
    return {Staging::kDirect, config.stages};
  }
  return choice;
}

}  // namespace gpupipe::kernels::cuda::tuning

// The `auto` staging choice (Staging::kAuto) as data: which strategy and depth each op family
// uses for an element type and input size. Host-only; the dispatch code of each op resolves
// kAuto through ResolveStaging before it sizes its grid, so Describe* reports the resolved
// strategy.
//
// Provenance. Entries are to come from the kernels benchmark on the H200
// (bench/kernels, results in bench/results/kernels-h200.md: every strategy x stages x size,
// best median device time). Until those measurements exist, no entry claims one: every family
// and type uses `direct` (the baseline, vectorized plain loads) at every size. A measured entry
// replaces a default line below and names the results file section and commit it came from.
#pragma once

#include <cstdint>

#include "kernels/common/element_type.h"
#include "kernels/cuda/ops.h"

namespace gpupipe::kernels::cuda::tuning {

// Op families whose load loop can stage (their kernels stream long contiguous runs).
enum class StagingFamily {
  kElementwise,  // Elementwise
  kRowReduce,    // RowReduce / RowArgmax over long rows (block path)
};

struct StagingTableEntry {
  StagingFamily family;
  ElementType type;
  int64_t min_bytes;  // applies to inputs of at least this many bytes (up to the next entry's)
  Staging staging;    // never kAuto
  int stages;         // kMinStages..kMaxStages, or 0 to keep LaunchConfig::stages
  const char* provenance;
};

// Sorted by family, type, then min_bytes.
inline constexpr StagingTableEntry kStagingTable[] = {
    {StagingFamily::kElementwise, ElementType::kFloat32, 0, Staging::kDirect, 0,
     "default until measured (bench/results/kernels-h200.md)"},
    {StagingFamily::kElementwise, ElementType::kFloat64, 0, Staging::kDirect, 0,
     "default until measured (bench/results/kernels-h200.md)"},
    {StagingFamily::kElementwise, ElementType::kFloat16, 0, Staging::kDirect, 0,
     "default until measured (bench/results/kernels-h200.md)"},
    {StagingFamily::kElementwise, ElementType::kInt32, 0, Staging::kDirect, 0,
     "default until measured (bench/results/kernels-h200.md)"},
    {StagingFamily::kRowReduce, ElementType::kFloat32, 0, Staging::kDirect, 0,
     "default until measured (bench/results/kernels-h200.md)"},
    {StagingFamily::kRowReduce, ElementType::kFloat64, 0, Staging::kDirect, 0,
     "default until measured (bench/results/kernels-h200.md)"},
    {StagingFamily::kRowReduce, ElementType::kFloat16, 0, Staging::kDirect, 0,
     "default until measured (bench/results/kernels-h200.md)"},
    {StagingFamily::kRowReduce, ElementType::kInt32, 0, Staging::kDirect, 0,
     "default until measured (bench/results/kernels-h200.md)"},
};

struct StagingChoice {
  Staging staging;
  int stages;
};

// The strategy and depth a launch with `config` uses: config's own unless it asks for kAuto,
// then the table entry for (family, type) with the largest min_bytes <= bytes; direct where the
// table has none.
inline StagingChoice ResolveStaging(const LaunchConfig& config, StagingFamily family,
                                    ElementType type, int64_t bytes) {
  if (config.staging != Staging::kAuto) return {config.staging, config.stages};
  StagingChoice choice{Staging::kDirect, config.stages};
  for (const StagingTableEntry& e : kStagingTable) {
    if (e.family == family && e.type == type && e.min_bytes <= bytes) {
      choice = {e.staging, e.stages > 0 ? e.stages : config.stages};
    }
  }
  return choice;
}

}  // namespace gpupipe::kernels::cuda::tuning

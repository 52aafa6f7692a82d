// The jobs `gpupipe bench` sends: a weighted mix of entries, each an op pipeline on a tensor of
// one shape, dtype and priority, from command-line flags or a small file, one entry per line:
//
//   # weight; shape; dtype; priority; ops (any order, each key=value, separated by ';')
//   weight=9; shape=1x1024; dtype=float32; priority=low;  ops=affine(alpha=2) | relu | softmax
//   weight=1; shape=1x1024; dtype=float32; priority=high; ops=softmax
//
// Keys: ops (required, the CLI's ops grammar), shape (default 1x1024), dtype (float32),
// priority (normal), weight (1, a positive integer). Blank lines and lines starting with '#'
// are skipped.
//
// Each entry gets a few inputs of fresh random data (kInputVariants), so that jobs in flight
// together carry different bytes: a service that mixes up results between jobs (a batch split
// wrongly) shows as a mismatch against the first result of the same input.
//
// Pure apart from the file read; thread-safe.
#ifndef GPUPIPE_CLIENT_BENCH_JOB_MIX_H_
#define GPUPIPE_CLIENT_BENCH_JOB_MIX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace bench {

struct MixEntry {
  std::string ops_text;  // as given
  std::vector<v1::Op> ops;
  std::vector<int64_t> shape = {1, 1024};
  v1::DType dtype = v1::DTYPE_FLOAT32;
  v1::Priority priority = v1::PRIORITY_NORMAL;
  int weight = 1;
};

// Distinct random inputs per entry.
inline constexpr int kInputVariants = 8;
// The most entries a mix may have, and the largest input of one entry: a load tool's inputs
// are held in memory, kInputVariants of them per entry.
inline constexpr int kMaxMixEntries = 64;
inline constexpr int64_t kMaxEntryInputBytes = int64_t{64} << 20;

// One line of a mix file (see above). INVALID_ARGUMENT naming the key at fault.
absl::StatusOr<MixEntry> ParseMixLine(const std::string& line);
// A whole mix file's text; errors name the line ("line 3: ...").
absl::StatusOr<std::vector<MixEntry>> ParseMixText(const std::string& text);
// Reads and parses a mix file.
absl::StatusOr<std::vector<MixEntry>> ReadMixFile(const std::string& path);

// "1x1024" -> {1, 1024}.
absl::StatusOr<std::vector<int64_t>> ParseShape(const std::string& text);
std::string ShapeText(const std::vector<int64_t>& shape);  // {1, 1024} -> "1x1024"

// The requests of one entry: kInputVariants SubmitRequests with fresh random inputs (values in
// [-4, 4) for floating types, [-100, 100] for integers), `seed` making them reproducible.
absl::StatusOr<std::vector<v1::SubmitRequest>> EntryRequests(const MixEntry& entry, uint64_t seed);

// A short label for reports: "affine(alpha=2) | relu | softmax 1x1024 float32 low".
std::string EntryLabel(const MixEntry& entry);

}  // namespace bench
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_BENCH_JOB_MIX_H_

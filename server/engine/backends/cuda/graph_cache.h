// A least-recently-used cache of instantiated CUDA graphs for one lane (one stream with fixed
// buffers, so a plan's kernels always see the same pointers there).
//
// Entries are keyed by the plan's topology (step kinds, shapes, staging, launch mode); the
// kernels' parameters (elementwise programs) are compared separately, so a job that differs
// only in parameters updates the cached graph in place (cudaGraphExecUpdate) instead of
// instantiating a new one, and a changed shape, dtype or mode never replays a stale graph.
//
// Not thread-safe: one lane's worker uses it. Counters may be read from any thread.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <functional>
#include <list>
#include <string>

#include "absl/status/statusor.h"
#include "server/engine/backends/backend.h"

namespace gpupipe::engine {

class GraphCache {
 public:
  enum class Outcome { kHit, kUpdate, kMiss };

  explicit GraphCache(int capacity) : capacity_(capacity) {}
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  struct Lookup {
    cudaGraphExec_t exec = nullptr;
    Outcome outcome = Outcome::kMiss;
  };

  // The graph for `topology` with kernel parameters `params`. When none is cached with those
  // parameters, `enqueue` (which must enqueue exactly the plan's kernels on `stream`) is run
  // under stream capture to make one. The returned exec stays valid until the next call.
  absl::StatusOr<Lookup> Get(const std::string& topology, const std::string& params,
                             cudaStream_t stream, const std::function<cudaError_t()>& enqueue);

  // Whether a job of this topology came here before (it is cached, or was asked about
  // already); records the question. Remembers the last 4 x capacity topologies asked about.
  bool SeenBefore(const std::string& topology);

  // Adds this cache's counters to `stats`.
  void AddStats(GraphCacheStats* stats) const;

 private:
  struct Entry {
    std::string topology;
    std::string params;
    cudaGraphExec_t exec = nullptr;
  };

  absl::StatusOr<cudaGraph_t> Capture(cudaStream_t stream,
                                      const std::function<cudaError_t()>& enqueue);

  const int capacity_;
  std::list<Entry> entries_;       // most recently used first
  std::list<std::string> seen_;    // topologies asked about by SeenBefore, most recent first
  std::atomic<int64_t> hits_{0}, updates_{0}, misses_{0}, evictions_{0};
  std::atomic<int> size_{0};
};

const char* GraphOutcomeName(GraphCache::Outcome outcome);  // "hit", "update", "miss"

}  // namespace gpupipe::engine

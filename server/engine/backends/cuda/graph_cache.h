// A least-recently-used cache of instantiated CUDA graphs for one lane (one stream with fixed
// buffers, so a plan's kernels always see the same pointers there). A graph holds a chunk's
// kernels, or a whole one-chunk job: its copies in and out of the lane's own host buffers and
// its timing events around the kernels, or, for a job without copies, its kernels on the
// lane's mapped host buffers between two timing events.
//
// Entries are keyed by the plan's topology (step kinds, shapes, staging, launch mode, and what
// the graph holds besides the kernels); the
// kernels' parameters (elementwise programs) are compared separately, so a job that differs
// only in parameters updates the cached graph in place (cudaGraphExecUpdate) instead of
// instantiating a new one, and a changed shape, dtype or mode never replays a stale graph.
//
// Not thread-safe: one lane's worker uses it. Counters may be read from any thread.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <list>
#include <string>

#include "absl/functional/function_ref.h"
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
    int kernels = 0;  // kernels the graph launches (as its enqueue counted them)
  };

  // Enqueues what a graph holds on the capturing stream and adds the kernels it launched to
  // `*kernels`. Events it records for the host to read must use cudaEventRecordExternal, so
  // that they become event record nodes rather than dependencies inside the graph.
  // A reference, not a copy: a replay builds no callable object.
  using Enqueue = absl::FunctionRef<cudaError_t(int* kernels)>;

  // The graph for `topology` with kernel parameters `params`. When none is cached with those
  // parameters, `enqueue` (which must enqueue exactly what the topology names on `stream`) is
  // run under stream capture to make one. The returned exec stays valid until the next call.
  absl::StatusOr<Lookup> Get(const std::string& topology, const std::string& params,
                             cudaStream_t stream, Enqueue enqueue);

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
    int kernels = 0;
  };

  absl::StatusOr<cudaGraph_t> Capture(cudaStream_t stream, Enqueue enqueue, int* kernels);

  const int capacity_;
  std::list<Entry> entries_;       // most recently used first
  std::list<std::string> seen_;    // topologies asked about by SeenBefore, most recent first
  std::atomic<int64_t> hits_{0}, updates_{0}, misses_{0}, evictions_{0};
  std::atomic<int> size_{0};
};

const char* GraphOutcomeName(GraphCache::Outcome outcome);  // "hit", "update", "miss"

}  // namespace gpupipe::engine

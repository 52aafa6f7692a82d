#include "server/engine/backends/cuda/graph_cache.h"

#include "absl/strings/str_cat.h"
#include "server/engine/backends/cuda/cuda_status.h"

namespace gpupipe::engine {

const char* GraphOutcomeName(GraphCache::Outcome outcome) {
  switch (outcome) {
    case GraphCache::Outcome::kHit: return "hit";
    case GraphCache::Outcome::kUpdate: return "update";
    case GraphCache::Outcome::kMiss: return "miss";
  }
  return "";
}

GraphCache::~GraphCache() {
  for (Entry& e : entries_) cudaGraphExecDestroy(e.exec);
}

absl::StatusOr<cudaGraph_t> GraphCache::Capture(cudaStream_t stream, Enqueue enqueue,
                                                int* kernels) {
  // Thread-local mode: other lanes' threads keep making CUDA calls during this capture, and
  // none of them is ours to forbid.
  if (cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
      err != cudaSuccess) {
    return CudaError(err, "cudaStreamBeginCapture");
  }
  *kernels = 0;
  const cudaError_t launched = enqueue(kernels);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (launched != cudaSuccess || ended != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    return CudaError(launched != cudaSuccess ? launched : ended, "capturing the plan");
  }
  return graph;
}

absl::StatusOr<GraphCache::Lookup> GraphCache::Get(const std::string& topology,
                                                   const std::string& params,
                                                   cudaStream_t stream, Enqueue enqueue) {
  auto it = entries_.begin();
  while (it != entries_.end() && it->topology != topology) ++it;
  if (it != entries_.end()) {
    entries_.splice(entries_.begin(), entries_, it);  // now most recently used
    Entry& entry = entries_.front();
    if (entry.params == params) {
      ++hits_;
      return Lookup{entry.exec, Outcome::kHit, entry.kernels};
    }
    int kernels = 0;
    absl::StatusOr<cudaGraph_t> graph = Capture(stream, enqueue, &kernels);
    if (!graph.ok()) return graph.status();
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(entry.exec, *graph, &info) == cudaSuccess) {
      cudaGraphDestroy(*graph);
      entry.params = params;
      entry.kernels = kernels;
      ++updates_;
      return Lookup{entry.exec, Outcome::kUpdate, kernels};
    }
    // Not updatable in place (the dispatch chose other kernels): instantiate anew.
    cudaGetLastError();
    cudaGraphExecDestroy(entry.exec);
    entry.exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&entry.exec, *graph, 0);
    cudaGraphDestroy(*graph);
    if (err != cudaSuccess) {
      entries_.pop_front();
      --size_;
      return CudaError(err, "cudaGraphInstantiate");
    }
    entry.params = params;
    entry.kernels = kernels;
    ++misses_;
    return Lookup{entry.exec, Outcome::kMiss, kernels};
  }

  int kernels = 0;
  absl::StatusOr<cudaGraph_t> graph = Capture(stream, enqueue, &kernels);
  if (!graph.ok()) return graph.status();
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, *graph, 0);
  cudaGraphDestroy(*graph);
  if (err != cudaSuccess) return CudaError(err, "cudaGraphInstantiate");
  if (static_cast<int>(entries_.size()) >= capacity_) {
    // Safe to destroy: the lane waits for each job's work before it takes the next job.
    cudaGraphExecDestroy(entries_.back().exec);
    entries_.pop_back();
    --size_;
    ++evictions_;
  }
  entries_.push_front(Entry{topology, params, exec, kernels});
  ++size_;
  ++misses_;
  return Lookup{exec, Outcome::kMiss, kernels};
}

bool GraphCache::SeenBefore(const std::string& topology) {
  for (const Entry& e : entries_) {
    if (e.topology == topology) return true;
  }
  for (auto it = seen_.begin(); it != seen_.end(); ++it) {
    if (*it == topology) {
      seen_.splice(seen_.begin(), seen_, it);
      return true;
    }
  }
  seen_.push_front(topology);
  if (seen_.size() > 4 * static_cast<size_t>(capacity_)) seen_.pop_back();
  return false;
}

void GraphCache::AddStats(GraphCacheStats* stats) const {
  stats->hits += hits_;
  stats->updates += updates_;
  stats->misses += misses_;
  stats->evictions += evictions_;
  stats->entries += size_;
  stats->capacity += capacity_;
}

}  // namespace gpupipe::engine

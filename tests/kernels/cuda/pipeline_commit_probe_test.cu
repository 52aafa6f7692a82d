// libcu++'s block-scope cuda::pipeline in its smallest partitioned use, with no gpupipe code:
// one producer warp copies tiles with cuda::memcpy_async and producer_commit, one consumer
// warp reads them with consumer_wait / consumer_release. It checks that the pattern computes
// what it should, and it is the reproduction for a compute-sanitizer synccheck report that the
// `pipeline` staging strategy (kernels/cuda/detail/staging/pipeline_partitioned.cuh) inherits.
//
// producer_commit() (cuda/pipeline, thread_scope_block) arrives twice on the stage's `produced`
// barrier from each producer thread in one phase: cp.async.mbarrier.arrive.shared.b64 (which
// first raises the pending count by one, so the pair is one net arrival) and then
// barrier::arrive(). synccheck (CUDA 13.0) reports the second as "Barrier error detected.
// Missing wait" at pipeline:270, for a single tile (one phase, nothing earlier to wait for).
// The same copy with a hand-written mbarrier protocol, one cp.async.mbarrier.arrive.noinc per
// producer thread per phase, is clean (second kernel below). scripts/gpu-check.sh runs
// synccheck on this binary to show the report, and on the kernel tests with the `pipeline`
// strategy's kernels (template argument Staging 1) excluded.
#include <cooperative_groups.h>
#include <cuda/barrier>
#include <cuda/pipeline>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

// The __shared__ pipeline state and barriers are initialized by make_pipeline and init(), not
// by their constructors.
#pragma nv_diag_suppress 20054

namespace {

namespace cg = cooperative_groups;
constexpr int kTileFloats = 128;  // 32 lanes x one 16-byte vector
constexpr int kStages = 2;

__global__ void PartitionedPipelineCopy(const float* in, float* out, int tiles) {
  __shared__ alignas(16) float buf[kStages][kTileFloats];
  __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, kStages> state;
  auto block = cg::this_thread_block();
  const bool producer = threadIdx.x < 32;
  auto pipe = cuda::make_pipeline(
      block, &state, producer ? cuda::pipeline_role::producer : cuda::pipeline_role::consumer);
  if (producer) {
    auto warp = cg::tiled_partition<32>(block);
    for (int t = 0; t < tiles; ++t) {
      pipe.producer_acquire();
      cuda::memcpy_async(warp, buf[t % kStages], in + t * kTileFloats,
                         cuda::aligned_size_t<16>(kTileFloats * sizeof(float)), pipe);
      __syncwarp();
      pipe.producer_commit();
    }
  } else {
    for (int t = 0; t < tiles; ++t) {
      pipe.consumer_wait();
      for (int i = threadIdx.x - 32; i < kTileFloats; i += 32) {
        out[t * kTileFloats + i] = 2.0f * buf[t % kStages][i];
      }
      pipe.consumer_release();
    }
  }
  __syncwarp();
  pipe.quit();
}

__global__ void NoincMbarrierCopy(const float* in, float* out, int tiles) {
  __shared__ alignas(16) float buf[kStages][kTileFloats];
  __shared__ cuda::barrier<cuda::thread_scope_block> full[kStages], empty[kStages];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      init(&full[s], 32);
      init(&empty[s], 32);
    }
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    for (int t = 0; t < tiles; ++t) {
      const int s = t % kStages;
      if (t >= kStages) empty[s].wait_parity(((t / kStages) - 1) & 1);
      const auto dst = static_cast<unsigned>(__cvta_generic_to_shared(buf[s] + threadIdx.x * 4));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst),
                   "l"(in + t * kTileFloats + threadIdx.x * 4)
                   : "memory");
      const auto bar = static_cast<unsigned>(
          __cvta_generic_to_shared(cuda::device::barrier_native_handle(full[s])));
      asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(bar) : "memory");
    }
    // Observe the consumers' last release of each stage before the block ends.
    for (int t = tiles > kStages ? tiles - kStages : 0; t < tiles; ++t) {
      empty[t % kStages].wait_parity((t / kStages) & 1);
    }
  } else {
    for (int t = 0; t < tiles; ++t) {
      const int s = t % kStages;
      full[s].wait_parity((t / kStages) & 1);
      for (int i = threadIdx.x - 32; i < kTileFloats; i += 32) {
        out[t * kTileFloats + i] = 2.0f * buf[s][i];
      }
      (void)empty[s].arrive();
    }
  }
}

class PipelineCommitProbe : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      cudaGetLastError();
      GTEST_SKIP() << "no CUDA device";
    }
  }

  // Runs `kernel` over `tiles` tiles and checks out == 2 * in.
  template <typename Kernel>
  void Check(Kernel kernel, int tiles) {
    const int n = tiles * kTileFloats;
    std::vector<float> h(n);
    for (int i = 0; i < n; ++i) h[i] = static_cast<float>(i % 1000) - 500.0f;
    float* d_in = nullptr;
    float* d_out = nullptr;
    ASSERT_EQ(cudaMalloc(&d_in, n * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out, n * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(d_out, 0xff, n * sizeof(float)), cudaSuccess);
    kernel<<<1, 64>>>(d_in, d_out, tiles);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> got(n);
    ASSERT_EQ(cudaMemcpy(got.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], 2.0f * h[i]) << "element " << i;
    cudaFree(d_in);
    cudaFree(d_out);
  }
};

TEST_P(PipelineCommitProbe, PartitionedBlockPipelineCopies) {
  Check(PartitionedPipelineCopy, GetParam());
}

TEST_P(PipelineCommitProbe, NoincMbarrierProtocolCopies) { Check(NoincMbarrierCopy, GetParam()); }

INSTANTIATE_TEST_SUITE_P(Tiles, PipelineCommitProbe, ::testing::Values(1, 2, 9));

}  // namespace

// What a small job's launch costs the host, shape by shape: a job of one row of 1024 float32
// (4 KiB in, 4 KiB out, one short kernel), enqueued and waited for in the ways a lane could run
// it, on one thread and on several threads at once (each with a stream and buffers of its own,
// as the daemon's lanes are). For each shape it prints the host time of the enqueueing calls
// and of the whole round trip (enqueue, then wait for the last event), the median and p90 of
// `reps` jobs after a warm-up, and the jobs a second of 1, 2 and 4 threads together; the
// waits spin (events of default flags) or block (cudaEventBlockingSync), as --cuda-wait does.
//
// Shapes (the lane's one-stream job is "stream+times" or, repeated, "graph+times"):
//   stream+times  event, copy in, event, kernel, event, copy out, event: seven calls
//   graph+times   the same seven captured as one graph (events as external record nodes)
//   stream        copy in, kernel, copy out, done event: four calls
//   graph         copy in, kernel and copy out as one graph, then the done event
//   mapped        the kernel reads the pinned input and writes the pinned output itself
//                 (pinned memory is mapped, at the same address, where addressing is unified,
//                 as on every 64-bit host), then the done event: two calls
//   mapped+times  event, kernel, event on the stream: three calls
//   mapped-graph  the mapped kernel and its two timing events as one graph
//
// Build and run on a GPU host, from the repository root:
//   nvcc -O3 -std=c++17 -arch=sm_90 -I. -o launch_shapes bench/service/experiments/launch_shapes.cu
//   ./launch_shapes [reps]   (default 3000)
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/cuda_check.cuh"

namespace {

constexpr int kN = 1024;
constexpr int kThreads = 256;
using Clock = std::chrono::steady_clock;

// affine(2, 1) | relu | softmax over one row of kN, one block: the small job's math.
__global__ void __launch_bounds__(kThreads) SmallJob(const float* in, float* out) {
  __shared__ float red[kThreads / 32];
  float v[kN / kThreads];
  float m = -INFINITY;
  for (int i = 0; i < kN / kThreads; ++i) {
    v[i] = fmaxf(2.f * in[threadIdx.x + i * kThreads] + 1.f, 0.f);
    m = fmaxf(m, v[i]);
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(~0u, m, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
  __syncthreads();
  m = red[0];
  for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  float s = 0;
  for (int i = 0; i < kN / kThreads; ++i) s += (v[i] = __expf(v[i] - m));
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = s;
  __syncthreads();
  s = 0;
  for (int w = 0; w < kThreads / 32; ++w) s += red[w];
  for (int i = 0; i < kN / kThreads; ++i) out[threadIdx.x + i * kThreads] = v[i] / s;
}

// One thread's lane: a stream, device buffers, pinned staging in and out, timing events.
struct Lane {
  cudaStream_t stream{};
  float* d_in = nullptr;
  float* d_out = nullptr;
  float* h_in = nullptr;
  float* h_out = nullptr;
  cudaEvent_t times[4]{};  // copy in starts, kernel starts, kernel ends, copy out ends
  cudaEvent_t done{};
  cudaGraphExec_t graph{};
  bool blocking = false;

  explicit Lane(bool block) : blocking(block) {
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaMalloc(&d_in, kN * sizeof(float)));
    CK(cudaMalloc(&d_out, kN * sizeof(float)));
    CK(cudaHostAlloc(&h_in, kN * sizeof(float), cudaHostAllocDefault));
    CK(cudaHostAlloc(&h_out, kN * sizeof(float), cudaHostAllocDefault));
    for (int i = 0; i < kN; ++i) h_in[i] = std::sin(0.37f * i);
    const unsigned flags = block ? cudaEventBlockingSync : cudaEventDefault;
    for (cudaEvent_t& e : times) CK(cudaEventCreateWithFlags(&e, flags));
    CK(cudaEventCreateWithFlags(&done, flags | cudaEventDisableTiming));
  }
  ~Lane() {
    if (graph) cudaGraphExecDestroy(graph);
    for (cudaEvent_t e : times) cudaEventDestroy(e);
    cudaEventDestroy(done);
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFreeHost(h_in);
    cudaFreeHost(h_out);
    cudaStreamDestroy(stream);
  }
  void Kernel(const float* in, float* out) { SmallJob<<<1, kThreads, 0, stream>>>(in, out); }
  void Record(cudaEvent_t e, unsigned flags) { CK(cudaEventRecordWithFlags(e, stream, flags)); }
  void CopyIn() { CK(cudaMemcpyAsync(d_in, h_in, kN * 4, cudaMemcpyHostToDevice, stream)); }
  void CopyOut() { CK(cudaMemcpyAsync(h_out, d_out, kN * 4, cudaMemcpyDeviceToHost, stream)); }
  void StreamTimes(unsigned f) {
    Record(times[0], f);
    CopyIn();
    Record(times[1], f);
    Kernel(d_in, d_out);
    Record(times[2], f);
    CopyOut();
    Record(times[3], f);
  }
  void Capture(const std::function<void()>& body) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    body();
    CK(cudaStreamEndCapture(stream, &g));
    CK(cudaGraphInstantiate(&graph, g, 0));
    CK(cudaGraphDestroy(g));
    CK(cudaGraphUpload(graph, stream));
    CK(cudaStreamSynchronize(stream));
  }
};

struct Shape {
  const char* name;
  std::function<void(Lane&)> prepare;  // once per lane (graph capture)
  std::function<cudaEvent_t(Lane&)> enqueue;  // one job; returns the event to wait for
};

std::vector<Shape> Shapes() {
  const auto none = [](Lane&) {};
  return {
      {"stream+times", none,
       [](Lane& l) {
         l.StreamTimes(cudaEventRecordDefault);
         return l.times[3];
       }},
      {"graph+times", [](Lane& l) { l.Capture([&] { l.StreamTimes(cudaEventRecordExternal); }); },
       [](Lane& l) {
         CK(cudaGraphLaunch(l.graph, l.stream));
         return l.times[3];
       }},
      {"stream", none,
       [](Lane& l) {
         l.CopyIn();
         l.Kernel(l.d_in, l.d_out);
         l.CopyOut();
         l.Record(l.done, 0);
         return l.done;
       }},
      {"graph",
       [](Lane& l) {
         l.Capture([&] {
           l.CopyIn();
           l.Kernel(l.d_in, l.d_out);
           l.CopyOut();
         });
       },
       [](Lane& l) {
         CK(cudaGraphLaunch(l.graph, l.stream));
         l.Record(l.done, 0);
         return l.done;
       }},
      {"mapped", none,
       [](Lane& l) {
         l.Kernel(l.h_in, l.h_out);
         l.Record(l.done, 0);
         return l.done;
       }},
      {"mapped+times", none,
       [](Lane& l) {
         l.Record(l.times[1], 0);
         l.Kernel(l.h_in, l.h_out);
         l.Record(l.times[2], 0);
         return l.times[2];
       }},
      {"mapped-graph",
       [](Lane& l) {
         l.Capture([&] {
           l.Record(l.times[1], cudaEventRecordExternal);
           l.Kernel(l.h_in, l.h_out);
           l.Record(l.times[2], cudaEventRecordExternal);
         });
       },
       [](Lane& l) {
         CK(cudaGraphLaunch(l.graph, l.stream));
         return l.times[2];
       }},
  };
}

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }
double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

// Checks a lane's output against the CPU: the shape ran the job, not just the calls.
bool Check(const Lane& l) {
  double m = -INFINITY, s = 0;
  std::vector<double> v(kN);
  for (int i = 0; i < kN; ++i) m = std::max(m, v[i] = std::max(2.0 * l.h_in[i] + 1, 0.0));
  for (double& x : v) s += (x = std::exp(x - m));
  for (int i = 0; i < kN; ++i) {
    if (std::fabs(l.h_out[i] - v[i] / s) > 1e-6 + 1e-4 * v[i] / s) return false;
  }
  return true;
}

// Jobs a second of `threads` lanes running `shape` at once for `seconds`.
double Throughput(const Shape& shape, int threads, bool block, double seconds) {
  std::vector<std::unique_ptr<Lane>> lanes;
  for (int t = 0; t < threads; ++t) {
    lanes.push_back(std::make_unique<Lane>(block));
    shape.prepare(*lanes.back());
  }
  std::atomic<bool> go{false}, stop{false};
  std::atomic<long> jobs{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Lane& l = *lanes[t];
      while (!go.load()) {
      }
      long n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        CK(cudaEventSynchronize(shape.enqueue(l)));
        ++n;
      }
      jobs += n;
    });
  }
  go = true;
  const Clock::time_point start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (std::thread& th : pool) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  return jobs / elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 3000;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d reps a shape after %d warm-up jobs\n", prop.name, reps, reps / 10);
  printf("%-8s %-14s %10s %10s %10s %10s %10s %10s %10s %s\n", "wait", "shape", "enq p50",
         "enq p90", "rt p50", "rt p90", "1 thr/s", "2 thr/s", "4 thr/s", "check");
  for (bool block : {false, true}) {
    for (const Shape& shape : Shapes()) {
      Lane lane(block);
      shape.prepare(lane);
      std::vector<double> enq, rt;
      for (int i = 0; i < reps + reps / 10; ++i) {
        std::memset(lane.h_out, 0, kN * sizeof(float));
        const Clock::time_point t0 = Clock::now();
        const cudaEvent_t e = shape.enqueue(lane);
        const Clock::time_point t1 = Clock::now();
        CK(cudaEventSynchronize(e));
        const Clock::time_point t2 = Clock::now();
        if (i >= reps / 10) {
          enq.push_back(Us(t1 - t0));
          rt.push_back(Us(t2 - t0));
        }
      }
      const bool ok = Check(lane);
      double tput[3];
      const int counts[3] = {1, 2, 4};
      for (int k = 0; k < 3; ++k) tput[k] = Throughput(shape, counts[k], block, 0.5);
      printf("%-8s %-14s %10.2f %10.2f %10.2f %10.2f %10.0f %10.0f %10.0f %s\n",
             block ? "block" : "spin", shape.name, Quantile(enq, 0.5), Quantile(enq, 0.9),
             Quantile(rt, 0.5), Quantile(rt, 0.9), tput[0], tput[1], tput[2],
             ok ? "ok" : "MISMATCH");
      fflush(stdout);
    }
  }
  return 0;
}

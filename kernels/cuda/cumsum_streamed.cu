// cumsum of float32 rows: the streamed look-back scan (contract in detail/scan_lookback.cuh;
// dispatch, batching and the workspace reset in cumsum.cu).
//
// A persistent, warp-specialized variant of cumsum.cu's LookbackKernel (a block a tile): one
// block an SM, each taking tile after tile from the counter. Three roles, so that no warp
// waits on another SM while it could be loading or scanning:
//  - the producer warp claims the block's tiles (counter order, so every tile a block waits
//    for is held by a running block) and copies each whole, aligned tile into a ring of
//    `slots` shared-memory slots with one cp.async.bulk (anything else the compute warps read
//    from global memory);
//  - the compute warps scan tile u in registers, publish its aggregate, mail its total to the
//    look-back warp, and then store tile u - kStreamLag, whose prefix the look-back warp found
//    while they scanned the tiles after it (scanned tiles wait in registers);
//  - the look-back warp finds each tile's exclusive prefix. It knows the inclusive prefix of
//    the block's own previous tile, so it never reads further back than that tile (about
//    `slots` grids of tiles, read in one round of kStreamWindows windows): it waits for the
//    aggregates of the tiles claimed before this one, never for a chain of prefixes.
//
// Barriers (mbarriers in shared memory; tile u is the block's u-th, slot s = u % slots in
// phase u / slots; mailbox b = u % kStreamMailboxes in phase u / kStreamMailboxes):
//  - full[s] (32 arrivals: the producer's lanes; plus the copy's bytes): slot s holds tile u
//    (or says the block has no more tiles); slot_* are written before it.
//  - empty[s] (one arrival a compute thread, after its last read of the slot): the producer
//    may refill slot s; it fences the async proxy first.
//  - scanned[b] (1: compute thread 0): mail_tile / mail_total of tile u are set (mail_tile < 0:
//    no more tiles). Only the look-back warp's lane 0 waits on it and reads the mail.
//  - prefixed[b] (1: the look-back warp's lane 0): mail_prefix of tile u is set.
//  - consumed[b] (one arrival a compute thread, after it read mail_prefix of tile u): the
//    look-back warp may write mailbox b's prefix for tile u + kStreamMailboxes.
// Mailbox b is rewritten only after its readers are done: thread 0 writes mail_tile /
// mail_total for tile u only after it waited for tile u - kStreamLag - 1's prefix (the look-back
// warp read tile u - kStreamMailboxes's mail before it mailed that prefix), and the look-back
// warp writes mail_prefix for tile u only after consumed[b] for tile u - kStreamMailboxes. No
// barrier can be waited on a phase late (kStreamLag < kStreamMailboxes): each phase a waiter
// waits for needs an arrival that comes after the waiter's previous wait on that barrier.
// Every thread observes the phase of a barrier it arrived on before it arrives on it again,
// and again before it exits.
//
// Tuning (compute warps, items, slots, look-back windows, lag, mailboxes): tuning/scan_policy.h,
// with the reasons. The other input types stay on LookbackKernel, the faster of the two for them.
#include <cuda/ptx>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/detail/barrier_ring.cuh"
#include "kernels/cuda/detail/launch.cuh"
#include "kernels/cuda/detail/row_access.cuh"
#include "kernels/cuda/detail/scan_lookback.cuh"
#include "kernels/cuda/detail/typed_items.cuh"
#include "kernels/cuda/tuning/scan_policy.h"

namespace gpupipe::kernels::cuda::detail {
namespace {

using StreamPolicy = tuning::StreamedScanPolicy;
constexpr int kStreamComputeWarps = StreamPolicy::kComputeWarps;
constexpr int kStreamComputeThreads = kStreamComputeWarps * 32;
constexpr int kStreamProducerWarp = kStreamComputeWarps;
constexpr int kStreamLookbackWarp = kStreamComputeWarps + 1;
constexpr int kStreamThreads = kStreamComputeThreads + 64;
constexpr int kStreamMaxSlots = StreamPolicy::kMaxSlots;  // slots: a launch parameter, up to this
constexpr int kStreamSlots = StreamPolicy::kSlots;
constexpr int kStreamWindows = StreamPolicy::kWindows;  // look-back windows of 32 tiles, one round
constexpr int kStreamLag = StreamPolicy::kLag;  // tiles scanned before a scanned tile is stored
constexpr int kStreamItems = StreamPolicy::kItems;  // a compute thread's items a tile
constexpr int kStreamMailboxes = StreamPolicy::kMailboxes;  // > kStreamLag: the barrier notes
constexpr int kStreamBarrierId = 1;  // the compute warps' named barrier (0: __syncthreads)
static_assert(int64_t{kStreamComputeThreads} * kStreamItems == kStreamedTile);
static_assert(kStreamSlots >= 2 && kStreamSlots <= kStreamMaxSlots);
static_assert(kStreamLag < kStreamMailboxes);

template <typename In>
struct StreamSmem {
  using Acc = typename ItemTraits<In>::Acc;
  uint64_t full[kStreamMaxSlots];
  uint64_t empty[kStreamMaxSlots];
  uint64_t scanned[kStreamMailboxes];
  uint64_t prefixed[kStreamMailboxes];
  uint64_t consumed[kStreamMailboxes];
  long long slot_tile[kStreamMaxSlots];  // the tile in the slot, or -1: no more tiles
  // The tile's row in the batch and index within the row: derivable from slot_tile, but the
  // producer's lane divides once where 256 compute threads would each divide 64-bit.
  long long slot_row[kStreamMaxSlots];
  long long slot_j[kStreamMaxSlots];
  int slot_staged[kStreamMaxSlots];  // 1: the slot's data holds it; 0: read it from global
  long long mail_tile[kStreamMailboxes];
  Acc mail_total[kStreamMailboxes];
  Acc mail_prefix[kStreamMailboxes];
  Acc warp_totals[2][kStreamComputeWarps];
};

// Dynamic shared memory: the StreamSmem header, then `slots` tiles of data.
template <typename In>
constexpr size_t kStreamDataOffset = Round16(sizeof(StreamSmem<In>) + 127) / 128 * 128;
template <typename In>
constexpr size_t StreamSmemBytes(int slots) {
  return kStreamDataOffset<In> + static_cast<size_t>(slots) * kStreamedTile * sizeof(In);
}

__device__ __forceinline__ void ComputeBarrier() {
  asm volatile("bar.sync %0, %1;" ::"n"(kStreamBarrierId), "n"(kStreamComputeThreads) : "memory");
}

template <typename Acc>
__device__ __forceinline__ uint64_t BitsOf(Acc a) {
  uint64_t bits = 0;
  memcpy(&bits, &a, sizeof(Acc));
  return bits;
}

// The exclusive prefix of `tile`: the sum of the aggregates of the tiles before it back to the
// newest one with an inclusive prefix, plus that prefix. Tile `known` (when >= row_first) is
// the block's own previous tile, whose inclusive prefix `known_inclusive` is not read back;
// tiles older than it, or than row_first, are never read. Lane l reads tile newest - (32 i + l)
// for window i; a round ends when every tile newer than the newest inclusive prefix among them
// has published at least its aggregate.
template <typename Acc, int K, typename Status>
__device__ __forceinline__ Acc StreamLookBack(const Status& status, int64_t tile,
                                              int64_t row_first, int64_t known,
                                              Acc known_inclusive, unsigned spin_max_ns) {
  const int lane = threadIdx.x & 31;
  const int64_t floor = max(row_first, known);
  Acc prefix = Acc(0);
  for (int64_t newest = tile - 1;; newest -= 32 * K) {
    TileRecord r[K];
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const int64_t q = newest - (32 * i + lane);
      if (q < floor) {
        r[i] = {kFlagPrefix, 0};  // older than a prefix that is certain to be there
      } else if (q == known) {
        r[i] = {kFlagPrefix, BitsOf(known_inclusive)};
      } else {
        r[i] = {kFlagInvalid, 0};
      }
    }
    int stop_window = K;  // the window of the newest inclusive prefix, K: none
    int stop_lane = 0;
    unsigned sleep_ns = kSpinMinNs;
    for (;;) {
#pragma unroll
      for (int i = 0; i < K; ++i) {
        // Windows older than the newest prefix found so far never count (flags only advance,
        // so that prefix can only be overtaken by a newer one).
        if (i <= stop_window && r[i].flag == kFlagInvalid) {
          r[i] = status.Load(newest - (32 * i + lane));
        }
      }
      bool ready = true;  // every tile newer than the newest prefix has published
      stop_window = K;
#pragma unroll
      for (int i = 0; i < K; ++i) {
        const unsigned prefixes = __ballot_sync(kFullMask, r[i].flag == kFlagPrefix);
        const unsigned invalid = __ballot_sync(kFullMask, r[i].flag == kFlagInvalid);
        if (stop_window == K) {
          if (prefixes != 0) {
            stop_window = i;
            stop_lane = __ffs(prefixes) - 1;
            if ((invalid & ((1u << stop_lane) - 1)) != 0) ready = false;
          } else if (invalid != 0) {
            ready = false;
          }
        }
      }
      if (ready) break;
      __nanosleep(sleep_ns);
      sleep_ns = min(2 * sleep_ns, spin_max_ns);
    }
    Acc sum = Acc(0);
#pragma unroll
    for (int i = 0; i < K; ++i) {
      if (i < stop_window || (i == stop_window && lane <= stop_lane)) {
        sum += Status::Value(r[i].bits);
      }
    }
    prefix += WarpSum(sum);
    if (stop_window < K) return prefix;
  }
}

template <typename In>
__global__ void __launch_bounds__(kStreamThreads, 1)
    StreamedLookbackKernel(const In* d_in, typename OutOf<In>::type* d_out, int64_t row0,
                           int64_t cols, int64_t tiles_per_row, int64_t tiles, int slots,
                           unsigned spin_max_ns, typename ItemTraits<In>::Acc* d_carry,
                           void* d_workspace) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // Built for a target without bulk copies: the host never launches it there
  // (StreamedLookbackRuns). The names only the body below uses count as used.
  (void)kStreamLookbackWarp;
  (void)kStreamWindows;
  (void)&ComputeBarrier;
  __trap();
#else
  using Acc = typename ItemTraits<In>::Acc;
  using Bits = typename ItemTraits<In>::Bits;
  using Out = typename OutOf<In>::type;
  using Status = TileStatus<Acc>;
  constexpr int kItemsHere = kStreamItems;
  constexpr int kLag = kStreamLag;
  constexpr int kVec = 16 / sizeof(Bits);
  constexpr int kVecs = kItemsHere / kVec;
  constexpr int kWarpSpan = 32 * kItemsHere;
  constexpr int64_t kTileHere = kStreamedTile;
  constexpr uint32_t kTileBytes = static_cast<uint32_t>(kTileHere * sizeof(In));
  static_assert(kItemsHere % kVec == 0 && (kVec * sizeof(Out)) % 16 == 0);
  extern __shared__ __align__(128) unsigned char s_raw[];
  auto& sm = *reinterpret_cast<StreamSmem<In>*>(s_raw);
  const auto slot_data = [&](int s) { return s_raw + kStreamDataOffset<In> + s * kTileBytes; };
  auto* base = static_cast<char*>(d_workspace);
  auto* counter = reinterpret_cast<unsigned long long*>(base);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;

  if (threadIdx.x == 0) {
    for (int s = 0; s < slots; ++s) {
      ::cuda::ptx::mbarrier_init(&sm.full[s], 32);
      ::cuda::ptx::mbarrier_init(&sm.empty[s], kStreamComputeThreads);
    }
    for (int b = 0; b < kStreamMailboxes; ++b) {
      ::cuda::ptx::mbarrier_init(&sm.scanned[b], 1);
      ::cuda::ptx::mbarrier_init(&sm.prefixed[b], 1);
      ::cuda::ptx::mbarrier_init(&sm.consumed[b], kStreamComputeThreads);
    }
    ::cuda::ptx::fence_mbarrier_init(::cuda::ptx::sem_release, ::cuda::ptx::scope_cluster);
  }
  __syncthreads();
  detail::WaitForPrimaryGrids();
  const Status status = Status::Make(base, tiles);
  // Where tile `tile` of the batch starts, and how many of its elements exist.
  const auto locate = [&](int64_t tile, int64_t* row, int64_t* j) {
    *row = tile / tiles_per_row;
    *j = tile - *row * tiles_per_row;
  };

  if (warp == kStreamProducerWarp) {
    int64_t u = 0;
    // s = u % slots and use = u / slots, kept as counters (no 64-bit division a tile).
    for (int s = 0, use = 0;; ++u, s = s + 1 == slots ? 0 : s + 1, use += s == 0) {
      if (use > 0) {
        WaitPhase(&sm.empty[s], use - 1);  // the compute warps are done with tile u - S
        WaitPhase(&sm.full[s], use - 1);   // observe our own last arrival
        // Order the compute warps' reads, acquired above, before the bulk write.
        ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared);
      }
      unsigned long long claimed = 0;
      if (lane == 0) claimed = atomicAdd(counter, 1ull);
      const auto tile = static_cast<long long>(__shfl_sync(kFullMask, claimed, 0));
      const bool more = tile < tiles;
      bool staged = false;
      const In* src = nullptr;
      int64_t row = 0, j = 0;
      if (more) {
        locate(tile, &row, &j);
        src = d_in + (row0 + row) * cols + j * kTileHere;
        staged = (j + 1) * kTileHere <= cols && detail::Aligned16(src);
      }
      if (lane == 0) {
        sm.slot_tile[s] = more ? tile : -1;
        sm.slot_row[s] = row;
        sm.slot_j[s] = j;
        sm.slot_staged[s] = staged ? 1 : 0;
        if (staged) {
          (void)::cuda::ptx::mbarrier_arrive_expect_tx(::cuda::ptx::sem_release,
                                                       ::cuda::ptx::scope_cta,
                                                       ::cuda::ptx::space_shared, &sm.full[s],
                                                       kTileBytes);
          ::cuda::ptx::cp_async_bulk(::cuda::ptx::space_cluster, ::cuda::ptx::space_global,
                                     slot_data(s), src, kTileBytes, &sm.full[s]);
        } else {
          (void)::cuda::ptx::mbarrier_arrive(&sm.full[s]);
        }
      } else {
        (void)::cuda::ptx::mbarrier_arrive(&sm.full[s]);
      }
      if (!more) break;
    }
    // Observe the last phase of every slot's full barrier (all complete: each was waited on by
    // the compute warps, or is the last, whose completion needs only our arrivals).
    for (int64_t k = u >= slots ? u - slots + 1 : 0; k <= u; ++k) {
      WaitPhase(&sm.full[k % slots], k / slots);
    }
  } else if (warp == kStreamLookbackWarp) {
    int64_t known = -1;  // the block's previous tile
    Acc known_inclusive = Acc(0);
    int64_t u_end = 0;  // the index of the no-more-tiles mail
    for (int64_t u = 0;; ++u) {
      // Lane 0 alone waits for the mail and reads it (and the carry), and hands it to the
      // other lanes: its arrival on prefixed[b] then follows every read of mailbox b this warp
      // makes, and no lane can lag a phase behind on scanned[b].
      const int b = static_cast<int>(u % kStreamMailboxes);
      long long mailed_tile = 0;
      Acc mailed_total = Acc(0);
      if (lane == 0) {
        WaitPhase(&sm.scanned[b], u / kStreamMailboxes);
        mailed_tile = sm.mail_tile[b];
        mailed_total = sm.mail_total[b];
      }
      const long long tile = __shfl_sync(kFullMask, mailed_tile, 0);
      if (tile < 0) {
        u_end = u;
        break;
      }
      const Acc total = __shfl_sync(kFullMask, mailed_total, 0);
      int64_t row, j;
      locate(tile, &row, &j);
      Acc prefix;
      if (j == 0) {
        Acc carry = Acc(0);
        if (lane == 0 && d_carry != nullptr) carry = __ldcg(d_carry + row0 + row);
        prefix = __shfl_sync(kFullMask, carry, 0);
      } else {
        const int64_t row_first = tile - j;
        prefix = StreamLookBack<Acc, kStreamWindows>(status, tile, row_first,
                                               known >= row_first ? known : -1, known_inclusive,
                                               spin_max_ns);
      }
      const Acc inclusive = prefix + total;
      if (lane == 0) {
        status.Publish(tile, inclusive, kFlagPrefix);
        if (d_carry != nullptr && j == tiles_per_row - 1) d_carry[row0 + row] = inclusive;
        if (u >= kStreamMailboxes) {
          // Every compute thread has read tile u - kStreamMailboxes's prefix from mailbox b
          // (long since: they store that tile kStreamLag tiles after scanning it).
          WaitPhase(&sm.consumed[b], u / kStreamMailboxes - 1);
          WaitPhase(&sm.prefixed[b], u / kStreamMailboxes - 1);
        }
        sm.mail_prefix[b] = prefix;
        (void)::cuda::ptx::mbarrier_arrive(&sm.prefixed[b]);
      }
      known = tile;
      known_inclusive = inclusive;
    }
    // Lane 0 observes its last arrival on each mailbox (complete: one arrival each).
    if (lane == 0) {
      for (int64_t k = u_end >= kStreamMailboxes ? u_end - kStreamMailboxes : 0; k < u_end; ++k) {
        WaitPhase(&sm.prefixed[k % kStreamMailboxes], k / kStreamMailboxes);
      }
    }
  } else {
    // Compute warps. pend[l] holds tile u - kLag + l scanned within its tile (inclusive),
    // waiting for its prefix; each tile is stored kLag tiles after it was scanned.
    Acc pend[kLag][kVecs][kVec];
    Out* pend_out[kLag];
    int64_t pend_valid[kLag];
    // Stores pending tile `l` (local index v) once the look-back warp has mailed its prefix.
    const auto store = [&](const Acc (&x)[kVecs][kVec], Out* out, int64_t out_valid, int64_t v) {
      const int vb = static_cast<int>(v % kStreamMailboxes);
      WaitPhase(&sm.prefixed[vb], v / kStreamMailboxes);
      const Acc prefix = sm.mail_prefix[vb];
      if (v >= kStreamMailboxes) WaitPhase(&sm.consumed[vb], v / kStreamMailboxes - 1);
      (void)::cuda::ptx::mbarrier_arrive(&sm.consumed[vb]);  // done with mailbox vb's prefix
      StoreSpan<Out, kVecs, kVec>(out, out_valid, [&](int k, int i) { return prefix + x[k][i]; });
    };
    int64_t u = 0;
    for (int s = 0, use = 0;; ++u, s = s + 1 == slots ? 0 : s + 1, use += s == 0) {
      const int b = static_cast<int>(u & 1);                       // warp_totals buffer
      const int mb = static_cast<int>(u % kStreamMailboxes);       // mailbox
      WaitPhase(&sm.full[s], use);
      const long long tile = sm.slot_tile[s];
      const bool staged = sm.slot_staged[s] != 0;
      const int64_t row = sm.slot_row[s];
      const int64_t j = sm.slot_j[s];
      Acc v[kVecs][kVec];
      int64_t valid = 0;
      if (tile >= 0) {
        const int64_t warp_first = j * kTileHere + static_cast<int64_t>(warp) * kWarpSpan;
        valid = cols - warp_first;
        if (staged) {
          const auto* src =
              reinterpret_cast<const uint4*>(slot_data(s)) + warp * (kWarpSpan / kVec);
#pragma unroll
          for (int k = 0; k < kVecs; ++k) {
            const uint4 raw = src[k * 32 + lane];
            Bits e[kVec];
            memcpy(e, &raw, sizeof(raw));
#pragma unroll
            for (int i = 0; i < kVec; ++i) v[k][i] = ItemTraits<In>::ToAcc(e[i]);
          }
        } else {
          LoadSpanElements<In>(d_in + (row0 + row) * cols + warp_first, valid, v);
        }
      }
      if (use > 0) WaitPhase(&sm.empty[s], use - 1);
      (void)::cuda::ptx::mbarrier_arrive(&sm.empty[s]);  // done reading the slot

      if (tile >= 0) {
        Acc vec_base[kVecs];
        const Acc warp_total = ScanSpan(v, vec_base);
        if (lane == 0) sm.warp_totals[b][warp] = warp_total;
        ComputeBarrier();
        Acc warp_prefix = Acc(0);
        Acc tile_total = Acc(0);
#pragma unroll
        for (int w = 0; w < kStreamComputeWarps; ++w) {
          const Acc t = sm.warp_totals[b][w];
          if (w < warp) warp_prefix += t;
          tile_total += t;
        }
        if (threadIdx.x == 0) {
          if (j > 0) status.Publish(tile, tile_total, kFlagAggregate);
          sm.mail_tile[mb] = tile;
          sm.mail_total[mb] = tile_total;
        }
#pragma unroll
        for (int k = 0; k < kVecs; ++k) {
          const Acc add = warp_prefix + vec_base[k];
#pragma unroll
          for (int i = 0; i < kVec; ++i) v[k][i] += add;
        }
      } else if (threadIdx.x == 0) {
        sm.mail_tile[mb] = -1;
      }
      if (threadIdx.x == 0) {
        if (u >= kStreamMailboxes) {
          WaitPhase(&sm.scanned[mb], u / kStreamMailboxes - 1);
        }
        (void)::cuda::ptx::mbarrier_arrive(&sm.scanned[mb]);
      }

      if (tile < 0) {  // no more tiles: store every pending one, oldest first
#pragma unroll
        for (int l = 0; l < kLag; ++l) {
          if (u - kLag + l >= 0) store(pend[l], pend_out[l], pend_valid[l], u - kLag + l);
        }
        break;
      }
      if (u >= kLag) store(pend[0], pend_out[0], pend_valid[0], u - kLag);
#pragma unroll
      for (int l = 0; l + 1 < kLag; ++l) {
#pragma unroll
        for (int k = 0; k < kVecs; ++k) {
#pragma unroll
          for (int i = 0; i < kVec; ++i) pend[l][k][i] = pend[l + 1][k][i];
        }
        pend_out[l] = pend_out[l + 1];
        pend_valid[l] = pend_valid[l + 1];
      }
#pragma unroll
      for (int k = 0; k < kVecs; ++k) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) pend[kLag - 1][k][i] = v[k][i];
      }
      pend_out[kLag - 1] =
          d_out + (row0 + row) * cols + j * kTileHere + static_cast<int64_t>(warp) * kWarpSpan;
      pend_valid[kLag - 1] = valid;
    }
    // Observe the last phase of every slot's empty barrier this thread arrived on, and of each
    // mailbox thread 0 arrived on.
    for (int64_t k = u >= slots ? u - slots + 1 : 0; k <= u; ++k) {
      WaitPhase(&sm.empty[k % slots], k / slots);
    }
    if (threadIdx.x == 0) {
      for (int64_t k = u >= kStreamMailboxes ? u - kStreamMailboxes + 1 : 0; k <= u; ++k) {
        WaitPhase(&sm.scanned[k % kStreamMailboxes], k / kStreamMailboxes);
      }
    }
    // Tiles 0 .. u - 1 were stored, each arriving on its mailbox's consumed barrier.
    for (int64_t k = u >= kStreamMailboxes ? u - kStreamMailboxes : 0; k < u; ++k) {
      WaitPhase(&sm.consumed[k % kStreamMailboxes], k / kStreamMailboxes);
    }
  }
  detail::AllowDependentGrids();
#endif
}

}  // namespace

bool StreamedLookbackRuns(const LaunchConfig& config) {
  return config.arch >= kBulkCopyArch &&
         StreamSmemBytes<float>(kStreamSlots) <= static_cast<size_t>(config.max_smem_per_block);
}

cudaError_t LaunchStreamedLookback(const float* d_in, float* d_out, int64_t row0, int64_t cols,
                                   int64_t tiles_per_row, int64_t tiles, float* d_carry,
                                   void* d_workspace, Launcher& launch) {
  constexpr auto kKernel = StreamedLookbackKernel<float>;
  constexpr size_t kSmem = StreamSmemBytes<float>(kStreamSlots);
  if (!launch.describing()) {
    static const cudaError_t opt_in = cudaFuncSetAttribute(
        kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem));
    if (opt_in != cudaSuccess) return opt_in;
  }
  const int64_t grid = std::min<int64_t>(tiles, launch.config().multiprocessors);
  return launch.WithSmem("cumsum.streamed", kKernel, grid, kStreamThreads, kSmem, d_in, d_out,
                         row0, cols, tiles_per_row, tiles, kStreamSlots, kSpinMaxNs, d_carry,
                         d_workspace);
}

}  // namespace gpupipe::kernels::cuda::detail

// cumsum of float32 rows: the streamed look-back scan (contract in detail/scan_lookback.cuh;
// dispatch, batching and the workspace reset in cumsum.cu).
//
// A persistent, warp-specialized variant of cumsum.cu's LookbackKernel (a block a tile): one
// block an SM, each taking tile after tile from the counter. Three roles, so that no warp
// waits on another SM while it could be loading or scanning:
//  - the producer warp (StreamedScanBlock::Produce) claims the block's tiles (counter order, so
//    every tile a block waits for is held by a running block) and copies each whole, aligned
//    tile into a ring of `slots` shared-memory slots with one cp.async.bulk (anything else the
//    compute warps read from global memory);
//  - the compute warps (Compute) scan tile u in registers, publish its aggregate, mail its total
//    to the look-back warp, and then store tile u - kStreamLag, whose prefix the look-back warp
//    found while they scanned the tiles after it (scanned tiles wait in registers);
//  - the look-back warp (LookBack) finds each tile's exclusive prefix. It knows the inclusive
//    prefix of the block's own previous tile, so it never reads further back than that tile
//    (about `slots` grids of tiles, read in one round of kStreamWindows windows): it waits for
//    the aggregates of the tiles claimed before this one, never for a chain of prefixes.
//
// Barriers: three BarrierRings (detail/barrier_ring.cuh states their protocol, the observed
// arrivals and why no phase is skipped). Tile u is the block's u-th, use u of each ring.
//  - slots (kBulkCopy, `slots` slots): producer, the producer warp's 32 lanes (lane 0 writes
//    slot_* and, for a staged tile, commits with the tile's copy); consumers, the compute
//    threads. A slot says the block has no more tiles with slot_tile < 0.
//  - mail (kStreamMailboxes slots, full: `scanned`): producer, compute thread 0, which writes
//    mail_tile / mail_total of tile u (mail_tile < 0: no more tiles); consumer, the look-back
//    warp's lane 0, which alone waits for the mail, reads it and hands it to the other lanes.
//  - answers (kStreamMailboxes slots, full: `prefixed`, empty: `consumed`): producer, the
//    look-back warp's lane 0, which writes mail_prefix of tile u; consumers, the compute threads,
//    each releasing after it read the prefix to store tile u.
// The mail ring's empty barriers are the answers ring's full ones: answering tile u's mail is
// the look-back's release of it, since lane 0 read the mail before. So thread 0 rewrites mailbox
// b for tile u only after tile u - kStreamMailboxes was answered; that wait never blocks, since
// thread 0 already waited for the answer to tile u - kStreamLag - 1 (answers come in tile order)
// to store that tile, and kStreamLag < kStreamMailboxes.
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
  RingBarriers<kStreamMaxSlots> slots;
  uint64_t scanned[kStreamMailboxes];   // the mail ring's full barriers
  uint64_t prefixed[kStreamMailboxes];  // the answers ring's full, the mail ring's empty
  uint64_t consumed[kStreamMailboxes];  // the answers ring's empty barriers
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

// One block of the streamed scan: the kernel's arguments, its shared memory and its rings, and
// one function a role. Constructing it is block-collective (one thread initializes the
// barriers; shared memory only, so it may precede the PDL wait).
template <typename In>
class StreamedScanBlock {
 public:
  using Acc = typename ItemTraits<In>::Acc;
  using Bits = typename ItemTraits<In>::Bits;
  using Out = typename OutOf<In>::type;
  using Status = TileStatus<Acc>;

 private:
  static constexpr int kLag = kStreamLag;
  static constexpr int kVec = 16 / sizeof(Bits);  // elements a 16-byte vector
  static constexpr int kVecs = kStreamItems / kVec;  // a compute thread's vectors a tile
  static constexpr int kWarpSpan = 32 * kStreamItems;  // a compute warp's elements a tile
  static constexpr uint32_t kTileBytes = static_cast<uint32_t>(kStreamedTile * sizeof(In));
  static_assert(kStreamItems % kVec == 0 && (kVec * sizeof(Out)) % 16 == 0);

 public:
  __device__ StreamedScanBlock(unsigned char* s_raw, const In* d_in, Out* d_out, int64_t row0,
                               int64_t cols, int64_t tiles_per_row, int64_t tiles, int slots,
                               unsigned spin_max_ns, Acc* d_carry, void* d_workspace)
      : sm_(*reinterpret_cast<StreamSmem<In>*>(s_raw)),
        s_data_(s_raw + kStreamDataOffset<In>),
        d_in_(d_in),
        d_out_(d_out),
        row0_(row0),
        cols_(cols),
        tiles_per_row_(tiles_per_row),
        tiles_(tiles),
        slots_(slots),
        spin_max_ns_(spin_max_ns),
        d_carry_(d_carry),
        d_counter_(static_cast<unsigned long long*>(d_workspace)),
        status_(Status::Make(static_cast<char*>(d_workspace), tiles)) {
    if (threadIdx.x == 0) {
      SlotRing().Init(slots_, 32, kStreamComputeThreads);
      MailRing().InitFull(kStreamMailboxes, 1);
      AnswerRing().Init(kStreamMailboxes, 1, kStreamComputeThreads);
      FenceRingInit();
    }
    __syncthreads();
  }

  // The producer warp: claims tiles until none is left and puts each into the next slot,
  // staged or described, then one slot that says there are no more.
  __device__ __forceinline__ void Produce() const {
    const int lane = threadIdx.x & 31;
    const auto ring = SlotRing();
    RingState st(slots_);
    for (bool more = true; more; st.Advance()) {
      ring.ProducerAcquire(st);  // the compute warps are done with the slot's previous tile
      unsigned long long claimed = 0;
      if (lane == 0) claimed = atomicAdd(d_counter_, 1ull);
      const auto tile = static_cast<long long>(__shfl_sync(kFullMask, claimed, 0));
      more = tile < tiles_;
      bool staged = false;
      const In* src = nullptr;
      int64_t row = 0, j = 0;
      if (more) {
        Locate(tile, &row, &j);
        src = d_in_ + (row0_ + row) * cols_ + j * kStreamedTile;
        staged = (j + 1) * kStreamedTile <= cols_ && Aligned16(src);
      }
      const int s = st.index();
      if (lane == 0) {
        sm_.slot_tile[s] = more ? tile : -1;
        sm_.slot_row[s] = row;
        sm_.slot_j[s] = j;
        sm_.slot_staged[s] = staged ? 1 : 0;
      }
      if (lane == 0 && staged) {
        ring.ProducerCommit(st, SlotData(s), src, kTileBytes);
      } else {
        ring.ProducerCommit(st);
      }
    }
    ring.ProducerTail(st);
  }

  // The look-back warp: for each mailed tile, its exclusive prefix, published as the tile's
  // inclusive prefix and answered to the compute warps.
  __device__ __forceinline__ void LookBack() const {
    const int lane = threadIdx.x & 31;
    const auto mail = MailRing();
    const auto answers = AnswerRing();
    int64_t known = -1;  // the block's previous tile
    Acc known_inclusive = Acc(0);
    RingState st(kStreamMailboxes);
    for (;; st.Advance()) {
      // Lane 0 alone waits for the mail and reads it (and the carry), and hands it to the
      // other lanes: its answer then follows every read of the mailbox this warp makes.
      const int b = st.index();
      long long mailed_tile = 0;
      Acc mailed_total = Acc(0);
      if (lane == 0) {
        mail.ConsumerWait(st);
        mailed_tile = sm_.mail_tile[b];
        mailed_total = sm_.mail_total[b];
      }
      const long long tile = __shfl_sync(kFullMask, mailed_tile, 0);
      if (tile < 0) break;
      const Acc total = __shfl_sync(kFullMask, mailed_total, 0);
      int64_t row, j;
      Locate(tile, &row, &j);
      Acc prefix;
      if (j == 0) {
        Acc carry = Acc(0);
        if (lane == 0 && d_carry_ != nullptr) carry = __ldcg(d_carry_ + row0_ + row);
        prefix = __shfl_sync(kFullMask, carry, 0);
      } else {
        const int64_t row_first = tile - j;
        prefix = StreamLookBack<Acc, kStreamWindows>(status_, tile, row_first,
                                                     known >= row_first ? known : -1,
                                                     known_inclusive, spin_max_ns_);
      }
      const Acc inclusive = prefix + total;
      if (lane == 0) {
        status_.Publish(tile, inclusive, kFlagPrefix);
        if (d_carry_ != nullptr && j == tiles_per_row_ - 1) d_carry_[row0_ + row] = inclusive;
        // Every compute thread has read the mailbox's previous prefix (long since: they store
        // a tile kStreamLag tiles after scanning it).
        answers.ProducerAcquire(st);
        sm_.mail_prefix[b] = prefix;
        answers.ProducerCommit(st);  // also the mail ring's release of this mail
      }
      known = tile;
      known_inclusive = inclusive;
    }
    if (lane == 0) answers.ProducerTail(st);  // st: the no-more-tiles mail, not answered
  }

  // The compute warps: tile after tile from the slots, scanned, mailed to the look-back warp,
  // and stored kStreamLag tiles later with the prefix it answered.
  __device__ __forceinline__ void Compute() const {
    const int warp = threadIdx.x >> 5;
    const auto slots = SlotRing();
    // pend[l] holds tile u - kLag + l scanned within its tile (inclusive), waiting for its
    // prefix; each tile is stored kLag tiles after it was scanned.
    Acc pend[kLag][kVecs][kVec];
    Out* pend_out[kLag];
    int64_t pend_valid[kLag];
    int64_t u = 0;
    RingState st(slots_);
    for (bool more = true; more; ++u, st.Advance()) {
      const int s = st.index();
      slots.ConsumerWait(st);
      const long long tile = sm_.slot_tile[s];
      const bool staged = sm_.slot_staged[s] != 0;
      const int64_t row = sm_.slot_row[s];
      const int64_t j = sm_.slot_j[s];
      more = tile >= 0;
      Acc v[kVecs][kVec];
      int64_t valid = 0;
      if (more) valid = LoadTile(s, staged, row, j, v);
      slots.ConsumerRelease(st);  // done reading the slot

      const Acc tile_total = more ? ScanTile(v, tile, j, static_cast<int>(u & 1)) : Acc(0);
      if (threadIdx.x == 0) Mail(u, more ? tile : -1, tile_total);

      if (!more) {  // no more tiles: store every pending one, oldest first
#pragma unroll
        for (int l = 0; l < kLag; ++l) {
          if (u - kLag + l >= 0) StoreTile(pend[l], pend_out[l], pend_valid[l], u - kLag + l);
        }
        continue;
      }
      if (u >= kLag) StoreTile(pend[0], pend_out[0], pend_valid[0], u - kLag);
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
      pend_out[kLag - 1] = d_out_ + (row0_ + row) * cols_ + j * kStreamedTile +
                           static_cast<int64_t>(warp) * kWarpSpan;
      pend_valid[kLag - 1] = valid;
    }
    // u tiles went through the slots and the mail (the last saying there are no more), and
    // u - 1 through the answers.
    slots.ConsumerTail(st);
    if (threadIdx.x == 0) MailRing().ProducerTail(RingState::At(u, kStreamMailboxes));
    AnswerRing().ConsumerTail(RingState::At(u - 1, kStreamMailboxes));
  }

 private:
  // ---- the compute warps' steps -----------------------------------------------------------------

  // This warp's span of tile j of `row` into v, from slot s when the tile is staged there;
  // returns how many of the span's elements exist.
  __device__ __forceinline__ int64_t LoadTile(int s, bool staged, int64_t row, int64_t j,
                                              Acc (&v)[kVecs][kVec]) const {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int64_t warp_first = j * kStreamedTile + static_cast<int64_t>(warp) * kWarpSpan;
    const int64_t valid = cols_ - warp_first;
    if (staged) {
      const auto* src = reinterpret_cast<const uint4*>(SlotData(s)) + warp * (kWarpSpan / kVec);
#pragma unroll
      for (int k = 0; k < kVecs; ++k) {
        const uint4 raw = src[k * 32 + lane];
        Bits e[kVec];
        memcpy(e, &raw, sizeof(raw));
#pragma unroll
        for (int i = 0; i < kVec; ++i) v[k][i] = ItemTraits<In>::ToAcc(e[i]);
      }
    } else {
      LoadSpanElements<In>(d_in_ + (row0_ + row) * cols_ + warp_first, valid, v);
    }
    return valid;
  }

  // Scans tile `tile` (index j in its row) in place across the compute warps, exchanging warp
  // totals through buffer b of warp_totals (alternate tiles alternate buffers, so one named
  // barrier a tile suffices); thread 0 publishes the aggregate. Returns the tile's total.
  __device__ __forceinline__ Acc ScanTile(Acc (&v)[kVecs][kVec], long long tile, int64_t j,
                                          int b) const {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    Acc vec_base[kVecs];
    const Acc warp_total = ScanSpan(v, vec_base);
    if (lane == 0) sm_.warp_totals[b][warp] = warp_total;
    ComputeBarrier();
    Acc warp_prefix = Acc(0);
    Acc tile_total = Acc(0);
#pragma unroll
    for (int w = 0; w < kStreamComputeWarps; ++w) {
      const Acc t = sm_.warp_totals[b][w];
      if (w < warp) warp_prefix += t;
      tile_total += t;
    }
    if (threadIdx.x == 0 && j > 0) status_.Publish(tile, tile_total, kFlagAggregate);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const Acc add = warp_prefix + vec_base[k];
#pragma unroll
      for (int i = 0; i < kVec; ++i) v[k][i] += add;
    }
    return tile_total;
  }

  // Thread 0: mails the block's u-th tile (-1: no more tiles) and its total to the look-back warp.
  __device__ __forceinline__ void Mail(int64_t u, long long tile, Acc total) const {
    const auto mail = MailRing();
    const RingState st = RingState::At(u, kStreamMailboxes);
    mail.ProducerAcquire(st);  // tile u - kStreamMailboxes was answered (the notes above)
    sm_.mail_tile[st.index()] = tile;
    sm_.mail_total[st.index()] = total;
    mail.ProducerCommit(st);
  }

  // Stores the block's v-th tile, scanned within itself into x, once the look-back warp has
  // answered its prefix.
  __device__ __forceinline__ void StoreTile(const Acc (&x)[kVecs][kVec], Out* out,
                                            int64_t out_valid, int64_t v) const {
    const auto answers = AnswerRing();
    const RingState st = RingState::At(v, kStreamMailboxes);
    answers.ConsumerWait(st);
    const Acc prefix = sm_.mail_prefix[st.index()];
    answers.ConsumerRelease(st);  // done with the mailbox's prefix
    StoreSpan<Out, kVecs, kVec>(out, out_valid, [&](int k, int i) { return prefix + x[k][i]; });
  }

  // ---- the rings and the data ----------------------------------------------------------------
  __device__ __forceinline__ BarrierRing<RingFill::kBulkCopy> SlotRing() const {
    return BarrierRing<RingFill::kBulkCopy>(sm_.slots);
  }
  __device__ __forceinline__ BarrierRing<RingFill::kGeneric> MailRing() const {
    return BarrierRing<RingFill::kGeneric>(sm_.scanned, sm_.prefixed);
  }
  __device__ __forceinline__ BarrierRing<RingFill::kGeneric> AnswerRing() const {
    return BarrierRing<RingFill::kGeneric>(sm_.prefixed, sm_.consumed);
  }
  __device__ __forceinline__ unsigned char* SlotData(int s) const {
    return s_data_ + s * kTileBytes;
  }
  // Tile `tile` of the batch is tile *j of row *row.
  __device__ __forceinline__ void Locate(int64_t tile, int64_t* row, int64_t* j) const {
    *row = tile / tiles_per_row_;
    *j = tile - *row * tiles_per_row_;
  }

  StreamSmem<In>& sm_;
  unsigned char* s_data_;
  const In* d_in_;
  Out* d_out_;
  int64_t row0_;
  int64_t cols_;
  int64_t tiles_per_row_;
  int64_t tiles_;
  int slots_;
  unsigned spin_max_ns_;
  Acc* d_carry_;
  unsigned long long* d_counter_;
  Status status_;
};

template <typename In>
__global__ void __launch_bounds__(kStreamThreads, 1)
    StreamedLookbackKernel(const In* d_in, typename OutOf<In>::type* d_out, int64_t row0,
                           int64_t cols, int64_t tiles_per_row, int64_t tiles, int slots,
                           unsigned spin_max_ns, typename ItemTraits<In>::Acc* d_carry,
                           void* d_workspace) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // Built for a target without bulk copies: the host never launches it there
  // (StreamedLookbackRuns). The names only the body below uses count as used.
  (void)kStreamProducerWarp;
  (void)kStreamLookbackWarp;
  (void)kStreamWindows;
  (void)&ComputeBarrier;
  __trap();
#else
  extern __shared__ __align__(128) unsigned char s_raw[];
  const StreamedScanBlock<In> block(s_raw, d_in, d_out, row0, cols, tiles_per_row, tiles, slots,
                                    spin_max_ns, d_carry, d_workspace);
  detail::WaitForPrimaryGrids();
  const int warp = threadIdx.x >> 5;
  if (warp == kStreamProducerWarp) {
    block.Produce();
  } else if (warp == kStreamLookbackWarp) {
    block.LookBack();
  } else {
    block.Compute();
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

// A ring of shared-memory slots handed from producer threads to consumer threads through two
// mbarriers a slot, after CUTLASS's PipelineTmaAsync (include/cutlass/pipeline/sm90_pipeline.hpp):
// every role walks the ring with its own RingState, and the BarrierRing's paired verbs carry
// the protocol:
//
//   producer: ProducerAcquire(st); write slot st.index(); ProducerCommit(st); st.Advance();
//             ... after its last commit: ProducerTail(st)
//   consumer: ConsumerWait(st); read slot st.index(); ConsumerRelease(st); st.Advance();
//             ... after its last release: ConsumerTail(st)
//
// Every mbarrier ring of the kernels is one of these: the bulk stager (staging/bulk.cuh) and the
// streamed scan's tile slots and mailboxes (cumsum_streamed.cu). The `pipeline` staging strategy
// keeps its ring inside libcu++'s cuda::pipeline (staging/pipeline_partitioned.cuh), which walks
// the same ring but observes none of its own arrivals (below).
//
// Protocol. Use j of a ring of S slots (the j-th item through it since initialization) takes slot
// s = j % S in that slot's phase p = j / S, of both of the slot's barriers; a wait for phase p is
// a parity wait for p & 1. RingState holds (s, p) and advances it; nothing else decides them.
//  - full[s] (arrival count: the producer threads; on a kBulkCopy ring also the bytes of the
//    copies of the use) completes phase p when every producer thread has committed use j and its
//    copy has landed. Consumers wait for it before reading the slot: the producers' writes before
//    their commit (a release arrival) are visible after the wait (an acquire).
//  - empty[s] (arrival count: the consumer threads) completes phase p when every consumer has
//    released use j, each after its own last read of the slot. Producers wait for phase p - 1
//    before they write use j into the slot. On a kBulkCopy ring the producer then fences the
//    async proxy, so that the bulk copy's write is ordered after the consumers' reads, which
//    were made through the generic proxy and acquired by the wait.
//  - Observed arrivals (the rule compute-sanitizer synccheck checks): every thread observes the
//    completion of a barrier phase it arrived on before it arrives on that barrier again, and
//    again before it exits. ProducerAcquire observes the producer's own arrival on full[s] phase
//    p - 1, ConsumerRelease the consumer's own arrival on empty[s] phase p - 1. Both phases are
//    already complete when the verb runs (full[s] p - 1 before the consumers released p - 1,
//    which ProducerAcquire just waited for; empty[s] p - 1 before the producers committed p,
//    which this consumer waited for), so each costs one try_wait. ProducerTail and ConsumerTail
//    observe the last phase of every slot the thread arrived on, so that no arrival is
//    unobserved and no copy outstanding when the block exits.
//  - No ABA. A parity wait cannot tell phase p from phase p + 2, so no thread may fall two phases
//    behind on a barrier it waits on; none can, since the phase after the awaited one always
//    needs something the waiting thread does only after its wait. A consumer waiting for full[s]
//    phase p: phase p + 1 needs the producers' commit of use j + S, after their acquire, which
//    needs this consumer's release of use j. A producer waiting for empty[s] phase p - 1 (its
//    acquire of use j): phase p needs every consumer's release of use j, after their wait for
//    full[s] phase p, which needs this producer's commit of use j. An observing or tail wait for
//    a phase of a barrier the thread arrives on: the next phase needs the thread's next arrival.
//    This needs every thread of a role to take part in every use (the arrival counts), and holds
//    for any S and any number of uses.
// Several threads of one role each call the verbs (each is counted once per phase); a thread
// that both produces and consumes (the bulk stager's leader) calls both roles' verbs.
#pragma once

#include <cuda/ptx>

#include <cstdint>

namespace gpupipe::kernels::cuda::detail {

// How producers fill a slot: plain stores (kGeneric), or cp.async.bulk copies that complete on
// full[s] with their bytes (kBulkCopy: the producer's acquire fences the async proxy).
enum class RingFill { kGeneric, kBulkCopy };

template <RingFill kFill>
class BarrierRing;

// One role's position in a ring of `stages` slots: use j is slot index() = j % stages in phase
// phase() = j / stages. The stage count may be a run-time value. Phases are ints: a block's uses
// of a ring (tiles) number far fewer than 2^31.
class RingState {
 public:
  // Use 0: slot 0, phase 0.
  __device__ __forceinline__ explicit RingState(int stages)
      : index_(0), phase_(0), stages_(stages) {}

  // The position of use j.
  __device__ __forceinline__ static RingState At(int64_t j, int stages) {
    return RingState(static_cast<int>(j % stages), static_cast<int>(j / stages), stages);
  }

  __device__ __forceinline__ int index() const { return index_; }
  __device__ __forceinline__ int phase() const { return phase_; }
  __device__ __forceinline__ int stages() const { return stages_; }

  // To the next use: the next slot, and the next phase when the index wraps.
  __device__ __forceinline__ void Advance() {
    if (++index_ == stages_) {
      index_ = 0;
      ++phase_;
    }
  }

  // The same slot one lap later (use j + stages).
  __device__ __forceinline__ RingState NextLap() const {
    return RingState(index_, phase_ + 1, stages_);
  }

 private:
  __device__ __forceinline__ RingState(int index, int phase, int stages)
      : index_(index), phase_(phase), stages_(stages) {}

  int index_;
  int phase_;  // -1 only inside BarrierRing's tails: a slot with no use one lap back
  int stages_;

  template <RingFill>
  friend class BarrierRing;
};

// The barriers of a ring of up to kMaxSlots slots, for a kernel's shared storage.
template <int kMaxSlots>
struct RingBarriers {
  alignas(8) uint64_t full[kMaxSlots];
  alignas(8) uint64_t empty[kMaxSlots];
};

// Makes barriers initialized by this thread visible to the async proxy (bulk copies complete on
// them); then a block barrier (__syncthreads) before any thread uses them.
__device__ __forceinline__ void FenceRingInit() {
  ::cuda::ptx::fence_mbarrier_init(::cuda::ptx::sem_release, ::cuda::ptx::scope_cluster);
}

// Waits until phase `phase` (>= 0) of `bar` has completed.
__device__ __forceinline__ void WaitPhase(uint64_t* bar, int phase) {
  const uint32_t parity = static_cast<uint32_t>(phase & 1);
  while (!::cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

// The verbs over one ring's full[] and empty[] barriers (shared memory). A view: copies refer to
// the same barriers. The barriers of two rings may be shared where one ring's release is the
// other's commit (the streamed scan's mailboxes); each barrier is initialized once.
template <RingFill kFill>
class BarrierRing {
 public:
  __device__ BarrierRing(uint64_t* full, uint64_t* empty) : full_(full), empty_(empty) {}
  template <int kMaxSlots>
  __device__ explicit BarrierRing(RingBarriers<kMaxSlots>& barriers)
      : BarrierRing(barriers.full, barriers.empty) {}

  // Initialization, by one thread, before FenceRingInit and the block barrier: full[0, stages)
  // counts `producers` arrivals a phase, empty[0, stages) `consumers`.
  __device__ __forceinline__ void Init(int stages, uint32_t producers, uint32_t consumers) const {
    InitFull(stages, producers);
    InitEmpty(stages, consumers);
  }
  __device__ __forceinline__ void InitFull(int stages, uint32_t producers) const {
    for (int s = 0; s < stages; ++s) ::cuda::ptx::mbarrier_init(&full_[s], producers);
  }
  __device__ __forceinline__ void InitEmpty(int stages, uint32_t consumers) const {
    for (int s = 0; s < stages; ++s) ::cuda::ptx::mbarrier_init(&empty_[s], consumers);
  }

  // ---- producer ---------------------------------------------------------------------------------

  // Waits until slot st.index() may take use st: every consumer released the slot's previous use
  // (none on the first lap). Also observes this thread's own commit of that use.
  __device__ __forceinline__ void ProducerAcquire(const RingState& st) const {
    if (st.phase() > 0) {
      WaitPhase(&empty_[st.index()], st.phase() - 1);
      WaitPhase(&full_[st.index()], st.phase() - 1);
      if constexpr (kFill == RingFill::kBulkCopy) {
        ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared);
      }
    }
  }

  // This thread's part of use st is written (its stores before the call are released to the
  // consumers). On a kBulkCopy ring: for a producer thread that copies nothing into the slot.
  __device__ __forceinline__ void ProducerCommit(const RingState& st) const {
    (void)::cuda::ptx::mbarrier_arrive(&full_[st.index()]);
  }

  // kBulkCopy: commits use st with one bulk copy of `bytes` (a multiple of 16) from global
  // d_src to shared s_dst (both 16-byte aligned); the phase completes when its bytes have landed.
  __device__ __forceinline__ void ProducerCommit(const RingState& st, void* s_dst,
                                                 const void* d_src, uint32_t bytes) const {
    static_assert(kFill == RingFill::kBulkCopy, "bulk copies complete on a kBulkCopy ring");
    uint64_t* bar = &full_[st.index()];
    (void)::cuda::ptx::mbarrier_arrive_expect_tx(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta,
                                                 ::cuda::ptx::space_shared, bar, bytes);
    ::cuda::ptx::cp_async_bulk(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, s_dst, d_src,
                               bytes, bar);
  }

  // After this thread's last commit (st: the position after it): observes the last phase of
  // every slot's full barrier it arrived on.
  __device__ __forceinline__ void ProducerTail(const RingState& st) const { Tail(full_, st); }

  // ---- consumer ---------------------------------------------------------------------------------

  // Waits until use st is in slot st.index().
  __device__ __forceinline__ void ConsumerWait(const RingState& st) const {
    WaitPhase(&full_[st.index()], st.phase());
  }

  // This thread is done reading use st (its reads before the call are ordered before the
  // producers' next write of the slot). First observes its own release of the slot's previous
  // use.
  __device__ __forceinline__ void ConsumerRelease(const RingState& st) const {
    if (st.phase() > 0) WaitPhase(&empty_[st.index()], st.phase() - 1);
    (void)::cuda::ptx::mbarrier_arrive(&empty_[st.index()]);
  }

  // After this thread's last release (st: the position after it): observes the last phase of
  // every slot's empty barrier it arrived on.
  __device__ __forceinline__ void ConsumerTail(const RingState& st) const { Tail(empty_, st); }

 private:
  // Waits for uses j - S .. j - 1 of `bars` (those that exist), j being st's use: the same slot
  // one lap back, then S positions forward.
  __device__ __forceinline__ static void Tail(uint64_t* bars, const RingState& st) {
    RingState t(st.index(), st.phase() - 1, st.stages());
#pragma unroll 1
    for (int k = 0; k < st.stages(); ++k, t.Advance()) {
      if (t.phase() >= 0) WaitPhase(&bars[t.index()], t.phase());
    }
  }

  uint64_t* full_;
  uint64_t* empty_;
};

}  // namespace gpupipe::kernels::cuda::detail

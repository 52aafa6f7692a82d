// Every call kernels_bench makes into the kernels library, for every element type the op takes
// (the untyped host API of kernels/cuda/ops.h: a device pointer plus an ElementType). The
// existing ops use kernels/cuda/ops.h; the new ops use the headers named in the shared API
// decisions (kernels/cuda/{cumsum,histogram,convolve,topk}.h) and are compiled only where
// those headers exist. Adapt the calls here when a signature changes.
#include "bench/kernels/gpupipe_ops.h"

#include "kernels/common/element_type.h"
#include "kernels/common/elementwise_program.h"
#include "kernels/common/row_ops.h"

#if __has_include("kernels/cuda/cumsum.h")
#include "kernels/cuda/cumsum.h"
#define GPUPIPE_BENCH_HAVE_CUMSUM 1
#endif
#if __has_include("kernels/cuda/histogram.h")
#include "kernels/cuda/histogram.h"
#define GPUPIPE_BENCH_HAVE_HISTOGRAM 1
#endif
#if __has_include("kernels/cuda/convolve.h")
#include "kernels/cuda/convolve.h"
#define GPUPIPE_BENCH_HAVE_CONVOLVE 1
#endif
#if __has_include("kernels/cuda/topk.h")
#include "kernels/cuda/topk.h"
#define GPUPIPE_BENCH_HAVE_TOPK 1
#endif

namespace gpupipe::bench {

namespace kc = kernels::cuda;
using kernels::ElementType;

const std::vector<StagingVariant>& StagingVariants() {
  static const std::vector<StagingVariant> kVariants = {
      {kc::Staging::kDirect, "direct", false},
      {kc::Staging::kPipeline, "pipeline", true},
      {kc::Staging::kPipelineThread, "pipeline-thread", true},
      {kc::Staging::kPrimitives, "primitives", true},
      {kc::Staging::kBulk, "bulk", true},
  };
  return kVariants;
}

bool KernelOpBuilt(KernelOp op) {
  switch (op) {
    case KernelOp::kCumsum:
#ifdef GPUPIPE_BENCH_HAVE_CUMSUM
      return true;
#else
      return false;
#endif
    case KernelOp::kHistogram:
#ifdef GPUPIPE_BENCH_HAVE_HISTOGRAM
      return true;
#else
      return false;
#endif
    case KernelOp::kConvolve:
#ifdef GPUPIPE_BENCH_HAVE_CONVOLVE
      return true;
#else
      return false;
#endif
    case KernelOp::kTopk:
#ifdef GPUPIPE_BENCH_HAVE_TOPK
      return true;
#else
      return false;
#endif
    default:
      return true;
  }
}

bool KernelOpAccepts(KernelOp op, ElementType type) {
  if (kernels::IsFloatingPoint(type)) return true;
  if (type != ElementType::kInt32) return false;
  switch (op) {
    case KernelOp::kAffine:  // as add: the integer-closed opcodes only
    case KernelOp::kSum:
    case KernelOp::kMin:
    case KernelOp::kMax:
    case KernelOp::kArgmax:
    case KernelOp::kCumsum:
    case KernelOp::kHistogram:
    case KernelOp::kTopk: return true;
    default: return false;
  }
}

int64_t KernelOpOutputElements(const KernelOpArgs& a) {
  switch (a.op) {
    case KernelOp::kSum:
    case KernelOp::kMin:
    case KernelOp::kMax:
    case KernelOp::kArgmax: return a.rows;
    case KernelOp::kHistogram: return a.rows * a.bins;
    case KernelOp::kTopk: return a.rows * a.k;
    default: return a.rows * a.cols;  // elementwise, softmax, normalize, cumsum, convolve same
  }
}

ElementType KernelOpOutputType(const KernelOpArgs& a) {
  switch (a.op) {
    case KernelOp::kArgmax:
    case KernelOp::kHistogram: return ElementType::kInt64;
    case KernelOp::kSum:
    case KernelOp::kCumsum:
      return a.type == ElementType::kInt32 ? ElementType::kInt64 : a.type;
    default: return a.type;
  }
}

int KernelOpOutputElementBytes(const KernelOpArgs& a) {
  return static_cast<int>(kernels::ElementSize(KernelOpOutputType(a)));
}

cudaError_t RunKernelOp(const KernelOpArgs& a, const void* d_in, void* d_out, void* d_ws,
                        size_t ws_bytes, const kc::LaunchConfig& config, int* kernel_count) {
  const kernels::EwProgram none;
  switch (a.op) {
    case KernelOp::kAffine: {
      // int32 takes kAffine only as add (a = 1).
      const double alpha = a.type == ElementType::kInt32 ? 1.0 : 2.0;
      kernels::EwProgram p;
      p.Append({kernels::EwOpcode::kAffine, alpha, 1.0});
      return kc::Elementwise(d_in, a.type, d_out, a.rows * a.cols, p, config,
                             kernel_count);
    }
    case KernelOp::kSum:
      return kc::RowSum(d_in, a.type, d_out, a.rows, a.cols, none, d_ws, ws_bytes, config,
                        kernel_count);
    case KernelOp::kMin:
    case KernelOp::kMax:
      return kc::RowReduce(d_in, a.type, d_out, a.rows, a.cols,
                           a.op == KernelOp::kMin ? kernels::RowReduceKind::kMin
                                                  : kernels::RowReduceKind::kMax,
                           none, d_ws, ws_bytes, config, kernel_count);
    case KernelOp::kSoftmax:
      return kc::RowSoftmax(d_in, a.type, d_out, a.rows, a.cols, none, d_ws,
                            ws_bytes, config, kernel_count);
    case KernelOp::kArgmax:
      return kc::RowArgmax(d_in, a.type, static_cast<int64_t*>(d_out), a.rows,
                           a.cols, none, d_ws, ws_bytes, config, kernel_count);
    case KernelOp::kStandardize:
      return kc::RowNormalize(d_in, a.type, d_out, a.rows, a.cols,
                              kernels::RowNormalizeKind::kStandardize, none, d_ws, ws_bytes,
                              config, kernel_count);
    case KernelOp::kL2Normalize:
      return kc::RowNormalize(d_in, a.type, d_out, a.rows, a.cols,
                              kernels::RowNormalizeKind::kL2Normalize, none, d_ws, ws_bytes,
                              config, kernel_count);
    case KernelOp::kCumsum:
#ifdef GPUPIPE_BENCH_HAVE_CUMSUM
      // The whole row in one call: no carry.
      return kc::RowCumsum(d_in, a.type, d_out, a.rows, a.cols,
                           /*d_carry=*/nullptr, d_ws, ws_bytes, config, kernel_count);
#else
      break;
#endif
    case KernelOp::kHistogram:
#ifdef GPUPIPE_BENCH_HAVE_HISTOGRAM
      return kc::RowHistogram(d_in, a.type, static_cast<int64_t*>(d_out), a.rows,
                              a.cols, a.bins, a.lo, a.hi, /*accumulate=*/false, d_ws, ws_bytes,
                              config, kernel_count);
#else
      break;
#endif
    case KernelOp::kConvolve:
#ifdef GPUPIPE_BENCH_HAVE_CONVOLVE
    {
      // The kernel takes taps as doubles (rounded to float32 for float32 data).
      const std::vector<double> taps(a.taps.begin(), a.taps.end());
      return kc::RowConvolve(d_in, a.type, d_out, a.rows, a.cols, taps.data(),
                             static_cast<int32_t>(taps.size()), kc::ConvolveMode::kSame, d_ws,
                             ws_bytes, config, kernel_count);
    }
#else
      break;
#endif
    case KernelOp::kTopk:
#ifdef GPUPIPE_BENCH_HAVE_TOPK
      return kc::RowTopk(d_in, a.type, d_out, a.rows, a.cols, a.k, d_ws,
                         ws_bytes, config, kernel_count);
#else
      break;
#endif
  }
  return cudaErrorNotSupported;
}

}  // namespace gpupipe::bench

// Host API of the cumsum kernels: np.cumsum(x, axis=-1), an inclusive scan of each row.
// The contract of kernels/cuda/ops.h applies (enqueue only on config.stream, no allocation,
// no synchronization, invalid arguments return cudaErrorInvalidValue and enqueue nothing,
// PDL on every launch with config.pdl). d_in and d_out need only their element alignment;
// 16-byte vector loads are used wherever a tile happens to be 16-byte aligned.
//
// Types (NumPy's, with float16 accumulated in float32):
//   in_type    d_out      accumulator / d_carry element
//   float32    float32    float
//   float64    float64    double
//   float16    float16    float (rounded to float16 once per output)
//   int32      int64      int64 (exact; wraps as two's complement like NumPy's int64)
// Accuracy (floats): each output's error against the exact prefix sum is a small multiple of
// eps(accumulator) * sum_{j<=i} |x_j| (tiles are summed in trees and chained through their
// prefixes), plus the final rounding to float16 for float16 output.
//
// d_carry (nullable): `rows` accumulator values, added to every output of their row and then
// replaced by the row's total (the old carry included). Scanning a row in consecutive pieces
// with one carry (zeroed before the first) therefore equals scanning it whole, up to float
// rounding. The carry is read and written by the kernels in stream order, like d_out.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/element_type.h"
#include "kernels/cuda/ops.h"

namespace gpupipe::kernels::cuda {

// Workspace RowCumsum needs for rows x cols (a function of the shape only; 0 for shapes that
// need none). The single-pass scan of long rows keeps one status record per tile of 8192
// or 16384 elements there, for at most kCumsumMaxTilesPerLaunch tiles (or one row's tiles, if
// more), and the counter its blocks take their tiles from.
size_t RowCumsumWorkspaceBytes(int64_t rows, int64_t cols);

// Inclusive scan of each of `rows` rows of `cols` elements (rows, cols >= 1) into d_out (which
// must not overlap d_in). Kernels, by shape:
//   cols <= 2048:        cumsum.warp-rows: one warp scans a row (many short rows);
//   many longer rows:    cumsum.block-rows: one block scans a row, tile after tile;
//   few long rows:       per batch of rows, cumsum.init and a single-pass scan with decoupled
//                        look-back: tiles claimed in order through an atomic counter, per-tile
//                        aggregate / inclusive-prefix records in d_workspace, reset by
//                        cumsum.init, never by a memset (float32 and float16 pack flag and
//                        value into one 64-bit word). float32: cumsum.streamed, a persistent
//                        block an SM (tiles of 8192 copied in by cp.async.bulk; each block's
//                        look-back stops at its own previous tile); the other types:
//                        cumsum.lookback, a block a tile (16384 for float16, 8192 for float64
//                        and int32).
cudaError_t RowCumsum(const void* d_in, ElementType in_type, void* d_out, int64_t rows,
                      int64_t cols, void* d_carry, void* d_workspace, size_t workspace_bytes,
                      const LaunchConfig& config, int* kernels = nullptr);

// What RowCumsum launches for these arguments (see ops.h, "launch descriptions").
std::vector<KernelLaunchInfo> DescribeRowCumsum(ElementType in_type, int64_t rows, int64_t cols,
                                                const LaunchConfig& config);

// Tiles one look-back launch covers at most: bounds the workspace (20 bytes a tile), so that
// any shape whose rows have at most 2^16 tiles (2^28 elements in tiles of 4096) needs under
// 1.4 MB, within the 2 MiB of RowOpsWorkspaceBytes() that the engine gives every lane.
inline constexpr int64_t kCumsumMaxTilesPerLaunch = int64_t{1} << 16;

}  // namespace gpupipe::kernels::cuda

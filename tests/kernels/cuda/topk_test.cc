// RowTopk vs the CPU reference on fresh random data: exact values (NaN matches NaN, -0 equals
// +0), for every type, k in {1, 16, 32, 33, 1024} where the row allows, edge shapes, ties and
// NaNs, and the split path (few long rows through the workspace).
#include "kernels/cuda/topk.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/topk_reference.h"
#include "tests/kernels/cuda/typed_test_util.h"

namespace gpupipe::kernels::cuda {
namespace {

using testing::DeviceBytes;
using testing::HostArray;

enum class Data { kUniform, kTies, kSpecials, kAscending, kDescending, kPlateau };

const char* DataName(Data d) {
  switch (d) {
    case Data::kUniform: return "uniform";
    case Data::kTies: return "ties";
    case Data::kSpecials: return "specials";
    case Data::kAscending: return "ascending";
    case Data::kDescending: return "descending";
    case Data::kPlateau: return "plateau";
  }
  return "?";
}

class TopkTest : public testing::TypedKernelTest {
 protected:
  // rows x cols values of `data`. kPlateau: each row is 1 but for k copies of 100, k - 1 of them
  // in the first 16-byte vector of k - 1 different lanes of the warp path's first round (rows
  // that start at 16-byte boundaries) and the last one near the row's end, after the warp's
  // threshold has been raised: a threshold above the k-th largest key drops that last copy.
  HostArray Generate(ElementType type, int64_t rows, int64_t cols, int k, Data data) {
    const int64_t n = rows * cols;
    const int64_t lane_stride = 16 / static_cast<int64_t>(ElementSize(type));
    HostArray a(type, n);
    const bool is_float = IsFloatingPoint(type);
    std::uniform_real_distribution<double> uniform(-1000.0, 1000.0);
    std::uniform_int_distribution<int> small(-20, 20);
    std::uniform_int_distribution<int> pick(0, 15);
    for (int64_t i = 0; i < n; ++i) {
      double v = 0;
      switch (data) {
        case Data::kUniform:
          v = type == ElementType::kInt32 ? std::floor(uniform(rng_) * 2e6) : uniform(rng_);
          break;
        case Data::kTies: v = small(rng_); break;
        case Data::kSpecials: {
          const int p = pick(rng_);
          if (is_float && p == 0) {
            v = std::numeric_limits<double>::quiet_NaN();
          } else if (is_float && p == 1) {
            v = (i % 2 != 0) ? -std::numeric_limits<double>::infinity()
                             : std::numeric_limits<double>::infinity();
          } else if (is_float && p == 2) {
            v = (i % 2 != 0) ? -0.0 : 0.0;
          } else if (type == ElementType::kInt32 && p < 2) {
            v = p == 0 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max();
          } else {
            v = small(rng_);
          }
          break;
        }
        case Data::kAscending: v = static_cast<double>(i % 60000) - 30000; break;
        case Data::kDescending: v = 30000 - static_cast<double>(i % 60000); break;
        case Data::kPlateau: {
          const int64_t j = i % cols;
          const bool early = j % lane_stride == 0 && j / lane_stride < k - 1;
          v = early || j == cols - 5 ? 100 : 1;
          break;
        }
      }
      a.Set(i, v);
    }
    return a;
  }

  void Check(ElementType type, int64_t rows, int64_t cols, int k, Data data, int64_t offset = 0,
             bool pdl = true) {
    const std::string what = std::string(ElementTypeName(type)) + " " + std::to_string(rows) +
                             "x" + std::to_string(cols) + " k " + std::to_string(k) + " " +
                             DataName(data) + " offset " + std::to_string(offset);
    SCOPED_TRACE(what);
    const size_t elem = ElementSize(type);
    const HostArray x = Generate(type, rows, cols, k, data);
    HostArray ref(type, rows * k);
    ASSERT_TRUE(cpu::RowTopk(x.data(), type, ref.data(), rows, cols, k));

    DeviceBytes d_in((rows * cols + offset) * elem);
    DeviceBytes d_out((rows * k + offset) * elem);
    const size_t ws_bytes = RowTopkWorkspaceBytes(rows, cols, k, type);
    DeviceBytes d_ws(ws_bytes);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    ASSERT_CUDA_OK(Upload(d_in.get() + offset * elem, x.data(), rows * cols * elem));
    int kernels = -1;
    ASSERT_CUDA_OK(RowTopk(d_in.get() + offset * elem, type, d_out.get() + offset * elem, rows,
                           cols, k, ws_bytes > 0 ? d_ws.get() : nullptr, ws_bytes, Config(pdl),
                           &kernels));
    const std::vector<KernelLaunchInfo> described = DescribeRowTopk(rows, cols, k, type, Config());
    EXPECT_EQ(static_cast<int>(described.size()), kernels);
    HostArray gpu(type, rows * k);
    ASSERT_CUDA_OK(cudaMemcpyAsync(gpu.data(), d_out.get() + offset * elem, rows * k * elem,
                                   cudaMemcpyDeviceToHost, stream_));
    ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
    EXPECT_TRUE(d_out.GuardIntact(0)) << "wrote past the output";
    int reported = 0;
    for (int64_t i = 0; i < rows * k; ++i) {
      const double g = gpu.Get(i);
      const double r = ref.Get(i);
      const bool same = (std::isnan(g) && std::isnan(r)) || g == r;
      if (!same) {
        ADD_FAILURE() << what << ": row " << i / k << " rank " << i % k << " gpu " << g
                      << " ref " << r << " (kernels: " << described.front().name << ")";
        if (++reported >= 5) return;
      }
    }
  }
};

constexpr ElementType kTypes[] = {ElementType::kFloat32, ElementType::kFloat64,
                                  ElementType::kFloat16, ElementType::kInt32};

TEST_F(TopkTest, MatchesReferenceForEveryTypeAndK) {
  struct Shape {
    int64_t rows, cols;
  };
  const Shape shapes[] = {{1, 1}, {1, 5}, {7, 33}, {100, 1000}, {3, 5000}, {64, 1027}};
  for (ElementType type : kTypes) {
    for (int k : {1, 16, 32, 33, 1024}) {
      for (const Shape& s : shapes) {
        if (k > s.cols) continue;
        for (Data d : {Data::kUniform, Data::kTies, Data::kSpecials}) {
          Check(type, s.rows, s.cols, k, d);
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST_F(TopkTest, EveryKUpTo64OnOddRows) {
  for (ElementType type : kTypes) {
    for (int k = 1; k <= 64; k += (k < 40 ? 1 : 7)) {
      Check(type, 9, 301, k, Data::kSpecials);
      if (HasFailure()) return;
    }
  }
}

TEST_F(TopkTest, ManyShortRows) {
  for (ElementType type : kTypes) {
    Check(type, 20000, 1, 1, Data::kUniform);
    Check(type, 5000, 40, 16, Data::kTies);
    Check(type, 3000, 64, 33, Data::kSpecials);
    if (HasFailure()) return;
  }
}

// Rows of many rounds of the warp path, where its threshold has been raised many times: k
// other than 1, 16 and 32, a plateau of equal top values reaching the threshold early, and
// descending rows (every key after the first k is below the threshold).
TEST_F(TopkTest, RaisedThresholdsKeepEveryTopValue) {
  for (ElementType type : kTypes) {
    for (int k : {1, 2, 3, 15, 16, 17, 30, 31, 32, 33}) {
      Check(type, 20, 1000, k, Data::kPlateau);
      Check(type, 8, 5000, k, Data::kDescending);
      Check(type, 6, 3000, k, Data::kTies);
      if (HasFailure()) return;
    }
  }
}

// Few long rows go through the workspace (partials, then the final pass).
TEST_F(TopkTest, SplitLongRows) {
  for (ElementType type : kTypes) {
    for (int k : {1, 16, 32, 33, 1024}) {
      EXPECT_EQ(DescribeRowTopk(2, 300007, k, type, Config()).size(), 2u);
      Check(type, 2, 300007, k, Data::kUniform);
      Check(type, 1, 1 << 20, k, Data::kSpecials);
      Check(type, 8, 50000, k, Data::kAscending);
      if (HasFailure()) return;
    }
  }
}

TEST_F(TopkTest, UnalignedPointersAndNoPdl) {
  for (ElementType type : kTypes) {
    for (int64_t offset : {1, 3}) {
      Check(type, 5, 1001, 16, Data::kUniform, offset);
      Check(type, 5, 1001, 100, Data::kTies, offset, /*pdl=*/false);
      if (HasFailure()) return;
    }
  }
}

TEST_F(TopkTest, RejectsInvalidArguments) {
  DeviceBytes d(4096);
  const LaunchConfig c = Config();
  EXPECT_EQ(RowTopk(d.get(), ElementType::kFloat32, d.get() + 2048, 1, 4, 0, nullptr, 0, c),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowTopk(d.get(), ElementType::kFloat32, d.get() + 2048, 1, 4, 5, nullptr, 0, c),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowTopk(d.get(), ElementType::kInt64, d.get() + 2048, 1, 4, 1, nullptr, 0, c),
            cudaErrorInvalidValue);
  EXPECT_EQ(RowTopk(d.get() + 2, ElementType::kFloat32, d.get() + 2048, 1, 4, 1, nullptr, 0, c),
            cudaErrorInvalidValue);
  // A split plan needs its workspace.
  ASSERT_GT(RowTopkWorkspaceBytes(1, 1 << 20, 16, ElementType::kFloat32), 0u);
  EXPECT_EQ(RowTopk(d.get(), ElementType::kFloat32, d.get() + 2048, 1, 1 << 20, 16, nullptr, 0,
                    c),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace gpupipe::kernels::cuda

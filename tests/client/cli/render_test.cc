#include "client/cli/render.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace cli {
namespace {

using ::testing::HasSubstr;

template <typename T>
v1::Tensor MakeTensor(v1::DType dtype, std::vector<int64_t> shape, std::vector<T> values) {
  v1::Tensor t;
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  t.mutable_data()->resize(values.size() * sizeof(T));
  std::memcpy(t.mutable_data()->data(), values.data(), values.size() * sizeof(T));
  return t;
}

TEST(RenderTest, FormatValues) {
  EXPECT_EQ(FormatValues(MakeTensor<float>(v1::DTYPE_FLOAT32, {}, {2.5f})), "2.5");
  EXPECT_EQ(FormatValues(MakeTensor<float>(v1::DTYPE_FLOAT32, {3}, {0.1f, 1.0f / 3, -0.0f})),
            "[0.1, 0.33333334, -0]");
  EXPECT_EQ(FormatValues(MakeTensor<double>(v1::DTYPE_FLOAT64, {2, 2}, {0.1, 1e300, 2, 3})),
            "[[0.1, 1e+300], [2, 3]]");
  EXPECT_EQ(FormatValues(MakeTensor<int64_t>(v1::DTYPE_INT64, {2}, {-5, 1LL << 40})),
            "[-5, 1099511627776]");
  EXPECT_EQ(FormatValues(MakeTensor<int32_t>(v1::DTYPE_INT32, {1, 0}, {})), "[[]]");
  // binary16 bits of 0.5, 0.1 (0.0999755859375) and -inf.
  EXPECT_EQ(FormatValues(MakeTensor<uint16_t>(v1::DTYPE_FLOAT16, {3}, {0x3800, 0x2e66, 0xfc00})),
            "[0.5, 0.09998, -inf]");
  EXPECT_EQ(FormatValues(MakeTensor<float>(v1::DTYPE_FLOAT32, {1},
                                           {std::numeric_limits<float>::quiet_NaN()})),
            "[nan]");
}

TEST(RenderTest, Units) {
  EXPECT_EQ(FormatMicros(12.34), "12.3 us");
  EXPECT_EQ(FormatMicros(1520), "1.52 ms");
  EXPECT_EQ(FormatMicros(2.5e6), "2.50 s");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(4096), "4.0 KiB");
  EXPECT_EQ(FormatBytes(16 << 20), "16.0 MiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 29), "1.5 GiB");
  v1::Timing t;
  t.set_bytes_in(1000000);
  t.set_bytes_out(1000000);
  t.set_total_us(1000);
  EXPECT_DOUBLE_EQ(Throughput(t), 2.0);
  t.set_total_us(0);
  EXPECT_EQ(Throughput(t), 0);
}

SubmitReport Report() {
  SubmitReport r;
  r.input_path = "x.npy";
  r.input_dtype = v1::DTYPE_FLOAT32;
  r.input_shape = {2, 3};
  r.ops = "affine(alpha=2) | sum";
  r.result.accepted.set_job_id("job-7");
  r.result.accepted.set_backend("cuda");
  r.result.accepted.set_output_dtype(v1::DTYPE_FLOAT32);
  r.result.accepted.add_output_shape(2);
  r.result.output = MakeTensor<float>(v1::DTYPE_FLOAT32, {2}, {3, 12});
  r.result.has_timing = true;
  v1::Timing& t = r.result.timing;
  t.set_queue_us(5);
  t.set_h2d_us(10.25);
  t.set_compute_us(1500);
  t.set_d2h_us(4);
  t.set_total_us(2000);
  t.set_bytes_in(24);
  t.set_bytes_out(8);
  t.set_kernels(2);
  t.set_stream("high/0 (device priority -5)");
  t.set_staging("direct");
  t.set_launch("pdl");
  return r;
}

TEST(RenderTest, SubmitText) {
  EXPECT_EQ(RenderSubmitText(Report()),
            "job       job-7 (backend cuda)\n"
            "ops       affine(alpha=2) | sum\n"
            "tensor    float32[2, 3] -> float32[2]\n"
            "timing    queue 5.0 us, h2d 10.2 us, compute 1.50 ms, d2h 4.0 us, total 2.00 ms\n"
            "stream    high/0 (device priority -5), 2 kernels, staging direct, launch pdl\n"
            "bytes     in 24 B, out 8 B, 0.00 GB/s\n"
            "output    [3, 12]\n");
  SubmitReport written = Report();
  written.output_path = "y.npy";
  EXPECT_THAT(RenderSubmitText(written), HasSubstr("output    written to y.npy\n"));
  SubmitReport big = Report();
  big.result.output = MakeTensor<float>(v1::DTYPE_FLOAT32, {17}, std::vector<float>(17));
  EXPECT_THAT(RenderSubmitText(big),
              HasSubstr("output    not saved (17 elements; pass --output FILE.npy to save it)"));
  SubmitReport untimed = Report();
  untimed.result.has_timing = false;
  EXPECT_THAT(RenderSubmitText(untimed), HasSubstr("timing    not reported by the server\n"));
}

TEST(RenderTest, SubmitJson) {
  nlohmann::ordered_json j = SubmitJson(Report());
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["job_id"], "job-7");
  EXPECT_EQ(j["backend"], "cuda");
  EXPECT_EQ(j["ops"], "affine(alpha=2) | sum");
  EXPECT_EQ(j["input"]["path"], "x.npy");
  EXPECT_EQ(j["input"]["shape"], nlohmann::ordered_json({2, 3}));
  EXPECT_EQ(j["input"]["dtype"], "float32");
  EXPECT_EQ(j["output"]["shape"], nlohmann::ordered_json({2}));
  EXPECT_EQ(j["output"]["dtype"], "float32");
  EXPECT_TRUE(j["output"]["path"].is_null());
  EXPECT_EQ(j["output"]["values"], nlohmann::ordered_json({3.0, 12.0}));
  const nlohmann::ordered_json& t = j["timing"];
  for (const char* key : {"queue_us", "h2d_us", "compute_us", "d2h_us", "total_us", "bytes_in",
                          "bytes_out", "kernels", "stream", "staging", "launch", "gb_per_s"}) {
    EXPECT_TRUE(t.contains(key)) << key;
  }
  EXPECT_EQ(t["kernels"], 2);
  EXPECT_EQ(t["stream"], "high/0 (device priority -5)");
  EXPECT_DOUBLE_EQ(t["gb_per_s"].get<double>(), 32.0 / 2000 / 1e3);

  SubmitReport big = Report();
  big.output_path = "y.npy";
  big.result.output = MakeTensor<float>(v1::DTYPE_FLOAT32, {17}, std::vector<float>(17));
  nlohmann::ordered_json jb = SubmitJson(big);
  EXPECT_EQ(jb["output"]["path"], "y.npy");
  EXPECT_FALSE(jb["output"].contains("values"));
}

TEST(RenderTest, ValuesJsonTurnsNonFiniteIntoNull) {
  nlohmann::ordered_json v = ValuesJson(MakeTensor<double>(
      v1::DTYPE_FLOAT64, {2}, {std::numeric_limits<double>::infinity(), 1.5}));
  EXPECT_EQ(v.dump(), "[null,1.5]");
  EXPECT_EQ(ValuesJson(MakeTensor<int64_t>(v1::DTYPE_INT64, {1}, {-3})).dump(), "[-3]");
}

v1::DescribeResponse Description() {
  v1::DescribeResponse d;
  d.set_backend("cuda");
  d.set_server_version("gpupiped 0.1.0");
  v1::Device* dev = d.mutable_device();
  dev->set_name("NVIDIA H200");
  dev->set_multiprocessors(132);
  dev->set_memory_bytes(int64_t{150} << 30);
  dev->set_compute_capability("9.0");
  dev->set_least_stream_priority(0);
  dev->set_greatest_stream_priority(-5);
  v1::PriorityMapping* p = dev->add_priorities();
  p->set_priority(v1::PRIORITY_HIGH);
  p->set_device_priority(-5);
  p->set_streams(1);
  v1::OpInfo* op = d.add_ops();
  op->set_name("affine");
  op->set_kind("elementwise");
  op->set_description("y = alpha * x + beta");
  v1::ParamInfo* alpha = op->add_params();
  alpha->set_name("alpha");
  alpha->set_type("number");
  alpha->set_default_value("1");
  op->add_dtypes(v1::DTYPE_FLOAT32);
  op->add_dtypes(v1::DTYPE_FLOAT16);
  d.add_stagings(v1::STAGING_AUTO);
  d.add_stagings(v1::STAGING_PIPELINE);
  d.add_launch_modes(v1::LAUNCH_PDL);
  d.mutable_limits()->set_max_input_bytes(int64_t{1} << 30);
  d.mutable_limits()->set_max_ops(16);
  d.mutable_limits()->set_max_chunk_bytes(int64_t{1} << 20);
  d.mutable_limits()->set_max_rank(8);
  return d;
}

TEST(RenderTest, DescribeText) {
  const std::string text = RenderDescribeText(Description());
  EXPECT_THAT(text, HasSubstr("server    gpupiped 0.1.0 (backend cuda)\n"));
  EXPECT_THAT(text,
              HasSubstr("device    NVIDIA H200 (ordinal 0, compute 9.0, 132 SMs, 150.0 GiB)"));
  EXPECT_THAT(text, HasSubstr("high    -> device priority -5, 1 stream\n"));
  EXPECT_THAT(text, HasSubstr("ops       affine  elementwise    y = alpha * x + beta\n"));
  EXPECT_THAT(text, HasSubstr("params: alpha (number, default 1)\n"));
  EXPECT_THAT(text, HasSubstr("dtypes: float32, float16\n"));
  EXPECT_THAT(text, HasSubstr("staging   auto, pipeline\n"));
  EXPECT_THAT(text, HasSubstr("launch    pdl\n"));
  EXPECT_THAT(text, HasSubstr("limits    input 1.0 GiB, 16 ops, rank 8, chunks 1.0 MiB\n"));
  v1::DescribeResponse cpu;
  cpu.set_backend("cpu");
  EXPECT_THAT(RenderDescribeText(cpu), HasSubstr("device    none (CPU backend)\n"));
}

TEST(RenderTest, DescribeJson) {
  absl::StatusOr<std::string> json = DescribeJson(Description());
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->find('\n'), std::string::npos);
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(*json);
  EXPECT_EQ(j["backend"], "cuda");
  EXPECT_EQ(j["device"]["multiprocessors"], 132);
  EXPECT_EQ(j["device"]["compute_capability"], "9.0");
  EXPECT_EQ(j["ops"][0]["params"][0]["default_value"], "1");
  EXPECT_EQ(j["limits"]["max_ops"], 16);
  EXPECT_EQ(j["launch_modes"][0], "LAUNCH_PDL");
}

TEST(RenderTest, ErrorJson) {
  EXPECT_EQ(ErrorJson(absl::StatusCode::kInvalidArgument, "input.shape: bad").dump(),
            R"({"status":"error","code":"INVALID_ARGUMENT","message":"input.shape: bad"})");
}

}  // namespace
}  // namespace cli
}  // namespace gpupipe

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
using ::testing::Not;

template <typename T>
v1::Tensor MakeTensor(v1::DType dtype, std::vector<int64_t> shape, std::vector<T> values) {
  v1::Tensor t;
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  // An empty vector's data() may be null, which memcpy must not get even for no bytes.
  if (!values.empty()) {
    t.mutable_data()->assign(reinterpret_cast<const char*>(values.data()),
                             values.size() * sizeof(T));
  }
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
            "timing    queue 5.0 us, h2d 10.2 us, compute 1.50 ms, d2h 4.0 us, total 2.00 ms, "
            "then result stream 0.0 us\n"
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

v1::Plan SoftmaxPlan() {
  v1::Plan plan;
  plan.set_launch("pdl");
  plan.set_staging("direct");
  const char* names[] = {"softmax.stats", "softmax.apply"};
  for (int i = 0; i < 2; ++i) {
    v1::PlannedKernel* k = plan.add_kernels();
    k->set_index(i);
    k->set_name(names[i]);
    k->set_step(0);
    k->set_ops("affine+softmax");
    k->set_rows(64);
    k->set_cols(100);
    k->set_blocks(i == 0 ? 64 : 132);
    k->set_threads(256);
  }
  v1::PlanEdge* e = plan.add_edges();
  e->set_from(0);
  e->set_to(1);
  e->set_kind("pdl");
  e->set_reason("needs each row's max and sum");
  return plan;
}

TEST(RenderTest, PlanText) {
  EXPECT_EQ(RenderPlanText(SoftmaxPlan()),
            "plan      2 kernels, launch pdl, staging direct\n"
            "          k0  softmax.stats  step 0  affine+softmax  64 x 100  grid 64 x 256\n"
            "          k1  softmax.apply  step 0  affine+softmax  64 x 100  grid 132 x 256\n"
            "          k0 -> k1 pdl: needs each row's max and sum\n");
  // CPU plans launch nothing; edges may lack a kind or a reason.
  v1::Plan cpu;
  v1::PlannedKernel* k = cpu.add_kernels();
  k->set_name("ew");
  k->set_ops("relu");
  k->set_rows(1);
  k->set_cols(3);
  cpu.add_edges()->set_to(0);
  EXPECT_EQ(RenderPlanText(cpu),
            "plan      1 kernel, launch -, staging -\n"
            "          k0  ew  step 0  relu  1 x 3  grid -\n"
            "          k0 -> k0\n");
  EXPECT_EQ(RenderPlanText(v1::Plan()), "plan      0 kernels, launch -, staging -\n");
}

TEST(RenderTest, FormatTable) {
  EXPECT_EQ(FormatTable({{"a", "bbb", "c"}, {"dddd", "e", "12"}}, {false, true, false}, 2),
            "  a     bbb  c\n"
            "  dddd    e  12\n");
  EXPECT_EQ(FormatTable({}, {}, 0), "");
}

TEST(RenderTest, SubmitTextWithPlanGraphAndSteps) {
  SubmitReport r = Report();
  r.explain = true;
  r.profile = true;
  r.result.plan = SoftmaxPlan();
  r.result.has_plan = true;
  r.result.timing.set_launch("graph-pdl");
  r.result.timing.set_graph("hit");
  v1::StepTiming* s0 = r.result.timing.add_steps();
  s0->set_step(0);
  s0->set_ops("affine+softmax");
  s0->set_kernels(2);
  s0->set_device_us(1250);
  v1::StepTiming* s1 = r.result.timing.add_steps();
  s1->set_step(1);
  s1->set_ops("sum");
  s1->set_kernels(1);
  s1->set_device_us(12.5);
  EXPECT_EQ(RenderSubmitText(r),
            "plan      2 kernels, launch pdl, staging direct\n"
            "          k0  softmax.stats  step 0  affine+softmax  64 x 100  grid 64 x 256\n"
            "          k1  softmax.apply  step 0  affine+softmax  64 x 100  grid 132 x 256\n"
            "          k0 -> k1 pdl: needs each row's max and sum\n"
            "job       job-7 (backend cuda)\n"
            "ops       affine(alpha=2) | sum\n"
            "tensor    float32[2, 3] -> float32[2]\n"
            "timing    queue 5.0 us, h2d 10.2 us, compute 1.50 ms, d2h 4.0 us, total 2.00 ms, "
            "then result stream 0.0 us\n"
            "stream    high/0 (device priority -5), 2 kernels, staging direct, launch graph-pdl, "
            "graph hit\n"
            "bytes     in 24 B, out 8 B, 0.00 GB/s\n"
            "steps     step  ops             kernels   device\n"
            "          0     affine+softmax        2  1.25 ms\n"
            "          1     sum                   1  12.5 us\n"
            "output    [3, 12]\n");
}

TEST(RenderTest, ProfiledKernelsFollowTheSteps) {
  SubmitReport r = Report();
  r.profile = true;
  v1::StepTiming* step = r.result.timing.add_steps();
  step->set_step(0);
  step->set_ops("softmax");
  step->set_kernels(2);
  step->set_device_us(30);
  for (int k = 0; k < 2; ++k) {
    v1::KernelTiming* kt = r.result.timing.add_kernel_times();
    kt->set_index(k);
    kt->set_name(k == 0 ? "softmax.stats" : "softmax.normalize");
    kt->set_step(0);
    kt->set_device_us(k == 0 ? 12.5 : 17.5);
  }
  const std::string text = RenderSubmitText(r);
  EXPECT_THAT(text, HasSubstr("kernels   kernel  name               step   device\n"
                              "          k0      softmax.stats         0  12.5 us\n"
                              "          k1      softmax.normalize     0  17.5 us\n"));
  const nlohmann::ordered_json j = SubmitJson(r);
  ASSERT_EQ(j["timing"]["kernel_times"].size(), 2u);
  EXPECT_EQ(j["timing"]["kernel_times"][1]["name"], "softmax.normalize");
  EXPECT_EQ(j["timing"]["kernel_times"][1]["device_us"], 17.5);
}

TEST(RenderTest, TimelineShowsEachChunksStages) {
  SubmitReport r = Report();
  r.timeline = true;
  r.result.timing.set_chunks(2);
  const char* stages[] = {"h2d", "compute", "d2h"};
  for (int chunk = 0; chunk < 2; ++chunk) {
    for (int s = 0; s < 3; ++s) {
      v1::TimelineEntry* e = r.result.timing.add_timeline();
      e->set_stream(stages[s]);
      e->set_stage(stages[s]);
      e->set_chunk(chunk);
      e->set_start_us(chunk * 10 + s * 10);
      e->set_end_us(chunk * 10 + s * 10 + 9.5);
    }
  }
  const std::string text = RenderSubmitText(r);
  EXPECT_THAT(text, HasSubstr("chunks    2\n"));
  EXPECT_THAT(text, HasSubstr("timeline  chunk     h2d us  compute us     d2h us\n"
                              "              0    0.0-9.5   10.0-19.5  20.0-29.5\n"
                              "              1  10.0-19.5   20.0-29.5  30.0-39.5\n"))
      << text;
  const nlohmann::ordered_json j = SubmitJson(r);
  EXPECT_EQ(j["timing"]["chunks"], 2);
  ASSERT_EQ(j["timing"]["timeline"].size(), 6u);
  EXPECT_EQ(j["timing"]["timeline"][4]["stage"], "compute");
  EXPECT_EQ(j["timing"]["timeline"][4]["start_us"], 20.0);
}

TEST(RenderTest, SubmitTextSaysWhatTheServerLeftOut) {
  SubmitReport r = Report();
  r.explain = true;
  r.profile = true;
  const std::string text = RenderSubmitText(r);
  EXPECT_THAT(text, HasSubstr("plan      not reported by the server\n"));
  EXPECT_THAT(text, HasSubstr("steps     not reported by the server\n"));
  // Not asked for, not mentioned.
  const std::string plain = RenderSubmitText(Report());
  EXPECT_THAT(plain, Not(HasSubstr("plan")));
  EXPECT_THAT(plain, Not(HasSubstr("steps")));
  EXPECT_THAT(plain, Not(HasSubstr("graph")));
}

SubmitReport DryRun() {
  SubmitReport r = Report();
  r.result.dry_run = true;
  r.result.has_timing = false;
  r.result.timing.Clear();
  r.result.output.clear_data();
  r.result.plan = SoftmaxPlan();
  r.result.has_plan = true;
  r.output_path = "";
  return r;
}

TEST(RenderTest, DryRunTextIsThePlanOnly) {
  EXPECT_EQ(RenderSubmitText(DryRun()), RenderPlanText(SoftmaxPlan()));
}

TEST(RenderTest, DryRunJson) {
  nlohmann::ordered_json j = SubmitJson(DryRun());
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["dry_run"], true);
  EXPECT_EQ(j["output"]["shape"], nlohmann::ordered_json({2}));
  EXPECT_FALSE(j["output"].contains("values"));
  EXPECT_FALSE(j["output"].contains("path"));
  EXPECT_FALSE(j.contains("timing"));
  ASSERT_TRUE(j.contains("plan"));
  EXPECT_EQ(j["plan"]["kernels"].size(), 2u);
}

TEST(RenderTest, SubmitJsonPlanGraphAndSteps) {
  SubmitReport r = Report();
  r.result.plan = SoftmaxPlan();
  r.result.has_plan = true;
  r.result.timing.set_graph("miss");
  r.result.timing.set_result_stream_us(7.5);
  v1::StepTiming* st = r.result.timing.add_steps();
  st->set_step(0);
  st->set_ops("affine+softmax");
  st->set_kernels(2);
  st->set_device_us(99.5);
  nlohmann::ordered_json j = SubmitJson(r);
  EXPECT_EQ(j["dry_run"], false);
  EXPECT_EQ(j["plan"].dump(),
            R"({"launch":"pdl","staging":"direct","kernels":[)"
            R"({"index":0,"name":"softmax.stats","step":0,"ops":"affine+softmax","rows":64,)"
            R"("cols":100,"blocks":64,"threads":256},)"
            R"({"index":1,"name":"softmax.apply","step":0,"ops":"affine+softmax","rows":64,)"
            R"("cols":100,"blocks":132,"threads":256}],)"
            R"("edges":[{"from":0,"to":1,"kind":"pdl","reason":"needs each row's max and sum"}]})");
  EXPECT_EQ(j["timing"]["graph"], "miss");
  EXPECT_EQ(j["timing"]["result_stream_us"], 7.5);
  EXPECT_EQ(j["timing"]["steps"].dump(),
            R"([{"step":0,"ops":"affine+softmax","kernels":2,"device_us":99.5}])");

  nlohmann::ordered_json plain = SubmitJson(Report());
  EXPECT_FALSE(plain.contains("plan"));
  EXPECT_TRUE(plain["timing"]["graph"].is_null());
  EXPECT_EQ(plain["timing"]["steps"], nlohmann::ordered_json::array());
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
  EXPECT_EQ(j["upload"], "inline");
  EXPECT_EQ(j["output"]["shape"], nlohmann::ordered_json({2}));
  EXPECT_EQ(j["output"]["dtype"], "float32");
  EXPECT_TRUE(j["output"]["path"].is_null());
  EXPECT_EQ(j["output"]["values"], nlohmann::ordered_json({3.0, 12.0}));
  const nlohmann::ordered_json& t = j["timing"];
  for (const char* key : {"queue_us", "h2d_us", "compute_us", "d2h_us", "total_us", "bytes_in",
                          "bytes_out", "kernels", "stream", "staging", "launch", "gbps"}) {
    EXPECT_TRUE(t.contains(key)) << key;
  }
  EXPECT_EQ(t["kernels"], 2);
  EXPECT_EQ(t["stream"], "high/0 (device priority -5)");
  EXPECT_DOUBLE_EQ(t["gbps"].get<double>(), 32.0 / 2000 / 1e3);

  SubmitReport big = Report();
  big.output_path = "y.npy";
  big.result.output = MakeTensor<float>(v1::DTYPE_FLOAT32, {17}, std::vector<float>(17));
  nlohmann::ordered_json jb = SubmitJson(big);
  EXPECT_EQ(jb["output"]["path"], "y.npy");
  EXPECT_FALSE(jb["output"].contains("values"));
}

TEST(RenderTest, ALargeResultNeedsNoDataToReport) {
  // The CLI keeps a result's bytes only when they are few enough to show: the element count
  // comes from the shape.
  SubmitReport big = Report();
  big.result.output = MakeTensor<float>(v1::DTYPE_FLOAT32, {1 << 20, 1024}, {});
  EXPECT_THAT(RenderSubmitText(big), HasSubstr("output    not saved (1073741824 elements; pass "
                                               "--output FILE.npy to save it)"));
  EXPECT_FALSE(SubmitJson(big)["output"].contains("values"));
  big.output_path = "y.npy";
  EXPECT_THAT(RenderSubmitText(big), HasSubstr("output    written to y.npy\n"));
  const nlohmann::ordered_json j = SubmitJson(big);
  EXPECT_EQ(j["output"]["shape"], nlohmann::ordered_json({1 << 20, 1024}));
  EXPECT_FALSE(j["output"].contains("values"));
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
  dev->set_wait("spin");
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
  d.add_launch_modes(v1::LAUNCH_GRAPH_PDL);
  v1::GraphCacheStats* g = d.mutable_graph_cache();
  g->set_hits(120);
  g->set_updates(4);
  g->set_misses(8);
  g->set_entries(3);
  g->set_capacity(64);
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
  EXPECT_THAT(text, HasSubstr("          waits for the device: spin\n"));
  EXPECT_THAT(text, HasSubstr("ops       affine  elementwise    y = alpha * x + beta\n"));
  EXPECT_THAT(text, HasSubstr("params: alpha (number, default 1)\n"));
  EXPECT_THAT(text, HasSubstr("dtypes: float32, float16\n"));
  EXPECT_THAT(text, HasSubstr("staging   auto, pipeline\n"));
  EXPECT_THAT(text, HasSubstr("launch    pdl, graph-pdl\n"));
  EXPECT_THAT(text,
              HasSubstr("graphs    3 of 64 cached; 120 hits, 4 updates, 8 misses, 0 evictions\n"));
  EXPECT_THAT(text, HasSubstr("limits    input 1.0 GiB, 16 ops, rank 8, chunks 1.0 MiB\n"));
  v1::DescribeResponse streaming = Description();
  streaming.mutable_limits()->set_max_stream_input_bytes(int64_t{4} << 30);
  EXPECT_THAT(RenderDescribeText(streaming),
              HasSubstr("limits    input 1.0 GiB (streamed 4.0 GiB), 16 ops, rank 8, chunks 1.0 MiB\n"));
  v1::DescribeResponse admission = Description();
  v1::Limits* l = admission.mutable_limits();
  l->set_max_queued_jobs(1024);
  l->set_max_queued_bytes(int64_t{2} << 30);
  l->set_max_client_jobs(256);
  l->set_max_client_queued_bytes(int64_t{512} << 20);
  l->set_max_client_uploads(4);
  l->set_min_chunk_bytes(64 << 10);
  l->set_max_work_per_byte(4096);
  l->set_upload_idle_timeout_ms(30000);
  l->set_reader_idle_timeout_ms(0);
  const std::string limits = RenderDescribeText(admission);
  EXPECT_THAT(limits, HasSubstr("queue     1024 jobs per priority, 2.0 GiB held\n"));
  EXPECT_THAT(limits, HasSubstr("client    256 jobs, 512.0 MiB queued, 4 uploads\n"));
  EXPECT_THAT(
      limits,
      HasSubstr("work      chunks of at least 64.0 KiB, at most 4096 operations per byte\n"));
  EXPECT_THAT(limits, HasSubstr("idle      upload 30 s, reader none\n"));
  l->set_reader_idle_timeout_ms(30000);
  l->set_reader_idle_busy_timeout_ms(10000);
  EXPECT_THAT(RenderDescribeText(admission),
              HasSubstr("idle      upload 30 s, reader 30 s (10 s while its lane is wanted)\n"));
  // Results held unread (server/rpc/unread_results.h), where the daemon states them.
  l->set_max_unread_bytes(int64_t{1} << 30);
  l->set_max_client_unread_bytes(int64_t{256} << 20);
  const std::string unread = RenderDescribeText(admission);
  EXPECT_THAT(unread, HasSubstr("queue     1024 jobs per priority, 2.0 GiB held, results of "
                                "1.0 GiB unread\n"));
  EXPECT_THAT(unread,
              HasSubstr("client    256 jobs, 512.0 MiB queued, 4 uploads, 256.0 MiB unread\n"));
  v1::DescribeResponse cpu;
  cpu.set_backend("cpu");
  EXPECT_THAT(RenderDescribeText(cpu), HasSubstr("device    none (CPU backend)\n"));
  EXPECT_THAT(RenderDescribeText(cpu), Not(HasSubstr("graphs")));
  cpu.mutable_graph_cache();
  EXPECT_THAT(RenderDescribeText(cpu), HasSubstr("graphs    no cache\n"));
  v1::DescribeResponse listener = Description();
  v1::PriorityListener* p = listener.mutable_priority_listener();
  p->set_address("10.0.0.7:50052");
  p->set_lowest(v1::PRIORITY_HIGH);
  p->set_max_calls(64);
  p->set_threads(3);
  EXPECT_THAT(RenderDescribeText(listener),
              HasSubstr("priority  10.0.0.7:50052: SubmitSmall of priority high and above, 64 "
                        "calls at once, 3 threads\n"));
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
  // Enums by the names the flags take, 64-bit integers as numbers.
  EXPECT_EQ(j["launch_modes"][0], "pdl");
  EXPECT_EQ(j["graph_cache"]["hits"], 120);
  EXPECT_EQ(j["graph_cache"]["capacity"], 64);
}

TEST(RenderTest, ErrorJson) {
  EXPECT_EQ(ErrorJson(absl::StatusCode::kInvalidArgument, "input.shape: bad").dump(),
            R"({"status":"error","code":"INVALID_ARGUMENT","message":"input.shape: bad"})");
}

}  // namespace
}  // namespace cli
}  // namespace gpupipe

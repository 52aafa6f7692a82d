#include "client/cli/proto_json.h"

#include <limits>

#include "gtest/gtest.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace cli {
namespace {

TEST(ProtoJsonTest, NamesEnumsAsTheCliDoesAndWritesNumbersAsNumbers) {
  v1::OpInfo op;
  op.set_name("relu");
  op.add_dtypes(v1::DTYPE_FLOAT32);
  op.add_dtypes(v1::DTYPE_FLOAT16);
  nlohmann::ordered_json j = ProtoJson(op);
  EXPECT_EQ(j["name"], "relu");
  EXPECT_EQ(j["dtypes"], nlohmann::ordered_json::array({"float32", "float16"}));
  EXPECT_TRUE(j["params"].is_array());
  EXPECT_TRUE(j["params"].empty());

  v1::DescribeResponse d;
  d.add_launch_modes(v1::LAUNCH_GRAPH_PDL);
  d.mutable_graph_cache()->set_hits(int64_t{1} << 40);
  j = ProtoJson(d);
  EXPECT_EQ(j["launch_modes"][0], "graph-pdl");
  EXPECT_EQ(j["graph_cache"]["hits"].get<int64_t>(), int64_t{1} << 40);
  EXPECT_EQ(j["graph_cache"]["misses"], 0);  // scalars always written
  EXPECT_FALSE(j.contains("device"));        // an unset message is not
}

TEST(ProtoJsonTest, MapsBecomeObjectsAndNonFiniteNumbersNull) {
  v1::StatsResponse s;
  (*s.mutable_rejected())["max-client-jobs"] = 3;
  s.set_uptime_seconds(std::numeric_limits<double>::infinity());
  const nlohmann::ordered_json j = ProtoJson(s);
  EXPECT_EQ(j["rejected"]["max-client-jobs"], 3);
  EXPECT_TRUE(j["uptime_seconds"].is_null());
}

TEST(ProtoJsonTest, OneofMembersOnlyWhenSet) {
  v1::RunRequest r;
  r.set_data("\x01\x02");
  const nlohmann::ordered_json j = ProtoJson(r);
  EXPECT_EQ(j["data"], "AQI=");  // bytes in base64
  EXPECT_FALSE(j.contains("spec"));
}

}  // namespace
}  // namespace cli
}  // namespace gpupipe

#include "client/enum_names.h"

#include "gmock/gmock.h"
#include "gpupipe/v1/gpupipe.pb.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace client {
namespace {

using ::testing::ElementsAre;

TEST(EnumNamesTest, ShortNames) {
  EXPECT_EQ(ShortEnumName(*v1::Priority_descriptor()->FindValueByName("PRIORITY_HIGH")), "high");
  EXPECT_EQ(ShortEnumName(*v1::Staging_descriptor(), v1::STAGING_PIPELINE), "pipeline");
  EXPECT_EQ(ShortEnumName(*v1::LaunchMode_descriptor(), v1::LAUNCH_PDL), "pdl");
  EXPECT_EQ(ShortEnumName(*v1::DType_descriptor(), v1::DTYPE_FLOAT16), "float16");
  EXPECT_EQ(ShortEnumName(*v1::LaunchMode_descriptor(), 99), "99");
}

TEST(EnumNamesTest, ListSkipsUnspecified) {
  EXPECT_THAT(ShortEnumNames(*v1::Priority_descriptor()), ElementsAre("low", "normal", "high"));
  EXPECT_THAT(ShortEnumNames(*v1::Staging_descriptor()),
              ElementsAre("auto", "direct", "pipeline", "pipeline_thread", "primitives", "bulk"));
}

TEST(EnumNamesTest, FindIgnoresCaseAndAcceptsFullNames) {
  const auto& priority = *v1::Priority_descriptor();
  EXPECT_EQ(FindEnumValue(priority, "high")->number(), v1::PRIORITY_HIGH);
  EXPECT_EQ(FindEnumValue(priority, "LOW")->number(), v1::PRIORITY_LOW);
  EXPECT_EQ(FindEnumValue(priority, "priority_normal")->number(), v1::PRIORITY_NORMAL);
  EXPECT_EQ(FindEnumValue(priority, "urgent"), nullptr);
  EXPECT_EQ(FindEnumValue(priority, ""), nullptr);
}

TEST(EnumNamesTest, FlagNamesUseDashes) {
  EXPECT_EQ(FlagEnumName(*v1::LaunchMode_descriptor(), v1::LAUNCH_GRAPH_PDL), "graph-pdl");
  EXPECT_EQ(FlagEnumName(*v1::LaunchMode_descriptor()->FindValueByNumber(v1::LAUNCH_PDL)), "pdl");
  EXPECT_EQ(FlagEnumName(*v1::LaunchMode_descriptor(), 99), "99");
  // The grammar's names keep the underscore: its identifiers cannot contain '-'.
  EXPECT_EQ(ShortEnumName(*v1::LaunchMode_descriptor(), v1::LAUNCH_GRAPH_PDL), "graph_pdl");
  EXPECT_THAT(FlagEnumNames(*v1::LaunchMode_descriptor()),
              ElementsAre("auto", "stream", "pdl", "graph", "graph-pdl"));
}

TEST(EnumNamesTest, FindTreatsDashAsUnderscore) {
  const auto& launch = *v1::LaunchMode_descriptor();
  EXPECT_EQ(FindEnumValue(launch, "graph-pdl")->number(), v1::LAUNCH_GRAPH_PDL);
  EXPECT_EQ(FindEnumValue(launch, "graph_pdl")->number(), v1::LAUNCH_GRAPH_PDL);
  EXPECT_EQ(FindEnumValue(launch, "LAUNCH-GRAPH-PDL")->number(), v1::LAUNCH_GRAPH_PDL);
  EXPECT_EQ(FindEnumValue(launch, "graph-"), nullptr);
}

}  // namespace
}  // namespace client
}  // namespace gpupipe

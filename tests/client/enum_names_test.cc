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
              ElementsAre("auto", "direct", "pipeline"));
}

TEST(EnumNamesTest, FindIgnoresCaseAndAcceptsFullNames) {
  const auto& priority = *v1::Priority_descriptor();
  EXPECT_EQ(FindEnumValue(priority, "high")->number(), v1::PRIORITY_HIGH);
  EXPECT_EQ(FindEnumValue(priority, "LOW")->number(), v1::PRIORITY_LOW);
  EXPECT_EQ(FindEnumValue(priority, "priority_normal")->number(), v1::PRIORITY_NORMAL);
  EXPECT_EQ(FindEnumValue(priority, "urgent"), nullptr);
  EXPECT_EQ(FindEnumValue(priority, ""), nullptr);
}

}  // namespace
}  // namespace client
}  // namespace gpupipe

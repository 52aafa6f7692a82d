#include "client/ops_grammar.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace client {
namespace {

using google::protobuf::Message;
using google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::testing::SizeIs;

std::vector<v1::Op> MustParse(const std::string& text) {
  absl::StatusOr<std::vector<v1::Op>> ops = ParseOps(text);
  EXPECT_TRUE(ops.ok()) << text << ": " << ops.status();
  return ops.ok() ? *ops : std::vector<v1::Op>{};
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<std::vector<v1::Op>> ops = ParseOps(text);
  EXPECT_FALSE(ops.ok()) << text << " parsed as " << (ops.ok() ? FormatOps(*ops) : "");
  if (!ops.ok()) {
    EXPECT_EQ(ops.status().code(), absl::StatusCode::kInvalidArgument);
  }
  return ops.ok() ? "" : std::string(ops.status().message());
}

// ---- gpupipe.v1 ops ----------------------------------------------------------------------

TEST(OpsGrammarTest, ReadmeExample) {
  std::vector<v1::Op> ops = MustParse("affine(alpha=2,beta=1) | relu | softmax");
  ASSERT_THAT(ops, SizeIs(3));
  ASSERT_TRUE(ops[0].has_affine());
  EXPECT_EQ(ops[0].affine().alpha(), 2);
  EXPECT_EQ(ops[0].affine().beta(), 1);
  EXPECT_TRUE(ops[1].has_relu());
  EXPECT_TRUE(ops[2].has_softmax());
}

TEST(OpsGrammarTest, SingleOpsAndOptionalParentheses) {
  EXPECT_TRUE(MustParse("sum")[0].has_sum());
  EXPECT_TRUE(MustParse("relu()")[0].has_relu());
  std::vector<v1::Op> ops = MustParse("affine");
  ASSERT_TRUE(ops[0].has_affine());
  EXPECT_FALSE(ops[0].affine().has_alpha());
  EXPECT_FALSE(ops[0].affine().has_beta());
  ops = MustParse("affine(beta=0)");
  EXPECT_FALSE(ops[0].affine().has_alpha());
  EXPECT_TRUE(ops[0].affine().has_beta());
}

TEST(OpsGrammarTest, WhitespaceAnywhere) {
  for (const char* text : {"affine(alpha=2,beta=1)|relu|softmax",
                           "  affine ( alpha = 2 , beta = 1 )  |  relu  |  softmax  ",
                           "\naffine(\n  alpha=2,\n  beta=1,\n)\n|\trelu ( ) |\r\nsoftmax\n"}) {
    std::vector<v1::Op> ops = MustParse(text);
    ASSERT_THAT(ops, SizeIs(3)) << text;
    EXPECT_EQ(ops[0].affine().alpha(), 2) << text;
    EXPECT_EQ(ops[0].affine().beta(), 1) << text;
    EXPECT_TRUE(ops[1].has_relu());
    EXPECT_TRUE(ops[2].has_softmax());
  }
}

TEST(OpsGrammarTest, NumberForms) {
  auto alpha = [](const std::string& v) {
    std::vector<v1::Op> ops = MustParse("affine(alpha=" + v + ")");
    return ops.empty() ? -12345.0 : ops[0].affine().alpha();
  };
  EXPECT_EQ(alpha("2"), 2);
  EXPECT_EQ(alpha("-2"), -2);
  EXPECT_EQ(alpha("+2"), 2);
  EXPECT_EQ(alpha("- 2"), -2);
  EXPECT_EQ(alpha("2.25"), 2.25);
  EXPECT_EQ(alpha(".5"), 0.5);
  EXPECT_EQ(alpha("5."), 5);
  EXPECT_EQ(alpha("1e3"), 1000);
  EXPECT_EQ(alpha("-1.5E-3"), -0.0015);
  EXPECT_EQ(alpha("2e+2"), 200);
  EXPECT_EQ(alpha("0.1"), 0.1);
  EXPECT_EQ(alpha("inf"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(alpha("-inf"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(alpha("Infinity"), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(alpha("nan")));
  EXPECT_TRUE(std::signbit(alpha("-0")));
}

TEST(OpsGrammarTest, TrailingCommaInParams) {
  EXPECT_EQ(MustParse("affine(alpha=3,)")[0].affine().alpha(), 3);
}

TEST(OpsGrammarTest, UnknownOpListsKnownOps) {
  // The list follows the proto, which grows; the first ops are stable.
  EXPECT_THAT(
      ParseError("affine(alpha=2,beta=1) | relu | sofmax"),
      StartsWith("unknown op 'sofmax' at 1:33: did you mean 'softmax'? (known: affine, relu, "
                 "sum, softmax"));
  EXPECT_THAT(ParseError("qqqq"), StartsWith("unknown op 'qqqq' at 1:1 (known: affine"));
  EXPECT_THAT(ParseError("relu |\n  sofmax"), HasSubstr("unknown op 'sofmax' at 2:3"));
  EXPECT_THAT(ParseError("Relu"), HasSubstr("unknown op 'Relu' at 1:1"));
}

TEST(OpsGrammarTest, UnknownParamListsParams) {
  EXPECT_EQ(ParseError("affine(alpah=2)"),
            "unknown param 'alpah' for op 'affine' at 1:8: did you mean 'alpha'? (params: alpha, "
            "beta)");
  EXPECT_EQ(ParseError("relu(x=1)"),
            "unknown param 'x' for op 'relu' at 1:6 (op 'relu' takes no params)");
}

TEST(OpsGrammarTest, DuplicateParam) {
  EXPECT_EQ(ParseError("affine(alpha=2, alpha=3)"),
            "duplicate param 'alpha' for op 'affine' at 1:17");
}

TEST(OpsGrammarTest, ListForScalar) {
  EXPECT_EQ(ParseError("affine(alpha=[1, 2])"),
            "param 'alpha' of op 'affine' takes a single value, not a list at 1:14");
}

TEST(OpsGrammarTest, NonNumberForNumber) {
  EXPECT_EQ(ParseError("affine(alpha=two)"),
            "param 'alpha' of op 'affine' takes a number, got 'two' at 1:14");
  EXPECT_THAT(ParseError("affine(alpha=1e999)"),
              HasSubstr("number 1e999 is out of range for double param 'alpha'"));
  EXPECT_THAT(ParseError("affine(alpha=-nan)"), HasSubstr("expected a number after '-' at 1:15"));
  EXPECT_THAT(ParseError("affine(alpha=2x)"), HasSubstr("malformed number '2x' at 1:14"));
  EXPECT_THAT(ParseError("affine(alpha=1.2.3)"), HasSubstr("malformed number '1.2.3'"));
  EXPECT_THAT(ParseError("affine(alpha=)"), HasSubstr("expected a value at 1:14, got ')'"));
  EXPECT_THAT(ParseError("affine(alpha 2)"),
              HasSubstr("expected '=' after param 'alpha' at 1:14, got '2'"));
}

TEST(OpsGrammarTest, EmptyPipeline) {
  EXPECT_THAT(ParseError(""), HasSubstr("empty pipeline"));
  EXPECT_THAT(ParseError("  \n\t "), HasSubstr("empty pipeline"));
}

TEST(OpsGrammarTest, MissingOps) {
  EXPECT_EQ(ParseError("relu |"), "expected an op name at 1:7, got end of input");
  EXPECT_EQ(ParseError("| relu"), "expected an op name at 1:1, got '|'");
  EXPECT_EQ(ParseError("relu || sum"), "expected an op name at 1:7, got '|'");
  EXPECT_EQ(ParseError("affine(2)"), "expected a param name or ')' at 1:8, got '2'");
}

TEST(OpsGrammarTest, TrailingGarbage) {
  EXPECT_EQ(ParseError("relu softmax"),
            "unexpected 'softmax' at 1:6 (expected '|' or the end of the pipeline)");
  EXPECT_EQ(ParseError("relu, sum"),
            "unexpected ',' at 1:5 (expected '|' or the end of the pipeline)");
  EXPECT_EQ(ParseError("relu # comment"), "unexpected character '#' at 1:6");
  EXPECT_EQ(ParseError("relu \x01"), "unexpected character byte 0x01 at 1:6");
}

TEST(OpsGrammarTest, UnbalancedParentheses) {
  EXPECT_EQ(ParseError("affine(alpha=2"), "unbalanced parentheses: '(' at 1:7 is not closed");
  EXPECT_EQ(ParseError("affine(alpha=2,"), "unbalanced parentheses: '(' at 1:7 is not closed");
  EXPECT_EQ(ParseError("affine(alpha="), "unbalanced parentheses: '(' at 1:7 is not closed");
  EXPECT_EQ(ParseError("affine(alpha"), "unbalanced parentheses: '(' at 1:7 is not closed");
  EXPECT_EQ(ParseError("affine("), "unbalanced parentheses: '(' at 1:7 is not closed");
  EXPECT_EQ(ParseError("relu)"), "unbalanced parentheses: unexpected ')' at 1:5");
  EXPECT_EQ(ParseError("affine(alpha=2))"), "unbalanced parentheses: unexpected ')' at 1:16");
  EXPECT_EQ(ParseError("affine(alpha=2 | relu"),
            "expected ',' or ')' at 1:16, got '|'");
}

TEST(OpsGrammarTest, FormatIsCanonical) {
  EXPECT_EQ(FormatOps(MustParse(" affine( beta=1,alpha=2 )|relu|  softmax")),
            "affine(alpha=2, beta=1) | relu | softmax");
  EXPECT_EQ(FormatOps(MustParse("affine()")), "affine");
  EXPECT_EQ(FormatOps(MustParse("affine(alpha=0.1, beta=-1e-300)")),
            "affine(alpha=0.1, beta=-1e-300)");
  EXPECT_EQ(FormatOps(MustParse("affine(alpha=-inf, beta=nan)")),
            "affine(alpha=-inf, beta=nan)");
  EXPECT_EQ(FormatOps({v1::Op()}), "?");
  EXPECT_EQ(FormatOps({}), "");
}

TEST(OpsGrammarTest, FormatRoundTrips) {
  std::vector<v1::Op> ops(5);
  ops[0].mutable_affine()->set_alpha(1.0 / 3);
  ops[0].mutable_affine()->set_beta(-123456789.123456789);
  ops[1].mutable_relu();
  ops[2].mutable_affine()->set_alpha(0);  // explicitly present zero stays present
  ops[3].mutable_sum();
  ops[4].mutable_affine()->set_beta(std::numeric_limits<double>::denorm_min());
  const std::string text = FormatOps(ops);
  std::vector<v1::Op> back = MustParse(text);
  ASSERT_THAT(back, SizeIs(ops.size())) << text;
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_TRUE(MessageDifferencer::Equals(ops[i], back[i])) << text << " op " << i;
  }
  EXPECT_TRUE(back[2].affine().has_alpha());
}

TEST(OpsGrammarTest, KnownOps) {
  // Proto declaration order; ops added to the proto follow these.
  const std::vector<std::string> known = KnownOps();
  ASSERT_GE(known.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(known.begin(), known.begin() + 4),
            (std::vector<std::string>{"affine", "relu", "sum", "softmax"}));
}

// ---- param types gpupipe.v1 does not use yet, through a descriptor built at runtime ---------

constexpr char kTestProto[] = R"pb(
  name: "grammar_test.proto"
  package: "gt"
  syntax: "proto3"
  enum_type {
    name: "Mode"
    value { name: "MODE_UNSPECIFIED" number: 0 }
    value { name: "MODE_SAME" number: 1 }
    value { name: "MODE_VALID" number: 2 }
  }
  message_type {
    name: "ConvolveOp"
    field { name: "taps" number: 1 label: LABEL_REPEATED type: TYPE_DOUBLE }
    field { name: "mode" number: 2 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".gt.Mode" }
    field { name: "n" number: 3 label: LABEL_OPTIONAL type: TYPE_INT32 }
    field { name: "k" number: 4 label: LABEL_OPTIONAL type: TYPE_UINT32 }
    field { name: "big" number: 5 label: LABEL_OPTIONAL type: TYPE_INT64 }
    field { name: "f" number: 6 label: LABEL_OPTIONAL type: TYPE_FLOAT }
    field { name: "flag" number: 7 label: LABEL_OPTIONAL type: TYPE_BOOL }
    field { name: "sizes" number: 8 label: LABEL_REPEATED type: TYPE_SINT32 }
    field { name: "label" number: 9 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "u64" number: 10 label: LABEL_OPTIONAL type: TYPE_UINT64 }
    field { name: "modes" number: 11 label: LABEL_REPEATED type: TYPE_ENUM type_name: ".gt.Mode" }
    field { name: "lo" number: 12 label: LABEL_OPTIONAL type: TYPE_DOUBLE oneof_index: 0 }
    field { name: "hi" number: 13 label: LABEL_OPTIONAL type: TYPE_DOUBLE oneof_index: 0 }
    oneof_decl { name: "bound" }
  }
  message_type { name: "NopOp" }
  message_type {
    name: "Op"
    field { name: "convolve" number: 1 label: LABEL_OPTIONAL type: TYPE_MESSAGE
            type_name: ".gt.ConvolveOp" oneof_index: 0 }
    field { name: "nop" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE
            type_name: ".gt.NopOp" oneof_index: 0 }
    oneof_decl { name: "kind" }
  }
)pb";

class GenericGrammarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kTestProto, &file));
    ASSERT_NE(pool_.BuildFile(file), nullptr);
    prototype_ = factory_.GetPrototype(pool_.FindMessageTypeByName("gt.Op"));
    ASSERT_NE(prototype_, nullptr);
  }

  // The params message of the only op of `text`, in text format for easy comparison.
  std::string Params(const std::string& text) {
    auto ops = ParseOpsAs(text, *prototype_);
    EXPECT_TRUE(ops.ok()) << text << ": " << ops.status();
    if (!ops.ok() || ops->size() != 1) return "<error>";
    const Message& op = *(*ops)[0];
    const auto* kind = op.GetDescriptor()->FindOneofByName("kind");
    const auto* field = op.GetReflection()->GetOneofFieldDescriptor(op, kind);
    std::string out;
    google::protobuf::TextFormat::Printer printer;
    printer.SetSingleLineMode(true);
    printer.PrintToString(op.GetReflection()->GetMessage(op, field), &out);
    return std::string(absl::StripTrailingAsciiWhitespace(out));
  }

  std::string Error(const std::string& text) {
    auto ops = ParseOpsAs(text, *prototype_);
    EXPECT_FALSE(ops.ok()) << text;
    return ops.ok() ? "" : std::string(ops.status().message());
  }

  google::protobuf::DescriptorPool pool_;
  google::protobuf::DynamicMessageFactory factory_{&pool_};
  const Message* prototype_ = nullptr;
};

TEST_F(GenericGrammarTest, Lists) {
  EXPECT_EQ(Params("convolve(taps=[1, -2.5, 3e2])"), "taps: 1 taps: -2.5 taps: 300");
  EXPECT_EQ(Params("convolve(taps=[ 1 ,2, ])"), "taps: 1 taps: 2");
  EXPECT_EQ(Params("convolve(taps=[])"), "");
  EXPECT_EQ(Params("convolve(sizes=[-1, 2])"), "sizes: -1 sizes: 2");
  EXPECT_EQ(Error("convolve(taps=1)"),
            "param 'taps' of op 'convolve' takes a list such as taps=[1, 2] at 1:15");
  EXPECT_EQ(Error("convolve(taps=[1, [2]])"), "nested lists are not supported at 1:19");
  EXPECT_EQ(Error("convolve(taps=[1, 2"), "unbalanced brackets: '[' at 1:15 is not closed");
  EXPECT_EQ(Error("convolve(taps=[1 2])"), "expected ',' or ']' at 1:18, got '2'");
  EXPECT_THAT(Error("convolve(sizes=[1, 2.5])"),
              HasSubstr("param 'sizes' of op 'convolve' takes an integer, got '2.5' at 1:20"));
}

TEST_F(GenericGrammarTest, Enums) {
  EXPECT_EQ(Params("convolve(mode=same)"), "mode: MODE_SAME");
  EXPECT_EQ(Params("convolve(mode=VALID)"), "mode: MODE_VALID");
  EXPECT_EQ(Params("convolve(mode=Mode_Same)"), "mode: MODE_SAME");
  EXPECT_EQ(Params("convolve(modes=[same, valid])"), "modes: MODE_SAME modes: MODE_VALID");
  EXPECT_EQ(Error("convolve(mode=full)"),
            "param 'mode' of op 'convolve' takes one of same, valid; got 'full' at 1:15");
  EXPECT_THAT(Error("convolve(mode=1)"), HasSubstr("takes one of same, valid; got '1'"));
}

TEST_F(GenericGrammarTest, Integers) {
  EXPECT_EQ(Params("convolve(n=-3, k=7)"), "n: -3 k: 7");
  EXPECT_EQ(Params("convolve(n=2147483647)"), "n: 2147483647");
  EXPECT_EQ(Params("convolve(n=-2147483648)"), "n: -2147483648");
  EXPECT_EQ(Params("convolve(n=1e3)"), "n: 1000");
  EXPECT_EQ(Params("convolve(n=2.0)"), "n: 2");
  EXPECT_EQ(Params("convolve(big=9007199254740993)"), "big: 9007199254740993");
  EXPECT_EQ(Params("convolve(big=-9223372036854775808)"), "big: -9223372036854775808");
  EXPECT_EQ(Params("convolve(u64=18446744073709551615)"), "u64: 18446744073709551615");
  EXPECT_EQ(Error("convolve(n=2147483648)"),
            "number 2147483648 is out of range for int32 param 'n' of op 'convolve' at 1:12 "
            "(range -2147483648 to 2147483647)");
  EXPECT_THAT(Error("convolve(n=-2147483649)"), HasSubstr("out of range for int32"));
  EXPECT_THAT(Error("convolve(k=-1)"), HasSubstr("number -1 is out of range for uint32"));
  EXPECT_THAT(Error("convolve(k=4294967296)"), HasSubstr("out of range for uint32"));
  EXPECT_THAT(Error("convolve(big=9223372036854775808)"), HasSubstr("out of range for int64"));
  EXPECT_THAT(Error("convolve(u64=18446744073709551616)"), HasSubstr("out of range for uint64"));
  EXPECT_THAT(Error("convolve(n=1e10)"), HasSubstr("out of range for int32"));
  EXPECT_THAT(Error("convolve(n=2.5)"), HasSubstr("takes an integer, got '2.5'"));
  EXPECT_THAT(Error("convolve(n=inf)"), HasSubstr("takes an integer, got 'inf'"));
}

TEST_F(GenericGrammarTest, FloatsBoolsAndUnsupportedTypes) {
  EXPECT_EQ(Params("convolve(f=1.5, flag=true)"), "f: 1.5 flag: true");
  EXPECT_EQ(Params("convolve(flag=False)"), "");  // proto3 default: not stored
  EXPECT_THAT(Error("convolve(f=1e39)"), HasSubstr("number 1e39 is out of range for float"));
  EXPECT_THAT(Error("convolve(flag=1)"), HasSubstr("takes true or false, got '1'"));
  EXPECT_THAT(Error("convolve(label=x)"),
              HasSubstr("param 'label' of op 'convolve' has type string, which the ops grammar "
                        "cannot express"));
}

TEST_F(GenericGrammarTest, OneofParamsExcludeEachOther) {
  EXPECT_EQ(Params("convolve(lo=1)"), "lo: 1");
  EXPECT_EQ(Error("convolve(lo=1, hi=2)"),
            "params 'lo' and 'hi' of op 'convolve' exclude each other at 1:16");
}

TEST_F(GenericGrammarTest, FormatRoundTrips) {
  const std::string text =
      "convolve(taps=[1, -2.5, 0.1], mode=same, n=-3, k=7, big=9007199254740993, f=0.1, "
      "flag=true, sizes=[-1, 2], u64=18446744073709551615, modes=[valid, same], hi=2) | nop";
  auto ops = ParseOpsAs(text, *prototype_);
  ASSERT_TRUE(ops.ok()) << ops.status();
  std::vector<const Message*> pointers;
  for (const auto& op : *ops) pointers.push_back(op.get());
  const std::string formatted = FormatOpsAs(pointers);
  EXPECT_EQ(formatted, text);
  auto back = ParseOpsAs(formatted, *prototype_);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), ops->size());
  for (size_t i = 0; i < ops->size(); ++i) {
    EXPECT_TRUE(MessageDifferencer::Equals(*(*ops)[i], *(*back)[i])) << formatted;
  }
}

TEST_F(GenericGrammarTest, MessageWithoutKindOneof) {
  const Message* nop = factory_.GetPrototype(pool_.FindMessageTypeByName("gt.NopOp"));
  auto ops = ParseOpsAs("x", *nop);
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(ops.status().message(), HasSubstr("gt.NopOp has no oneof 'kind'"));
}

}  // namespace
}  // namespace client
}  // namespace gpupipe

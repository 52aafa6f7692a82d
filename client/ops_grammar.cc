#include "client/ops_grammar.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/enum_names.h"
#include "client/suggest.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace gpupipe {
namespace client {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::OneofDescriptor;
using google::protobuf::Reflection;

const OneofDescriptor* KindOneof(const Descriptor& op_type) {
  return op_type.FindOneofByName("kind");
}

std::vector<std::string> KindNames(const OneofDescriptor& kind) {
  std::vector<std::string> names;
  for (int i = 0; i < kind.field_count(); ++i) names.push_back(kind.field(i)->name());
  return names;
}

std::vector<std::string> ParamNames(const Descriptor& op) {
  std::vector<std::string> names;
  for (int i = 0; i < op.field_count(); ++i) names.push_back(op.field(i)->name());
  return names;
}

// ---- lexer -------------------------------------------------------------------------------

struct Pos {
  int line = 1;
  int col = 1;
};

std::string At(Pos p) { return absl::StrCat(" at ", p.line, ":", p.col); }

enum class Tok { kIdent, kNumber, kLParen, kRParen, kLBracket, kRBracket, kComma, kEquals,
                 kPipe, kMinus, kPlus, kEnd };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;
  Pos pos;
};

std::string Describe(const Token& t) {
  return t.kind == Tok::kEnd ? "end of input" : absl::StrCat("'", t.text, "'");
}

bool IsIdentStart(char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }

absl::StatusOr<std::vector<Token>> Lex(absl::string_view text) {
  std::vector<Token> tokens;
  Pos pos;
  size_t i = 0;
  auto advance = [&](size_t n) {
    for (size_t k = 0; k < n; ++k, ++i) {
      if (text[i] == '\n') {
        ++pos.line;
        pos.col = 1;
      } else {
        ++pos.col;
      }
    }
  };
  while (i < text.size()) {
    const char c = text[i];
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      advance(1);
      continue;
    }
    Token t;
    t.pos = pos;
    size_t len = 1;
    if (IsIdentStart(c)) {
      while (i + len < text.size() && IsIdentChar(text[i + len])) ++len;
      t.kind = Tok::kIdent;
    } else if (IsDigit(c) || (c == '.' && i + 1 < text.size() && IsDigit(text[i + 1]))) {
      auto digits = [&] {
        while (i + len < text.size() && IsDigit(text[i + len])) ++len;
      };
      len = 0;
      digits();
      if (i + len < text.size() && text[i + len] == '.') {
        ++len;
        digits();
      }
      if (i + len < text.size() && (text[i + len] == 'e' || text[i + len] == 'E')) {
        size_t mark = len++;
        if (i + len < text.size() && (text[i + len] == '+' || text[i + len] == '-')) ++len;
        const size_t before = len;
        digits();
        if (len == before) len = mark;  // not an exponent: left for the check below
      }
      // "2x" or "1e" is a malformed number rather than a number followed by a name.
      if (i + len < text.size() && (IsIdentChar(text[i + len]) || text[i + len] == '.')) {
        size_t end = len;
        while (i + end < text.size() && (IsIdentChar(text[i + end]) || text[i + end] == '.')) {
          ++end;
        }
        return absl::InvalidArgumentError(absl::StrCat(
            "malformed number '", text.substr(i, end), "'", At(pos)));
      }
      t.kind = Tok::kNumber;
    } else {
      switch (c) {
        case '(': t.kind = Tok::kLParen; break;
        case ')': t.kind = Tok::kRParen; break;
        case '[': t.kind = Tok::kLBracket; break;
        case ']': t.kind = Tok::kRBracket; break;
        case ',': t.kind = Tok::kComma; break;
        case '=': t.kind = Tok::kEquals; break;
        case '|': t.kind = Tok::kPipe; break;
        case '-': t.kind = Tok::kMinus; break;
        case '+': t.kind = Tok::kPlus; break;
        default: {
          // Quote printable characters; show others by code so the message stays one line.
          const unsigned char u = static_cast<unsigned char>(c);
          const std::string shown = absl::ascii_isprint(u)
                                        ? absl::StrCat("'", std::string(1, c), "'")
                                        : absl::StrFormat("byte 0x%02x", u);
          return absl::InvalidArgumentError(
              absl::StrCat("unexpected character ", shown, At(pos)));
        }
      }
    }
    t.text = std::string(text.substr(i, len));
    advance(len);
    tokens.push_back(std::move(t));
  }
  Token end;
  end.pos = pos;
  tokens.push_back(end);
  return tokens;
}

// ---- values ------------------------------------------------------------------------------

struct Scalar {
  bool negative = false;
  bool has_sign = false;
  Token token;  // kNumber or kIdent
  Pos pos;      // of the sign when there is one

  std::string Text() const {
    return absl::StrCat(has_sign ? (negative ? "-" : "+") : "", token.text);
  }
};

struct Value {
  bool is_list = false;
  std::vector<Scalar> items;
  Pos pos;
};

bool IsInfName(absl::string_view s) {
  return absl::EqualsIgnoreCase(s, "inf") || absl::EqualsIgnoreCase(s, "infinity");
}

absl::string_view TypeName(const FieldDescriptor& f) { return f.type_name(); }

// Context for messages about one param: "param 'alpha' of op 'affine'".
struct ParamRef {
  const FieldDescriptor* field;
  absl::string_view op;
  std::string Name() const { return absl::StrCat("param '", field->name(), "' of op '", op, "'"); }
};

absl::StatusOr<double> ToDouble(const Scalar& s, const ParamRef& ref) {
  double v;
  if (s.token.kind == Tok::kIdent) {
    if (IsInfName(s.token.text)) {
      v = std::numeric_limits<double>::infinity();
    } else if (absl::EqualsIgnoreCase(s.token.text, "nan") && !s.has_sign) {
      v = std::numeric_limits<double>::quiet_NaN();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(ref.Name(), " takes a number, got '",
                                                     s.Text(), "'", At(s.pos)));
    }
  } else if (!absl::SimpleAtod(s.token.text, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed number '", s.Text(), "'", At(s.pos)));
  } else if (std::isinf(v)) {
    return absl::InvalidArgumentError(absl::StrCat("number ", s.Text(), " is out of range for ",
                                                   TypeName(*ref.field), " ", ref.Name(),
                                                   At(s.pos)));
  }
  return s.negative ? -v : v;
}

// Integers are exact: "3000000000" never passes through a double. Integral decimals such as
// "1e3" or "2.0" are accepted when they are exact in a double.
absl::Status ToInteger(const Scalar& s, const ParamRef& ref, int64_t lo, uint64_t hi,
                       int64_t* out_signed, uint64_t* out_unsigned) {
  auto not_integer = [&] {
    return absl::InvalidArgumentError(absl::StrCat(ref.Name(), " takes an integer, got '",
                                                   s.Text(), "'", At(s.pos)));
  };
  auto out_of_range = [&] {
    return absl::InvalidArgumentError(absl::StrCat("number ", s.Text(), " is out of range for ",
                                                   TypeName(*ref.field), " ", ref.Name(),
                                                   At(s.pos), " (range ", lo, " to ", hi, ")"));
  };
  if (s.token.kind != Tok::kNumber) return not_integer();
  const std::string& text = s.token.text;
  uint64_t magnitude = 0;
  const bool plain = text.find_first_not_of("0123456789") == std::string::npos;
  if (plain) {
    if (!absl::SimpleAtoi(text, &magnitude)) return out_of_range();
  } else {
    double d;
    if (!absl::SimpleAtod(text, &d)) return not_integer();
    if (std::isinf(d) || d >= 18446744073709551616.0) return out_of_range();
    if (d != std::floor(d)) return not_integer();
    if (d > 9007199254740992.0) return not_integer();  // 2^53: no longer exact
    magnitude = static_cast<uint64_t>(d);
  }
  if (s.negative && magnitude != 0) {
    // -lo as uint64 without overflowing for INT64_MIN.
    const uint64_t limit = static_cast<uint64_t>(-(lo + 1)) + 1;
    if (lo == 0 || magnitude > limit) return out_of_range();
    *out_signed = magnitude == limit ? lo : -static_cast<int64_t>(magnitude);
    *out_unsigned = 0;
    return absl::OkStatus();
  }
  if (magnitude > hi) return out_of_range();
  *out_signed = static_cast<int64_t>(magnitude);
  *out_unsigned = magnitude;
  return absl::OkStatus();
}

// Stores one scalar into `field` of `msg` (appending when the field is repeated).
absl::Status Store(Message* msg, const ParamRef& ref, const Scalar& s) {
  const FieldDescriptor& f = *ref.field;
  const Reflection& r = *msg->GetReflection();
  const bool rep = f.is_repeated();
  int64_t i64 = 0;
  uint64_t u64 = 0;
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      absl::StatusOr<double> v = ToDouble(s, ref);
      if (!v.ok()) return v.status();
      rep ? r.AddDouble(msg, &f, *v) : r.SetDouble(msg, &f, *v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      absl::StatusOr<double> v = ToDouble(s, ref);
      if (!v.ok()) return v.status();
      if (std::isfinite(*v) && std::fabs(*v) > FLT_MAX) {
        return absl::InvalidArgumentError(absl::StrCat("number ", s.Text(),
                                                       " is out of range for float ", ref.Name(),
                                                       At(s.pos)));
      }
      const float fv = static_cast<float>(*v);
      rep ? r.AddFloat(msg, &f, fv) : r.SetFloat(msg, &f, fv);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT32: {
      absl::Status st = ToInteger(s, ref, INT32_MIN, INT32_MAX, &i64, &u64);
      if (!st.ok()) return st;
      const int32_t v = static_cast<int32_t>(i64);
      rep ? r.AddInt32(msg, &f, v) : r.SetInt32(msg, &f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      absl::Status st = ToInteger(s, ref, INT64_MIN, INT64_MAX, &i64, &u64);
      if (!st.ok()) return st;
      rep ? r.AddInt64(msg, &f, i64) : r.SetInt64(msg, &f, i64);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      absl::Status st = ToInteger(s, ref, 0, UINT32_MAX, &i64, &u64);
      if (!st.ok()) return st;
      const uint32_t v = static_cast<uint32_t>(u64);
      rep ? r.AddUInt32(msg, &f, v) : r.SetUInt32(msg, &f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      absl::Status st = ToInteger(s, ref, 0, UINT64_MAX, &i64, &u64);
      if (!st.ok()) return st;
      rep ? r.AddUInt64(msg, &f, u64) : r.SetUInt64(msg, &f, u64);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v;
      if (s.token.kind == Tok::kIdent && !s.has_sign &&
          (absl::EqualsIgnoreCase(s.token.text, "true") ||
           absl::EqualsIgnoreCase(s.token.text, "false"))) {
        v = absl::EqualsIgnoreCase(s.token.text, "true");
      } else {
        return absl::InvalidArgumentError(absl::StrCat(ref.Name(), " takes true or false, got '",
                                                       s.Text(), "'", At(s.pos)));
      }
      rep ? r.AddBool(msg, &f, v) : r.SetBool(msg, &f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const EnumValueDescriptor* v = nullptr;
      if (s.token.kind == Tok::kIdent && !s.has_sign) {
        v = FindEnumValue(*f.enum_type(), s.token.text);
      }
      if (v == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            ref.Name(), " takes one of ", absl::StrJoin(ShortEnumNames(*f.enum_type()), ", "),
            "; got '", s.Text(), "'", At(s.pos)));
      }
      rep ? r.AddEnum(msg, &f, v) : r.SetEnum(msg, &f, v);
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(ref.Name(), " has type ", f.type_name(),
                                                     ", which the ops grammar cannot express",
                                                     At(s.pos)));
  }
}

// ---- parser ------------------------------------------------------------------------------

class Parser {
 public:
  Parser(std::vector<Token> tokens, const Message& prototype, const OneofDescriptor& kind)
      : tokens_(std::move(tokens)), prototype_(prototype), kind_(kind) {}

  absl::StatusOr<std::vector<std::unique_ptr<Message>>> ParsePipeline() {
    std::vector<std::unique_ptr<Message>> ops;
    if (Peek().kind == Tok::kEnd) {
      return absl::InvalidArgumentError(
          "empty pipeline (expected ops such as 'affine(alpha=2) | relu')");
    }
    for (;;) {
      std::unique_ptr<Message> op(prototype_.New());
      absl::Status s = ParseOp(op.get());
      if (!s.ok()) return s;
      ops.push_back(std::move(op));
      const Token& t = Peek();
      if (t.kind == Tok::kEnd) return ops;
      if (t.kind == Tok::kPipe) {
        Next();
        continue;
      }
      if (t.kind == Tok::kRParen || t.kind == Tok::kRBracket) {
        return absl::InvalidArgumentError(
            absl::StrCat("unbalanced parentheses: unexpected ", Describe(t), At(t.pos)));
      }
      return absl::InvalidArgumentError(absl::StrCat("unexpected ", Describe(t), At(t.pos),
                                                     " (expected '|' or the end of the pipeline)"));
    }
  }

 private:
  const Token& Peek() const { return tokens_[pos_]; }
  const Token& Next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }

  absl::Status ParseOp(Message* op) {
    const Token& name = Next();
    if (name.kind != Tok::kIdent) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected an op name", At(name.pos), ", got ", Describe(name)));
    }
    const FieldDescriptor* kind_field = nullptr;
    for (int i = 0; i < kind_.field_count(); ++i) {
      if (kind_.field(i)->name() == name.text) kind_field = kind_.field(i);
    }
    if (kind_field == nullptr || kind_field->message_type() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown op '", name.text, "'", At(name.pos), DidYouMean(name.text, KindNames(kind_)),
          " (known: ", absl::StrJoin(KindNames(kind_), ", "), ")"));
    }
    Message* params = op->GetReflection()->MutableMessage(op, kind_field);
    if (Peek().kind != Tok::kLParen) return absl::OkStatus();
    const Token& open = Next();
    open_paren_ = &open;
    std::set<const FieldDescriptor*> seen;
    for (;;) {
      const Token& t = Next();
      if (t.kind == Tok::kRParen) return absl::OkStatus();
      if (t.kind == Tok::kEnd) return Unclosed(open);
      if (t.kind != Tok::kIdent) {
        return absl::InvalidArgumentError(absl::StrCat("expected a param name or ')'", At(t.pos),
                                                       ", got ", Describe(t)));
      }
      const Descriptor& desc = *params->GetDescriptor();
      const FieldDescriptor* field = desc.FindFieldByName(t.text);
      if (field == nullptr) {
        const std::vector<std::string> names = ParamNames(desc);
        return absl::InvalidArgumentError(absl::StrCat(
            "unknown param '", t.text, "' for op '", name.text, "'", At(t.pos),
            DidYouMean(t.text, names),
            names.empty() ? absl::StrCat(" (op '", name.text, "' takes no params)")
                          : absl::StrCat(" (params: ", absl::StrJoin(names, ", "), ")")));
      }
      if (!seen.insert(field).second) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate param '", t.text, "' for op '",
                                                       name.text, "'", At(t.pos)));
      }
      if (const OneofDescriptor* oneof = field->real_containing_oneof()) {
        for (const FieldDescriptor* other : seen) {
          if (other != field && other->real_containing_oneof() == oneof) {
            return absl::InvalidArgumentError(absl::StrCat(
                "params '", other->name(), "' and '", field->name(), "' of op '", name.text,
                "' exclude each other", At(t.pos)));
          }
        }
      }
      const Token& eq = Next();
      if (eq.kind != Tok::kEquals) {
        if (eq.kind == Tok::kEnd) return Unclosed(open);
        return absl::InvalidArgumentError(absl::StrCat("expected '=' after param '", t.text, "'",
                                                       At(eq.pos), ", got ", Describe(eq)));
      }
      absl::StatusOr<Value> value = ParseValue();
      if (!value.ok()) return value.status();
      absl::Status s = Apply(params, ParamRef{field, name.text}, *value);
      if (!s.ok()) return s;
      const Token& sep = Next();
      if (sep.kind == Tok::kComma) continue;
      if (sep.kind == Tok::kRParen) return absl::OkStatus();
      if (sep.kind == Tok::kEnd) return Unclosed(open);
      return absl::InvalidArgumentError(
          absl::StrCat("expected ',' or ')'", At(sep.pos), ", got ", Describe(sep)));
    }
  }

  // Input that ends inside a value: name the bracket or parenthesis left open.
  absl::Status EndInsideValue() const {
    if (open_bracket_ != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unbalanced brackets: '['", At(open_bracket_->pos), " is not closed"));
    }
    return Unclosed(*open_paren_);
  }

  absl::Status Unclosed(const Token& open) const {
    return absl::InvalidArgumentError(absl::StrCat("unbalanced parentheses: '", open.text, "'",
                                                   At(open.pos), " is not closed"));
  }

  absl::StatusOr<Scalar> ParseScalar() {
    Scalar s;
    const Token& first = Next();
    s.pos = first.pos;
    const Token* t = &first;
    if (first.kind == Tok::kMinus || first.kind == Tok::kPlus) {
      s.has_sign = true;
      s.negative = first.kind == Tok::kMinus;
      t = &Next();
      if (t->kind == Tok::kEnd) return EndInsideValue();
      if (t->kind != Tok::kNumber && !(t->kind == Tok::kIdent && IsInfName(t->text))) {
        return absl::InvalidArgumentError(absl::StrCat("expected a number after '", first.text,
                                                       "'", At(t->pos), ", got ", Describe(*t)));
      }
    }
    if (t->kind == Tok::kEnd) return EndInsideValue();
    if (t->kind != Tok::kNumber && t->kind != Tok::kIdent) {
      if (t->kind == Tok::kLBracket) {
        return absl::InvalidArgumentError(
            absl::StrCat("nested lists are not supported", At(t->pos)));
      }
      return absl::InvalidArgumentError(
          absl::StrCat("expected a value", At(t->pos), ", got ", Describe(*t)));
    }
    s.token = *t;
    return s;
  }

  absl::StatusOr<Value> ParseValue() {
    Value v;
    v.pos = Peek().pos;
    if (Peek().kind != Tok::kLBracket) {
      absl::StatusOr<Scalar> s = ParseScalar();
      if (!s.ok()) return s.status();
      v.items.push_back(*s);
      return v;
    }
    const Token& open = Next();
    v.is_list = true;
    open_bracket_ = &open;
    for (;;) {
      if (Peek().kind == Tok::kRBracket) break;
      if (Peek().kind == Tok::kEnd) return EndInsideValue();
      absl::StatusOr<Scalar> s = ParseScalar();
      if (!s.ok()) return s.status();
      v.items.push_back(*s);
      const Token& sep = Peek();
      if (sep.kind == Tok::kComma) {
        Next();
        continue;
      }
      if (sep.kind == Tok::kRBracket) break;
      if (sep.kind == Tok::kEnd) return EndInsideValue();
      return absl::InvalidArgumentError(
          absl::StrCat("expected ',' or ']'", At(sep.pos), ", got ", Describe(sep)));
    }
    Next();  // ']'
    open_bracket_ = nullptr;
    return v;
  }

  absl::Status Apply(Message* msg, const ParamRef& ref, const Value& v) {
    if (ref.field->is_repeated() && !v.is_list) {
      return absl::InvalidArgumentError(absl::StrCat(ref.Name(), " takes a list such as ",
                                                     ref.field->name(), "=[1, 2]", At(v.pos)));
    }
    if (!ref.field->is_repeated() && v.is_list) {
      return absl::InvalidArgumentError(
          absl::StrCat(ref.Name(), " takes a single value, not a list", At(v.pos)));
    }
    for (const Scalar& s : v.items) {
      absl::Status st = Store(msg, ref, s);
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

  std::vector<Token> tokens_;
  const Message& prototype_;
  const OneofDescriptor& kind_;
  size_t pos_ = 0;
  // The '(' of the op being parsed and the '[' of the list being parsed, if any; both point
  // into tokens_, which does not change while parsing.
  const Token* open_paren_ = nullptr;
  const Token* open_bracket_ = nullptr;
};

// ---- formatting --------------------------------------------------------------------------

template <typename T>
std::string ShortestFloat(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  const int max_digits = std::numeric_limits<T>::max_digits10;
  std::string out;
  for (int digits = 1; digits <= max_digits; ++digits) {
    out = absl::StrFormat("%.*g", digits, static_cast<double>(v));
    double back;
    if (absl::SimpleAtod(out, &back) && static_cast<T>(back) == v) break;
  }
  return out;
}

std::string FormatScalar(const Message& msg, const FieldDescriptor& f, int index) {
  const Reflection& r = *msg.GetReflection();
  const bool rep = f.is_repeated();
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return ShortestFloat(rep ? r.GetRepeatedDouble(msg, &f, index) : r.GetDouble(msg, &f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return ShortestFloat(rep ? r.GetRepeatedFloat(msg, &f, index) : r.GetFloat(msg, &f));
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(rep ? r.GetRepeatedInt32(msg, &f, index) : r.GetInt32(msg, &f));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(rep ? r.GetRepeatedInt64(msg, &f, index) : r.GetInt64(msg, &f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(rep ? r.GetRepeatedUInt32(msg, &f, index) : r.GetUInt32(msg, &f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(rep ? r.GetRepeatedUInt64(msg, &f, index) : r.GetUInt64(msg, &f));
    case FieldDescriptor::CPPTYPE_BOOL:
      return (rep ? r.GetRepeatedBool(msg, &f, index) : r.GetBool(msg, &f)) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return ShortEnumName(*f.enum_type(), rep ? r.GetRepeatedEnumValue(msg, &f, index)
                                               : r.GetEnumValue(msg, &f));
    default:
      return "?";
  }
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Message>>> ParseOpsAs(
    absl::string_view text, const Message& prototype) {
  const OneofDescriptor* kind = KindOneof(*prototype.GetDescriptor());
  if (kind == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(prototype.GetDescriptor()->full_name(), " has no oneof 'kind'"));
  }
  absl::StatusOr<std::vector<Token>> tokens = Lex(text);
  if (!tokens.ok()) return tokens.status();
  return Parser(*std::move(tokens), prototype, *kind).ParsePipeline();
}

std::string FormatOpsAs(const std::vector<const Message*>& ops) {
  std::vector<std::string> parts;
  for (const Message* op : ops) {
    const OneofDescriptor* oneof = KindOneof(*op->GetDescriptor());
    const FieldDescriptor* kind =
        oneof == nullptr ? nullptr : op->GetReflection()->GetOneofFieldDescriptor(*op, oneof);
    if (kind == nullptr || kind->message_type() == nullptr) {
      parts.push_back("?");
      continue;
    }
    const Message& params = op->GetReflection()->GetMessage(*op, kind);
    std::vector<const FieldDescriptor*> fields;
    params.GetReflection()->ListFields(params, &fields);
    std::vector<std::string> assigns;
    for (const FieldDescriptor* f : fields) {
      std::string value;
      if (f->is_repeated()) {
        std::vector<std::string> items;
        const int n = params.GetReflection()->FieldSize(params, f);
        for (int i = 0; i < n; ++i) items.push_back(FormatScalar(params, *f, i));
        value = absl::StrCat("[", absl::StrJoin(items, ", "), "]");
      } else {
        value = FormatScalar(params, *f, 0);
      }
      assigns.push_back(absl::StrCat(f->name(), "=", value));
    }
    parts.push_back(assigns.empty() ? kind->name()
                                    : absl::StrCat(kind->name(), "(",
                                                   absl::StrJoin(assigns, ", "), ")"));
  }
  return absl::StrJoin(parts, " | ");
}

std::vector<std::string> KnownOps() {
  return KindNames(*KindOneof(*v1::Op::descriptor()));
}

absl::StatusOr<std::vector<v1::Op>> ParseOps(absl::string_view text) {
  absl::StatusOr<std::vector<std::unique_ptr<Message>>> parsed =
      ParseOpsAs(text, v1::Op::default_instance());
  if (!parsed.ok()) return parsed.status();
  std::vector<v1::Op> ops(parsed->size());
  for (size_t i = 0; i < ops.size(); ++i) {
    // New() on the v1::Op prototype made every element a v1::Op.
    ops[i].Swap(static_cast<v1::Op*>((*parsed)[i].get()));
  }
  return ops;
}

std::string FormatOps(const std::vector<v1::Op>& ops) {
  std::vector<const Message*> pointers;
  for (const v1::Op& op : ops) pointers.push_back(&op);
  return FormatOpsAs(pointers);
}

}  // namespace client
}  // namespace gpupipe

#include "spark/runtime/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/charconv.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spark {
namespace rt {
namespace {

const std::string& EmptyString() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}

// Length of the UTF-8 sequence starting at text[pos] (1..4), or 0 when it is not valid UTF-8
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
int Utf8SequenceLength(absl::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return 1;
  int length = 0;
  unsigned char min_second = 0x80, max_second = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) min_second = 0xA0;
    if (lead == 0xED) max_second = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) min_second = 0x90;
    if (lead == 0xF4) max_second = 0x8F;
  } else {
    return 0;
  }
  if (pos + length > text.size()) return 0;
  if (byte(pos + 1) < min_second || byte(pos + 1) > max_second) return 0;
  for (int i = 2; i < length; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return 0;
  }
  return length;
}

void AppendUtf8(uint32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    out->push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Parser {
 public:
  Parser(absl::string_view text, int max_depth) : text_(text), max_depth_(max_depth) {}

  absl::StatusOr<Json> ParseDocument() {
    SkipWhitespace();
    absl::StatusOr<Json> value = ParseValue(0);
    if (!value.ok()) return value.status();
    SkipWhitespace();
    if (pos_ != text_.size()) {
      return Error(pos_, absl::StrCat("unexpected ", Describe(pos_), " after the JSON value"));
    }
    return value;
  }

 private:
  absl::Status Error(size_t offset, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat("JSON error at byte ", offset, ": ", message));
  }

  // "'x'", "byte 0x01" or "the end of the input", for messages.
  std::string Describe(size_t offset) const {
    if (offset >= text_.size()) return "the end of the input";
    const unsigned char c = static_cast<unsigned char>(text_[offset]);
    if (c >= 0x20 && c < 0x7F) return absl::StrCat("'", text_.substr(offset, 1), "'");
    return absl::StrFormat("byte 0x%02x", c);
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  void SkipWhitespace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      ++pos_;
    }
  }

  absl::StatusOr<Json> ParseValue(int depth) {
    switch (Peek()) {
      case '{':
        return ParseObject(depth + 1);
      case '[':
        return ParseArray(depth + 1);
      case '"': {
        absl::StatusOr<std::string> text = ParseString();
        if (!text.ok()) return text.status();
        return Json::String(*std::move(text));
      }
      case 't':
        return ParseLiteral("true", Json::Bool(true));
      case 'f':
        return ParseLiteral("false", Json::Bool(false));
      case 'n':
        return ParseLiteral("null", Json::Null());
      default:
        if (Peek() == '-' || IsDigit(Peek())) return ParseNumber();
        return Error(pos_, absl::StrCat("expected a JSON value, found ", Describe(pos_)));
    }
  }

  absl::StatusOr<Json> ParseLiteral(absl::string_view word, Json value) {
    if (text_.substr(pos_, word.size()) != word) {
      return Error(pos_, absl::StrCat("expected a JSON value, found ", Describe(pos_)));
    }
    pos_ += word.size();
    return value;
  }

  // RFC 8259: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
  absl::StatusOr<Json> ParseNumber() {
    const size_t start = pos_;
    if (Peek() == '-') ++pos_;
    if (Peek() == '0') {
      ++pos_;
    } else if (IsDigit(Peek())) {
      while (IsDigit(Peek())) ++pos_;
    } else {
      return Error(pos_, absl::StrCat("expected a digit, found ", Describe(pos_)));
    }
    bool integral = true;
    if (Peek() == '.') {
      integral = false;
      ++pos_;
      if (!IsDigit(Peek())) {
        return Error(pos_, absl::StrCat("expected a digit after '.', found ", Describe(pos_)));
      }
      while (IsDigit(Peek())) ++pos_;
    }
    if (Peek() == 'e' || Peek() == 'E') {
      integral = false;
      ++pos_;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      if (!IsDigit(Peek())) {
        return Error(pos_,
                     absl::StrCat("expected a digit in the exponent, found ", Describe(pos_)));
      }
      while (IsDigit(Peek())) ++pos_;
    }
    const absl::string_view token = text_.substr(start, pos_ - start);
    int64_t integer = 0;
    if (integral && absl::SimpleAtoi(token, &integer)) return Json::Int(integer);
    double value = 0.0;
    const absl::from_chars_result result =
        absl::from_chars(token.data(), token.data() + token.size(), value);
    if (result.ec != std::errc() || !std::isfinite(value)) {
      return Error(start, absl::StrCat("number ", token, " is out of the range of a double"));
    }
    return Json::Double(value);
  }

  // Four hex digits at pos_.
  absl::StatusOr<uint32_t> ParseHex4() {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = Peek();
      uint32_t digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        return Error(pos_, absl::StrCat("expected 4 hex digits after \\u, found ", Describe(pos_)));
      }
      value = value * 16 + digit;
      ++pos_;
    }
    return value;
  }

  // After "\u": a code point, combining a surrogate pair.
  absl::StatusOr<uint32_t> ParseUnicodeEscape(size_t escape_start) {
    absl::StatusOr<uint32_t> unit = ParseHex4();
    if (!unit.ok()) return unit.status();
    if (*unit >= 0xDC00 && *unit <= 0xDFFF) {
      return Error(escape_start, "unpaired low surrogate in \\u escape");
    }
    if (*unit < 0xD800 || *unit > 0xDBFF) return *unit;
    if (text_.substr(pos_, 2) != "\\u") {
      return Error(escape_start, "high surrogate in \\u escape is not followed by a low surrogate");
    }
    pos_ += 2;
    absl::StatusOr<uint32_t> low = ParseHex4();
    if (!low.ok()) return low.status();
    if (*low < 0xDC00 || *low > 0xDFFF) {
      return Error(escape_start, "high surrogate in \\u escape is not followed by a low surrogate");
    }
    return 0x10000 + ((*unit - 0xD800) << 10) + (*low - 0xDC00);
  }

  absl::Status ParseEscape(std::string* out) {
    const size_t escape_start = pos_;
    ++pos_;  // the backslash
    const char c = Peek();
    ++pos_;
    switch (c) {
      case '"': out->push_back('"'); return absl::OkStatus();
      case '\\': out->push_back('\\'); return absl::OkStatus();
      case '/': out->push_back('/'); return absl::OkStatus();
      case 'b': out->push_back('\b'); return absl::OkStatus();
      case 'f': out->push_back('\f'); return absl::OkStatus();
      case 'n': out->push_back('\n'); return absl::OkStatus();
      case 'r': out->push_back('\r'); return absl::OkStatus();
      case 't': out->push_back('\t'); return absl::OkStatus();
      case 'u': {
        absl::StatusOr<uint32_t> code_point = ParseUnicodeEscape(escape_start);
        if (!code_point.ok()) return code_point.status();
        AppendUtf8(*code_point, out);
        return absl::OkStatus();
      }
      default:
        return Error(escape_start, absl::StrCat("invalid escape \\", Describe(escape_start + 1),
                                                " in string (valid: \\\" \\\\ \\/ \\b \\f \\n "
                                                "\\r \\t \\uXXXX)"));
    }
  }

  absl::StatusOr<std::string> ParseString() {
    const size_t start = pos_;
    ++pos_;  // the opening quote
    std::string out;
    while (true) {
      if (AtEnd()) return Error(start, "unterminated string");
      const unsigned char c = static_cast<unsigned char>(Peek());
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c == '\\') {
        absl::Status status = ParseEscape(&out);
        if (!status.ok()) return status;
        continue;
      }
      if (c < 0x20) {
        return Error(pos_, absl::StrFormat("control character 0x%02x in string (escape it)", c));
      }
      const int length = Utf8SequenceLength(text_, pos_);
      if (length == 0) return Error(pos_, "invalid UTF-8 in string");
      out.append(text_.data() + pos_, length);
      pos_ += length;
    }
  }

  absl::Status CheckDepth(int depth) const {
    if (depth <= max_depth_) return absl::OkStatus();
    return Error(pos_, absl::StrCat("nesting is deeper than the limit of ", max_depth_));
  }

  absl::StatusOr<Json> ParseArray(int depth) {
    absl::Status status = CheckDepth(depth);
    if (!status.ok()) return status;
    ++pos_;  // '['
    Json::Array elements;
    SkipWhitespace();
    if (Peek() == ']') {
      ++pos_;
      return Json::MakeArray(std::move(elements));
    }
    while (true) {
      SkipWhitespace();
      absl::StatusOr<Json> element = ParseValue(depth);
      if (!element.ok()) return element.status();
      elements.push_back(*std::move(element));
      SkipWhitespace();
      if (Peek() == ']') {
        ++pos_;
        return Json::MakeArray(std::move(elements));
      }
      if (Peek() != ',') {
        return Error(pos_, absl::StrCat("expected ',' or ']' in array, found ", Describe(pos_)));
      }
      ++pos_;
    }
  }

  absl::StatusOr<Json> ParseObject(int depth) {
    absl::Status status = CheckDepth(depth);
    if (!status.ok()) return status;
    ++pos_;  // '{'
    Json::Object members;
    absl::flat_hash_set<std::string> keys;
    SkipWhitespace();
    if (Peek() == '}') {
      ++pos_;
      return Json::MakeObject(std::move(members));
    }
    while (true) {
      SkipWhitespace();
      if (Peek() != '"') {
        return Error(pos_, absl::StrCat("expected a string key in object, found ", Describe(pos_)));
      }
      const size_t key_start = pos_;
      absl::StatusOr<std::string> key = ParseString();
      if (!key.ok()) return key.status();
      if (!keys.insert(*key).second) {
        return Error(key_start, absl::StrCat("duplicate key \"", *key, "\" in object"));
      }
      SkipWhitespace();
      if (Peek() != ':') {
        return Error(pos_, absl::StrCat("expected ':' after object key, found ", Describe(pos_)));
      }
      ++pos_;
      SkipWhitespace();
      absl::StatusOr<Json> value = ParseValue(depth);
      if (!value.ok()) return value.status();
      members.emplace_back(*std::move(key), *std::move(value));
      SkipWhitespace();
      if (Peek() == '}') {
        ++pos_;
        return Json::MakeObject(std::move(members));
      }
      if (Peek() != ',') {
        return Error(pos_, absl::StrCat("expected ',' or '}' in object, found ", Describe(pos_)));
      }
      ++pos_;
    }
  }

  absl::string_view text_;
  int max_depth_;
  size_t pos_ = 0;
};

void AppendQuoted(absl::string_view text, std::string* out) {
  out->push_back('"');
  for (const char c : text) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// The shortest "%.Ng" text that reads back as exactly `value`, marked as a double.
void AppendDouble(double value, std::string* out) {
  if (!std::isfinite(value)) {
    out->append("null");
    return;
  }
  char buffer[32];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  const absl::string_view text(buffer);
  out->append(text.data(), text.size());
  if (text.find_first_of(".e") == absl::string_view::npos) out->append(".0");
}

void AppendJson(const Json& value, std::string* out) {
  switch (value.type()) {
    case Json::Type::kNull:
      out->append("null");
      return;
    case Json::Type::kBool:
      out->append(value.as_bool() ? "true" : "false");
      return;
    case Json::Type::kNumber:
      if (value.is_int()) {
        absl::StrAppend(out, value.as_int());
      } else {
        AppendDouble(value.as_double(), out);
      }
      return;
    case Json::Type::kString:
      AppendQuoted(value.as_string(), out);
      return;
    case Json::Type::kArray: {
      out->push_back('[');
      const char* separator = "";
      for (const Json& element : value.as_array()) {
        out->append(separator);
        AppendJson(element, out);
        separator = ",";
      }
      out->push_back(']');
      return;
    }
    case Json::Type::kObject: {
      out->push_back('{');
      const char* separator = "";
      for (const Json::Member& member : value.as_object()) {
        out->append(separator);
        AppendQuoted(member.first, out);
        out->push_back(':');
        AppendJson(member.second, out);
        separator = ",";
      }
      out->push_back('}');
      return;
    }
  }
}

}  // namespace

Json Json::Bool(bool value) {
  Json json;
  json.type_ = Type::kBool;
  json.bool_ = value;
  return json;
}

Json Json::Int(int64_t value) {
  Json json;
  json.type_ = Type::kNumber;
  json.is_int_ = true;
  json.int_ = value;
  json.double_ = static_cast<double>(value);
  return json;
}

Json Json::Double(double value) {
  Json json;
  json.type_ = Type::kNumber;
  json.double_ = value;
  return json;
}

Json Json::String(std::string value) {
  Json json;
  json.type_ = Type::kString;
  json.string_ = std::move(value);
  return json;
}

Json Json::MakeArray(Array elements) {
  Json json;
  json.type_ = Type::kArray;
  json.array_ = std::move(elements);
  return json;
}

Json Json::MakeObject(Object members) {
  Json json;
  json.type_ = Type::kObject;
  json.object_ = std::move(members);
  return json;
}

absl::StatusOr<Json> Json::Parse(absl::string_view text, int max_depth) {
  return Parser(text, max_depth).ParseDocument();
}

std::string Json::Serialize() const {
  std::string out;
  AppendJson(*this, &out);
  return out;
}

int64_t Json::as_int() const {
  if (type_ != Type::kNumber) return 0;
  if (is_int_) return int_;
  // Saturate instead of the undefined behaviour of an out-of-range conversion.
  if (!(double_ > -9.2233720368547758e18)) return INT64_MIN;
  if (!(double_ < 9.2233720368547758e18)) return INT64_MAX;
  return static_cast<int64_t>(double_);
}

double Json::as_double() const { return type_ == Type::kNumber ? double_ : 0.0; }

const std::string& Json::as_string() const {
  return type_ == Type::kString ? string_ : EmptyString();
}

const Json::Array& Json::as_array() const {
  static const Array* const kEmpty = new Array();
  return type_ == Type::kArray ? array_ : *kEmpty;
}

const Json::Object& Json::as_object() const {
  static const Object* const kEmpty = new Object();
  return type_ == Type::kObject ? object_ : *kEmpty;
}

const Json* Json::Find(absl::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (const Member& member : object_) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

Json& Json::Add(std::string key, Json value) {
  if (type_ == Type::kNull) type_ = Type::kObject;
  object_.emplace_back(std::move(key), std::move(value));
  return *this;
}

Json& Json::Append(Json value) {
  if (type_ == Type::kNull) type_ = Type::kArray;
  array_.push_back(std::move(value));
  return *this;
}

absl::string_view Json::TypeName() const {
  switch (type_) {
    case Type::kNull: return "null";
    case Type::kBool: return "a boolean";
    case Type::kNumber: return is_int_ ? "an integer" : "a number";
    case Type::kString: return "a string";
    case Type::kArray: return "an array";
    case Type::kObject: return "an object";
  }
  return "a value";
}

bool operator==(const Json& a, const Json& b) {
  if (a.type_ != b.type_) return false;
  switch (a.type_) {
    case Json::Type::kNull: return true;
    case Json::Type::kBool: return a.bool_ == b.bool_;
    case Json::Type::kNumber:
      if (a.is_int_ != b.is_int_) return false;
      return a.is_int_ ? a.int_ == b.int_ : a.double_ == b.double_;
    case Json::Type::kString: return a.string_ == b.string_;
    case Json::Type::kArray: return a.array_ == b.array_;
    case Json::Type::kObject: return a.object_ == b.object_;
  }
  return false;
}

}  // namespace rt
}  // namespace spark

#include "spark/runtime/tool_call.h"

#include <cctype>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace spark {
namespace rt {
namespace {

using Json = nlohmann::ordered_json;

constexpr absl::string_view kQuote = "<|\"|>";
constexpr int kMaxDepth = 64;

// A recursive-descent reader of Gemma's argument syntax. Hand-written: no library reads this
// format (it is JSON-like, with bare keys and <|"|> string quotes).
class Reader {
 public:
  explicit Reader(absl::string_view text) : text_(text) {}

  absl::StatusOr<Json> Object(int depth) {
    if (depth > kMaxDepth) return Error("nested deeper than 64");
    if (!Eat('{')) return Error("expected '{'");
    Json object = Json::object();
    SkipSpace();
    if (Eat('}')) return object;
    while (true) {
      SkipSpace();
      absl::StatusOr<std::string> key = Key();
      if (!key.ok()) return key.status();
      SkipSpace();
      if (!Eat(':')) return Error(absl::StrCat("expected ':' after the key '", *key, "'"));
      absl::StatusOr<Json> value = Value(depth + 1);
      if (!value.ok()) return value.status();
      object[*key] = *std::move(value);
      SkipSpace();
      if (Eat('}')) return object;
      if (!Eat(',')) return Error("expected ',' or '}'");
    }
  }

  absl::StatusOr<Json> Value(int depth) {
    SkipSpace();
    if (Peek(kQuote)) return String();
    if (Peek("{")) return Object(depth);
    if (Peek("[")) return Array(depth);
    // A bare word: a number, true/false, null/none/nil (any case), or text as a string.
    const size_t start = at_;
    while (at_ < text_.size() && text_[at_] != ',' && text_[at_] != '}' && text_[at_] != ']') ++at_;
    std::string word(text_.substr(start, at_ - start));
    while (!word.empty() && std::isspace(static_cast<unsigned char>(word.back()))) word.pop_back();
    if (word.empty()) return Error("expected a value");
    std::string lower;
    for (char c : word) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "true") return Json(true);
    if (lower == "false") return Json(false);
    if (lower == "null" || lower == "none" || lower == "nil") return Json(nullptr);
    const Json number = Json::parse(word, nullptr, /*allow_exceptions=*/false);
    if (number.is_number()) return number;
    return Json(word);
  }

  bool AtEnd() {
    SkipSpace();
    return at_ == text_.size();
  }
  bool Eat(char c) {
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("tool call: ", what, " at byte ", at_, " of '", text_.substr(0, 200), "'"));
  }

 private:
  absl::StatusOr<Json> Array(int depth) {
    if (depth > kMaxDepth) return Error("nested deeper than 64");
    Eat('[');
    Json array = Json::array();
    SkipSpace();
    if (Eat(']')) return array;
    while (true) {
      absl::StatusOr<Json> value = Value(depth + 1);
      if (!value.ok()) return value.status();
      array.push_back(*std::move(value));
      SkipSpace();
      if (Eat(']')) return array;
      if (!Eat(',')) return Error("expected ',' or ']'");
    }
  }

  absl::StatusOr<Json> String() {
    at_ += kQuote.size();
    const size_t end = text_.find(kQuote, at_);
    if (end == absl::string_view::npos) return Error("a string without its closing <|\"|>");
    Json value(std::string(text_.substr(at_, end - at_)));
    at_ = end + kQuote.size();
    return value;
  }

  absl::StatusOr<std::string> Key() {
    if (Peek(kQuote)) {
      absl::StatusOr<Json> quoted = String();
      if (!quoted.ok()) return quoted.status();
      return quoted->get<std::string>();
    }
    const size_t start = at_;
    while (at_ < text_.size() && text_[at_] != ':' && text_[at_] != ',' && text_[at_] != '}' &&
           !std::isspace(static_cast<unsigned char>(text_[at_]))) {
      ++at_;
    }
    if (at_ == start) return Error("expected a key");
    return std::string(text_.substr(start, at_ - start));
  }

  bool Peek(absl::string_view s) const { return text_.substr(at_, s.size()) == s; }
  void SkipSpace() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }

  absl::string_view text_;
  size_t at_ = 0;
};

}  // namespace

absl::StatusOr<ToolCall> ParseToolCall(absl::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  constexpr absl::string_view kCall = "call:";
  if (text.substr(0, kCall.size()) != kCall) {
    return absl::InvalidArgumentError(
        absl::StrCat("tool call: expected 'call:NAME{...}', got '", text.substr(0, 200), "'"));
  }
  text.remove_prefix(kCall.size());
  const size_t brace = text.find('{');
  ToolCall call;
  call.name = std::string(text.substr(0, brace));
  if (call.name.empty() || brace == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("tool call: expected a name and '{' after 'call:', got '", text.substr(0, 200), "'"));
  }
  for (char c : call.name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      return absl::InvalidArgumentError(absl::StrCat("tool call: the name '", call.name,
                                                     "' has a character other than letters, "
                                                     "digits, '_', '-' and '.'"));
    }
  }
  Reader reader(text.substr(brace));
  absl::StatusOr<Json> arguments = reader.Object(0);
  if (!arguments.ok()) return arguments.status();
  if (!reader.AtEnd()) return reader.Error("text after the arguments' closing '}'");
  call.arguments = arguments->dump(-1, ' ', false, Json::error_handler_t::replace);
  return call;
}

}  // namespace rt
}  // namespace spark

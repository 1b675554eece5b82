#include "json_document.h"

#include <cstddef>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace spark {
namespace rt {
namespace {

// A SAX pass over the text before the DOM is built: nlohmann keeps the last of two equal keys
// and has no depth limit of its own. Its parser is iterative, so this pass cannot overflow the
// stack either; it stops at the first problem.
class StructureCheck final : public nlohmann::json_sax<Json> {
 public:
  explicit StructureCheck(int max_depth) : max_depth_(max_depth) {}

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return Enter();
  }
  bool key(string_t& key) override {
    if (keys_.back().insert(key).second) return true;
    return Fail(absl::StrCat("duplicate key \"", key, "\" in object"));
  }
  bool end_object() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    keys_.emplace_back();  // keeps keys_ in step with the nesting
    return Enter();
  }
  bool end_array() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& error) override {
    // nlohmann's message is "[json.exception.parse_error.101] parse error at line 1, column 12:
    // syntax error while parsing value - unexpected '}'; expected '[', ..."; keep what follows
    // the location.
    std::string what = error.what();
    const size_t colon = what.find(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    position_ = position;
    message_ = what;
    return false;
  }

  // Where the pass stopped (a byte offset) and why; empty when the text is fine.
  size_t position() const { return position_; }
  const std::string& message() const { return message_; }

 private:
  bool Enter() {
    if (++depth_ <= max_depth_) return true;
    return Fail(absl::StrCat("nesting deeper than ", max_depth_, " levels"));
  }
  bool Fail(std::string message) {
    message_ = std::move(message);
    position_ = std::numeric_limits<size_t>::max();  // filled in by ParseJson
    return false;
  }

  int max_depth_;
  int depth_ = 0;
  std::vector<absl::flat_hash_set<std::string>> keys_;
  size_t position_ = 0;
  std::string message_;
};

// A pointer into the text that records how far the parser has read, so that an error found by
// StructureCheck (which nlohmann gives no position) can say where it is.
class CountingIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator(const char* at, const char* begin, size_t* furthest)
      : at_(at), begin_(begin), furthest_(furthest) {}
  reference operator*() const { return *at_; }
  CountingIterator& operator++() {
    ++at_;
    if (furthest_ != nullptr) *furthest_ = static_cast<size_t>(at_ - begin_);
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const CountingIterator& other) const { return at_ == other.at_; }
  bool operator!=(const CountingIterator& other) const { return at_ != other.at_; }

 private:
  const char* at_;
  const char* begin_;
  size_t* furthest_;
};

}  // namespace

absl::StatusOr<Json> ParseJson(absl::string_view text, int max_depth) {
  StructureCheck check(max_depth);
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  size_t consumed = 0;  // how far the parser has read: just past the token it last handed out
  if (!Json::sax_parse(CountingIterator(begin, begin, &consumed),
                       CountingIterator(end, begin, nullptr), &check,
                       nlohmann::json::input_format_t::json, /*strict=*/true)) {
    // nlohmann's own errors carry their position; a duplicate key or the depth limit is where
    // the parser stopped (the end of that key or bracket).
    // Both count the bytes read, the offending one included: the offset is one less.
    size_t position =
        check.position() == std::numeric_limits<size_t>::max() ? consumed : check.position();
    position = position > 0 ? position - 1 : 0;
    return absl::InvalidArgumentError(
        absl::StrCat("JSON error at byte ", position, ": ", check.message()));
  }
  Json value = Json::parse(begin, end, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return absl::InvalidArgumentError("JSON error: the document could not be read");
  }
  return value;
}

std::string SerializeJson(const Json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

bool IsJsonInt(const Json& value) {
  if (value.is_number_unsigned()) {
    return value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  }
  return value.is_number_integer();
}

int64_t JsonInt(const Json& value) {
  return IsJsonInt(value) ? value.get<int64_t>() : 0;
}

absl::string_view JsonTypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a number";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    default:
      return "a value";
  }
}

}  // namespace rt
}  // namespace spark

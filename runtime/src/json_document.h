// JSON through nlohmann-json (Debian nlohmann-json3-dev), with the policy the runtime's file
// formats need on top of it: the `.spark.plan` document, safetensors headers and checkpoint
// indexes are untrusted input. Internal to the runtime (spark-run's --json output uses it too).
#ifndef SPARK_RUNTIME_SRC_JSON_DOCUMENT_H_
#define SPARK_RUNTIME_SRC_JSON_DOCUMENT_H_

#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spark {
namespace rt {

// Objects keep their keys in document order (messages and round trips follow the file).
using Json = nlohmann::ordered_json;

inline constexpr int kDefaultJsonMaxDepth = 64;

// Parses one document: RFC 8259 as nlohmann reads it (UTF-8, no comments, no trailing commas, no
// NaN or Infinity), and additionally rejects a key that appears twice in one object (naming it)
// and nesting deeper than `max_depth`. The message says at which byte offset (from 0) the problem
// was found: "JSON error at byte N: ..." (nlohmann's description follows).
absl::StatusOr<Json> ParseJson(absl::string_view text, int max_depth = kDefaultJsonMaxDepth);

// Compact text that ParseJson reads back to an equal value (doubles in their shortest round-trip
// form, always with a '.' or an exponent); bytes that are not UTF-8 are replaced by U+FFFD.
std::string SerializeJson(const Json& value);

// An integer that fits int64 (nlohmann keeps non-negative ones unsigned).
bool IsJsonInt(const Json& value);
// Its value; 0 for anything else.
int64_t JsonInt(const Json& value);

// The member `key` of an object, or nullptr when absent or when `value` is not an object.
inline const Json* FindMember(const Json& value, absl::string_view key) {
  if (!value.is_object()) return nullptr;
  const auto it = value.find(std::string(key));
  return it == value.end() ? nullptr : &*it;
}

// Writers' shorthands: an int64 value, and a member appended to an object (in order; the writer
// is trusted not to repeat a key).
inline Json JsonInteger(int64_t value) { return Json(value); }
inline void AddMember(Json& object, const std::string& key, Json value) {
  object[key] = std::move(value);
}

// "null", "a boolean", "an integer", "a number", "a string", "an array", "an object", for
// messages.
absl::string_view JsonTypeName(const Json& value);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_JSON_DOCUMENT_H_

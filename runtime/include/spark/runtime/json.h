// A small, strict JSON value type for the runtime's file formats (the `.spark.plan` document,
// safetensors headers, checkpoint indexes).
//
// Parse() accepts exactly RFC 8259 JSON: one value, optional surrounding whitespace, UTF-8 text,
// no comments, no trailing commas, no NaN/Infinity. It additionally rejects duplicate object keys
// (naming the key) and nesting deeper than `max_depth`. Every error says at which byte offset the
// problem is. Objects keep their keys in document order. Numbers written without a fraction or
// exponent that fit in int64 stay exact integers; every other number is a double.
//
// Serialize() writes compact JSON (no whitespace) that Parse() reads back to an equal value:
// doubles use the shortest representation that round-trips, and always carry a '.' or an exponent
// so they read back as doubles. JSON cannot express NaN or infinities; they serialize as null.
#ifndef SPARK_RUNTIME_JSON_H_
#define SPARK_RUNTIME_JSON_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spark {
namespace rt {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<Json>;
  using Member = std::pair<std::string, Json>;
  using Object = std::vector<Member>;  // document order

  static constexpr int kDefaultMaxDepth = 64;

  Json() = default;  // null
  static Json Null() { return Json(); }
  static Json Bool(bool value);
  static Json Int(int64_t value);
  static Json Double(double value);
  static Json String(std::string value);
  static Json MakeArray(Array elements = {});
  static Json MakeObject(Object members = {});

  // Parses one JSON document (see the file comment for what is rejected).
  static absl::StatusOr<Json> Parse(absl::string_view text, int max_depth = kDefaultMaxDepth);

  // Compact JSON text; Parse(Serialize()) gives back an equal value.
  std::string Serialize() const;

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_int() const { return type_ == Type::kNumber && is_int_; }  // an exact int64
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  // Accessors; calling one for another type returns the zero value (false, 0, "", empty).
  bool as_bool() const { return type_ == Type::kBool && bool_; }
  int64_t as_int() const;    // an integer as is, a double truncated toward zero
  double as_double() const;  // any number
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;

  // Object members: the value of `key`, or nullptr when absent or when this is not an object.
  const Json* Find(absl::string_view key) const;
  // Appends a member to an object (turning null into an empty object first). Does not check for
  // duplicates: the writer is trusted.
  Json& Add(std::string key, Json value);
  // Appends an element to an array (turning null into an empty array first).
  Json& Append(Json value);

  // A short name of the type for error messages: "null", "a boolean", "a number", "a string",
  // "an array", "an object".
  absl::string_view TypeName() const;

  friend bool operator==(const Json& a, const Json& b);
  friend bool operator!=(const Json& a, const Json& b) { return !(a == b); }

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  bool is_int_ = false;
  int64_t int_ = 0;
  double double_ = 0.0;
  std::string string_;
  Array array_;
  Object object_;
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_JSON_H_

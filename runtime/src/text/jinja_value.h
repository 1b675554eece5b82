// The value type of Spark's Jinja interpreter (chat templates): the Python objects a chat
// template sees, with Python's semantics where templates can observe them (truthiness, str() and
// repr() when printed, int vs float arithmetic, equality across int/float/bool, insertion-ordered
// dicts, code-point string length and indexing) and jinja2's Undefined (falsy, prints as empty,
// an error when an attribute of it is read).
//
// No Debian package offers Jinja for C++, so Spark carries this small interpreter of the subset
// real chat templates use (docs/chat-templates.md lists it).
#ifndef SPARK_RUNTIME_SRC_TEXT_JINJA_VALUE_H_
#define SPARK_RUNTIME_SRC_TEXT_JINJA_VALUE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace spark::rt::jinja {

class Value;
struct CallArgs;
class Interpreter;

using List = std::vector<Value>;

// An insertion-ordered dict with string keys (the only keys JSON and chat templates produce).
class Dict {
 public:
  const Value* Find(absl::string_view key) const;
  void Set(const std::string& key, Value value);
  size_t size() const { return entries_.size(); }
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  absl::flat_hash_map<std::string, size_t> index_;
};

// A built-in function, a bound method or a macro. `line` is the line of the call.
using Function = std::function<absl::StatusOr<Value>(Interpreter& interpreter, CallArgs& args,
                                                     int line)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction,
                    kNamespace, kGenerator, kView };

  Value() = default;  // undefined
  static Value Undefined(std::string hint) {
    Value v;
    v.string_ = std::make_shared<const std::string>(std::move(hint));
    return v;
  }
  static Value None() { return Value(Kind::kNone); }
  static Value Bool(bool b) { Value v(Kind::kBool); v.int_ = b; return v; }
  static Value Int(int64_t i) { Value v(Kind::kInt); v.int_ = i; return v; }
  static Value Float(double d) { Value v(Kind::kFloat); v.float_ = d; return v; }
  static Value String(std::string s) {
    Value v(Kind::kString);
    v.string_ = std::make_shared<const std::string>(std::move(s));
    return v;
  }
  static Value MakeList(List items, bool tuple = false) {
    Value v(Kind::kList);
    for (const Value& item : items) v.Absorb(item);
    v.list_ = std::make_shared<const List>(std::move(items));
    v.tuple_ = tuple;
    return v;
  }
  static Value MakeDict(Dict dict) {
    Value v(Kind::kDict);
    for (const auto& entry : dict.entries()) v.Absorb(entry.second);
    v.dict_ = std::make_shared<Dict>(std::move(dict));
    return v;
  }
  // A namespace(...) object: the one mutable value (`{% set ns.attr = ... %}`).
  static Value MakeNamespace(Dict dict) {
    Value v = MakeDict(std::move(dict));
    v.kind_ = Kind::kNamespace;
    v.has_namespace_ = true;
    return v;
  }
  // What jinja2's lazy filters (map, select, reject, selectattr, rejectattr, unique, items) and
  // reversed() return: an iterator, always truthy, without len(), usable once. Spark computes the
  // items eagerly; an error computing them (`deferred`) surfaces when the iterator is first used,
  // as in Python. `type_name`: "generator", "list_reverseiterator", ...
  static Value MakeGenerator(List items, absl::Status deferred, std::string type_name) {
    Value v(Kind::kGenerator);
    for (const Value& item : items) v.Absorb(item);
    v.list_ = std::make_shared<const List>(std::move(items));
    v.string_ = std::make_shared<const std::string>(std::move(type_name));
    v.generator_ = std::make_shared<GeneratorState>();
    v.generator_->deferred = std::move(deferred);
    v.has_generator_ = true;
    return v;
  }
  // A dict's keys(), values() or items(): iterable again and again, with len() and `in`, no
  // indexing; printed "dict_keys(['a'])". `type_name`: "dict_keys", "dict_values", "dict_items".
  static Value MakeView(List items, std::string type_name) {
    Value v(Kind::kView);
    for (const Value& item : items) v.Absorb(item);
    v.list_ = std::make_shared<const List>(std::move(items));
    v.string_ = std::make_shared<const std::string>(std::move(type_name));
    return v;
  }
  static Value MakeFunction(std::string name, Function function) {
    Value v(Kind::kFunction);
    v.string_ = std::make_shared<const std::string>(std::move(name));
    v.function_ = std::make_shared<const Function>(std::move(function));
    return v;
  }
  // `json` must nest at most JsonDeeperThan's limit (FromJson recurses).
  static Value FromJson(const nlohmann::ordered_json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python's numbers.Number: bool counts, as in jinja2's `number` test and in arithmetic.
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  bool is_generator() const { return kind_ == Kind::kGenerator; }
  bool is_view() const { return kind_ == Kind::kView; }
  const List& view_items() const { return *list_; }
  // A generator's items, once: later calls give none; its deferred error on the first call.
  absl::StatusOr<List> Consume() const {
    if (generator_->consumed) return List{};
    generator_->consumed = true;
    if (!generator_->deferred.ok()) return generator_->deferred;
    return *list_;
  }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // also a bool's 0/1
  double as_float() const { return is_float() ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return *string_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& mutable_namespace() const { return *dict_; }
  const Function& as_function() const { return *function_; }
  // The name of a function, or the hint of an undefined value ("'x' is undefined").
  const std::string& name() const;

  // Nesting depth of lists and dicts (a scalar is 0): the interpreter bounds it, so that printing,
  // comparing and freeing a value never recurse without limit.
  int depth() const { return depth_; }
  // Whether a namespace is inside (or is) this value: namespaces never go into namespaces, so
  // no value can contain itself.
  bool has_namespace() const { return has_namespace_; }
  // Whether a generator is inside (or is) this value (jinja2 would print its address).
  bool has_generator() const { return has_generator_; }

  // The object a namespace or function is (Python's `is`).
  const void* identity() const {
    if (is_generator()) return generator_.get();
    if (is_view()) return list_.get();
    return is_function() ? static_cast<const void*>(function_.get())
                         : static_cast<const void*>(dict_.get());
  }

  // Python truthiness (undefined is falsy).
  bool Truthy() const;
  // Python's type name as jinja2 messages spell it ("str", "int", "list", "dict", ...).
  std::string TypeName() const;

 private:
  explicit Value(Kind kind) : kind_(kind) {}
  void Absorb(const Value& child) {
    depth_ = std::max(depth_, child.depth_ + 1);
    has_namespace_ = has_namespace_ || child.has_namespace_;
    has_generator_ = has_generator_ || child.has_generator_;
  }

  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;
  bool has_namespace_ = false;
  bool has_generator_ = false;
  int depth_ = 0;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Function> function_;
  struct GeneratorState {
    bool consumed = false;
    absl::Status deferred;
  };
  std::shared_ptr<GeneratorState> generator_;
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument `name` at `position`, else the keyword `name`, else nullptr.
  const Value* Get(size_t position, absl::string_view name) const;
};

// Whether `json` nests arrays/objects deeper than `limit` levels (recursion bounded by `limit`).
bool JsonDeeperThan(const nlohmann::ordered_json& json, int limit);

// Python's str(value) (what `{{ value }}` prints; undefined prints as "").
std::string ToStr(const Value& value);
// Python's repr(value).
std::string Repr(const Value& value);
// Python's repr of a float ("1.0", "0.1", "1e+20", "inf").
std::string FloatRepr(double value);

// Python's ==: 1 == 1.0 == True, deep for lists and dicts; undefined equals only undefined.
bool Equal(const Value& a, const Value& b);

// json.dumps(value, ensure_ascii=False, indent=indent, separators=..., sort_keys=sort_keys), as
// transformers' tojson filter calls it. `indent` < 0: no indent; `indent_text` overrides it when
// set (Python accepts a string indent). An error for a value JSON cannot hold.
struct JsonOptions {
  int indent = -1;
  std::string indent_text;
  bool has_indent_text = false;
  std::string item_separator;
  std::string key_separator;
  bool has_separators = false;
  bool sort_keys = false;
  bool ensure_ascii = false;  // non-ASCII as \uXXXX (surrogate pairs above U+FFFF)
};
absl::StatusOr<std::string> ToJson(const Value& value, const JsonOptions& options);

// UTF-8 helpers on valid UTF-8 (strings come from JSON or a validated template).
std::vector<std::string> SplitCodePoints(absl::string_view text);
size_t CodePointCount(absl::string_view text);
// Python's str.isspace() for one code point given as UTF-8.
bool IsPythonSpace(absl::string_view code_point);
// Python's str.upper()/str.lower() (jinja_case.cc: the common scripts; others unchanged).
std::string PyUpper(absl::string_view text);
std::string PyLower(absl::string_view text);
// Python's str.strip/lstrip/rstrip: `chars` == nullptr strips whitespace.
std::string PyStrip(absl::string_view text, const std::string* chars, bool left, bool right);

}  // namespace spark::rt::jinja

#endif  // SPARK_RUNTIME_SRC_TEXT_JINJA_VALUE_H_

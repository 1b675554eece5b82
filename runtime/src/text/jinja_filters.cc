// The filters and tests of Spark's Jinja subset (jinja2's built-ins as chat templates use them,
// and transformers' tojson). The names listed in IsKnownFilter/IsKnownTest (jinja_parser.cc) are
// exactly the ones implemented here.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "jinja_interpreter.h"
#include "spark/runtime/status_macros.h"

namespace spark::rt::jinja {
namespace {

bool IsTrue(const Value* v) { return v != nullptr && v->Truthy(); }

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// jinja2's `title`: words start after '-', whitespace, '(', '{', '[' or '<'; each word is
// word[0].upper() + word[1:].lower().
std::string Title(const std::string& s) {
  std::string out, word;
  const auto flush = [&]() {
    if (word.empty()) return;
    const std::vector<std::string> cps = SplitCodePoints(word);
    out += PyUpper(cps[0]);
    out += PyLower(absl::string_view(word).substr(cps[0].size()));
    word.clear();
  };
  for (const std::string& cp : SplitCodePoints(s)) {
    if (cp == "-" || cp == "(" || cp == "{" || cp == "[" || cp == "<" || IsPythonSpace(cp)) {
      flush();
      out += cp;
    } else {
      word += cp;
    }
  }
  flush();
  return out;
}

// Python's int(str): optional sign, digits with single underscores, surrounding whitespace.
bool ParsePyInt(std::string text, int64_t* out) {
  text = PyStrip(text, nullptr, true, true);
  std::string digits;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '_' && i > 0 && i + 1 < text.size() &&
        absl::ascii_isdigit(static_cast<unsigned char>(text[i - 1])) &&
        absl::ascii_isdigit(static_cast<unsigned char>(text[i + 1]))) {
      continue;
    }
    digits += text[i];
  }
  return !digits.empty() && absl::SimpleAtoi(digits, out) &&
         digits.find_first_of(" \t\n") == std::string::npos;
}

bool ParsePyFloat(const std::string& text, double* out) {
  const std::string t = PyStrip(text, nullptr, true, true);
  if (t.empty()) return false;
  const std::string lower = absl::AsciiStrToLower(t);
  if (lower == "inf" || lower == "+inf" || lower == "infinity" || lower == "+infinity") {
    *out = INFINITY;
    return true;
  }
  if (lower == "-inf" || lower == "-infinity") {
    *out = -INFINITY;
    return true;
  }
  if (lower == "nan" || lower == "+nan" || lower == "-nan") {
    *out = NAN;
    return true;
  }
  char* end = nullptr;
  *out = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() && t.find_first_of("xXpP") == std::string::npos;
}

}  // namespace

absl::StatusOr<Value> Interpreter::Filter(const std::string& name, const Value& input,
                                          CallArgs& args, int line) {
  // jinja2's lazy filters return generators: computed here at once, errors deferred to first use.
  if (name == "map" || name == "select" || name == "reject" || name == "selectattr" ||
      name == "rejectattr" || name == "unique" || name == "items") {
    absl::StatusOr<Value> result = FilterEager(name, input, args, line);
    if (!result.ok()) return Value::MakeGenerator({}, result.status(), "generator");
    return Value::MakeGenerator(result->as_list(), absl::OkStatus(), "generator");
  }
  if (name == "reverse" && !input.is_string()) {
    switch (input.kind()) {
      case Value::Kind::kList: {
        List items(input.as_list().rbegin(), input.as_list().rend());
        return Value::MakeGenerator(std::move(items), absl::OkStatus(),
                                    input.is_tuple() ? "reversed" : "list_reverseiterator");
      }
      case Value::Kind::kDict: {
        List keys;
        for (auto it = input.as_dict().entries().rbegin(); it != input.as_dict().entries().rend();
             ++it) {
          keys.push_back(Value::String(it->first));
        }
        return Value::MakeGenerator(std::move(keys), absl::OkStatus(), "dict_reversekeyiterator");
      }
      case Value::Kind::kUndefined:
        return Value::MakeGenerator({}, absl::OkStatus(), "reversed");
      case Value::Kind::kView: {
        List items(input.view_items().rbegin(), input.view_items().rend());
        const std::string kind = input.name().substr(5);  // "keys", "values", "items"
        return Value::MakeGenerator(std::move(items), absl::OkStatus(),
                                    "dict_reverse" + kind.substr(0, kind.size() - 1) + "iterator");
      }
      case Value::Kind::kGenerator: {  // not reversible: jinja2 falls back to a reversed list
        SPARK_ASSIGN_OR_RETURN(List items, Iterate(input, line));
        std::reverse(items.begin(), items.end());
        return Value::MakeList(std::move(items));
      }
      default:
        return Error(line, "argument must be iterable");
    }
  }
  return FilterEager(name, input, args, line);
}

absl::StatusOr<Value> Interpreter::FilterEager(const std::string& name, const Value& input,
                                               CallArgs& args, int line) {
  const auto arg = [&](size_t i, const char* key) { return args.Get(i, key); };
  const auto need_string = [&](const Value& v) -> absl::StatusOr<std::string> {
    if (v.is_undefined()) return std::string();
    SPARK_RETURN_IF_ERROR(CheckPrintable(v, line));
    return ToStr(v);
  };
  // Resolves `attribute` ("a.b.0") on an item, as jinja2's make_attrgetter does.
  const auto get_path = [&](const Value& item, const std::string& path) -> absl::StatusOr<Value> {
    Value v = item;
    for (absl::string_view part : absl::StrSplit(path, '.')) {
      int64_t index = 0;
      if (absl::SimpleAtoi(part, &index)) {
        SPARK_ASSIGN_OR_RETURN(v, GetItem(v, Value::Int(index), line));
      } else {
        SPARK_ASSIGN_OR_RETURN(v, GetItem(v, Value::String(std::string(part)), line));
      }
    }
    return v;
  };
  // Python's list.sort (with jinja2's case folding of strings), comparing in the order CPython's
  // timsort does for lists under 64 items (a first run, then binary insertion), so that a type
  // error names the same pair; `reverse` reverses before and after, as CPython does.
  const auto sort_values = [&](std::vector<Value>& items, bool reverse, bool case_sensitive,
                               const std::function<absl::StatusOr<Value>(const Value&)>& key)
      -> absl::Status {
    std::vector<std::pair<Value, Value>> keyed;
    for (const Value& item : items) {
      SPARK_ASSIGN_OR_RETURN(Value k, key(item));
      if (!case_sensitive && k.is_string()) k = Value::String(PyLower(k.as_string()));
      keyed.emplace_back(std::move(k), item);
    }
    if (reverse) std::reverse(keyed.begin(), keyed.end());
    absl::Status error;
    const auto less = [&](const std::pair<Value, Value>& a, const std::pair<Value, Value>& b) {
      if (!error.ok()) return false;
      absl::StatusOr<bool> result = Compare("<", a.first, b.first, line);
      if (!result.ok()) {
        error = result.status();
        return false;
      }
      return *result;
    };
    const size_t n = keyed.size();
    if (n >= 2 && n < 64) {
      size_t run = 2;
      if (less(keyed[1], keyed[0])) {
        while (run < n && less(keyed[run], keyed[run - 1])) ++run;
        std::reverse(keyed.begin(), keyed.begin() + static_cast<std::ptrdiff_t>(run));
      } else {
        while (run < n && !less(keyed[run], keyed[run - 1])) ++run;
      }
      for (size_t start = run; start < n && error.ok(); ++start) {
        size_t l = 0, r = start;
        while (l < r) {
          const size_t p = l + ((r - l) >> 1);
          if (less(keyed[start], keyed[p])) {
            r = p;
          } else {
            l = p + 1;
          }
        }
        std::rotate(keyed.begin() + static_cast<std::ptrdiff_t>(l),
                    keyed.begin() + static_cast<std::ptrdiff_t>(start),
                    keyed.begin() + static_cast<std::ptrdiff_t>(start) + 1);
      }
    } else if (n >= 64) {
      std::stable_sort(keyed.begin(), keyed.end(), less);
    }
    SPARK_RETURN_IF_ERROR(error);
    if (reverse) std::reverse(keyed.begin(), keyed.end());
    items.clear();
    for (auto& [k, v] : keyed) items.push_back(std::move(v));
    return absl::OkStatus();
  };

  if (name == "safe") return input;
  if (name == "default" || name == "d") {
    const Value* fallback = arg(0, "default_value");
    const bool boolean = IsTrue(arg(1, "boolean"));
    if (input.is_undefined() || (boolean && !input.Truthy())) {
      return fallback != nullptr ? *fallback : Value::String("");
    }
    return input;
  }
  if (name == "trim") {
    SPARK_ASSIGN_OR_RETURN(const std::string s, need_string(input));
    const Value* chars = arg(0, "chars");
    if (chars != nullptr && !chars->is_none() && !chars->is_string()) {
      return Error(line, "trim: chars must be a string");
    }
    return Value::String(PyStrip(s, chars != nullptr && chars->is_string() ? &chars->as_string()
                                                                           : nullptr,
                                 true, true));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "string" || name == "escape" || name == "e") {
    SPARK_ASSIGN_OR_RETURN(const std::string s, need_string(input));
    if (name == "upper") return Value::String(PyUpper(s));
    if (name == "lower") return Value::String(PyLower(s));
    if (name == "title") return Value::String(Title(s));
    if (name == "capitalize") {
      // str.capitalize(): the first character title-cased, the rest lower-cased.
      const std::vector<std::string> cps = SplitCodePoints(s);
      if (cps.empty()) return Value::String("");
      const std::string first = cps[0] == "\xC3\x9F" ? "Ss" : PyUpper(cps[0]);
      return Value::String(first + PyLower(absl::string_view(s).substr(cps[0].size())));
    }
    if (name == "escape" || name == "e") return Value::String(HtmlEscape(s));
    return Value::String(s);
  }
  if (name == "replace") {
    SPARK_ASSIGN_OR_RETURN(const std::string s, need_string(input));
    const Value* from = arg(0, "old");
    const Value* to = arg(1, "new");
    const Value* count = arg(2, "count");
    if (from == nullptr || to == nullptr) return Error(line, "replace takes old and new");
    CallArgs method_args;
    method_args.positional = {Value::String(ToStr(*from)), Value::String(ToStr(*to))};
    if (count != nullptr && !count->is_none()) method_args.positional.push_back(*count);
    SPARK_ASSIGN_OR_RETURN(const Value method, Method(Value::String(s), "replace", line));
    return Call(method, method_args, line);
  }
  if (name == "length" || name == "count") {
    switch (input.kind()) {
      case Value::Kind::kUndefined: return Value::Int(0);
      case Value::Kind::kString:
        return Value::Int(static_cast<int64_t>(CodePointCount(input.as_string())));
      case Value::Kind::kList: return Value::Int(static_cast<int64_t>(input.as_list().size()));
      case Value::Kind::kDict: return Value::Int(static_cast<int64_t>(input.as_dict().size()));
      case Value::Kind::kView: return Value::Int(static_cast<int64_t>(input.view_items().size()));
      default:
        return Error(line, absl::StrCat("object of type '", input.TypeName(), "' has no len()"));
    }
  }
  if (name == "tojson") {
    JsonOptions options;
    options.ensure_ascii = IsTrue(arg(0, "ensure_ascii"));
    if (const Value* indent = arg(1, "indent"); indent != nullptr && !indent->is_none()) {
      if (indent->is_int()) {
        options.indent = static_cast<int>(std::clamp<int64_t>(indent->as_int(), -1, 1000));
        if (indent->as_int() < 0) options.indent = 0;
      } else if (indent->is_string()) {
        options.has_indent_text = true;
        options.indent_text = indent->as_string();
      } else {
        return Error(line, "tojson: indent must be an integer or a string");
      }
    }
    if (const Value* sep = arg(2, "separators"); sep != nullptr && !sep->is_none()) {
      if (!sep->is_list() || sep->as_list().size() != 2 || !sep->as_list()[0].is_string() ||
          !sep->as_list()[1].is_string()) {
        return Error(line, "tojson: separators must be a pair of strings");
      }
      options.has_separators = true;
      options.item_separator = sep->as_list()[0].as_string();
      options.key_separator = sep->as_list()[1].as_string();
    }
    options.sort_keys = IsTrue(arg(3, "sort_keys"));
    absl::StatusOr<std::string> json = ToJson(input, options);
    if (!json.ok()) return Error(line, json.status().message());
    SPARK_RETURN_IF_ERROR(CheckSize(json->size(), line));
    return Value::String(*std::move(json));
  }
  if (name == "join") {
    SPARK_ASSIGN_OR_RETURN(const std::vector<Value> items, Iterate(input, line));
    const Value* sep = arg(0, "d");
    const Value* attribute = arg(1, "attribute");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0 && sep != nullptr) out += ToStr(*sep);
      Value item = items[i];
      if (attribute != nullptr && !attribute->is_none()) {
        SPARK_ASSIGN_OR_RETURN(item, get_path(item, ToStr(*attribute)));
      }
      SPARK_RETURN_IF_ERROR(CheckPrintable(item, line));
      out += ToStr(item);
      if (out.size() > limits_.max_output_bytes) return CheckSize(out.size(), line);
    }
    SPARK_RETURN_IF_ERROR(CheckSize(out.size(), line));
    return Value::String(std::move(out));
  }
  if (name == "first" || name == "last") {
    if (name == "last" && !input.is_string() && !input.is_list() && !input.is_dict() &&
        !input.is_view() && !input.is_undefined()) {
      return Error(line, absl::StrCat("'", input.TypeName(), "' object is not reversible"));
    }
    SPARK_ASSIGN_OR_RETURN(const std::vector<Value> items, Iterate(input, line));
    if (items.empty()) {
      return Value::Undefined(absl::StrCat("No ", name, " item, sequence was empty."));
    }
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    SPARK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input, line));
    return Value::MakeList(std::move(items));
  }
  if (name == "reverse") {  // strings only: Filter handles the rest
    if (input.is_string()) {
      std::vector<std::string> cps = SplitCodePoints(input.as_string());
      std::reverse(cps.begin(), cps.end());
      std::string out;
      for (const std::string& cp : cps) out += cp;
      return Value::String(std::move(out));
    }
    SPARK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input, line));
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (name == "items") {
    if (input.is_undefined()) return Value::MakeList({});
    if (!input.is_dict()) return Error(line, "Can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, v] : input.as_dict().entries()) {
      out.push_back(Value::MakeList({Value::String(k), v}, true));
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "dictsort") {
    if (!input.is_dict()) {
      if (input.is_undefined()) return UndefinedError(input, line);
      return Error(line, absl::StrCat("dictsort: '", input.TypeName(),
                                      "' object has no attribute 'items'"));
    }
    const bool case_sensitive = IsTrue(arg(0, "case_sensitive"));
    const Value* by = arg(1, "by");
    const bool by_value = by != nullptr && by->is_string() && by->as_string() == "value";
    if (by != nullptr && !(by->is_string() && (by->as_string() == "key" || by_value))) {
      return Error(line, "You can only sort by either \"key\" or \"value\"");
    }
    const bool reverse = IsTrue(arg(2, "reverse"));
    std::vector<Value> pairs;
    for (const auto& [k, v] : input.as_dict().entries()) {
      pairs.push_back(Value::MakeList({Value::String(k), v}, true));
    }
    SPARK_RETURN_IF_ERROR(sort_values(pairs, reverse, case_sensitive,
                                      [&](const Value& p) -> absl::StatusOr<Value> {
                                        return p.as_list()[by_value ? 1 : 0];
                                      }));
    return Value::MakeList(std::move(pairs));
  }
  if (name == "sort") {
    SPARK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input, line));
    const bool reverse = IsTrue(arg(0, "reverse"));
    const bool case_sensitive = IsTrue(arg(1, "case_sensitive"));
    const Value* attribute = arg(2, "attribute");
    SPARK_RETURN_IF_ERROR(sort_values(items, reverse, case_sensitive,
                                      [&](const Value& item) -> absl::StatusOr<Value> {
                                        if (attribute == nullptr || attribute->is_none()) {
                                          return item;
                                        }
                                        return get_path(item, ToStr(*attribute));
                                      }));
    return Value::MakeList(std::move(items));
  }
  if (name == "unique") {
    SPARK_ASSIGN_OR_RETURN(const std::vector<Value> items, Iterate(input, line));
    const bool case_sensitive = IsTrue(arg(0, "case_sensitive"));
    const Value* attribute = arg(1, "attribute");
    List out;
    std::vector<Value> seen;
    for (const Value& item : items) {
      Value key = item;
      if (attribute != nullptr && !attribute->is_none()) {
        SPARK_ASSIGN_OR_RETURN(key, get_path(item, ToStr(*attribute)));
      }
      if (!case_sensitive && key.is_string()) {
        key = Value::String(PyLower(key.as_string()));
      }
      if ((key.is_list() && !key.is_tuple()) || key.is_dict()) {  // unique keeps a set
        return Error(line, absl::StrCat("unhashable type: '", key.TypeName(), "'"));
      }
      bool dup = false;
      for (const Value& s : seen) dup = dup || Equal(s, key);
      if (!dup) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return Value::MakeList(std::move(out));
  }
  // jinja2's map/select/reject/selectattr/rejectattr start with `if value:`: a falsy input (0,
  // None, false, "") gives nothing, even one that cannot be iterated.
  if ((name == "map" || name == "select" || name == "reject" || name == "selectattr" ||
       name == "rejectattr") && !input.Truthy()) {
    return Value::MakeList({});
  }
  if (name == "map") {
    SPARK_ASSIGN_OR_RETURN(const std::vector<Value> items, Iterate(input, line));
    List out;
    if (const Value* attribute = args.Get(SIZE_MAX, "attribute"); attribute != nullptr) {
      const Value* fallback = args.Get(SIZE_MAX, "default");
      for (const Value& item : items) {
        SPARK_ASSIGN_OR_RETURN(Value v, get_path(item, ToStr(*attribute)));
        if (v.is_undefined() && fallback != nullptr) v = *fallback;
        out.push_back(std::move(v));
      }
      return Value::MakeList(std::move(out));
    }
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return Error(line, "map needs a filter name or attribute=");
    }
    const std::string filter = args.positional[0].as_string();
    if (!IsKnownFilter(filter)) {
      return Error(line, absl::StrCat("unsupported filter '", filter, "' (in map)"));
    }
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (const Value& item : items) {
      SPARK_ASSIGN_OR_RETURN(Value v, Filter(filter, item, rest, line));
      out.push_back(std::move(v));
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    SPARK_ASSIGN_OR_RETURN(const std::vector<Value> items, Iterate(input, line));
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool keep_when = name == "select" || name == "selectattr";
    size_t next = 0;
    std::string attribute;
    if (by_attr) {
      if (args.positional.empty()) return Error(line, absl::StrCat(name, " needs an attribute"));
      attribute = ToStr(args.positional[0]);
      next = 1;
    }
    std::string test;
    if (next < args.positional.size()) {
      if (!args.positional[next].is_string()) return Error(line, "the test name must be a string");
      test = args.positional[next].as_string();
      if (!IsKnownTest(test)) {
        return Error(line, absl::StrCat("unsupported test '", test, "' (in ", name, ")"));
      }
      ++next;
    }
    CallArgs test_args;
    test_args.positional.assign(args.positional.begin() + std::min(next, args.positional.size()),
                                args.positional.end());
    List out;
    for (const Value& item : items) {
      Value subject = item;
      if (by_attr) {
        SPARK_ASSIGN_OR_RETURN(subject, get_path(item, attribute));
      }
      bool pass = subject.Truthy();
      if (!test.empty()) {
        SPARK_ASSIGN_OR_RETURN(pass, Test(test, subject, test_args, line));
      }
      if (pass == keep_when) out.push_back(item);
    }
    return Value::MakeList(std::move(out));
  }
  // int() and float() of jinja2's Undefined raise its error.
  if ((name == "int" || name == "float") &&
      input.is_undefined()) {
    return UndefinedError(input, line);
  }
  if (name == "int") {
    const Value* fallback = arg(0, "default");
    const Value def = fallback != nullptr ? *fallback : Value::Int(0);
    if (input.is_int() || input.is_bool()) return Value::Int(input.as_int());
    if (input.is_float()) {
      const double d = input.as_float();
      if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return def;
      return Value::Int(static_cast<int64_t>(d));
    }
    if (input.is_string()) {
      int64_t v = 0;
      if (ParsePyInt(input.as_string(), &v)) return Value::Int(v);
      double d = 0;
      if (ParsePyFloat(input.as_string(), &d) && std::isfinite(d) && std::fabs(d) < 9.2e18) {
        return Value::Int(static_cast<int64_t>(d));
      }
    }
    return def;
  }
  if (name == "float") {
    const Value* fallback = arg(0, "default");
    const Value def = fallback != nullptr ? *fallback : Value::Float(0);
    if (input.is_number()) return Value::Float(input.as_float());
    double d = 0;
    if (input.is_string() && ParsePyFloat(input.as_string(), &d)) return Value::Float(d);
    return def;
  }
  if (name == "abs") {
    if (input.is_float()) return Value::Float(std::fabs(input.as_float()));
    if (input.is_int() || input.is_bool()) {
      if (input.as_int() == INT64_MIN) return Error(line, "integer overflow");
      return Value::Int(std::llabs(input.as_int()));
    }
    return Error(line, absl::StrCat("bad operand type for abs(): '", input.TypeName(), "'"));
  }
  if (name == "round") {
    const Value* precision_value = arg(0, "precision");
    const int64_t precision =
        precision_value != nullptr && precision_value->is_int() ? precision_value->as_int() : 0;
    const Value* method_value = arg(1, "method");
    const std::string method = method_value != nullptr ? ToStr(*method_value) : "common";
    if (method != "common" && method != "ceil" && method != "floor") {
      return Error(line, "method must be 'common', 'ceil' or 'floor'");
    }
    if (!input.is_number()) {
      return Error(line, absl::StrCat("type ", input.TypeName(),
                                      " doesn't define __round__ method"));
    }
    if (method == "common") {
      if (!input.is_float()) return Value::Int(input.as_int());
      // Python rounds the exact binary value half to even, as printf does (2.675 -> 2.67).
      if (precision >= 0 && precision <= 300 && std::isfinite(input.as_float())) {
        char buffer[400];
        std::snprintf(buffer, sizeof(buffer), "%.*f", static_cast<int>(precision),
                      input.as_float());
        return Value::Float(std::strtod(buffer, nullptr));
      }
      const double scale = std::pow(10.0, static_cast<double>(precision));
      return Value::Float(std::nearbyint(input.as_float() * scale) / scale);
    }
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = input.as_float() * scale;
    return Value::Float((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (name == "indent") {
    // jinja2 appends "\n" to the value itself: only strings work.
    if (input.is_undefined()) return UndefinedError(input, line);
    if (input.is_tuple()) {
      return Error(line, "can only concatenate tuple (not \"str\") to tuple");
    }
    if (input.is_list()) return Error(line, "'list' object has no attribute 'splitlines'");
    if (!input.is_string()) {
      return Error(line, absl::StrCat("unsupported operand type(s) for +=: '", input.TypeName(),
                                      "' and 'str'"));
    }
    const std::string s = input.as_string();
    const Value* width = arg(0, "width");
    std::string indention(4, ' ');
    if (width != nullptr) {
      if (width->is_string()) {
        indention = width->as_string();
      } else if (width->is_int()) {
        indention = std::string(static_cast<size_t>(std::clamp<int64_t>(width->as_int(), 0, 1000)),
                                ' ');
      } else {
        return Error(line, "indent: width must be an integer or a string");
      }
    }
    const bool first = IsTrue(arg(1, "first"));
    const bool blank = IsTrue(arg(2, "blank"));
    std::vector<std::string> lines = absl::StrSplit(s + "\n", '\n');
    lines.pop_back();  // str.splitlines() drops the piece after the final newline
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) {
        out += '\n';
        if (blank || !lines[i].empty()) out += indention;
      }
      out += lines[i];
      if (out.size() > limits_.max_output_bytes) return CheckSize(out.size(), line);
    }
    SPARK_RETURN_IF_ERROR(CheckSize(out.size(), line));
    if (first) out = indention + out;
    return Value::String(std::move(out));
  }
  return Error(line, absl::StrCat("unsupported filter '", name, "'"));
}

absl::StatusOr<bool> Interpreter::Test(const std::string& name, const Value& input,
                                       CallArgs& args, int line) {
  const Value* other = args.Get(0, "value");
  const auto need_other = [&]() -> absl::Status {
    if (other == nullptr) return Error(line, absl::StrCat("test '", name, "' takes an argument"));
    return absl::OkStatus();
  };
  // The one-argument tests of jinja2 are Python functions: an argument more is a TypeError.
  static const char* const kUnary[] = {"defined", "undefined", "none", "string", "mapping",
                                       "iterable", "sequence", "number", "integer", "float",
                                       "boolean", "true", "false", "odd", "even", "lower",
                                       "upper"};
  const size_t given = args.positional.size() + args.keyword.size();
  if (given > 0) {
    if (name == "callable") {
      return Error(line, absl::StrCat("callable() takes exactly one argument (", given + 1,
                                      " given)"));
    }
    for (const char* unary : kUnary) {
      if (name == unary) {
        return Error(line, absl::StrCat("test_", name, "() takes 1 positional argument but ",
                                        given + 1, " were given"));
      }
    }
  }
  if (name == "defined") return !input.is_undefined();
  if (name == "undefined") return input.is_undefined();
  if (name == "none") return input.is_none();
  if (name == "string") return input.is_string();
  if (name == "mapping") return input.is_dict();
  // jinja2's Undefined has __iter__, __len__ and __getitem__: it passes both.
  if (name == "iterable" || name == "sequence") {
    // An iterator or a dict view has no __getitem__ (and an iterator no len()).
    if (input.is_generator() || input.is_view()) return name == "iterable";
    return input.is_undefined() || input.is_string() || input.is_list() || input.is_dict();
  }
  if (name == "number") return input.is_number();
  if (name == "integer") return input.is_int();
  if (name == "float") return input.is_float();
  if (name == "boolean") return input.is_bool();
  if (name == "true") return input.is_bool() && input.as_bool();
  if (name == "false") return input.is_bool() && !input.as_bool();
  if (name == "callable") return input.is_function() || input.is_undefined();  // Undefined has __call__
  if (name == "lower" || name == "upper") {
    // str(value).islower() / .isupper(): some cased letter, none of the other case.
    SPARK_RETURN_IF_ERROR(CheckPrintable(input, line));
    const std::string text = ToStr(input);
    const std::string lower = PyLower(text), upper = PyUpper(text);
    if (lower == upper) return false;  // nothing cased
    return name == "lower" ? lower == text : upper == text;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    // Python: value % 2 == 1, value % 2 == 0, value % num == 0.
    Value divisor = Value::Int(2);
    if (name == "divisibleby") {
      SPARK_RETURN_IF_ERROR(need_other());
      divisor = *other;
    }
    SPARK_ASSIGN_OR_RETURN(const Value rest, EvalBinary("%", input, divisor, line));
    return Equal(rest, Value::Int(name == "odd" ? 1 : 0));
  }
  SPARK_RETURN_IF_ERROR(need_other());
  if (name == "equalto" || name == "eq" || name == "==") return Equal(input, *other);
  if (name == "ne" || name == "!=") return !Equal(input, *other);
  if (name == "sameas") {
    if (input.kind() != other->kind()) return false;
    if (input.is_none() || input.is_undefined()) return true;
    if (input.is_bool() || input.is_int()) return input.as_int() == other->as_int();
    if (input.is_namespace() || input.is_function()) return input.identity() == other->identity();
    return false;
  }
  if (name == "in") return Compare("in", input, *other, line);
  if (name == "lt" || name == "<" || name == "lessthan") return Compare("<", input, *other, line);
  if (name == "le" || name == "<=") return Compare("<=", input, *other, line);
  if (name == "gt" || name == ">" || name == "greaterthan") {
    return Compare(">", input, *other, line);
  }
  if (name == "ge" || name == ">=") return Compare(">=", input, *other, line);
  return Error(line, absl::StrCat("unsupported test '", name, "'"));
}

}  // namespace spark::rt::jinja

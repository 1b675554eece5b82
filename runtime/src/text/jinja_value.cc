#include "jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spark::rt::jinja {
namespace {

size_t Utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;  // not reached for valid UTF-8
}

char32_t DecodeOne(absl::string_view cp) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(cp[i]); };
  switch (cp.size()) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    case 4:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
    default: return 0;
  }
}

// Python's str.isprintable() approximated for repr(): C0/C1 controls, DEL, the non-breaking and
// other special spaces, format characters and line/paragraph separators are escaped.
bool ReprEscapes(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return true;
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x2064) || c == 0x3000 || c == 0xFEFF || c == 0x1680) {
    return true;
  }
  return (c >= 0xD800 && c <= 0xDFFF) || (c >= 0xE000 && c <= 0xF8FF);
}

std::string StringRepr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const std::string& cp : SplitCodePoints(s)) {
    const char32_t c = DecodeOne(cp);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += cp;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (ReprEscapes(c)) {
      if (c <= 0xFF) {
        out += absl::StrFormat("\\x%02x", static_cast<unsigned>(c));
      } else {
        out += absl::StrFormat("\\u%04x", static_cast<unsigned>(c));
      }
    } else {
      out += cp;
    }
  }
  out += quote;
  return out;
}

void JsonString(const std::string& s, std::string& out, bool ensure_ascii) {
  out += '"';
  if (ensure_ascii) {
    for (const std::string& cp : SplitCodePoints(s)) {
      const char32_t c = DecodeOne(cp);
      if (c < 0x80) {
        std::string one;
        JsonString(cp, one, false);
        out += one.substr(1, one.size() - 2);
      } else if (c < 0x10000) {
        out += absl::StrFormat("\\u%04x", static_cast<unsigned>(c));
      } else {
        const char32_t v = c - 0x10000;
        out += absl::StrFormat("\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                               static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      }
    }
    out += '"';
    return;
  }
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

absl::Status JsonValue(const Value& v, const JsonOptions& o, int depth, std::string& out) {
  if (depth > 512) return absl::InvalidArgumentError("tojson: nesting deeper than 512 levels");
  const std::string item_sep = o.has_separators ? o.item_separator
                               : (o.indent >= 0 || o.has_indent_text ? "," : ", ");
  const std::string key_sep = o.has_separators ? o.key_separator : ": ";
  const bool indented = o.indent >= 0 || o.has_indent_text;
  const std::string unit = o.has_indent_text ? o.indent_text : std::string(std::max(o.indent, 0), ' ');
  const auto newline = [&](int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += unit;
  };
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return absl::OkStatus();
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return absl::OkStatus();
    case Value::Kind::kInt: out += absl::StrCat(v.as_int()); return absl::OkStatus();
    case Value::Kind::kFloat: {
      const double d = v.as_float();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += FloatRepr(d);
      return absl::OkStatus();
    }
    case Value::Kind::kString:
      JsonString(v.as_string(), out, o.ensure_ascii);
      return absl::OkStatus();
    case Value::Kind::kList: {
      if (v.as_list().empty()) { out += "[]"; return absl::OkStatus(); }
      out += '[';
      bool first = true;
      for (const Value& item : v.as_list()) {
        if (!first) out += item_sep;
        first = false;
        if (indented) newline(depth + 1);
        if (absl::Status s = JsonValue(item, o, depth + 1, out); !s.ok()) return s;
      }
      if (indented) newline(depth);
      out += ']';
      return absl::OkStatus();
    }
    case Value::Kind::kDict: {
      if (v.as_dict().size() == 0) { out += "{}"; return absl::OkStatus(); }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.as_dict().entries()) entries.push_back(&e);
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out += '{';
      bool first = true;
      for (const auto* e : entries) {
        if (!first) out += item_sep;
        first = false;
        if (indented) newline(depth + 1);
        JsonString(e->first, out, o.ensure_ascii);
        out += key_sep;
        if (absl::Status s = JsonValue(e->second, o, depth + 1, out); !s.ok()) return s;
      }
      if (indented) newline(depth);
      out += '}';
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("Object of type ", v.TypeName(), " is not JSON serializable"));
  }
}

}  // namespace

const Value* Dict::Find(absl::string_view key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Dict::Set(const std::string& key, Value value) {
  const auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(key, std::move(value));
}

const std::string& Value::name() const {
  static const std::string* const kEmpty = new std::string();
  return string_ ? *string_ : *kEmpty;
}

Value Value::FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return None();
    case nlohmann::ordered_json::value_t::boolean: return Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Int(static_cast<int64_t>(u));
      return Float(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return String(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(FromJson(item));
      return MakeList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      for (const auto& [key, item] : json.items()) dict.Set(key, FromJson(item));
      return MakeDict(std::move(dict));
    }
    default: return None();  // binary and discarded values do not come from parsed JSON
  }
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0;
    case Kind::kString: return !string_->empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return dict_->size() != 0;
    case Kind::kView: return !list_->empty();
    default: return true;
  }
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return tuple_ ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kFunction: return "function";
    case Kind::kNamespace: return "Namespace";
    case Kind::kGenerator:
    case Kind::kView: return *string_;
  }
  return "object";
}

const Value* CallArgs::Get(size_t position, absl::string_view name) const {
  if (position < positional.size()) return &positional[position];
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return nullptr;
}

bool JsonDeeperThan(const nlohmann::ordered_json& json, int limit) {
  if (!json.is_array() && !json.is_object()) return false;
  if (limit <= 0) return true;
  for (const auto& item : json) {
    if (JsonDeeperThan(item, limit - 1)) return true;
  }
  return false;
}

std::string FloatRepr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form, then Python's repr layout: fixed notation for
  // decimal exponents in [-4, 16), else d.ddde+XX.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value,
                                    std::chars_format::scientific);
  std::string sci(buffer, result.ptr);
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  const int exponent = std::atoi(sci.c_str() + e + 1);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out += digits;
      out.append(exponent + 1 - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, exponent + 1);
      out += '.';
      out += digits.substr(exponent + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  out += absl::StrFormat("e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

std::string ToStr(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kString: return value.as_string();
    default: return Repr(value);
  }
}

std::string Repr(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return value.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return absl::StrCat(value.as_int());
    case Value::Kind::kFloat: return FloatRepr(value.as_float());
    case Value::Kind::kString: return StringRepr(value.as_string());
    case Value::Kind::kList: {
      std::string out = value.is_tuple() ? "(" : "[";
      bool first = true;
      for (const Value& item : value.as_list()) {
        if (!first) out += ", ";
        first = false;
        out += Repr(item);
      }
      if (value.is_tuple() && value.as_list().size() == 1) out += ",";
      out += value.is_tuple() ? ")" : "]";
      return out;
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : value.as_dict().entries()) {
        if (!first) out += ", ";
        first = false;
        out += StringRepr(key);
        out += ": ";
        out += Repr(item);
      }
      return out + "}";
    }
    case Value::Kind::kNamespace: {
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [key, item] : value.as_dict().entries()) {
        if (!first) out += ", ";
        first = false;
        out += StringRepr(key) + ": " + Repr(item);
      }
      return out + "}>";
    }
    case Value::Kind::kFunction: return absl::StrCat("<function ", value.name(), ">");
    case Value::Kind::kGenerator: return absl::StrCat("<", value.name(), " object>");
    case Value::Kind::kView: {
      std::string out = value.name() + "([";
      bool first = true;
      for (const Value& item : value.view_items()) {
        if (!first) out += ", ";
        first = false;
        out += Repr(item);
      }
      return out + "])";
    }
  }
  return "";
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      if (a.is_tuple() != b.is_tuple() || a.as_list().size() != b.as_list().size()) return false;
      for (size_t i = 0; i < a.as_list().size(); ++i) {
        if (!Equal(a.as_list()[i], b.as_list()[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (const auto& [key, item] : a.as_dict().entries()) {
        const Value* other = b.as_dict().Find(key);
        if (other == nullptr || !Equal(item, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();  // namespaces and functions: identity
  }
}

absl::StatusOr<std::string> ToJson(const Value& value, const JsonOptions& options) {
  std::string out;
  if (absl::Status s = JsonValue(value, options, 0, out); !s.ok()) return s;
  return out;
}

std::vector<std::string> SplitCodePoints(absl::string_view text) {
  std::vector<std::string> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = std::min(Utf8Length(static_cast<unsigned char>(text[i])), text.size() - i);
    out.emplace_back(text.substr(i, n));
    i += n;
  }
  return out;
}

size_t CodePointCount(absl::string_view text) {
  size_t count = 0;
  for (const char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

bool IsPythonSpace(absl::string_view code_point) {
  const char32_t c = DecodeOne(code_point);
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string PyStrip(absl::string_view text, const std::string* chars, bool left, bool right) {
  const std::vector<std::string> cps = SplitCodePoints(text);
  std::vector<std::string> strip_set;
  if (chars != nullptr) strip_set = SplitCodePoints(*chars);
  const auto strips = [&](const std::string& cp) {
    if (chars == nullptr) return IsPythonSpace(cp);
    return std::find(strip_set.begin(), strip_set.end(), cp) != strip_set.end();
  };
  size_t begin = 0, end = cps.size();
  if (left) while (begin < end && strips(cps[begin])) ++begin;
  if (right) while (end > begin && strips(cps[end - 1])) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) out += cps[i];
  return out;
}

}  // namespace spark::rt::jinja

#include "jinja_interpreter.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/status_macros.h"

namespace spark::rt::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

// Python's repr of a str, as jinja2's messages quote names.
std::string Quoted(const std::string& s) { return Repr(Value::String(s)); }

// jinja2's object_type_repr: "dict object", "None", "str object".
std::string ObjectTypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_namespace()) return "jinja2.utils.Namespace object";
  return absl::StrCat(v.TypeName(), " object");
}


// Python's str.replace(old, new[, count]).
std::string PyReplace(const std::string& s, const std::string& from, const std::string& to,
                      int64_t count) {
  std::string out;
  if (from.empty()) {
    const std::vector<std::string> cps = SplitCodePoints(s);
    int64_t done = 0;
    for (const std::string& cp : cps) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += cp;
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

// Python's str.split(sep=None, maxsplit=-1).
std::vector<std::string> PySplit(const std::string& s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep == nullptr) {
    const std::vector<std::string> cps = SplitCodePoints(s);
    size_t i = 0;
    while (true) {
      while (i < cps.size() && IsPythonSpace(cps[i])) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
        std::string rest;
        for (size_t k = i; k < cps.size(); ++k) rest += cps[k];
        parts.push_back(std::move(rest));  // the remainder keeps its trailing whitespace
        break;
      }
      std::string word;
      while (i < cps.size() && !IsPythonSpace(cps[i])) word += cps[i++];
      parts.push_back(std::move(word));
    }
    return parts;
  }
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t hit = s.find(*sep, pos);
    if (hit == std::string::npos) break;
    parts.push_back(s.substr(pos, hit - pos));
    pos = hit + sep->size();
  }
  parts.push_back(s.substr(pos));
  return parts;
}

Value StringList(const std::vector<std::string>& parts) {
  List items;
  items.reserve(parts.size());
  for (const std::string& p : parts) items.push_back(Value::String(p));
  return Value::MakeList(std::move(items));
}

// Python-style floor division and modulo on int64 (b != 0).
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t FloorMod(int64_t a, int64_t b) {
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

}  // namespace

Interpreter::Interpreter(const Template& tmpl, Limits limits,
                         std::function<std::string(const std::string&)> strftime_now)
    : template_(tmpl), limits_(limits), strftime_now_(std::move(strftime_now)) {
  builtins_["raise_exception"] = Value::MakeFunction(
      "raise_exception", [](Interpreter& in, CallArgs& args, int line) -> absl::StatusOr<Value> {
        const Value* message = args.Get(0, "message");
        const std::string text = message == nullptr ? "" : ToStr(*message);
        absl::Status status = in.Error(line, absl::StrCat("raise_exception: ", PrintableText(text)));
        status.SetPayload(kRaisedMessagePayload, absl::Cord(text));
        return status;
      });
  builtins_["strftime_now"] = Value::MakeFunction(
      "strftime_now", [](Interpreter& in, CallArgs& args, int line) -> absl::StatusOr<Value> {
        const Value* format = args.Get(0, "format");
        if (format == nullptr || !format->is_string()) {
          return in.Error(line, "strftime_now() takes a format string");
        }
        return Value::String(in.strftime_now_(format->as_string()));
      });
  builtins_["range"] = Value::MakeFunction(
      "range", [](Interpreter& in, CallArgs& args, int line) -> absl::StatusOr<Value> {
        if (!args.keyword.empty() || args.positional.empty() || args.positional.size() > 3) {
          return in.Error(line, "range() takes 1 to 3 integer arguments");
        }
        int64_t bounds[3] = {0, 0, 1};
        for (size_t i = 0; i < args.positional.size(); ++i) {
          const Value& v = args.positional[i];
          if (!v.is_int() && !v.is_bool()) {
            return in.Error(line, absl::StrCat("'", v.TypeName(),
                                               "' object cannot be interpreted as an integer"));
          }
        }
        if (args.positional.size() == 1) {
          bounds[1] = args.positional[0].as_int();
        } else {
          bounds[0] = args.positional[0].as_int();
          bounds[1] = args.positional[1].as_int();
          if (args.positional.size() == 3) bounds[2] = args.positional[2].as_int();
        }
        if (bounds[2] == 0) return in.Error(line, "range() arg 3 must not be zero");
        const long double span = (static_cast<long double>(bounds[1]) - bounds[0]) / bounds[2];
        const long double count = span <= 0 ? 0 : std::ceil(span);
        if (count > kMaxRange) {
          return in.Error(line, "Range too big. The sandbox blocks ranges larger than "
                                "MAX_RANGE (100000).");
        }
        List items;
        for (int64_t i = 0, v = bounds[0]; i < static_cast<int64_t>(count); ++i, v += bounds[2]) {
          items.push_back(Value::Int(v));
        }
        return Value::MakeList(std::move(items));
      });
  const auto make_dict = [](bool ns) {
    return [ns](Interpreter& in, CallArgs& args, int line) -> absl::StatusOr<Value> {
      Dict dict;
      if (args.positional.size() > 1) return in.Error(line, "namespace()/dict() take one mapping");
      if (args.positional.size() == 1) {
        if (!args.positional[0].is_dict()) {
          return in.Error(line, "namespace()/dict() take a mapping as positional argument");
        }
        for (const auto& [k, v] : args.positional[0].as_dict().entries()) dict.Set(k, v);
      }
      for (const auto& [k, v] : args.keyword) dict.Set(k, v);
      return ns ? Value::MakeNamespace(std::move(dict)) : Value::MakeDict(std::move(dict));
    };
  };
  builtins_["namespace"] = Value::MakeFunction("namespace", make_dict(true));
  builtins_["dict"] = Value::MakeFunction("dict", make_dict(false));
}

absl::Status Interpreter::Error(int line, absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(template_.origin, ":", line, ": ", message));
}

absl::Status Interpreter::UndefinedError(const Value& undefined, int line) const {
  return Error(line, PrintableText(undefined.name()));
}

absl::Status Interpreter::Step(int line) {
  if (++steps_ > limits_.max_steps) {
    return Error(line, absl::StrCat("the template ran more than ", limits_.max_steps,
                                    " evaluation steps (an endless or very long loop?)"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::CheckSize(size_t bytes, int line) {
  if (bytes > limits_.max_output_bytes) {
    return Error(line, absl::StrCat("the template's output or a string it builds exceeds ",
                                    limits_.max_output_bytes, " bytes"));
  }
  return Charge(bytes, line);
}

absl::Status Interpreter::Charge(size_t bytes, int line) {
  bytes_built_ += static_cast<int64_t>(std::min<size_t>(bytes, size_t{1} << 62));
  if (bytes_built_ > limits_.max_bytes_built) {
    return Error(line, absl::StrCat("the template built more than ", limits_.max_bytes_built,
                                    " bytes of strings and lists (quadratic building in a loop?)"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::CheckPrintable(const Value& value, int line) const {
  if (!value.has_generator()) return absl::OkStatus();
  return Error(line, "unsupported: printing a generator or iterator (the result of map, select, "
                     "reject, selectattr, rejectattr, unique, items or reverse; jinja2 prints its "
                     "memory address): apply | list");
}

absl::Status Interpreter::Write(absl::string_view text, int line) {
  if (out_->size() + text.size() > limits_.max_output_bytes) {
    return CheckSize(out_->size() + text.size(), line);
  }
  out_->append(text.data(), text.size());
  return absl::OkStatus();
}

absl::StatusOr<std::string> Interpreter::Render(const Dict& context) {
  Scope root;
  for (const auto& [key, value] : context.entries()) root.vars[key] = value;
  global_ = &root;
  std::string output;
  out_ = &output;
  call_depth_ = 0;
  steps_ = 0;
  bytes_built_ = 0;
  absl::StatusOr<Flow> flow = ExecBody(template_.body, root);
  global_ = nullptr;
  out_ = nullptr;
  if (!flow.ok()) return flow.status();
  return output;
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecBody(const Body& body, Scope& scope) {
  for (const NodePtr& node : body) {
    SPARK_ASSIGN_OR_RETURN(const Flow flow, Exec(*node, scope));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

absl::StatusOr<Interpreter::Flow> Interpreter::Exec(const Node& node, Scope& scope) {
  SPARK_RETURN_IF_ERROR(Step(node.line));
  switch (node.type) {
    case Node::Type::kText:
      SPARK_RETURN_IF_ERROR(Write(node.text, node.line));
      return Flow::kNormal;
    case Node::Type::kOutput: {
      SPARK_ASSIGN_OR_RETURN(const Value value, Eval(*node.expr, scope));
      SPARK_RETURN_IF_ERROR(CheckPrintable(value, node.line));
      SPARK_RETURN_IF_ERROR(Write(ToStr(value), node.line));
      return Flow::kNormal;
    }
    case Node::Type::kIf:
      for (const auto& [condition, body] : node.branches) {
        SPARK_ASSIGN_OR_RETURN(const Value value, Eval(*condition, scope));
        if (value.Truthy()) return ExecBody(body, scope);
      }
      return ExecBody(node.else_body, scope);
    case Node::Type::kFor:
      return ExecFor(node, scope);
    case Node::Type::kSet: {
      SPARK_ASSIGN_OR_RETURN(const Value value, Eval(*node.expr, scope));
      if (!node.target_object.empty()) {
        SPARK_ASSIGN_OR_RETURN(const Value object, Lookup(node.target_object, scope));
        if (!object.is_namespace()) {
          return Error(node.line, absl::StrCat("cannot assign attribute on non-namespace object '",
                                               node.target_object, "'"));
        }
        if (value.has_namespace()) {
          return Error(node.line, "unsupported: storing a namespace inside a namespace");
        }
        object.mutable_namespace().Set(node.target_attr, value);
        return Flow::kNormal;
      }
      if (node.targets.size() == 1) {
        scope.vars[node.targets[0]] = value;
        return Flow::kNormal;
      }
      SPARK_ASSIGN_OR_RETURN(const std::vector<Value> items, Iterate(value, node.line));
      if (items.size() != node.targets.size()) {
        return Error(node.line, absl::StrCat("cannot unpack ", items.size(), " values into ",
                                             node.targets.size(), " names"));
      }
      for (size_t i = 0; i < items.size(); ++i) scope.vars[node.targets[i]] = items[i];
      return Flow::kNormal;
    }
    case Node::Type::kSetBlock: {
      std::string captured;
      std::string* saved = out_;
      out_ = &captured;
      absl::StatusOr<Flow> flow = ExecBody(node.body, scope);
      out_ = saved;
      if (!flow.ok()) return flow.status();
      Value value = Value::String(std::move(captured));
      if (node.expr) {
        // Filters over the hole (an unnamed kName): bind it to the captured text.
        Scope hole{{}, &scope};
        hole.vars[""] = value;
        SPARK_ASSIGN_OR_RETURN(value, Eval(*node.expr, hole));
      }
      scope.vars[node.targets[0]] = value;
      return Flow::kNormal;
    }
    case Node::Type::kMacro: {
      const Node* macro = &node;
      scope.vars[node.name] = Value::MakeFunction(
          node.name, [macro](Interpreter& in, CallArgs& args, int line) {
            return in.CallMacro(*macro, args, line);
          });
      return Flow::kNormal;
    }
    case Node::Type::kBreak:
      return Flow::kBreak;
    case Node::Type::kContinue:
      return Flow::kContinue;
    case Node::Type::kGeneration: {
      // A call block in jinja2: its body is a closure, so its own `set`s stay inside.
      Scope inner{{}, &scope};
      return ExecBody(node.body, inner);
    }
  }
  return Flow::kNormal;
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecFor(const Node& node, Scope& scope) {
  SPARK_ASSIGN_OR_RETURN(const Value iterable, Eval(*node.expr, scope));
  SPARK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(iterable, node.line));
  const auto bind = [&](Scope& inner, const Value& item) -> absl::Status {
    if (node.targets.size() == 1) {
      inner.vars[node.targets[0]] = item;
      return absl::OkStatus();
    }
    SPARK_ASSIGN_OR_RETURN(const std::vector<Value> parts, Iterate(item, node.line));
    if (parts.size() != node.targets.size()) {
      return Error(node.line, absl::StrCat("cannot unpack ", parts.size(), " values into ",
                                           node.targets.size(), " loop variables"));
    }
    for (size_t i = 0; i < parts.size(); ++i) inner.vars[node.targets[i]] = parts[i];
    return absl::OkStatus();
  };
  if (node.condition) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      Scope inner{{}, &scope};
      SPARK_RETURN_IF_ERROR(bind(inner, item));
      SPARK_ASSIGN_OR_RETURN(const Value keep, Eval(*node.condition, inner));
      if (keep.Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return ExecBody(node.else_body, scope);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    SPARK_RETURN_IF_ERROR(Step(node.line));
    Scope inner{{}, &scope};
    SPARK_RETURN_IF_ERROR(bind(inner, items[i]));
    Dict loop;
    loop.Set("index", Value::Int(i + 1));
    loop.Set("index0", Value::Int(i));
    loop.Set("revindex", Value::Int(n - i));
    loop.Set("revindex0", Value::Int(n - i - 1));
    loop.Set("first", Value::Bool(i == 0));
    loop.Set("last", Value::Bool(i == n - 1));
    loop.Set("length", Value::Int(n));
    loop.Set("depth", Value::Int(1));
    loop.Set("depth0", Value::Int(0));
    if (i > 0) loop.Set("previtem", items[i - 1]);
    if (i + 1 < n) loop.Set("nextitem", items[i + 1]);
    loop.Set("cycle", Value::MakeFunction(
                          "cycle", [i](Interpreter& in, CallArgs& args, int line)
                                       -> absl::StatusOr<Value> {
                            if (args.positional.empty()) {
                              return in.Error(line, "loop.cycle() takes at least one argument");
                            }
                            return args.positional[static_cast<size_t>(i) %
                                                   args.positional.size()];
                          }));
    inner.vars["loop"] = Value::MakeDict(std::move(loop));
    SPARK_ASSIGN_OR_RETURN(const Flow flow, ExecBody(node.body, inner));
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

absl::StatusOr<Value> Interpreter::CallMacro(const Node& macro, CallArgs& args, int line) {
  if (call_depth_ >= limits_.max_call_depth) {
    return Error(line, absl::StrCat("macro calls nested deeper than ", limits_.max_call_depth,
                                    " (endless recursion?)"));
  }
  if (args.positional.size() > macro.params.size()) {
    return Error(line, absl::StrCat("macro '", macro.name, "' takes not more than ",
                                    macro.params.size(), " argument(s)"));
  }
  for (const auto& [key, value] : args.keyword) {
    bool known = false;
    for (const auto& param : macro.params) known = known || param.first == key;
    if (!known) {
      return Error(line, absl::StrCat("macro '", macro.name, "' takes no keyword argument '",
                                      PrintableText(key), "'"));
    }
  }
  Scope scope{{}, global_};
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const auto& [param, default_value] = macro.params[i];
    if (const Value* given = args.Get(i, param); given != nullptr) {
      scope.vars[param] = *given;
    } else if (default_value) {
      SPARK_ASSIGN_OR_RETURN(scope.vars[param], Eval(*default_value, scope));
    } else {
      scope.vars[param] =
          Value::Undefined(absl::StrCat("parameter ", Quoted(param), " was not provided"));
    }
  }
  std::string captured;
  std::string* saved = out_;
  out_ = &captured;
  ++call_depth_;
  absl::StatusOr<Flow> flow = ExecBody(macro.body, scope);
  --call_depth_;
  out_ = saved;
  if (!flow.ok()) return flow.status();
  return Value::String(std::move(captured));
}

absl::StatusOr<Value> Interpreter::Call(const Value& callee, CallArgs& args, int line) {
  if (callee.is_undefined()) return UndefinedError(callee, line);
  if (!callee.is_function()) {
    return Error(line, absl::StrCat("'", callee.TypeName(), "' object is not callable"));
  }
  return callee.as_function()(*this, args, line);
}

absl::StatusOr<Value> Interpreter::Lookup(const std::string& name, Scope& scope) {
  for (Scope* s = &scope; s != nullptr; s = s->parent) {
    const auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  // Macros see the template's top level (global_), not the caller's loop scopes.
  const auto it = builtins_.find(name);
  if (it != builtins_.end()) return it->second;
  return Value::Undefined(absl::StrCat(Quoted(name), " is undefined"));
}

absl::StatusOr<std::vector<Value>> Interpreter::Iterate(const Value& value, int line) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return std::vector<Value>{};
    case Value::Kind::kGenerator: return value.Consume();
    case Value::Kind::kView:
      SPARK_RETURN_IF_ERROR(Charge(value.view_items().size() * 16, line));
      return value.view_items();
    case Value::Kind::kList:
      SPARK_RETURN_IF_ERROR(Charge(value.as_list().size() * 16, line));
      return value.as_list();
    case Value::Kind::kDict: {
      SPARK_RETURN_IF_ERROR(Charge(value.as_dict().size() * 16, line));
      std::vector<Value> keys;
      for (const auto& entry : value.as_dict().entries()) keys.push_back(Value::String(entry.first));
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (std::string& cp : SplitCodePoints(value.as_string())) {
        chars.push_back(Value::String(std::move(cp)));
      }
      return chars;
    }
    default:
      return Error(line, absl::StrCat("'", value.TypeName(), "' object is not iterable"));
  }
}

absl::StatusOr<Value> Interpreter::GetAttr(const Value& object, const std::string& name,
                                           int line) {
  if (object.is_undefined()) return UndefinedError(object, line);
  if (object.is_namespace()) {
    if (const Value* v = object.as_dict().Find(name)) return *v;
  } else if (object.is_dict() || object.is_string() || object.is_list()) {
    // Python attribute first (a dict's methods), then the item (jinja2's getattr).
    absl::StatusOr<Value> method = Method(object, name, line);
    if (!method.ok() || !method->is_undefined()) return method;
    if (object.is_dict()) {
      if (const Value* v = object.as_dict().Find(name)) return *v;
    }
  }
  return Value::Undefined(absl::StrCat(Quoted(ObjectTypeRepr(object)), " has no attribute ",
                                       Quoted(name)));
}

absl::StatusOr<Value> Interpreter::GetItem(const Value& object, const Value& key, int line) {
  if (object.is_undefined()) return UndefinedError(object, line);
  if (object.is_dict() || object.is_namespace()) {
    if (key.is_string()) {
      if (const Value* v = object.as_dict().Find(key.as_string())) return *v;
      if (object.is_dict()) return GetAttr(object, key.as_string(), line);
    }
  } else if ((object.is_list() || object.is_string()) && (key.is_int() || key.is_bool())) {
    const int64_t size = object.is_list() ? static_cast<int64_t>(object.as_list().size())
                                          : static_cast<int64_t>(CodePointCount(object.as_string()));
    int64_t index = key.as_int();
    if (index < 0) index += size;
    if (index >= 0 && index < size) {
      if (object.is_list()) return object.as_list()[static_cast<size_t>(index)];
      return Value::String(SplitCodePoints(object.as_string())[static_cast<size_t>(index)]);
    }
  } else if (key.is_string()) {
    return GetAttr(object, key.as_string(), line);
  }
  if (key.is_string()) {
    return Value::Undefined(absl::StrCat(Quoted(ObjectTypeRepr(object)), " has no attribute ",
                                         Quoted(key.as_string())));
  }
  return Value::Undefined(absl::StrCat(ObjectTypeRepr(object), " has no element ", Repr(key)));
}

absl::StatusOr<Value> Interpreter::Method(const Value& self, const std::string& name, int line) {
  using Impl = std::function<absl::StatusOr<Value>(Interpreter&, const Value&, CallArgs&, int)>;
  const auto bind = [&](Impl impl) {
    return Value::MakeFunction(name, [self, impl](Interpreter& in, CallArgs& args, int l) {
      return impl(in, self, args, l);
    });
  };
  const auto string_arg = [](Interpreter& in, const CallArgs& args, size_t i, const char* key,
                             int l) -> absl::StatusOr<const std::string*> {
    const Value* v = args.Get(i, key);
    if (v == nullptr || v->is_none()) return nullptr;
    if (!v->is_string()) {
      return in.Error(l, absl::StrCat("expected a string argument, got ", v->TypeName()));
    }
    return &v->as_string();
  };
  const auto int_arg = [](const CallArgs& args, size_t i, const char* key, int64_t fallback) {
    const Value* v = args.Get(i, key);
    return v != nullptr && (v->is_int() || v->is_bool()) ? v->as_int() : fallback;
  };
  if (self.is_string()) {
    if (name == "startswith" || name == "endswith") {
      const bool starts = name == "startswith";
      return bind([starts](Interpreter& in, const Value& s, CallArgs& args,
                           int l) -> absl::StatusOr<Value> {
        const Value* prefix = args.Get(0, "prefix");
        if (prefix == nullptr) return in.Error(l, "startswith/endswith take an argument");
        std::vector<Value> options;
        if (prefix->is_string()) {
          options.push_back(*prefix);
        } else if (prefix->is_tuple()) {
          options = prefix->as_list();
        } else {
          return in.Error(l, absl::StrCat(starts ? "startswith" : "endswith",
                                          " first arg must be str or a tuple of str, not ",
                                          prefix->TypeName()));
        }
        for (const Value& o : options) {
          if (!o.is_string()) return in.Error(l, "startswith/endswith take strings");
          if (starts ? absl::StartsWith(s.as_string(), o.as_string())
                     : absl::EndsWith(s.as_string(), o.as_string())) {
            return Value::Bool(true);
          }
        }
        return Value::Bool(false);
      });
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const bool left = name != "rstrip", right = name != "lstrip";
      return bind([=](Interpreter& in, const Value& s, CallArgs& args,
                      int l) -> absl::StatusOr<Value> {
        SPARK_ASSIGN_OR_RETURN(const std::string* chars, string_arg(in, args, 0, "chars", l));
        return Value::String(PyStrip(s.as_string(), chars, left, right));
      });
    }
    if (name == "split") {
      return bind([=](Interpreter& in, const Value& s, CallArgs& args,
                      int l) -> absl::StatusOr<Value> {
        SPARK_ASSIGN_OR_RETURN(const std::string* sep, string_arg(in, args, 0, "sep", l));
        if (sep != nullptr && sep->empty()) return in.Error(l, "empty separator");
        return StringList(PySplit(s.as_string(), sep, int_arg(args, 1, "maxsplit", -1)));
      });
    }
    if (name == "replace") {
      return bind([=](Interpreter& in, const Value& s, CallArgs& args,
                      int l) -> absl::StatusOr<Value> {
        SPARK_ASSIGN_OR_RETURN(const std::string* from, string_arg(in, args, 0, "old", l));
        SPARK_ASSIGN_OR_RETURN(const std::string* to, string_arg(in, args, 1, "new", l));
        if (from == nullptr || to == nullptr) return in.Error(l, "replace() takes two strings");
        std::string out = PyReplace(s.as_string(), *from, *to, int_arg(args, 2, "count", -1));
        SPARK_RETURN_IF_ERROR(in.CheckSize(out.size(), l));
        return Value::String(std::move(out));
      });
    }
    if (name == "upper" || name == "lower") {
      const bool upper = name == "upper";
      return bind([upper](Interpreter&, const Value& s, CallArgs&, int) -> absl::StatusOr<Value> {
        return Value::String(upper ? PyUpper(s.as_string()) : PyLower(s.as_string()));
      });
    }
    if (name == "find" || name == "count") {
      const bool find = name == "find";
      return bind([=](Interpreter& in, const Value& s, CallArgs& args,
                      int l) -> absl::StatusOr<Value> {
        SPARK_ASSIGN_OR_RETURN(const std::string* sub, string_arg(in, args, 0, "sub", l));
        if (sub == nullptr) return in.Error(l, "find()/count() take a string");
        if (find) {
          const size_t hit = s.as_string().find(*sub);
          if (hit == std::string::npos) return Value::Int(-1);
          return Value::Int(static_cast<int64_t>(CodePointCount(s.as_string().substr(0, hit))));
        }
        if (sub->empty()) return Value::Int(static_cast<int64_t>(CodePointCount(s.as_string())) + 1);
        int64_t n = 0;
        for (size_t p = s.as_string().find(*sub); p != std::string::npos;
             p = s.as_string().find(*sub, p + sub->size())) {
          ++n;
        }
        return Value::Int(n);
      });
    }
    return Value();
  }
  if (self.is_dict()) {
    if (name == "items" || name == "keys" || name == "values") {
      const int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
      return bind([which](Interpreter&, const Value& d, CallArgs&, int) -> absl::StatusOr<Value> {
        List out;
        for (const auto& [k, v] : d.as_dict().entries()) {
          if (which == 0) out.push_back(Value::MakeList({Value::String(k), v}, /*tuple=*/true));
          if (which == 1) out.push_back(Value::String(k));
          if (which == 2) out.push_back(v);
        }
        return Value::MakeView(std::move(out),
                               which == 0 ? "dict_items" : which == 1 ? "dict_keys" : "dict_values");
      });
    }
    if (name == "get") {
      return bind([](Interpreter& in, const Value& d, CallArgs& args,
                     int l) -> absl::StatusOr<Value> {
        const Value* key = args.Get(0, "key");
        if (key == nullptr) return in.Error(l, "get() takes a key");
        const Value* fallback = args.Get(1, "default");
        if (key->is_string()) {
          if (const Value* v = d.as_dict().Find(key->as_string())) return *v;
        }
        return fallback != nullptr ? *fallback : Value::None();
      });
    }
  }
  if (self.is_list() && (name == "count" || name == "index")) {
    const bool count = name == "count";
    return bind([count](Interpreter& in, const Value& l, CallArgs& args,
                        int line_number) -> absl::StatusOr<Value> {
      const Value* needle = args.Get(0, "value");
      if (needle == nullptr) return in.Error(line_number, "count()/index() take a value");
      int64_t n = 0;
      for (size_t i = 0; i < l.as_list().size(); ++i) {
        if (Equal(l.as_list()[i], *needle)) {
          if (!count) return Value::Int(static_cast<int64_t>(i));
          ++n;
        }
      }
      if (!count) return in.Error(line_number, absl::StrCat(Repr(*needle), " is not in list"));
      return Value::Int(n);
    });
  }
  static const char* const kMutating[] = {"append", "extend", "insert", "pop", "remove", "clear",
                                          "update", "setdefault", "popitem", "sort", "reverse"};
  for (const char* m : kMutating) {
    if (name == m && (self.is_list() || self.is_dict())) {
      return Error(line, absl::StrCat("access to attribute ", Quoted(name), " of ",
                                      Quoted(self.TypeName()), " object is unsafe."));
    }
  }
  return Value();
}

// The arguments of a call or filter expression: children[1..] positional, then the keywords.
absl::StatusOr<CallArgs> Interpreter::EvalArgs(const Expr& expr, Scope& scope) {
  CallArgs args;
  for (size_t i = 1; i < expr.children.size(); ++i) {
    SPARK_ASSIGN_OR_RETURN(Value v, Eval(*expr.children[i], scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [key, value_expr] : expr.kwargs) {
    SPARK_ASSIGN_OR_RETURN(Value v, Eval(*value_expr, scope));
    args.keyword.emplace_back(key, std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Interpreter::Eval(const Expr& expr, Scope& scope) {
  SPARK_ASSIGN_OR_RETURN(Value value, EvalImpl(expr, scope));
  if (value.depth() > limits_.max_value_depth) {
    return Error(expr.line, absl::StrCat("a list or dict nested deeper than ",
                                         limits_.max_value_depth, " levels"));
  }
  return value;
}

absl::StatusOr<Value> Interpreter::EvalImpl(const Expr& expr, Scope& scope) {
  SPARK_RETURN_IF_ERROR(Step(expr.line));
  const int line = expr.line;
  switch (expr.type) {
    case Expr::Type::kLiteral: return expr.value;
    case Expr::Type::kName: return Lookup(expr.name, scope);
    case Expr::Type::kList:
    case Expr::Type::kTuple: {
      List items;
      for (const ExprPtr& child : expr.children) {
        SPARK_ASSIGN_OR_RETURN(Value v, Eval(*child, scope));
        items.push_back(std::move(v));
      }
      return Value::MakeList(std::move(items), expr.type == Expr::Type::kTuple);
    }
    case Expr::Type::kDict: {
      Dict dict;
      for (size_t i = 0; i + 1 < expr.children.size(); i += 2) {
        SPARK_ASSIGN_OR_RETURN(const Value key, Eval(*expr.children[i], scope));
        SPARK_ASSIGN_OR_RETURN(Value value, Eval(*expr.children[i + 1], scope));
        if (!key.is_string()) {
          return Error(line, "unsupported: dict literal keys other than strings");
        }
        dict.Set(key.as_string(), std::move(value));
      }
      return Value::MakeDict(std::move(dict));
    }
    case Expr::Type::kAttr: {
      SPARK_ASSIGN_OR_RETURN(const Value object, Eval(*expr.children[0], scope));
      return GetAttr(object, expr.name, line);
    }
    case Expr::Type::kItem: {
      SPARK_ASSIGN_OR_RETURN(const Value object, Eval(*expr.children[0], scope));
      SPARK_ASSIGN_OR_RETURN(const Value key, Eval(*expr.children[1], scope));
      return GetItem(object, key, line);
    }
    case Expr::Type::kSlice: {
      SPARK_ASSIGN_OR_RETURN(const Value object, Eval(*expr.children[0], scope));
      if (object.is_undefined()) return UndefinedError(object, line);
      int64_t parts[3];
      bool given[3];
      for (int i = 0; i < 3; ++i) {
        given[i] = false;
        parts[i] = 0;
        if (!expr.children[i + 1]) continue;
        SPARK_ASSIGN_OR_RETURN(const Value v, Eval(*expr.children[i + 1], scope));
        if (v.is_none()) continue;
        if (!v.is_int() && !v.is_bool()) {
          return Error(line, "slice indices must be integers or None");
        }
        given[i] = true;
        parts[i] = v.as_int();
      }
      std::vector<Value> items;
      std::vector<std::string> cps;
      if (object.is_string()) {
        cps = SplitCodePoints(object.as_string());
      } else if (object.is_list()) {
        items = object.as_list();
      } else {
        return Error(line, absl::StrCat("'", object.TypeName(), "' object is not subscriptable"));
      }
      const int64_t n = static_cast<int64_t>(object.is_string() ? cps.size() : items.size());
      const int64_t step = given[2] ? parts[2] : 1;
      if (step == 0) return Error(line, "slice step cannot be zero");
      // Python's slice.indices().
      const auto adjust = [&](int64_t v, bool has, int64_t fallback_pos, int64_t fallback_neg) {
        if (!has) return step > 0 ? fallback_pos : fallback_neg;
        if (v < 0) {
          v += n;
          if (v < 0) v = step > 0 ? 0 : -1;
        } else if (v >= n) {
          v = step > 0 ? n : n - 1;
        }
        return v;
      };
      const int64_t start = adjust(parts[0], given[0], 0, n - 1);
      const int64_t stop = adjust(parts[1], given[1], n, -1);
      List out_items;
      std::string out_text;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (object.is_string()) {
          out_text += cps[static_cast<size_t>(i)];
        } else {
          out_items.push_back(items[static_cast<size_t>(i)]);
        }
      }
      if (object.is_string()) return Value::String(std::move(out_text));
      return Value::MakeList(std::move(out_items), object.is_tuple());
    }
    case Expr::Type::kCall: {
      SPARK_ASSIGN_OR_RETURN(const Value callee, Eval(*expr.children[0], scope));
      SPARK_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, scope));
      if (callee.is_undefined() && expr.children[0]->type == Expr::Type::kAttr) {
        // A method the interpreter does not implement on a string, dict or list.
        SPARK_ASSIGN_OR_RETURN(const Value object, Eval(*expr.children[0]->children[0], scope));
        if (object.is_string() || object.is_list() || object.is_dict()) {
          return Error(line, absl::StrCat("unsupported method (or no such attribute): ",
                                          PrintableText(callee.name())));
        }
      }
      return Call(callee, args, line);
    }
    case Expr::Type::kFilter: {
      SPARK_ASSIGN_OR_RETURN(const Value input, Eval(*expr.children[0], scope));
      SPARK_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, scope));
      return Filter(expr.name, input, args, line);
    }
    case Expr::Type::kTest: {
      SPARK_ASSIGN_OR_RETURN(const Value input, Eval(*expr.children[0], scope));
      SPARK_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, scope));
      SPARK_ASSIGN_OR_RETURN(const bool result, Test(expr.name, input, args, line));
      return Value::Bool(result != expr.negated);
    }
    case Expr::Type::kNeg:
    case Expr::Type::kPos: {
      SPARK_ASSIGN_OR_RETURN(const Value v, Eval(*expr.children[0], scope));
      if (v.is_undefined()) return UndefinedError(v, line);
      if (!v.is_number()) {
        return Error(line, absl::StrCat("bad operand type for unary ",
                                        expr.type == Expr::Type::kNeg ? "-" : "+", ": '",
                                        v.TypeName(), "'"));
      }
      if (expr.type == Expr::Type::kPos) return v.is_bool() ? Value::Int(v.as_int()) : v;
      if (v.is_float()) return Value::Float(-v.as_float());
      if (v.as_int() == INT64_MIN) return Error(line, "integer overflow");
      return Value::Int(-v.as_int());
    }
    case Expr::Type::kNot: {
      SPARK_ASSIGN_OR_RETURN(const Value v, Eval(*expr.children[0], scope));
      return Value::Bool(!v.Truthy());
    }
    case Expr::Type::kAnd:
    case Expr::Type::kOr: {
      SPARK_ASSIGN_OR_RETURN(const Value left, Eval(*expr.children[0], scope));
      if ((expr.type == Expr::Type::kAnd) != left.Truthy()) return left;
      return Eval(*expr.children[1], scope);
    }
    case Expr::Type::kBinary: {
      SPARK_ASSIGN_OR_RETURN(const Value left, Eval(*expr.children[0], scope));
      SPARK_ASSIGN_OR_RETURN(const Value right, Eval(*expr.children[1], scope));
      return EvalBinary(expr.name, left, right, line);
    }
    case Expr::Type::kCompare: {
      SPARK_ASSIGN_OR_RETURN(Value left, Eval(*expr.children[0], scope));
      for (size_t i = 0; i < expr.ops.size(); ++i) {
        SPARK_ASSIGN_OR_RETURN(Value right, Eval(*expr.children[i + 1], scope));
        SPARK_ASSIGN_OR_RETURN(const bool ok, Compare(expr.ops[i], left, right, line));
        if (!ok) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case Expr::Type::kCondition: {
      SPARK_ASSIGN_OR_RETURN(const Value condition, Eval(*expr.children[1], scope));
      if (condition.Truthy()) return Eval(*expr.children[0], scope);
      if (expr.children[2]) return Eval(*expr.children[2], scope);
      return Value::Undefined("the inline if-expression on line " + std::to_string(line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Value();
}

absl::StatusOr<Value> Interpreter::EvalBinary(const std::string& op, const Value& a,
                                              const Value& b, int line) {
  if (op == "~") {
    SPARK_RETURN_IF_ERROR(CheckPrintable(a, line));
    SPARK_RETURN_IF_ERROR(CheckPrintable(b, line));
    std::string s = ToStr(a) + ToStr(b);
    SPARK_RETURN_IF_ERROR(CheckSize(s.size(), line));
    return Value::String(std::move(s));
  }
  if (op == "%" && a.is_string()) {
    if (a.as_string().find('%') != std::string::npos) {
      return Error(line, "unsupported: '%' string formatting");
    }
    // No conversion specifier: Python ignores a right side with __getitem__ that is not a tuple
    // or a string (a dict, a list, Undefined) and an empty tuple; anything else is left over.
    if (b.is_dict() || (b.is_list() && !b.is_tuple()) || b.is_undefined() ||
        (b.is_tuple() && b.as_list().empty())) {
      return a;
    }
    return Error(line, "not all arguments converted during string formatting");
  }
  if (a.is_undefined()) return UndefinedError(a, line);
  if (b.is_undefined()) return UndefinedError(b, line);
  const auto unsupported = [&]() {
    return Error(line, absl::StrCat("unsupported operand type(s) for ", op, ": '", a.TypeName(),
                                    "' and '", b.TypeName(), "'"));
  };
  if (a.is_number() && b.is_number()) {
    const bool floats = a.is_float() || b.is_float();
    if (op == "/") {
      if (b.as_float() == 0) return Error(line, floats ? "float division by zero" : "division by zero");
      return Value::Float(a.as_float() / b.as_float());
    }
    if (floats) {
      const double x = a.as_float(), y = b.as_float();
      if (op == "+") return Value::Float(x + y);
      if (op == "-") return Value::Float(x - y);
      if (op == "*") return Value::Float(x * y);
      if (op == "**") return Value::Float(std::pow(x, y));
      if (y == 0) return Error(line, op == "//" ? "float floor division by zero" : "float modulo");
      if (op == "//") return Value::Float(std::floor(x / y));
      if (op == "%") {
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value::Float(m);
      }
      return unsupported();
    }
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) return Error(line, "integer overflow");
      return Value::Int(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) return Error(line, "integer overflow");
      return Value::Int(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) return Error(line, "integer overflow");
      return Value::Int(r);
    }
    if (op == "**") {
      if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t result = 1;
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(result, x, &result)) return Error(line, "integer overflow");
        if (result == 0 || result == 1) break;
        if (i > 64 && result == -1) {
          result = (y % 2 == 0) ? 1 : -1;
          break;
        }
      }
      return Value::Int(result);
    }
    if (y == 0) {
      return Error(line, op == "%" ? "integer modulo by zero" : "integer division or modulo by zero");
    }
    if (x == INT64_MIN && y == -1) return Error(line, "integer overflow");
    if (op == "//") return Value::Int(FloorDiv(x, y));
    if (op == "%") return Value::Int(FloorMod(x, y));
    return unsupported();
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      SPARK_RETURN_IF_ERROR(CheckSize(a.as_string().size() + b.as_string().size(), line));
      return Value::String(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      SPARK_RETURN_IF_ERROR(Charge((a.as_list().size() + b.as_list().size()) * 16, line));
      List items = a.as_list();
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      return Value::MakeList(std::move(items), a.is_tuple());
    }
    if (a.is_string() || a.is_list()) {
      return Error(line, absl::StrCat("can only concatenate ", a.TypeName(), " (not \"",
                                      b.TypeName(), "\") to ", a.TypeName()));
    }
    return unsupported();
  }
  if (op == "*" && (a.is_string() || a.is_list() || b.is_string() || b.is_list())) {
    const Value& other = a.is_string() || a.is_list() ? b : a;
    if (!other.is_int() && !other.is_bool()) {
      return Error(line, absl::StrCat("can't multiply sequence by non-int of type '",
                                      other.TypeName(), "'"));
    }
  }
  if (op == "*") {
    const Value* seq = a.is_number() ? &b : &a;
    const Value* count = a.is_number() ? &a : &b;
    if ((seq->is_string() || seq->is_list()) && (count->is_int() || count->is_bool())) {
      const int64_t n = std::max<int64_t>(count->as_int(), 0);
      const size_t unit = seq->is_string() ? seq->as_string().size() : seq->as_list().size() * 16;
      if (unit != 0 && static_cast<uint64_t>(n) > limits_.max_output_bytes / unit) {
        return CheckSize(limits_.max_output_bytes + 1, line);
      }
      if (seq->is_string()) {
        SPARK_RETURN_IF_ERROR(CheckSize(unit * static_cast<size_t>(n), line));
      } else {
        SPARK_RETURN_IF_ERROR(Charge(unit * static_cast<size_t>(n), line));
      }
      if (seq->is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq->as_string();
        return Value::String(std::move(out));
      }
      List items;
      for (int64_t i = 0; i < n; ++i) {
        items.insert(items.end(), seq->as_list().begin(), seq->as_list().end());
      }
      return Value::MakeList(std::move(items), seq->is_tuple());
    }
  }
  return unsupported();
}

absl::StatusOr<bool> Interpreter::Compare(const std::string& op, const Value& a, const Value& b,
                                          int line) {
  if (op == "==") return Equal(a, b);
  if (op == "!=") return !Equal(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) {
        return Error(line, absl::StrCat("'in <string>' requires string as left operand, not ",
                                        a.TypeName()));
      }
      found = b.as_string().find(a.as_string()) != std::string::npos;
    } else if (b.is_list() || b.is_generator() || b.is_view()) {
      SPARK_ASSIGN_OR_RETURN(const std::vector<Value> items, Iterate(b, line));
      for (const Value& item : items) {
        if (Equal(a, item)) {
          found = true;
          break;
        }
      }
    } else if (b.is_dict() || b.is_namespace()) {
      if (a.is_list() && !a.is_tuple()) return Error(line, "unhashable type: 'list'");
      if (a.is_dict()) return Error(line, "unhashable type: 'dict'");
      found = a.is_string() && b.as_dict().Find(a.as_string()) != nullptr;
    } else if (!b.is_undefined()) {
      return Error(line, absl::StrCat("argument of type '", b.TypeName(), "' is not iterable"));
    }
    return op == "in" ? found : !found;
  }
  // Ordering: numbers, strings, lists (lexicographic).
  if (a.is_undefined()) return UndefinedError(a, line);
  if (b.is_undefined()) return UndefinedError(b, line);
  int order = 0;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_float(), y = b.as_float();
      if (std::isnan(x) || std::isnan(y)) return false;
      order = x < y ? -1 : x > y ? 1 : 0;
    } else {
      order = a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    }
  } else if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    order = c < 0 ? -1 : c > 0 ? 1 : 0;
  } else if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    size_t i = 0;
    while (i < x.size() && i < y.size() && Equal(x[i], y[i])) ++i;
    if (i < x.size() && i < y.size()) return Compare(op, x[i], y[i], line);
    order = x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  } else {
    return Error(line, absl::StrCat("'", op, "' not supported between instances of '",
                                    a.TypeName(), "' and '", b.TypeName(), "'"));
  }
  if (op == "<") return order < 0;
  if (op == "<=") return order <= 0;
  if (op == ">") return order > 0;
  return order >= 0;
}

}  // namespace spark::rt::jinja

// The evaluator of Spark's Jinja subset: renders a parsed Template (jinja_parser.h) with a context
// the way jinja2's ImmutableSandboxedEnvironment does under transformers' settings (loopcontrols;
// tojson = json.dumps(ensure_ascii=False); globals raise_exception, strftime_now, range with the
// sandbox's 100000 limit, namespace, dict). Bounded: output size, macro call depth and the number
// of evaluation steps, so no template can crash the process or run forever.
#ifndef SPARK_RUNTIME_SRC_TEXT_JINJA_INTERPRETER_H_
#define SPARK_RUNTIME_SRC_TEXT_JINJA_INTERPRETER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "jinja_parser.h"
#include "jinja_value.h"

namespace spark::rt::jinja {

// The payload type under which a raise_exception() status carries the template's own message.
inline constexpr char kRaisedMessagePayload[] = "spark.rt/chat_template.raise_exception";

struct Limits {
  size_t max_output_bytes = size_t{16} << 20;  // also the largest string a template may build
  int max_call_depth = 100;                    // nested macro calls
  int64_t max_steps = 50'000'000;              // statements + expressions evaluated
  int max_value_depth = 256;                   // nesting of lists and dicts
  // Bytes of strings built plus 16 per list element copied, over a whole rendering: bounds the
  // time of quadratic string or list building (`{% set ns.s = ns.s ~ x %}` in a long loop).
  int64_t max_bytes_built = int64_t{1} << 30;
};

class Interpreter {
 public:
  // `strftime_now(format)` as the global of that name returns it.
  Interpreter(const Template& tmpl, Limits limits,
              std::function<std::string(const std::string&)> strftime_now);

  absl::StatusOr<std::string> Render(const Dict& context);

  // For built-in functions and macros.
  absl::Status Error(int line, absl::string_view message) const;
  absl::StatusOr<Value> Call(const Value& callee, CallArgs& args, int line);

 private:
  struct Scope {
    absl::flat_hash_map<std::string, Value> vars;
    Scope* parent = nullptr;
  };
  enum class Flow { kNormal, kBreak, kContinue };

  absl::StatusOr<Flow> ExecBody(const Body& body, Scope& scope);
  absl::StatusOr<Flow> Exec(const Node& node, Scope& scope);
  absl::StatusOr<Flow> ExecFor(const Node& node, Scope& scope);
  absl::StatusOr<Value> Eval(const Expr& expr, Scope& scope);
  absl::StatusOr<CallArgs> EvalArgs(const Expr& expr, Scope& scope);
  absl::StatusOr<Value> EvalImpl(const Expr& expr, Scope& scope);
  absl::StatusOr<Value> EvalBinary(const std::string& op, const Value& a, const Value& b, int line);
  absl::StatusOr<bool> Compare(const std::string& op, const Value& a, const Value& b, int line);
  absl::StatusOr<Value> Filter(const std::string& name, const Value& input, CallArgs& args,
                               int line);
  absl::StatusOr<bool> Test(const std::string& name, const Value& input, CallArgs& args,
                            int line);
  absl::StatusOr<Value> GetAttr(const Value& object, const std::string& name, int line);
  absl::StatusOr<Value> GetItem(const Value& object, const Value& key, int line);
  absl::StatusOr<Value> Method(const Value& self, const std::string& name, int line);
  absl::StatusOr<std::vector<Value>> Iterate(const Value& value, int line);
  absl::StatusOr<Value> CallMacro(const Node& macro, CallArgs& args, int line);
  absl::StatusOr<Value> Lookup(const std::string& name, Scope& scope);
  absl::Status Write(absl::string_view text, int line);
  // An error for a value holding a generator (jinja2 would print its address).
  absl::Status CheckPrintable(const Value& value, int line) const;
  absl::StatusOr<Value> FilterEager(const std::string& name, const Value& input, CallArgs& args,
                                    int line);
  absl::Status Step(int line);
  // A string (or list) of `bytes` is being built: within the size limit and the budget?
  absl::Status CheckSize(size_t bytes, int line);
  // Adds `bytes` to the building budget only (list copies).
  absl::Status Charge(size_t bytes, int line);
  absl::Status UndefinedError(const Value& undefined, int line) const;

  const Template& template_;
  Limits limits_;
  std::function<std::string(const std::string&)> strftime_now_;
  Scope* global_ = nullptr;
  std::string* out_ = nullptr;
  int call_depth_ = 0;
  int64_t steps_ = 0;
  int64_t bytes_built_ = 0;
  absl::flat_hash_map<std::string, Value> builtins_;
};

}  // namespace spark::rt::jinja

#endif  // SPARK_RUNTIME_SRC_TEXT_JINJA_INTERPRETER_H_

// Lexer and parser of Spark's Jinja subset (chat templates): source text -> a tree of statements
// and expressions. The lexer applies jinja2's whitespace rules as transformers configures them:
// trim_blocks and lstrip_blocks on, `-`/`+` whitespace control on tags, line endings normalised to
// "\n" and one trailing newline dropped (keep_trailing_newline=False). Anything outside the subset
// (an unknown tag, filter or test) is an error naming it and its line.
#ifndef SPARK_RUNTIME_SRC_TEXT_JINJA_PARSER_H_
#define SPARK_RUNTIME_SRC_TEXT_JINJA_PARSER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jinja_value.h"

namespace spark::rt::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Type {
    kLiteral,   // value
    kName,      // name
    kList,      // children
    kTuple,     // children
    kDict,      // children: key, value, key, value, ...
    kAttr,      // children[0].name
    kItem,      // children[0][children[1]]
    kSlice,     // children[0][children[1]:children[2]:children[3]] (null: omitted)
    kCall,      // children[0](children[1..], kwargs)
    kFilter,    // children[0] | name(children[1..], kwargs)
    kTest,      // children[0] is [not] name(children[1..])
    kNeg,       // -children[0]
    kPos,       // +children[0]
    kNot,       // not children[0]
    kBinary,    // children[0] name children[1]: + - * / // % ** ~
    kAnd,       // children[0] and children[1]
    kOr,        // children[0] or children[1]
    kCompare,   // children[0] ops[0] children[1] ops[1] children[2] ...
    kCondition, // children[0] if children[1] else children[2] (null: undefined)
  };
  Type type;
  int line = 0;
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Type {
    kText,        // text
    kOutput,      // {{ expr }}
    kIf,          // branches (condition, body)..., else_body
    kFor,         // for targets in expr [if condition]: body [else: else_body]
    kSet,         // set targets = expr, or set target_object.target_attr = expr
    kSetBlock,    // set targets[0] [| filters] %} body {% endset; filters: expr over a kName "" hole
    kMacro,       // macro name(params) body
    kBreak,
    kContinue,
    kGeneration,  // {% generation %} body (transformers' AssistantTracker): rendered as is
  };
  Type type;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;
  std::string target_object;
  std::string target_attr;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters and defaults (null)
};

struct Template {
  std::string origin;
  Body body;
};

// Parses `source`; errors read "ORIGIN:LINE: message".
absl::StatusOr<std::unique_ptr<Template>> ParseTemplate(absl::string_view source,
                                                        absl::string_view origin);

// The filters and tests the interpreter implements (the parser refuses others).
bool IsKnownFilter(absl::string_view name);
bool IsKnownTest(absl::string_view name);

}  // namespace spark::rt::jinja

#endif  // SPARK_RUNTIME_SRC_TEXT_JINJA_PARSER_H_

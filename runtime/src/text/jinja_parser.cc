#include "jinja_parser.h"

#include <cctype>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/status_macros.h"

// `auto lhs = *expr` for an absl::StatusOr `expr`, returning its status when it is not OK.
#define SPARK_PARSE_ASSIGN(lhs, expr)           \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)
#include "utf8.h"

namespace spark::rt::jinja {
namespace {

constexpr int kMaxNesting = 200;  // expression and statement depth

enum class TokenType { kText, kBlockBegin, kBlockEnd, kVarBegin, kVarEnd, kName, kString,
                       kInt, kFloat, kOp, kEnd };

struct Token {
  TokenType type;
  std::string text;  // text, name, operator, or the decoded string literal
  Value number;
  int line;
};

bool IsSpaceAscii(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
                                   c == '\v' || c == '\f'; }

// Python's str.isspace() over a whole string (jinja2's \s): false for "".
bool AllPythonSpace(absl::string_view text) {
  if (text.empty()) return false;
  for (const std::string& cp : SplitCodePoints(text)) {
    if (!IsPythonSpace(cp)) return false;
  }
  return true;
}

// Length of the Python-whitespace prefix of `text` (jinja2's `\s*` after `-%}`).
size_t SpacePrefix(absl::string_view text) {
  size_t n = 0;
  while (n < text.size()) {
    const std::vector<std::string> cp = SplitCodePoints(text.substr(n, 4));
    if (cp.empty() || !IsPythonSpace(cp[0])) break;
    n += cp[0].size();
  }
  return n;
}

bool ValidUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    if (n == 2 && c < 0xC2) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    if (n == 3) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0)) return false;
    }
    if (n == 4) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xF0 && c1 < 0x90) || c > 0xF4 || (c == 0xF4 && c1 >= 0x90)) return false;
    }
    i += n;
  }
  return true;
}


class Lexer {
 public:
  Lexer(absl::string_view source, absl::string_view origin) : origin_(origin) {
    // jinja2: split on \r\n, \r and \n, drop one trailing empty line, join with "\n".
    source_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        source_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        source_ += source[i];
      }
    }
    if (!source_.empty() && source_.back() == '\n') source_.pop_back();
  }

  absl::StatusOr<std::vector<Token>> Run() {
    if (!ValidUtf8(source_)) return Error(1, "the template is not valid UTF-8");
    size_t pos = 0;
    int line = 1;
    bool line_starting = true;
    bool strip_next = false;  // the previous tag ended with '-'
    while (pos <= source_.size()) {
      size_t start = pos;
      size_t tag = std::string::npos;
      while ((start = source_.find('{', start)) != std::string::npos) {
        if (start + 1 < source_.size() &&
            (source_[start + 1] == '{' || source_[start + 1] == '%' || source_[start + 1] == '#')) {
          tag = start;
          break;
        }
        ++start;
      }
      const size_t raw_end = tag == std::string::npos ? source_.size() : tag;
      const std::string raw = source_.substr(pos, raw_end - pos);
      std::string text = raw;
      int text_line = line;
      if (strip_next) {
        // `-%}` consumed the whitespace after it (jinja2's `\s*` in the end rule).
        const size_t n = SpacePrefix(text);
        text_line += CountLines(absl::string_view(text).substr(0, n));
        text.erase(0, n);
        strip_next = false;
      }
      line += CountLines(raw);
      if (tag == std::string::npos) {
        Emit(TokenType::kText, text, text_line);
        break;
      }
      const char kind = source_[tag + 1];
      const char sign = tag + 2 < source_.size() ? source_[tag + 2] : '\0';
      if (sign == '-') {
        size_t keep = text.size();
        while (keep > 0) {
          // Strip Python whitespace from the right, code point by code point.
          size_t b = keep - 1;
          while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
          if (!IsPythonSpace(text.substr(b, keep - b))) break;
          keep = b;
        }
        text.resize(keep);
      } else if (sign != '+' && kind != '{') {
        const size_t newline = text.rfind('\n');
        const size_t l_pos = newline == std::string::npos ? 0 : newline + 1;
        if ((l_pos > 0 || line_starting) && AllPythonSpace(absl::string_view(text).substr(l_pos))) {
          text.resize(l_pos);
        }
      }
      Emit(TokenType::kText, text, text_line);
      pos = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        const size_t end = source_.find("#}", pos);
        if (end == std::string::npos) return Error(line, "unterminated comment ({# without #})");
        line += CountLines(source_.substr(pos, end - pos));
        const bool minus = end > pos && source_[end - 1] == '-';
        const bool plus = end > pos && source_[end - 1] == '+';
        pos = end + 2;
        line_starting = false;
        if (minus) {
          strip_next = true;
          line_starting = LineStartingAfterStrip(pos);
        } else if (!plus && pos < source_.size() && source_[pos] == '\n') {
          ++pos;
          ++line;
          line_starting = true;
        }
        continue;
      }
      const bool block = kind == '%';
      tokens_.push_back({block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", {}, line});
      SPARK_RETURN_IF_ERROR(LexTag(block, pos, line, line_starting, strip_next));
    }
    tokens_.push_back({TokenType::kEnd, "", {}, line});
    return std::move(tokens_);
  }

 private:

  absl::Status Error(int line, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ":", line, ": ", message));
  }
  static int CountLines(absl::string_view text) {
    int n = 0;
    for (const char c : text) n += c == '\n';
    return n;
  }
  bool LineStartingAfterStrip(size_t pos) const {
    const size_t n = SpacePrefix(absl::string_view(source_).substr(pos));
    return n > 0 && source_[pos + n - 1] == '\n';
  }
  void Emit(TokenType type, const std::string& text, int line) {
    if (type == TokenType::kText && text.empty()) return;
    tokens_.push_back({type, text, {}, line});
  }

  // Lexes the inside of {% ... %} or {{ ... }} from `pos` through its end marker.
  absl::Status LexTag(bool block, size_t& pos, int& line, bool& line_starting, bool& strip_next) {
    const int start_line = line;
    const char closer = block ? '%' : '}';
    while (true) {
      while (pos < source_.size() && IsSpaceAscii(source_[pos])) {
        line += source_[pos] == '\n';
        ++pos;
      }
      if (pos >= source_.size()) {
        return Error(start_line, block ? "unterminated tag ({% without %})"
                                       : "unterminated expression ({{ without }})");
      }
      const char c = source_[pos];
      // End of the tag: `%}`, `-%}`, `+%}` (blocks) or `}}`, `-}}`.
      const auto at_end = [&](size_t p) {
        return p + 1 < source_.size() && source_[p] == closer && source_[p + 1] == '}';
      };
      if (at_end(pos) || ((c == '-' || (block && c == '+')) && at_end(pos + 1))) {
        const bool minus = c == '-';
        const bool plus = c == '+';
        pos += (minus || plus) ? 3 : 2;
        tokens_.push_back({block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", {}, line});
        line_starting = false;
        if (minus) {
          strip_next = true;
          line_starting = LineStartingAfterStrip(pos);
        } else if (block && !plus && pos < source_.size() && source_[pos] == '\n') {
          ++pos;
          ++line;
          line_starting = true;
        }
        return absl::OkStatus();
      }
      if (c == '\'' || c == '"') {
        std::string value;
        size_t p = pos + 1;
        bool closed = false;
        while (p < source_.size()) {
          if (source_[p] == '\\' && p + 1 < source_.size()) {
            p += 2;
            continue;
          }
          if (source_[p] == c) {
            closed = true;
            break;
          }
          ++p;
        }
        if (!closed) return Error(line, "unterminated string literal");
        const std::string raw = source_.substr(pos + 1, p - pos - 1);
        SPARK_RETURN_IF_ERROR(Unescape(raw, line, value));
        tokens_.push_back({TokenType::kString, value, {}, line});
        line += CountLines(raw);
        pos = p + 1;
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t p = pos;
        while (p < source_.size() && (std::isdigit(static_cast<unsigned char>(source_[p])) ||
                                      source_[p] == '_')) {
          ++p;
        }
        bool is_float = false;
        if (p + 1 < source_.size() && source_[p] == '.' &&
            std::isdigit(static_cast<unsigned char>(source_[p + 1]))) {
          is_float = true;
          ++p;
          while (p < source_.size() && (std::isdigit(static_cast<unsigned char>(source_[p])) ||
                                        source_[p] == '_')) {
            ++p;
          }
        }
        if (p < source_.size() && (source_[p] == 'e' || source_[p] == 'E')) {
          size_t q = p + 1;
          if (q < source_.size() && (source_[q] == '+' || source_[q] == '-')) ++q;
          if (q < source_.size() && std::isdigit(static_cast<unsigned char>(source_[q]))) {
            is_float = true;
            p = q;
            while (p < source_.size() && std::isdigit(static_cast<unsigned char>(source_[p]))) ++p;
          }
        }
        std::string digits;
        for (size_t i = pos; i < p; ++i) {
          if (source_[i] != '_') digits += source_[i];
        }
        Token token{is_float ? TokenType::kFloat : TokenType::kInt, digits, {}, line};
        if (is_float) {
          token.number = Value::Float(std::strtod(digits.c_str(), nullptr));
        } else {
          int64_t v = 0;
          if (!absl::SimpleAtoi(digits, &v)) {
            return Error(line, absl::StrCat("integer literal ", digits, " is out of range"));
          }
          token.number = Value::Int(v);
        }
        tokens_.push_back(std::move(token));
        pos = p;
        continue;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t p = pos;
        while (p < source_.size() && (std::isalnum(static_cast<unsigned char>(source_[p])) ||
                                      source_[p] == '_')) {
          ++p;
        }
        tokens_.push_back({TokenType::kName, source_.substr(pos, p - pos), {}, line});
        pos = p;
        continue;
      }
      static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*",
                                         "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=",
                                         ".", ":", "|", ",", ";"};
      bool matched = false;
      for (const char* op : kOps) {
        const absl::string_view o(op);
        if (absl::string_view(source_).substr(pos, o.size()) == o) {
          tokens_.push_back({TokenType::kOp, std::string(o), {}, line});
          pos += o.size();
          matched = true;
          break;
        }
      }
      if (!matched) {
        return Error(line, absl::StrCat("unexpected character '",
                                        PrintableText(source_.substr(pos, 1)), "' in a tag"));
      }
    }
  }

  // Python's unicode-escape decoding of a string literal's body (what jinja2 applies).
  absl::Status Unescape(const std::string& raw, int line, std::string& out) const {
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '\\' || i + 1 >= raw.size()) {
        out += raw[i];
        continue;
      }
      const char e = raw[++i];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + n >= raw.size()) {
            return Error(line, absl::StrCat("truncated \\", std::string(1, e), " escape"));
          }
          const std::string hex = raw.substr(i + 1, n);
          char32_t v = 0;
          for (const char h : hex) {
            if (!std::isxdigit(static_cast<unsigned char>(h))) {
              return Error(line, absl::StrCat("truncated \\", std::string(1, e), " escape"));
            }
            v = v * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                                                                       : (std::tolower(h) - 'a' + 10));
          }
          if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
            return Error(line, "escape outside Unicode (or a surrogate) in a string literal");
          }
          ::spark::rt::AppendUtf8(v, &out);
          i += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = e - '0';
            for (int k = 0; k < 2 && i + 1 < raw.size() && raw[i + 1] >= '0' && raw[i + 1] <= '7';
                 ++k) {
              v = v * 8 + (raw[++i] - '0');
            }
            ::spark::rt::AppendUtf8(v, &out);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    return absl::OkStatus();
  }

  std::string origin_;
  std::string source_;
  std::vector<Token> tokens_;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string origin)
      : tokens_(std::move(tokens)), origin_(std::move(origin)) {}

  absl::StatusOr<Body> ParseAll() {
    Body body;
    std::string end;
    SPARK_RETURN_IF_ERROR(ParseBody(body, {}, end));
    return body;
  }

 private:

  const Token& Peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& Next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool IsOp(absl::string_view op, size_t ahead = 0) const {
    return Peek(ahead).type == TokenType::kOp && Peek(ahead).text == op;
  }
  bool IsName(absl::string_view name, size_t ahead = 0) const {
    return Peek(ahead).type == TokenType::kName && Peek(ahead).text == name;
  }
  absl::Status Error(int line, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ":", line, ": ", message));
  }
  std::string Describe(const Token& t) const {
    switch (t.type) {
      case TokenType::kEnd: return "the end of the template";
      case TokenType::kBlockEnd: return "'%}'";
      case TokenType::kVarEnd: return "'}}'";
      case TokenType::kText: return "text";
      case TokenType::kString: return "a string";
      default: return absl::StrCat("'", PrintableText(t.text), "'");
    }
  }
  absl::Status ExpectOp(absl::string_view op) {
    if (!IsOp(op)) {
      return Error(Peek().line, absl::StrCat("expected '", op, "', found ", Describe(Peek())));
    }
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectBlockEnd() {
    if (Peek().type != TokenType::kBlockEnd) {
      return Error(Peek().line, absl::StrCat("expected the end of the tag '%}', found ",
                                             Describe(Peek())));
    }
    Next();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Peek().type != TokenType::kName) {
      return Error(Peek().line, absl::StrCat("expected a name, found ", Describe(Peek())));
    }
    return Next().text;
  }

  // Parses statements until a block tag whose name is in `ends`; that name goes to `end` (its
  // tag's name token consumed, the rest of the tag not).
  absl::Status ParseBody(Body& body, const std::vector<std::string>& ends, std::string& end) {
    if (++depth_ > kMaxNesting) {
      return Error(Peek().line, absl::StrCat("statements nested deeper than ", kMaxNesting));
    }
    while (true) {
      const Token& t = Peek();
      if (t.type == TokenType::kEnd) {
        --depth_;
        if (ends.empty()) return absl::OkStatus();
        return Error(t.line, absl::StrCat("unexpected end of template: expected {% ", ends[0],
                                          " %} (the block opened at line ", open_line_, ")"));
      }
      if (t.type == TokenType::kText) {
        auto node = std::make_unique<Node>();
        node->type = Node::Type::kText;
        node->line = t.line;
        node->text = t.text;
        body.push_back(std::move(node));
        Next();
        continue;
      }
      if (t.type == TokenType::kVarBegin) {
        const int line = t.line;
        Next();
        SPARK_PARSE_ASSIGN(expr, ParseTuple(false));
        if (Peek().type != TokenType::kVarEnd) {
          return Error(Peek().line, absl::StrCat("expected '}}', found ", Describe(Peek())));
        }
        Next();
        auto node = std::make_unique<Node>();
        node->type = Node::Type::kOutput;
        node->line = line;
        node->expr = std::move(expr);
        body.push_back(std::move(node));
        continue;
      }
      // A block tag.
      Next();
      const Token& name_token = Peek();
      if (name_token.type != TokenType::kName) {
        return Error(name_token.line, absl::StrCat("expected a tag name after '{%', found ",
                                                   Describe(name_token)));
      }
      const std::string name = name_token.text;
      for (const std::string& e : ends) {
        if (name == e) {
          Next();
          end = name;
          --depth_;
          return absl::OkStatus();
        }
      }
      Next();
      SPARK_PARSE_ASSIGN(node, ParseStatement(name, name_token.line));
      body.push_back(std::move(node));
    }
  }

  absl::StatusOr<NodePtr> ParseStatement(const std::string& name, int line) {
    auto node = std::make_unique<Node>();
    node->line = line;
    const int saved_open = open_line_;
    open_line_ = line;
    std::string end;
    if (name == "if") {
      node->type = Node::Type::kIf;
      // jinja2 parses if/elif conditions without a top-level `a if b else c`.
      SPARK_PARSE_ASSIGN(condition, ParseTuple(true));
      SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
      while (true) {
        Body body;
        SPARK_RETURN_IF_ERROR(ParseBody(body, {"elif", "else", "endif"}, end));
        node->branches.emplace_back(std::move(condition), std::move(body));
        if (end == "elif") {
          SPARK_PARSE_ASSIGN(next_condition, ParseTuple(true));
          condition = std::move(next_condition);
          SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
          continue;
        }
        SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
        if (end == "else") {
          SPARK_RETURN_IF_ERROR(ParseBody(node->else_body, {"endif"}, end));
          SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
        }
        break;
      }
    } else if (name == "for") {
      node->type = Node::Type::kFor;
      while (true) {
        SPARK_PARSE_ASSIGN(target, ExpectName());
        node->targets.push_back(target);
        if (!IsOp(",")) break;
        Next();
      }
      if (!IsName("in")) {
        return Error(Peek().line, absl::StrCat("expected 'in' in a for tag, found ",
                                               Describe(Peek())));
      }
      Next();
      SPARK_PARSE_ASSIGN(iterable, ParseTuple(true));
      node->expr = std::move(iterable);
      if (IsName("if")) {
        Next();
        SPARK_PARSE_ASSIGN(filter, ParseExpression(true));
        node->condition = std::move(filter);
      }
      if (IsName("recursive")) {
        return Error(Peek().line, "unsupported: recursive for loops");
      }
      SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
      ++loop_depth_;
      SPARK_RETURN_IF_ERROR(ParseBody(node->body, {"else", "endfor"}, end));
      --loop_depth_;
      SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
      if (end == "else") {
        SPARK_RETURN_IF_ERROR(ParseBody(node->else_body, {"endfor"}, end));
        SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
      }
    } else if (name == "set") {
      SPARK_PARSE_ASSIGN(target, ExpectName());
      if (IsOp(".")) {
        Next();
        SPARK_PARSE_ASSIGN(attr, ExpectName());
        node->target_object = target;
        node->target_attr = attr;
      } else {
        node->targets.push_back(target);
        while (IsOp(",")) {
          Next();
          SPARK_PARSE_ASSIGN(more, ExpectName());
          node->targets.push_back(more);
        }
      }
      if (IsOp("=")) {
        Next();
        node->type = Node::Type::kSet;
        SPARK_PARSE_ASSIGN(value, ParseTuple(false));
        node->expr = std::move(value);
        SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
      } else {
        if (!node->target_object.empty() || node->targets.size() != 1) {
          return Error(line, "a block set ({% set x %}...{% endset %}) takes one plain name");
        }
        node->type = Node::Type::kSetBlock;
        if (IsOp("|")) {
          auto hole = std::make_unique<Expr>();
          hole->type = Expr::Type::kName;
          hole->line = line;
          SPARK_PARSE_ASSIGN(filters, ParseFilters(std::move(hole)));
          node->expr = std::move(filters);
        }
        SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
        SPARK_RETURN_IF_ERROR(ParseBody(node->body, {"endset"}, end));
        SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
      }
    } else if (name == "macro") {
      node->type = Node::Type::kMacro;
      SPARK_PARSE_ASSIGN(macro_name, ExpectName());
      node->name = macro_name;
      SPARK_RETURN_IF_ERROR(ExpectOp("("));
      while (!IsOp(")")) {
        SPARK_PARSE_ASSIGN(param, ExpectName());
        ExprPtr default_value;
        if (IsOp("=")) {
          Next();
          SPARK_PARSE_ASSIGN(value, ParseExpression(true));
          default_value = std::move(value);
        }
        node->params.emplace_back(param, std::move(default_value));
        if (!IsOp(",")) break;
        Next();
      }
      SPARK_RETURN_IF_ERROR(ExpectOp(")"));
      SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
      const int saved_loop_depth = loop_depth_;
      loop_depth_ = 0;
      SPARK_RETURN_IF_ERROR(ParseBody(node->body, {"endmacro"}, end));
      loop_depth_ = saved_loop_depth;
      if (Peek().type == TokenType::kName && Peek().text == node->name) Next();
      SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) return Error(line, absl::StrCat("'", name, "' outside a for loop"));
      node->type = name == "break" ? Node::Type::kBreak : Node::Type::kContinue;
      SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (name == "generation") {
      node->type = Node::Type::kGeneration;
      SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
      SPARK_RETURN_IF_ERROR(ParseBody(node->body, {"endgeneration"}, end));
      SPARK_RETURN_IF_ERROR(ExpectBlockEnd());
    } else {
      static const char* const kEndTags[] = {"endif", "endfor", "endset", "endmacro", "elif",
                                             "else", "endgeneration"};
      for (const char* e : kEndTags) {
        if (name == e) return Error(line, absl::StrCat("unexpected {% ", name, " %}"));
      }
      return Error(line, absl::StrCat("unsupported tag '", PrintableText(name), "'"));
    }
    open_line_ = saved_open;
    return node;
  }

  ExprPtr Make(Expr::Type type, int line) {
    auto e = std::make_unique<Expr>();
    e->type = type;
    e->line = line;
    return e;
  }

  // expression [, expression ...] -> a tuple when there is a comma (for/set/output).
  absl::StatusOr<ExprPtr> ParseTuple(bool no_condition) {
    const int line = Peek().line;
    SPARK_PARSE_ASSIGN(first, ParseExpression(!no_condition));
    if (!IsOp(",")) return first;
    auto tuple = Make(Expr::Type::kTuple, line);
    tuple->children.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Peek().type == TokenType::kBlockEnd || Peek().type == TokenType::kVarEnd) break;
      SPARK_PARSE_ASSIGN(item, ParseExpression(!no_condition));
      tuple->children.push_back(std::move(item));
    }
    return tuple;
  }

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condition) {
    if (++expr_depth_ > kMaxNesting) {
      return Error(Peek().line, absl::StrCat("expression nested deeper than ", kMaxNesting));
    }
    SPARK_PARSE_ASSIGN(expr, ParseOr());
    if (with_condition) {
      while (IsName("if")) {
        const int line = Next().line;
        SPARK_PARSE_ASSIGN(condition, ParseOr());
        auto cond = Make(Expr::Type::kCondition, line);
        cond->children.push_back(std::move(expr));
        cond->children.push_back(std::move(condition));
        if (IsName("else")) {
          Next();
          SPARK_PARSE_ASSIGN(otherwise, ParseExpression(true));
          cond->children.push_back(std::move(otherwise));
        } else {
          cond->children.push_back(nullptr);
        }
        expr = std::move(cond);
      }
    }
    --expr_depth_;
    return expr;
  }

  absl::StatusOr<ExprPtr> Binary(Expr::Type type, ExprPtr left, ExprPtr right, int line,
                                 std::string op = "") {
    auto e = Make(type, line);
    e->name = std::move(op);
    e->children.push_back(std::move(left));
    e->children.push_back(std::move(right));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    SPARK_PARSE_ASSIGN(left, ParseAnd());
    while (IsName("or")) {
      const int line = Next().line;
      SPARK_PARSE_ASSIGN(right, ParseAnd());
      SPARK_PARSE_ASSIGN(e, Binary(Expr::Type::kOr, std::move(left), std::move(right), line));
      left = std::move(e);
    }
    return left;
  }
  absl::StatusOr<ExprPtr> ParseAnd() {
    SPARK_PARSE_ASSIGN(left, ParseNot());
    while (IsName("and")) {
      const int line = Next().line;
      SPARK_PARSE_ASSIGN(right, ParseNot());
      SPARK_PARSE_ASSIGN(e, Binary(Expr::Type::kAnd, std::move(left), std::move(right), line));
      left = std::move(e);
    }
    return left;
  }
  absl::StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      const int line = Next().line;
      if (++expr_depth_ > kMaxNesting) {
        return Error(line, absl::StrCat("expression nested deeper than ", kMaxNesting));
      }
      SPARK_PARSE_ASSIGN(operand, ParseNot());
      --expr_depth_;
      auto e = Make(Expr::Type::kNot, line);
      e->children.push_back(std::move(operand));
      return e;
    }
    return ParseCompare();
  }
  absl::StatusOr<ExprPtr> ParseCompare() {
    const int line = Peek().line;
    SPARK_PARSE_ASSIGN(first, ParseMath1());
    ExprPtr compare;
    while (true) {
      std::string op;
      if (Peek().type == TokenType::kOp &&
          (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp(">") || IsOp("<=") || IsOp(">="))) {
        op = Next().text;
      } else if (IsName("in")) {
        Next();
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        Next();
        Next();
        op = "not in";
      } else {
        break;
      }
      if (!compare) {
        compare = Make(Expr::Type::kCompare, line);
        compare->children.push_back(std::move(first));
      }
      SPARK_PARSE_ASSIGN(operand, ParseMath1());
      compare->ops.push_back(op);
      compare->children.push_back(std::move(operand));
    }
    if (compare) return compare;
    return first;
  }
  absl::StatusOr<ExprPtr> ParseMath1() {
    SPARK_PARSE_ASSIGN(left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      const Token& op = Next();
      const int line = op.line;
      const std::string name = op.text;
      SPARK_PARSE_ASSIGN(right, ParseConcat());
      SPARK_PARSE_ASSIGN(e, Binary(Expr::Type::kBinary, std::move(left), std::move(right), line,
                                   name));
      left = std::move(e);
    }
    return left;
  }
  absl::StatusOr<ExprPtr> ParseConcat() {
    SPARK_PARSE_ASSIGN(left, ParseMath2());
    while (IsOp("~")) {
      const int line = Next().line;
      SPARK_PARSE_ASSIGN(right, ParseMath2());
      SPARK_PARSE_ASSIGN(e, Binary(Expr::Type::kBinary, std::move(left), std::move(right), line,
                                   "~"));
      left = std::move(e);
    }
    return left;
  }
  absl::StatusOr<ExprPtr> ParseMath2() {
    SPARK_PARSE_ASSIGN(left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& op = Next();
      const int line = op.line;
      const std::string name = op.text;
      SPARK_PARSE_ASSIGN(right, ParsePow());
      SPARK_PARSE_ASSIGN(e, Binary(Expr::Type::kBinary, std::move(left), std::move(right), line,
                                   name));
      left = std::move(e);
    }
    return left;
  }
  absl::StatusOr<ExprPtr> ParsePow() {
    SPARK_PARSE_ASSIGN(left, ParseUnary(true));
    while (IsOp("**")) {
      const int line = Next().line;
      SPARK_PARSE_ASSIGN(right, ParseUnary(true));
      SPARK_PARSE_ASSIGN(e, Binary(Expr::Type::kBinary, std::move(left), std::move(right), line,
                                   "**"));
      left = std::move(e);
    }
    return left;
  }
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      const Token& op = Next();
      const bool neg = op.text == "-";
      const int line = op.line;
      if (++expr_depth_ > kMaxNesting) {
        return Error(line, absl::StrCat("expression nested deeper than ", kMaxNesting));
      }
      SPARK_PARSE_ASSIGN(operand, ParseUnary(false));
      --expr_depth_;
      node = Make(neg ? Expr::Type::kNeg : Expr::Type::kPos, line);
      node->children.push_back(std::move(operand));
    } else {
      SPARK_PARSE_ASSIGN(primary, ParsePrimary());
      SPARK_PARSE_ASSIGN(postfix, ParsePostfix(std::move(primary)));
      node = std::move(postfix);
    }
    if (with_filter) {
      SPARK_PARSE_ASSIGN(filtered, ParseFilterExpr(std::move(node)));
      node = std::move(filtered);
    }
    return node;
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& t = Peek();
    const int line = t.line;
    if (t.type == TokenType::kName) {
      const std::string name = Next().text;
      if (name == "true" || name == "True") {
        auto e = Make(Expr::Type::kLiteral, line);
        e->value = Value::Bool(true);
        return e;
      }
      if (name == "false" || name == "False") {
        auto e = Make(Expr::Type::kLiteral, line);
        e->value = Value::Bool(false);
        return e;
      }
      if (name == "none" || name == "None") {
        auto e = Make(Expr::Type::kLiteral, line);
        e->value = Value::None();
        return e;
      }
      auto e = Make(Expr::Type::kName, line);
      e->name = name;
      return e;
    }
    if (t.type == TokenType::kString) {
      std::string text = Next().text;
      while (Peek().type == TokenType::kString) text += Next().text;  // adjacent literals join
      auto e = Make(Expr::Type::kLiteral, line);
      e->value = Value::String(std::move(text));
      return e;
    }
    if (t.type == TokenType::kInt || t.type == TokenType::kFloat) {
      auto e = Make(Expr::Type::kLiteral, line);
      e->value = Next().number;
      return e;
    }
    if (IsOp("(")) {
      Next();
      if (IsOp(")")) {
        Next();
        return Make(Expr::Type::kTuple, line);
      }
      SPARK_PARSE_ASSIGN(first, ParseExpression(true));
      if (IsOp(")")) {
        Next();
        return first;
      }
      auto tuple = Make(Expr::Type::kTuple, line);
      tuple->children.push_back(std::move(first));
      while (IsOp(",")) {
        Next();
        if (IsOp(")")) break;
        SPARK_PARSE_ASSIGN(item, ParseExpression(true));
        tuple->children.push_back(std::move(item));
      }
      SPARK_RETURN_IF_ERROR(ExpectOp(")"));
      return tuple;
    }
    if (IsOp("[")) {
      Next();
      auto list = Make(Expr::Type::kList, line);
      while (!IsOp("]")) {
        SPARK_PARSE_ASSIGN(item, ParseExpression(true));
        list->children.push_back(std::move(item));
        if (!IsOp(",")) break;
        Next();
      }
      SPARK_RETURN_IF_ERROR(ExpectOp("]"));
      return list;
    }
    if (IsOp("{")) {
      Next();
      auto dict = Make(Expr::Type::kDict, line);
      while (!IsOp("}")) {
        SPARK_PARSE_ASSIGN(key, ParseExpression(true));
        SPARK_RETURN_IF_ERROR(ExpectOp(":"));
        SPARK_PARSE_ASSIGN(value, ParseExpression(true));
        dict->children.push_back(std::move(key));
        dict->children.push_back(std::move(value));
        if (!IsOp(",")) break;
        Next();
      }
      SPARK_RETURN_IF_ERROR(ExpectOp("}"));
      return dict;
    }
    return Error(line, absl::StrCat("expected an expression, found ", Describe(t)));
  }

  absl::Status ParseCallArgs(Expr& call) {
    SPARK_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (Peek().type == TokenType::kName && IsOp("=", 1)) {
        const std::string key = Next().text;
        Next();
        SPARK_PARSE_ASSIGN(value, ParseExpression(true));
        call.kwargs.emplace_back(key, std::move(value));
      } else {
        if (!call.kwargs.empty()) {
          return Error(Peek().line, "a positional argument follows a keyword argument");
        }
        SPARK_PARSE_ASSIGN(value, ParseExpression(true));
        call.children.push_back(std::move(value));
      }
      if (!IsOp(",")) break;
      Next();
    }
    return ExpectOp(")");
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
    int chain = 0;
    while (true) {
      if (++chain > kMaxNesting) {
        return Error(Peek().line, absl::StrCat("expression nested deeper than ", kMaxNesting));
      }
      const int line = Peek().line;
      if (IsOp(".")) {
        Next();
        auto attr = Make(Expr::Type::kAttr, line);
        if (Peek().type == TokenType::kName) {
          attr->name = Next().text;
        } else if (Peek().type == TokenType::kInt) {
          attr->type = Expr::Type::kItem;
          auto index = Make(Expr::Type::kLiteral, line);
          index->value = Next().number;
          attr->children.push_back(std::move(node));
          attr->children.push_back(std::move(index));
          node = std::move(attr);
          continue;
        } else {
          return Error(line, absl::StrCat("expected an attribute name after '.', found ",
                                          Describe(Peek())));
        }
        attr->children.push_back(std::move(node));
        node = std::move(attr);
      } else if (IsOp("[")) {
        Next();
        ExprPtr parts[3];
        bool slice = false;
        for (int i = 0; i < 3; ++i) {
          if (!IsOp(":") && !IsOp("]")) {
            SPARK_PARSE_ASSIGN(part, ParseExpression(true));
            parts[i] = std::move(part);
          }
          if (i == 0 && !slice && IsOp(",")) {
            // x[a, b]: the key is a tuple (as in Python).
            auto tuple = Make(Expr::Type::kTuple, line);
            tuple->children.push_back(std::move(parts[0]));
            while (IsOp(",")) {
              Next();
              if (IsOp("]")) break;
              SPARK_PARSE_ASSIGN(item, ParseExpression(true));
              tuple->children.push_back(std::move(item));
            }
            parts[0] = std::move(tuple);
            break;
          }
          if (i < 2 && IsOp(":")) {
            Next();
            slice = true;
            continue;
          }
          break;
        }
        SPARK_RETURN_IF_ERROR(ExpectOp("]"));
        if (!slice) {
          if (!parts[0]) parts[0] = Make(Expr::Type::kTuple, line);  // x[] is x[()] in jinja2
          auto item = Make(Expr::Type::kItem, line);
          item->children.push_back(std::move(node));
          item->children.push_back(std::move(parts[0]));
          node = std::move(item);
        } else {
          auto s = Make(Expr::Type::kSlice, line);
          s->children.push_back(std::move(node));
          for (auto& p : parts) s->children.push_back(std::move(p));
          node = std::move(s);
        }
      } else if (IsOp("(")) {
        auto call = Make(Expr::Type::kCall, line);
        call->children.push_back(std::move(node));
        SPARK_RETURN_IF_ERROR(ParseCallArgs(*call));
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr node) {
    while (IsOp("|")) {
      const int line = Next().line;
      SPARK_PARSE_ASSIGN(name, ExpectName());
      if (!IsKnownFilter(name)) {
        return Error(line, absl::StrCat("unsupported filter '", PrintableText(name), "'"));
      }
      auto f = Make(Expr::Type::kFilter, line);
      f->name = name;
      f->children.push_back(std::move(node));
      if (IsOp("(")) SPARK_RETURN_IF_ERROR(ParseCallArgs(*f));
      node = std::move(f);
    }
    return node;
  }

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node) {
    int chain = 0;
    while (true) {
      if (++chain > kMaxNesting) {
        return Error(Peek().line, absl::StrCat("expression nested deeper than ", kMaxNesting));
      }
      if (IsOp("|")) {
        SPARK_PARSE_ASSIGN(filtered, ParseFilters(std::move(node)));
        node = std::move(filtered);
        continue;
      }
      if (IsName("is")) {
        const int line = Next().line;
        bool negated = false;
        if (IsName("not")) {
          Next();
          negated = true;
        }
        std::string name;
        if (Peek().type == TokenType::kName) {
          name = Next().text;
        } else {
          return Error(line, absl::StrCat("expected a test name after 'is', found ",
                                          Describe(Peek())));
        }
        if (!IsKnownTest(name)) {
          return Error(line, absl::StrCat("unsupported test '", PrintableText(name), "'"));
        }
        auto test = Make(Expr::Type::kTest, line);
        test->name = name;
        test->negated = negated;
        test->children.push_back(std::move(node));
        if (IsOp("(")) {
          SPARK_RETURN_IF_ERROR(ParseCallArgs(*test));
        } else if ((Peek().type == TokenType::kName && !IsName("else") && !IsName("or") &&
                    !IsName("and")) ||
                   Peek().type == TokenType::kString || Peek().type == TokenType::kInt ||
                   Peek().type == TokenType::kFloat || IsOp("[") || IsOp("{")) {
          // `is divisibleby 3`, `is equalto 'x'`: one argument without parentheses.
          if (IsName("is")) return Error(Peek().line, "You cannot chain multiple tests with is");
          SPARK_PARSE_ASSIGN(arg, ParsePrimary());
          SPARK_PARSE_ASSIGN(arg_postfix, ParsePostfix(std::move(arg)));
          test->children.push_back(std::move(arg_postfix));
        }
        node = std::move(test);
        continue;
      }
      if (IsOp("(")) {
        auto call = Make(Expr::Type::kCall, Peek().line);
        call->children.push_back(std::move(node));
        SPARK_RETURN_IF_ERROR(ParseCallArgs(*call));
        node = std::move(call);
        continue;
      }
      return node;
    }
  }

  std::vector<Token> tokens_;
  std::string origin_;
  size_t pos_ = 0;
  int depth_ = 0;
  int expr_depth_ = 0;
  int loop_depth_ = 0;
  int open_line_ = 0;
};

}  // namespace

bool IsKnownFilter(absl::string_view name) {
  static const char* const kFilters[] = {
      "trim", "tojson", "length", "count", "upper", "lower", "title", "capitalize", "replace",
      "join", "default", "d", "first", "last", "list", "items", "dictsort", "selectattr",
      "rejectattr", "select", "reject", "map", "string", "int", "float", "abs", "round",
      "indent", "safe", "unique", "reverse", "sort", "e", "escape"};
  for (const char* f : kFilters) {
    if (name == f) return true;
  }
  return false;
}

bool IsKnownTest(absl::string_view name) {
  static const char* const kTests[] = {
      "defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "number",
      "integer", "float", "boolean", "true", "false", "equalto", "eq", "==", "ne", "!=", "in",
      "lt", "<", "le", "<=", "gt", ">", "ge", ">=", "lessthan", "greaterthan", "odd", "even",
      "divisibleby", "callable", "sameas", "lower", "upper"};
  for (const char* t : kTests) {
    if (name == t) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<Template>> ParseTemplate(absl::string_view source,
                                                        absl::string_view origin) {
  Lexer lexer(source, origin);
  auto tokens = lexer.Run();
  if (!tokens.ok()) return tokens.status();
  Parser parser(std::move(*tokens), std::string(origin));
  auto body = parser.ParseAll();
  if (!body.ok()) return body.status();
  auto result = std::make_unique<Template>();
  result->origin = std::string(origin);
  result->body = std::move(*body);
  return result;
}

}  // namespace spark::rt::jinja

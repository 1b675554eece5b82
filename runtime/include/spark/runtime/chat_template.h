// Chat templates: renders a checkpoint's Jinja chat template (chat_template.jinja, or
// tokenizer_config.json's "chat_template") with OpenAI-style messages exactly as Python jinja2
// renders it under transformers' apply_chat_template: the same environment (sandboxed,
// trim_blocks, lstrip_blocks, loopcontrols), the same tojson, raise_exception and strftime_now,
// and the same keyword arguments (messages, tools, documents, add_generation_prompt, the special
// tokens, then whatever else the context holds, e.g. enable_thinking).
//
// No Debian package offers Jinja for C++, so Spark carries a small interpreter of the Jinja subset
// real chat templates use (runtime/src/text/jinja_*, docs/chat-templates.md); a construct outside
// it is an error naming it and its line, never a silently different prompt.
#ifndef SPARK_RUNTIME_CHAT_TEMPLATE_H_
#define SPARK_RUNTIME_CHAT_TEMPLATE_H_

#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace spark::rt {

namespace jinja {
struct Template;
}  // namespace jinja

// The status payload (type URL) under which a template's raise_exception(message) error carries
// `message` verbatim; the status message itself reads "ORIGIN:LINE: raise_exception: MESSAGE".
absl::string_view ChatTemplateRaisedPayload();

class ChatTemplate {
 public:
  // Bounds on one rendering (errors, not crashes, when a template exceeds them).
  struct Limits {
    size_t max_output_bytes = size_t{16} << 20;
    int max_call_depth = 100;
    int64_t max_steps = 50'000'000;
  };

  // source: the template text; origin: a file name for messages ("ORIGIN:LINE: ...").
  static absl::StatusOr<ChatTemplate> Parse(absl::string_view source, absl::string_view origin);

  // The template of a checkpoint directory: chat_template.jinja, else
  // chat_template.json's "chat_template" (a processor's), else tokenizer_config.json's
  // "chat_template" (a string, or a list of {"name", "template"}: the one named "default").
  // bos_token/eos_token (strings or {"content": ...} objects) come from tokenizer_config.json
  // when it exists. The error names what was looked for.
  static absl::StatusOr<ChatTemplate> Load(const std::string& directory);

  // context: {"messages": [...], "tools": [...]?, "add_generation_prompt": bool?,
  // "enable_thinking": bool?, ...}. As transformers does: tools and documents are None when
  // absent, add_generation_prompt false; bos_token/eos_token from Load are added unless the
  // context has them. ordered_json: key order is visible to templates (tojson, items()).
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context) const;

  const std::string& origin() const;
  const std::optional<std::string>& bos_token() const { return bos_token_; }
  const std::optional<std::string>& eos_token() const { return eos_token_; }
  void set_bos_token(std::optional<std::string> token) { bos_token_ = std::move(token); }
  void set_eos_token(std::optional<std::string> token) { eos_token_ = std::move(token); }
  void set_limits(const Limits& limits) { limits_ = limits; }
  // The local time strftime_now(format) formats: now unless set (tests fix it).
  void set_clock(std::function<std::tm()> clock) { clock_ = std::move(clock); }

 private:
  ChatTemplate() = default;

  std::shared_ptr<const jinja::Template> template_;
  std::optional<std::string> bos_token_;
  std::optional<std::string> eos_token_;
  Limits limits_;
  std::function<std::tm()> clock_;
};

}  // namespace spark::rt

#endif  // SPARK_RUNTIME_CHAT_TEMPLATE_H_

// Fuzzes the chat-template interpreter (spark_text): lexing, parsing and rendering of an arbitrary
// template with a conversation that exercises the usual chat-template inputs (system prompt, tool
// declarations, tool calls and responses, content parts, special tokens).
//
// Input: the template text, optionally followed by "\n@@CONTEXT@@\n" and a JSON object used as the
// render context instead of the built-in one.
//
// Invariants: a rejection (parse or render) carries a message; rendering is deterministic (the
// same input renders to the same text or the same error twice); the output respects the limit.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "nlohmann/json.hpp"
#include "spark/runtime/chat_template.h"

namespace {

const nlohmann::ordered_json& DefaultContext() {
  static const nlohmann::ordered_json* const kContext = new nlohmann::ordered_json(
      nlohmann::ordered_json::parse(R"({
  "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Hi \u00fc"}, {"type": "image"}]},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "f", "arguments": {"a": [1, 2.5, null, true], "b": {"c": "d"}}}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "ok"},
    {"role": "assistant", "content": "<|channel>thought\nx<channel|>Done.",
     "reasoning_content": "r"},
    {"role": "user", "content": "Again"}
  ],
  "tools": [{"type": "function", "function": {"name": "f", "description": "d",
    "parameters": {"type": "object", "properties": {"a": {"type": "array",
      "items": {"type": "number"}}, "b": {"type": "object", "properties": {"c":
      {"type": "string", "enum": ["d", "e"]}}}}, "required": ["a"]}}}],
  "add_generation_prompt": true,
  "enable_thinking": true,
  "bos_token": "<bos>",
  "eos_token": "<eos>"
})"));
  return *kContext;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  static constexpr char kSeparator[] = "\n@@CONTEXT@@\n";
  std::string source = input;
  nlohmann::ordered_json context = DefaultContext();
  if (const size_t at = input.find(kSeparator); at != std::string::npos) {
    source = input.substr(0, at);
    context = nlohmann::ordered_json::parse(input.substr(at + sizeof(kSeparator) - 1), nullptr,
                                            /*allow_exceptions=*/false);
    if (context.is_discarded()) return 0;
  }
  absl::StatusOr<spark::rt::ChatTemplate> tmpl =
      spark::rt::ChatTemplate::Parse(source, "fuzz.jinja");
  if (!tmpl.ok()) {
    SPARK_FUZZ_CHECK(!tmpl.status().message().empty());
    return 0;
  }
  spark::rt::ChatTemplate::Limits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_steps = 200000;
  limits.max_call_depth = 50;
  tmpl->set_limits(limits);
  tmpl->set_clock([] { return std::tm{}; });
  const absl::StatusOr<std::string> first = tmpl->Render(context);
  const absl::StatusOr<std::string> second = tmpl->Render(context);
  SPARK_FUZZ_CHECK(first.ok() == second.ok());
  if (!first.ok()) {
    SPARK_FUZZ_CHECK(!first.status().message().empty());
    SPARK_FUZZ_CHECK(first.status() == second.status());
    return 0;
  }
  SPARK_FUZZ_CHECK(*first == *second);
  SPARK_FUZZ_CHECK(first->size() <= limits.max_output_bytes);
  return 0;
}

// Gemma 4's tool calls, as the model writes them (gemma4-ecosystem.md section 4):
//   <|tool_call>call:NAME{key:<|"|>text<|"|>,count:42,flag:true,opts:{a:[1,2]}}<tool_call|>
// keys bare, strings between <|"|> markers, numbers, true/false, null/none/nil, nested {} and [].
// ParseToolCall reads the text between the markers into OpenAI's form (the name and the arguments
// as a JSON object's text), as vLLM's gemma4 tool parser and transformers' response schema do.
#ifndef SPARK_RUNTIME_TOOL_CALL_H_
#define SPARK_RUNTIME_TOOL_CALL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spark {
namespace rt {

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON object text, e.g. {"city":"Paris","days":3}
};

// `text` is what lies between <|tool_call> and <tool_call|>, special tokens as text:
// "call:NAME{...}". INVALID_ARGUMENT saying where it does not follow the format.
absl::StatusOr<ToolCall> ParseToolCall(absl::string_view text);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_TOOL_CALL_H_

// The OpenAI API surface of spark-serve (docs/serving.md), without HTTP: request bodies of
// /v1/chat/completions and /v1/completions checked and turned into GenerationRequests, and the
// response, chunk and error objects in OpenAI's shapes. Everything a client sends is untrusted:
// each wrong type, value out of range or field that would change the meaning of the request and
// that Spark does not implement is an ApiError naming the field, never a silent default.
#ifndef SPARK_RUNTIME_SRC_SERVE_OPENAI_API_H_
#define SPARK_RUNTIME_SRC_SERVE_OPENAI_API_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "api_types.h"
#include "json_document.h"
#include "spark/runtime/chat_template.h"
#include "spark/runtime/generation_config.h"
#include "spark/runtime/generator.h"
#include "spark/runtime/tokenizer.h"
#include "spark/runtime/tool_call.h"

namespace spark {
namespace serve {

using rt::Json;

template <typename T>
using Expected = std::variant<T, ApiError>;

// What the request layer needs from the loaded model.
struct ServeContext {
  const rt::Tokenizer* tokenizer = nullptr;
  const rt::ChatTemplate* chat_template = nullptr;  // null: /v1/chat/completions answers 400
  std::string model_name;
  int64_t max_length = 0;   // prompt + output, per request
  int64_t vocab_size = 0;
  rt::GenerationConfig generation_config;  // stop ids and sampling defaults
  // Images (image_url parts): whether the model takes them (a vision tower), the image ids
  // (ModelInfo's image_token_id, boi_token_id, eoi_token_id) and the soft-token budget of each
  // (spark-serve --image-tokens).
  bool takes_images = false;
  rt::ModelInfo model_info;
  int64_t image_tokens = 280;
  rt::ImageLimits image_limits;
};

// A request body: JSON (duplicate keys and nesting deeper than 64 refused) holding an object.
Expected<Json> ParseBody(absl::string_view body);

Expected<GenerationRequest> ParseChatRequest(const Json& body, const ServeContext& context);
Expected<GenerationRequest> ParseCompletionRequest(const Json& body, const ServeContext& context);

// /tokenize: {"prompt": TEXT} (add_special_tokens, default true) or {"messages": [...]} (the chat
// template, add_generation_prompt default true); answers {"tokens", "count", "max_model_len"}.
Expected<Json> Tokenize(const Json& body, const ServeContext& context);
// /detokenize: {"tokens": [ids]} -> {"prompt": TEXT}.
Expected<Json> Detokenize(const Json& body, const ServeContext& context);

// {"error": {"message", "type", "param", "code"}}.
Json ErrorJson(const ApiError& error);

// What a finished generation produced, for the response objects.
struct GenerationOutput {
  std::string text;       // the answer, without stop string or stopping token
  std::string reasoning;  // the thinking channel (reasoning_content), chat only
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::string finish_reason;  // "stop", "length", "abort" or "tool_calls"
  std::vector<rt::ToolCall> tool_calls;  // chat only
};

// The tool calls of a finished generation (each call's text, TextStream::tool_calls): parsed into
// `output` (finish_reason "tool_calls"); a call that does not parse stays in the text as written.
void AddToolCalls(const std::vector<std::string>& calls, GenerationOutput* output);

// A tool call's OpenAI form, with its id ("call_" + the request id's suffix + its index).
Json ToolCallJson(const rt::ToolCall& call, const std::string& id, size_t index, bool with_index);

// "stop" when an EOS id, a stop id or a stop string ended it, "abort" when the server cancelled
// it (shutting down), otherwise "length".
std::string FinishReason(const rt::GenerateResult& result);

Json UsageJson(int64_t prompt_tokens, int64_t completion_tokens);

// Non-streaming responses: chat.completion / text_completion.
Json ChatResponseJson(const std::string& id, int64_t created, const std::string& model,
                      const GenerationOutput& output);
Json CompletionResponseJson(const std::string& id, int64_t created, const std::string& model,
                            const GenerationOutput& output);

// Streaming chunks: chat.completion.chunk with a delta, text_completion with text. `field` of a
// chat delta is "role", "content" or "reasoning_content"; finish_reason empty: null.
// ChatToolCallChunkJson: a delta with one complete tool call.
Json ChatChunkJson(const std::string& id, int64_t created, const std::string& model,
                   const std::string& field, const std::string& value,
                   const std::string& finish_reason);
Json ChatToolCallChunkJson(const std::string& id, int64_t created, const std::string& model,
                           const rt::ToolCall& call, size_t index);
Json CompletionChunkJson(const std::string& id, int64_t created, const std::string& model,
                         const std::string& text, const std::string& finish_reason);
// The last chunk when stream_options.include_usage: no choices, the usage.
Json UsageChunkJson(Endpoint endpoint, const std::string& id, int64_t created,
                    const std::string& model, int64_t prompt_tokens, int64_t completion_tokens);

// "data: {json}\n\n".
std::string ServerSentEvent(const Json& value);

}  // namespace serve
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_SERVE_OPENAI_API_H_

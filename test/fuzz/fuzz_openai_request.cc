// Fuzzes spark-serve's OpenAI request layer (runtime/src/serve/openai_api): any bytes as the body
// of /v1/chat/completions, /v1/completions, /tokenize and /detokenize, with the tiny tokenizer and
// Google's Gemma 4 chat template.
//
// Invariants: every input gives a GenerationRequest or an ApiError with a status in 400..404 and
// a message, never a crash; an accepted request has a prompt that fits the context, ids in the
// vocabulary and max_new_tokens in [1, context - prompt]; the error object serialises.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include "fuzz_check.h"
#include "openai_api.h"
#include "spark/runtime/chat_template.h"
#include "spark/runtime/tokenizer.h"

namespace {

struct Fixture {
  std::unique_ptr<spark::rt::Tokenizer> tokenizer;
  std::unique_ptr<spark::rt::ChatTemplate> chat;
  spark::serve::ServeContext context;
};

const Fixture& Get() {
  static const Fixture* const fixture = [] {
    auto* f = new Fixture;
    f->tokenizer = std::move(*spark::rt::Tokenizer::Load(SPARK_TINY_TOKENIZER_DIR));
    f->chat = std::make_unique<spark::rt::ChatTemplate>(
        std::move(*spark::rt::ChatTemplate::Load(SPARK_TINY_TOKENIZER_DIR)));
    f->context.tokenizer = f->tokenizer.get();
    f->context.chat_template = f->chat.get();
    f->context.model_name = "tiny";
    f->context.max_length = 64;
    f->context.vocab_size = f->tokenizer->vocab_size();
    f->context.generation_config.eos_token_ids = {1, 106};
    return f;
  }();
  return *fixture;
}

void CheckError(const spark::serve::ApiError& error) {
  SPARK_FUZZ_CHECK(error.status >= 400 && error.status <= 404);
  SPARK_FUZZ_CHECK(!error.message.empty());
  SPARK_FUZZ_CHECK(!spark::serve::ServerSentEvent(spark::serve::ErrorJson(error)).empty());
}

void CheckRequest(const spark::serve::Expected<spark::serve::GenerationRequest>& parsed,
                  const spark::serve::ServeContext& context) {
  if (std::holds_alternative<spark::serve::ApiError>(parsed)) {
    CheckError(std::get<spark::serve::ApiError>(parsed));
    return;
  }
  const spark::serve::GenerationRequest& request = std::get<spark::serve::GenerationRequest>(parsed);
  const int64_t prompt = static_cast<int64_t>(request.prompt.size());
  SPARK_FUZZ_CHECK(prompt >= 1 && prompt < context.max_length);
  for (int32_t id : request.prompt) SPARK_FUZZ_CHECK(id >= 0 && id < context.vocab_size);
  SPARK_FUZZ_CHECK(request.generate.max_new_tokens >= 1 &&
                   request.generate.max_new_tokens <= context.max_length - prompt);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Fixture& fixture = Get();
  const std::string body(reinterpret_cast<const char*>(data), size);
  spark::serve::Expected<spark::serve::Json> json = spark::serve::ParseBody(body);
  if (std::holds_alternative<spark::serve::ApiError>(json)) {
    CheckError(std::get<spark::serve::ApiError>(json));
    return 0;
  }
  const spark::serve::Json& value = std::get<spark::serve::Json>(json);
  CheckRequest(spark::serve::ParseChatRequest(value, fixture.context), fixture.context);
  CheckRequest(spark::serve::ParseCompletionRequest(value, fixture.context), fixture.context);
  for (const auto& result : {spark::serve::Tokenize(value, fixture.context),
                             spark::serve::Detokenize(value, fixture.context)}) {
    if (std::holds_alternative<spark::serve::ApiError>(result)) {
      CheckError(std::get<spark::serve::ApiError>(result));
    }
  }
  return 0;
}

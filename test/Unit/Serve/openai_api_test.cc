// spark-serve's OpenAI request layer (runtime/src/serve/openai_api.h) with the tiny tokenizer and
// Google's Gemma 4 chat template: what a request becomes, what is refused and how.
#include "openai_api.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <variant>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "spark/runtime/chat_template.h"
#include "spark/runtime/tokenizer.h"

namespace spark {
namespace serve {
namespace {

class OpenAiApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = SPARK_TEST_SOURCE_DIR "/data/models/tokenizers/tiny";
    tokenizer_ = std::move(*rt::Tokenizer::Load(dir));
    chat_ = std::make_unique<rt::ChatTemplate>(std::move(*rt::ChatTemplate::Load(dir)));
    context_.tokenizer = tokenizer_.get();
    context_.chat_template = chat_.get();
    context_.model_name = "tiny";
    context_.max_length = 512;
    context_.vocab_size = tokenizer_->vocab_size();
    context_.generation_config.eos_token_ids = {1, 106};
    context_.generation_config.temperature = 1.0f;
    context_.generation_config.top_k = 64;
    context_.generation_config.top_p = 0.95f;
  }

  Expected<GenerationRequest> Chat(const std::string& body) {
    return ParseChatRequest(std::get<Json>(ParseBody(body)), context_);
  }
  Expected<GenerationRequest> Completion(const std::string& body) {
    return ParseCompletionRequest(std::get<Json>(ParseBody(body)), context_);
  }
  // The error of a refused request ("" when it was accepted).
  static std::string ErrorOf(const Expected<GenerationRequest>& parsed, int* status = nullptr,
                             std::string* param = nullptr) {
    if (!std::holds_alternative<ApiError>(parsed)) return "";
    const ApiError& error = std::get<ApiError>(parsed);
    if (status != nullptr) *status = error.status;
    if (param != nullptr) *param = error.param.value_or("");
    return error.message;
  }

  std::unique_ptr<rt::Tokenizer> tokenizer_;
  std::unique_ptr<rt::ChatTemplate> chat_;
  ServeContext context_;
};

constexpr char kHello[] = R"("messages": [{"role": "user", "content": "Hello"}])";

TEST_F(OpenAiApiTest, ChatRendersTheTemplateAndTakesTheConfigDefaults) {
  Expected<GenerationRequest> parsed = Chat(std::string("{") + kHello + "}");
  ASSERT_EQ(ErrorOf(parsed), "");
  const GenerationRequest& r = std::get<GenerationRequest>(parsed);
  const std::string rendered = *tokenizer_->Decode(r.prompt);
  EXPECT_EQ(rendered, "<bos><|turn>user\nHello<turn|>\n<|turn>model\n");
  EXPECT_EQ(r.model, "tiny");
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.generate.sampler.temperature, 1.0f);  // generation_config.json's
  EXPECT_EQ(r.generate.sampler.top_k, 64);
  EXPECT_EQ(r.generate.stop_token_ids, (std::vector<int32_t>{1, 106}));
  // No max_tokens: what is left of the context.
  EXPECT_EQ(r.generate.max_new_tokens, 512 - static_cast<int64_t>(r.prompt.size()));
}

TEST_F(OpenAiApiTest, ChatFieldsOverrideAndStreamOptionsNeedAStream) {
  Expected<GenerationRequest> parsed = Chat(std::string("{") + kHello +
      R"(, "temperature": 0, "top_k": -1, "seed": 9, "max_tokens": 5, "stop": "x",
         "stream": true, "stream_options": {"include_usage": true}, "frequency_penalty": 0,
         "user": "u", "store": false, "parallel_tool_calls": true, "service_tier": "auto",
         "chat_template_kwargs": {"enable_thinking": true}})");
  ASSERT_EQ(ErrorOf(parsed), "");
  const GenerationRequest& r = std::get<GenerationRequest>(parsed);
  EXPECT_EQ(r.generate.sampler.temperature, 0.0f);
  EXPECT_EQ(r.generate.sampler.top_k, 0);  // -1: all
  EXPECT_EQ(r.generate.sampler.seed, 9u);
  EXPECT_EQ(r.generate.max_new_tokens, 5);
  EXPECT_EQ(r.stop_strings, (std::vector<std::string>{"x"}));
  EXPECT_TRUE(r.stream && r.include_usage);
  // enable_thinking reached the template: its system turn carries <|think|>.
  EXPECT_NE(tokenizer_->Decode(r.prompt)->find("<|think|>"), std::string::npos);
  int status = 0;
  std::string param;
  EXPECT_NE(ErrorOf(Chat(std::string("{") + kHello + R"(, "stream_options": {"include_usage": true}})"),
                    &status, &param),
            "");
  EXPECT_EQ(param, "stream_options");
}

TEST_F(OpenAiApiTest, RefusesWhatItDoesNotImplementNamingTheField) {
  const auto param_of = [&](const std::string& extra) {
    int status = 0;
    std::string param;
    const std::string message = ErrorOf(Chat(std::string("{") + kHello + ", " + extra + "}"), &status, &param);
    EXPECT_EQ(status, 400) << extra << ": " << message;
    EXPECT_FALSE(message.empty()) << extra;
    return param;
  };
  EXPECT_EQ(param_of(R"("n": 3)"), "n");
  EXPECT_EQ(param_of(R"("presence_penalty": 0.5)"), "presence_penalty");
  EXPECT_EQ(param_of(R"("logprobs": true)"), "logprobs");
  EXPECT_EQ(param_of(R"("logit_bias": {"1": 2})"), "logit_bias");
  EXPECT_EQ(param_of(R"("response_format": {"type": "json_object"})"), "response_format");
  EXPECT_EQ(param_of(R"("tools": [{"type": "retrieval"}])"), "tools");
  EXPECT_EQ(param_of(R"("tools": 5)"), "tools");
  EXPECT_EQ(param_of(R"("tool_choice": "required")"), "tool_choice");
  EXPECT_EQ(param_of(R"("parallel_tool_calls": false)"), "parallel_tool_calls");
  EXPECT_EQ(param_of(R"("store": true)"), "store");
  EXPECT_EQ(param_of(R"("service_tier": "flex")"), "service_tier");
  EXPECT_EQ(param_of(R"("temperature": 3)"), "temperature");
  EXPECT_EQ(param_of(R"("top_p": 0)"), "top_p");
  EXPECT_EQ(param_of(R"("max_tokens": 0)"), "max_tokens");
  EXPECT_EQ(param_of(R"("max_tokens": 1000)"), "max_tokens");
  EXPECT_EQ(param_of(R"("stop": ["a", ""])"), "stop");
  EXPECT_EQ(param_of(R"("stream": "yes")"), "stream");
  EXPECT_EQ(param_of(R"("chat_template_kwargs": {"messages": []})"), "chat_template_kwargs");
}

TEST_F(OpenAiApiTest, MessagesAreChecked) {
  std::string param;
  int status = 0;
  EXPECT_NE(ErrorOf(Chat(R"({"messages": []})"), &status, &param), "");
  EXPECT_EQ(param, "messages");
  EXPECT_NE(ErrorOf(Chat(R"({"messages": [{"role": "robot", "content": "x"}]})"), &status, &param), "");
  EXPECT_EQ(param, "messages[0].role");
  EXPECT_NE(ErrorOf(Chat(R"({"messages": [{"role": "user", "content": 5}]})"), &status, &param), "");
  EXPECT_EQ(param, "messages[0].content");
  // An image for a model without a vision tower (this context's).
  EXPECT_NE(ErrorOf(Chat(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})"),
                    &status, &param),
            "");
  EXPECT_EQ(param, "messages[0].content[0].image_url");
  EXPECT_NE(ErrorOf(Chat(R"({})"), &status, &param), "");
  EXPECT_EQ(param, "messages");
  // Text parts are passed to the template as they are.
  EXPECT_EQ(ErrorOf(Chat(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]})")), "");
}

// A data: URL of a file of test/data/images.
std::string DataUrl(const std::string& mime, const std::string& file, size_t keep = std::string::npos) {
  std::ifstream in(SPARK_TEST_SOURCE_DIR "/data/images/" + file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return absl::StrCat("data:", mime, ";base64,", absl::Base64Escape(bytes.substr(0, keep)));
}

std::string ImageRequest(const std::string& url, const std::string& text = "What is in it?") {
  return absl::StrCat(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": ")",
                      url, R"("}}, {"type": "text", "text": ")", text, R"("}]}]})");
}

class OpenAiImageTest : public OpenAiApiTest {
 protected:
  void SetUp() override {
    OpenAiApiTest::SetUp();
    // tiny-mm-dense's ids in the tiny tokenizer: <|image|> 509, boi 362, eoi 363.
    context_.takes_images = true;
    context_.model_info.variant = "tiny-mm";
    context_.model_info.image_token_id = 509;
    context_.model_info.boi_token_id = 362;
    context_.model_info.eoi_token_id = 363;
    context_.image_tokens = 70;
  }
};

TEST_F(OpenAiImageTest, AnImageUrlPartBecomesTheImagesSoftTokensInThePrompt) {
  Expected<GenerationRequest> parsed = Chat(ImageRequest(DataUrl("image/png", "vision_a.png")));
  ASSERT_EQ(ErrorOf(parsed), "");
  const GenerationRequest& r = std::get<GenerationRequest>(parsed);
  ASSERT_EQ(r.images.size(), 1u);
  EXPECT_EQ(r.images[0].soft_tokens, 63);  // 100x75 at a budget of 70: 432x336, 27x21 patches
  ASSERT_EQ(r.image_positions.size(), 1u);
  const int64_t first = r.image_positions[0];
  ASSERT_GE(first, 1);
  EXPECT_EQ(r.prompt[first - 1], 362);
  for (int64_t k = 0; k < 63; ++k) EXPECT_EQ(r.prompt[first + k], 509);
  EXPECT_EQ(r.prompt[first + 63], 363);
  EXPECT_EQ(std::count(r.prompt.begin(), r.prompt.end(), 509), 63);
  // A JPEG as well, and two images in one message in order.
  Expected<GenerationRequest> two = Chat(absl::StrCat(
      R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": ")",
      DataUrl("image/jpeg", "vision_b.jpg"), R"("}}, {"type": "image_url", "image_url": {"url": ")",
      DataUrl("image/png", "vision_a.png"), R"("}}, {"type": "text", "text": "Compare"}]}]})"));
  ASSERT_EQ(ErrorOf(two), "");
  const GenerationRequest& t = std::get<GenerationRequest>(two);
  ASSERT_EQ(t.images.size(), 2u);
  EXPECT_EQ(t.images[0].soft_tokens, 55);
  EXPECT_EQ(t.images[1].soft_tokens, 63);
  EXPECT_EQ(t.image_positions[1], t.image_positions[0] + 55 + 2);
}

TEST_F(OpenAiImageTest, BadImagesAreRefusedNamingThePart) {
  const std::string part = "messages[0].content[0].image_url";
  struct Case {
    std::string url;
    std::string says;
  } cases[] = {
      {"https://example.com/cat.png", "remote image URLs are not fetched"},
      {"http://example.com/cat.png", "remote image URLs are not fetched"},
      {"file:///etc/passwd", "expected a data URL of a base64 image"},
      {"data:text/plain;base64,aGVsbG8=", "expected a data URL of a base64 image"},
      {"data:image/png,rawbytes", "expected a data URL of a base64 image"},
      {"data:image/png;base64,@@not base64@@", "does not decode"},
      {DataUrl("image/png", "vision_a.png", 300), "truncated"},
      {"data:image/png;base64,R0lGODlhAQABAAAAACw=", "GIF"},
  };
  for (const Case& c : cases) {
    int status = 0;
    std::string param;
    const std::string error = ErrorOf(Chat(ImageRequest(c.url)), &status, &param);
    EXPECT_NE(error.find(c.says), std::string::npos) << c.url.substr(0, 60) << ": " << error;
    EXPECT_EQ(status, 400) << error;
    EXPECT_EQ(param, part) << error;
  }
  // OpenAI's detail (a resolution choice) is the server's --image-tokens here: only "auto".
  {
    int status = 0;
    std::string param;
    const std::string url = DataUrl("image/png", "vision_a.png");
    const std::string error = ErrorOf(
        Chat(absl::StrCat(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": ")",
                          url, R"(", "detail": "high"}}]}]})")),
        &status, &param);
    EXPECT_NE(error.find("image_url: detail other than \"auto\" is not supported"), std::string::npos)
        << error;
    EXPECT_EQ(status, 400);
    EXPECT_EQ(param, part);
    EXPECT_EQ(ErrorOf(Chat(absl::StrCat(
                  R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": ")",
                  url, R"(", "detail": "auto"}}]}]})"))),
              "");
  }
  // Audio and HF-style image parts are refused, naming what to send.
  std::string param;
  EXPECT_NE(ErrorOf(Chat(R"({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]})"),
                    nullptr, &param)
                .find("image_url parts with data: URLs"),
            std::string::npos);
  EXPECT_EQ(param, "messages[0].content");
  // A placeholder the text itself holds: more placeholders than images.
  const std::string error =
      ErrorOf(Chat(ImageRequest(DataUrl("image/png", "vision_a.png"), "and <|image|> here")));
  EXPECT_NE(error.find("the prompt holds 2 image placeholders"), std::string::npos) << error;
  // The expanded prompt must fit the context.
  context_.max_length = 40;
  int status = 0;
  EXPECT_NE(ErrorOf(Chat(ImageRequest(DataUrl("image/png", "vision_a.png"))), &status),
            "");
  EXPECT_EQ(status, 400);
}

TEST_F(OpenAiApiTest, AnotherModelIsNotFound) {
  int status = 0;
  std::string param;
  EXPECT_NE(ErrorOf(Chat(std::string(R"({"model": "gpt-4o", )") + kHello + "}"), &status, &param), "");
  EXPECT_EQ(status, 404);
  EXPECT_EQ(param, "model");
}

TEST_F(OpenAiApiTest, CompletionsTakeTextOrIdsOnePromptAtATime) {
  Expected<GenerationRequest> text = Completion(R"({"prompt": "Hello world"})");
  ASSERT_EQ(ErrorOf(text), "");
  EXPECT_EQ(std::get<GenerationRequest>(text).prompt.front(), 2);  // <bos>: special tokens added
  EXPECT_EQ(std::get<GenerationRequest>(text).generate.max_new_tokens, 16);  // OpenAI's default
  Expected<GenerationRequest> ids = Completion(R"({"prompt": [[2, 39, 10]], "max_tokens": 3})");
  ASSERT_EQ(ErrorOf(ids), "");
  EXPECT_EQ(std::get<GenerationRequest>(ids).prompt, (std::vector<int32_t>{2, 39, 10}));
  std::string param;
  int status = 0;
  EXPECT_NE(ErrorOf(Completion(R"({"prompt": ["a", "b"]})"), &status, &param), "");
  EXPECT_NE(ErrorOf(Completion(R"({"prompt": [2, 99999]})"), &status, &param), "");
  EXPECT_EQ(param, "prompt");
  EXPECT_NE(ErrorOf(Completion(R"({"prompt": [2, 1.5]})"), &status, &param), "");
  EXPECT_NE(ErrorOf(Completion(R"({"prompt": "x", "echo": true})"), &status, &param), "");
  EXPECT_EQ(param, "echo");
  EXPECT_NE(ErrorOf(Completion(R"({"prompt": "x", "max_completion_tokens": 3})"), &status, &param), "");
  // A prompt filling the context leaves no room.
  std::string long_prompt = R"({"prompt": [)";
  for (int i = 0; i < 512; ++i) long_prompt += (i ? ",2" : "2");
  Expected<GenerationRequest> full = Completion(long_prompt + "]}");
  ASSERT_TRUE(std::holds_alternative<ApiError>(full));
  EXPECT_EQ(std::get<ApiError>(full).code.value_or(""), "context_length_exceeded");
}

TEST_F(OpenAiApiTest, BodiesThatAreNotObjectsAreRefused) {
  for (const char* body : {"", "[1]", "{\"a\": 1, \"a\": 2}", "{", "null", "\"x\""}) {
    Expected<Json> parsed = ParseBody(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(parsed)) << body;
    EXPECT_EQ(std::get<ApiError>(parsed).status, 400);
  }
  std::string deep(200, '[');
  EXPECT_TRUE(std::holds_alternative<ApiError>(ParseBody("{\"a\": " + deep + "}")));
}

TEST_F(OpenAiApiTest, TokenizeAndDetokenize) {
  Expected<Json> t = Tokenize(std::get<Json>(ParseBody(R"({"prompt": "Hello", "add_special_tokens": false})")), context_);
  ASSERT_TRUE(std::holds_alternative<Json>(t));
  EXPECT_EQ(std::get<Json>(t)["tokens"].size(), std::get<Json>(t)["count"].get<size_t>());
  EXPECT_NE(std::get<Json>(t)["tokens"][0].get<int>(), 2);
  Expected<Json> d = Detokenize(std::get<Json>(ParseBody(R"({"tokens": [2, 39]})")), context_);
  ASSERT_TRUE(std::holds_alternative<Json>(d));
  EXPECT_EQ(std::get<Json>(d)["prompt"].get<std::string>().rfind("<bos>", 0), 0u);
  EXPECT_TRUE(std::holds_alternative<ApiError>(
      Detokenize(std::get<Json>(ParseBody(R"({"tokens": [-1]})")), context_)));
  EXPECT_TRUE(std::holds_alternative<ApiError>(
      Tokenize(std::get<Json>(ParseBody(R"({"prompt": "a", "messages": []})")), context_)));
}

TEST_F(OpenAiApiTest, ToolsReachTheTemplateAndArgumentStringsBecomeObjects) {
  const std::string tools =
      R"("tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";
  Expected<GenerationRequest> parsed = Chat(std::string("{") + kHello + ", " + tools + "}");
  ASSERT_EQ(ErrorOf(parsed), "");
  const std::string prompt = *tokenizer_->Decode(std::get<GenerationRequest>(parsed).prompt);
  EXPECT_NE(prompt.find("<|tool>declaration:get_weather{"), std::string::npos) << prompt;
  // tool_choice "none": not shown to the model.
  Expected<GenerationRequest> none =
      Chat(std::string("{") + kHello + ", " + tools + R"(, "tool_choice": "none"})");
  ASSERT_EQ(ErrorOf(none), "");
  EXPECT_EQ(tokenizer_->Decode(std::get<GenerationRequest>(none).prompt)->find("<|tool>"),
            std::string::npos);
  // A past call with OpenAI's string arguments renders as Gemma's call syntax.
  Expected<GenerationRequest> history = Chat(
      std::string(R"({"messages": [{"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}], )") + tools + "}");
  ASSERT_EQ(ErrorOf(history), "");
  const std::string rendered = *tokenizer_->Decode(std::get<GenerationRequest>(history).prompt);
  EXPECT_NE(rendered.find("<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>"),
            std::string::npos)
      << rendered;
}

TEST_F(OpenAiApiTest, ToolCallsInTheResponse) {
  GenerationOutput output;
  output.finish_reason = "stop";
  AddToolCalls({R"(call:get_weather{city:<|"|>Paris<|"|>})", "not a call"}, &output);
  ASSERT_EQ(output.tool_calls.size(), 1u);
  EXPECT_EQ(output.finish_reason, "tool_calls");
  EXPECT_EQ(output.text, "<|tool_call>not a call<tool_call|>");  // kept as written
  output.text.clear();
  const Json chat = ChatResponseJson("chatcmpl-abc", 7, "tiny", output);
  const Json& message = chat["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["tool_calls"][0]["type"], "function");
  EXPECT_EQ(message["tool_calls"][0]["id"], "call_abc_0");
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "tool_calls");
  const Json chunk = ChatToolCallChunkJson("chatcmpl-abc", 7, "tiny", output.tool_calls[0], 0);
  EXPECT_EQ(chunk["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
}

TEST_F(OpenAiApiTest, ResponseShapes) {
  GenerationOutput output;
  output.text = "Hi";
  output.reasoning = "thinking";
  output.prompt_tokens = 3;
  output.completion_tokens = 2;
  output.finish_reason = "stop";
  const Json chat = ChatResponseJson("chatcmpl-1", 7, "tiny", output);
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(chat["choices"][0]["message"]["reasoning_content"], "thinking");
  EXPECT_EQ(chat["usage"]["total_tokens"], 5);
  const Json chunk = ChatChunkJson("chatcmpl-1", 7, "tiny", "content", "x", "");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(ServerSentEvent(chunk).rfind("data: {", 0), 0u);
  EXPECT_EQ(ServerSentEvent(chunk).substr(ServerSentEvent(chunk).size() - 2), "\n\n");
  const Json usage = UsageChunkJson(Endpoint::kCompletion, "cmpl-1", 7, "tiny", 3, 2);
  EXPECT_TRUE(usage["choices"].empty());
  ApiError error;
  error.message = "m";
  error.param = "p";
  const Json e = ErrorJson(error);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "p");
  EXPECT_TRUE(e["error"]["code"].is_null());
}

}  // namespace
}  // namespace serve
}  // namespace spark

#include "openai_api.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "json_document.h"
#include "spark/runtime/image.h"
#include "spark/runtime/image_prompt.h"

namespace spark {
namespace serve {
namespace {

ApiError BadRequest(std::string message, std::optional<std::string> param = std::nullopt) {
  ApiError error;
  error.status = 400;
  error.message = std::move(message);
  error.param = std::move(param);
  return error;
}

ApiError WrongType(const std::string& field, const char* expected, const Json& value) {
  return BadRequest(absl::StrCat("'", field, "' must be ", expected, ", got ",
                                 rt::JsonTypeName(value)),
                    field);
}

// Fields a request may carry that change nothing here (or only with their default value, checked
// in CheckNeutral).
bool IsNeutral(absl::string_view key) {
  static const char* const kNeutral[] = {
      "user",           "metadata",          "store",       "parallel_tool_calls",
      "service_tier",   "frequency_penalty", "presence_penalty", "logprobs",
      "top_logprobs",   "response_format",   "echo",        "best_of",
      "suffix",         "tool_choice"};
  return std::any_of(std::begin(kNeutral), std::end(kNeutral),
                     [&](const char* k) { return key == k; });
}

// A neutral field with anything but its neutral value would change the answer: refused.
std::optional<ApiError> CheckNeutral(const std::string& key, const Json& value) {
  const auto refuse = [&](const char* what) {
    return BadRequest(absl::StrCat("'", key, "' ", what, " is not supported by spark-serve"), key);
  };
  if (value.is_null()) return std::nullopt;
  if (key == "frequency_penalty" || key == "presence_penalty") {
    if (!value.is_number()) return WrongType(key, "a number", value);
    if (value.get<double>() != 0.0) return refuse("other than 0");
  } else if (key == "logprobs" || key == "echo") {
    if (!value.is_boolean() && !(key == "logprobs" && value.is_number_integer())) {
      return WrongType(key, "a boolean", value);
    }
    if (value.is_boolean() ? value.get<bool>() : value.get<int64_t>() != 0) return refuse("true");
  } else if (key == "top_logprobs") {
    return refuse("(log probabilities)");
  } else if (key == "best_of") {
    if (!rt::IsJsonInt(value) || rt::JsonInt(value) != 1) return refuse("other than 1");
  } else if (key == "suffix") {
    return refuse("(insertion)");
  } else if (key == "response_format") {
    const Json* type = rt::FindMember(value, "type");
    if (type == nullptr || !type->is_string() || type->get<std::string>() != "text") {
      return refuse("other than {\"type\": \"text\"} (structured output)");
    }
  } else if (key == "parallel_tool_calls") {
    // The model may write several calls in one answer, and each is returned.
    if (!value.is_boolean()) return WrongType(key, "a boolean", value);
    if (!value.get<bool>()) return refuse("false (at most one call per answer)");
  } else if (key == "store") {
    if (!value.is_boolean()) return WrongType(key, "a boolean", value);
    if (value.get<bool>()) return refuse("true (spark-serve keeps no completions)");
  } else if (key == "service_tier") {
    if (!value.is_string() || (value.get<std::string>() != "auto" &&
                               value.get<std::string>() != "default")) {
      return refuse("other than \"auto\" or \"default\"");
    }
  } else if (key == "tool_choice") {
    if (!value.is_string() || (value.get<std::string>() != "auto" && value.get<std::string>() != "none")) {
      return refuse("other than \"auto\" or \"none\"");
    }
  }
  return std::nullopt;
}

// The sampling and length fields both endpoints share.
struct CommonFields {
  std::optional<int64_t> max_tokens;
};

std::optional<ApiError> ReadNumber(const Json& body, const std::string& key, double low, double high,
                                   bool low_open, std::optional<double>* out) {
  const Json* value = rt::FindMember(body, key);
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (!value->is_number()) return WrongType(key, "a number", *value);
  const double v = value->get<double>();
  if (!std::isfinite(v) || v > high || (low_open ? v <= low : v < low)) {
    return BadRequest(absl::StrCat("'", key, "' must be in ", low_open ? "(" : "[", low, ", ", high,
                                   "], got ", value->dump()),
                      key);
  }
  *out = v;
  return std::nullopt;
}

std::optional<ApiError> ReadInt(const Json& body, const std::string& key, int64_t low, int64_t high,
                                std::optional<int64_t>* out) {
  const Json* value = rt::FindMember(body, key);
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (!rt::IsJsonInt(*value)) return WrongType(key, "an integer", *value);
  const int64_t v = rt::JsonInt(*value);
  if (v < low || v > high) {
    return BadRequest(absl::StrCat("'", key, "' must be in [", low, ", ", high, "], got ", v), key);
  }
  *out = v;
  return std::nullopt;
}

// model, stream, stream_options, n, the sampling fields, stop, max_tokens; the generation config's
// stop ids and sampling defaults. `known` lists the endpoint's own fields (checked by the caller).
std::optional<ApiError> ReadCommon(const Json& body, const ServeContext& context,
                                   const std::vector<std::string>& known, GenerationRequest* out,
                                   std::optional<int64_t>* max_tokens) {
  static const char* const kCommon[] = {"model", "stream", "stream_options", "n", "temperature",
                                        "top_p", "top_k", "seed", "stop", "max_tokens"};
  for (const auto& item : body.items()) {
    const std::string& key = item.key();
    const bool common = std::any_of(std::begin(kCommon), std::end(kCommon),
                                    [&](const char* k) { return key == k; });
    if (common || std::find(known.begin(), known.end(), key) != known.end()) continue;
    if (IsNeutral(key)) {
      if (std::optional<ApiError> error = CheckNeutral(key, item.value())) return error;
      continue;
    }
    return BadRequest(absl::StrCat("unsupported field '", key,
                                   "' (spark-serve refuses fields it does not implement rather "
                                   "than ignore them; docs/serving.md lists the fields)"),
                      key);
  }
  out->model = context.model_name;
  if (const Json* model = rt::FindMember(body, "model"); model != nullptr && !model->is_null()) {
    if (!model->is_string()) return WrongType("model", "a string", *model);
    if (model->get<std::string>() != context.model_name) {
      ApiError error;
      error.status = 404;
      error.message = absl::StrCat("the model '", model->get<std::string>(),
                                   "' does not exist; this server serves '", context.model_name,
                                   "' (GET /v1/models)");
      error.param = "model";
      error.code = "model_not_found";
      return error;
    }
  }
  if (const Json* stream = rt::FindMember(body, "stream"); stream != nullptr && !stream->is_null()) {
    if (!stream->is_boolean()) return WrongType("stream", "a boolean", *stream);
    out->stream = stream->get<bool>();
  }
  if (const Json* options = rt::FindMember(body, "stream_options");
      options != nullptr && !options->is_null()) {
    if (!options->is_object()) return WrongType("stream_options", "an object", *options);
    for (const auto& item : options->items()) {
      if (item.key() != "include_usage") {
        return BadRequest(absl::StrCat("unsupported field 'stream_options.", item.key(), "'"),
                          "stream_options");
      }
      if (!item.value().is_boolean()) {
        return WrongType("stream_options.include_usage", "a boolean", item.value());
      }
      out->include_usage = item.value().get<bool>();
    }
    if (!out->stream) {
      return BadRequest("'stream_options' is only allowed with \"stream\": true", "stream_options");
    }
  }
  std::optional<int64_t> n;
  if (std::optional<ApiError> error = ReadInt(body, "n", 1, 1 << 20, &n)) return error;
  if (n && *n != 1) {
    return BadRequest(absl::StrCat("'n' must be 1 (spark-serve generates one choice per request), "
                                   "got ", *n),
                      "n");
  }
  rt::SamplerOptions& sampler = out->generate.sampler;
  rt::SamplerFieldsGiven given;
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k, seed;
  if (auto e = ReadNumber(body, "temperature", 0.0, 2.0, false, &temperature)) return e;
  if (auto e = ReadNumber(body, "top_p", 0.0, 1.0, true, &top_p)) return e;
  if (auto e = ReadInt(body, "top_k", -1, std::numeric_limits<int32_t>::max(), &top_k)) return e;
  if (auto e = ReadInt(body, "seed", std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max(), &seed)) {
    return e;
  }
  if (temperature) sampler.temperature = static_cast<float>(*temperature);
  if (top_p) sampler.top_p = static_cast<float>(*top_p);
  if (top_k) sampler.top_k = *top_k < 0 ? 0 : static_cast<int32_t>(*top_k);  // -1: vLLM's "all"
  if (seed) sampler.seed = static_cast<uint64_t>(*seed);
  given.temperature = temperature.has_value();
  given.top_p = top_p.has_value();
  given.top_k = top_k.has_value();
  rt::ApplySamplingDefaults(context.generation_config, given, &sampler);
  out->generate.stop_token_ids = context.generation_config.eos_token_ids;
  if (const Json* stop = rt::FindMember(body, "stop"); stop != nullptr && !stop->is_null()) {
    const Json list = stop->is_array() ? *stop : Json::array({*stop});
    if (list.size() > 16) return BadRequest("'stop' has more than 16 strings", "stop");
    for (const Json& s : list) {
      if (!s.is_string()) return WrongType("stop", "a string or a list of strings", *stop);
      if (s.get<std::string>().empty()) return BadRequest("'stop' has an empty string", "stop");
      out->stop_strings.push_back(s.get<std::string>());
    }
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    std::optional<int64_t> value;
    if (auto e = ReadInt(body, key, 1, std::numeric_limits<int32_t>::max(), &value)) return e;
    if (value) *max_tokens = value;
  }
  return std::nullopt;
}

// The prompt fits, and so do the tokens asked for (or, when none were asked, what is left).
std::optional<ApiError> FitLength(const ServeContext& context, std::optional<int64_t> max_tokens,
                                  int64_t default_max_tokens, GenerationRequest* out) {
  const int64_t prompt = static_cast<int64_t>(out->prompt.size());
  if (prompt == 0) return BadRequest("the prompt is empty", "prompt");
  if (prompt >= context.max_length) {
    ApiError error = BadRequest(
        absl::StrCat("the prompt has ", prompt, " tokens; this server's maximum context is ",
                     context.max_length, " tokens (prompt and completion), so nothing fits"),
        "messages");
    error.code = "context_length_exceeded";
    return error;
  }
  const int64_t room = context.max_length - prompt;
  if (max_tokens && *max_tokens > room) {
    ApiError error = BadRequest(
        absl::StrCat("max_tokens is ", *max_tokens, " but the prompt has ", prompt,
                     " tokens and the maximum context is ", context.max_length, ": at most ", room,
                     " can be generated"),
        "max_tokens");
    error.code = "context_length_exceeded";
    return error;
  }
  out->generate.max_new_tokens = max_tokens ? *max_tokens : std::min(room, default_max_tokens);
  return std::nullopt;
}

// A message's content for the template: a string, null, or a list of text parts.
std::optional<ApiError> CheckContent(const Json& content, size_t index) {
  const std::string field = absl::StrCat("messages[", index, "].content");
  if (content.is_string() || content.is_null()) return std::nullopt;
  if (!content.is_array()) return WrongType(field, "a string or a list of parts", content);
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& part = content[j];
    const Json* type = rt::FindMember(part, "type");
    if (type == nullptr || !type->is_string()) {
      return BadRequest(absl::StrCat(field, ": each part needs a string 'type'"), field);
    }
    const std::string t = type->get<std::string>();
    if (t == "text") {
      const Json* text = rt::FindMember(part, "text");
      if (text == nullptr || !text->is_string()) {
        return BadRequest(absl::StrCat(field, ": a text part needs a string 'text'"), field);
      }
    } else if (t == "image_url") {
      const Json* image = rt::FindMember(part, "image_url");
      const Json* url = image != nullptr && image->is_object() ? rt::FindMember(*image, "url")
                                                               : image;
      if (url == nullptr || !url->is_string()) {
        return BadRequest(absl::StrCat(field, ": an image_url part needs 'image_url': {\"url\": "
                                              "\"data:image/png;base64,...\"}"),
                          field);
      }
      // OpenAI's `detail` picks a resolution; here the server's --image-tokens does.
      const Json* detail = image->is_object() ? rt::FindMember(*image, "detail") : nullptr;
      if (detail != nullptr && !detail->is_null() &&
          !(detail->is_string() && detail->get<std::string>() == "auto")) {
        const std::string part_field = absl::StrCat(field, "[", j, "].image_url");
        return BadRequest(absl::StrCat(part_field, ": detail other than \"auto\" is not "
                                                   "supported (the server's --image-tokens sets "
                                                   "each image's soft tokens)"),
                          part_field);
      }
    } else if (t == "input_audio" || t == "image" || t == "audio") {
      return BadRequest(absl::StrCat(field, ": '", t,
                                     "' parts are not supported: send images as image_url parts "
                                     "with data: URLs; audio is not supported yet"),
                        field);
    } else {
      return BadRequest(absl::StrCat(field, ": unknown part type '", t, "'"), field);
    }
  }
  return std::nullopt;
}

std::optional<ApiError> CheckMessages(const Json* messages) {
  if (messages == nullptr) return BadRequest("'messages' is required", "messages");
  if (!messages->is_array()) return WrongType("messages", "a list of messages", *messages);
  if (messages->empty()) return BadRequest("'messages' is empty", "messages");
  static const char* const kRoles[] = {"system", "developer", "user", "assistant", "tool"};
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    const std::string field = absl::StrCat("messages[", i, "]");
    if (!message.is_object()) return WrongType(field, "an object", message);
    const Json* role = rt::FindMember(message, "role");
    if (role == nullptr || !role->is_string() ||
        std::none_of(std::begin(kRoles), std::end(kRoles),
                     [&](const char* r) { return role->get<std::string>() == r; })) {
      return BadRequest(absl::StrCat(field, ".role must be one of system, developer, user, "
                                            "assistant, tool"),
                        field + ".role");
    }
    const Json* content = rt::FindMember(message, "content");
    if (content == nullptr && rt::FindMember(message, "tool_calls") == nullptr) {
      return BadRequest(absl::StrCat(field, " has no 'content'"), field + ".content");
    }
    if (content != nullptr) {
      if (std::optional<ApiError> error = CheckContent(*content, i)) return error;
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ValidateIds(const std::vector<int32_t>& ids, const ServeContext& context,
                                    const std::string& field) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= context.vocab_size) {
      return BadRequest(absl::StrCat(field, "[", i, "] is ", ids[i], ", outside the vocabulary [0, ",
                                     context.vocab_size, ")"),
                        field);
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ReadIds(const Json& value, const std::string& field,
                                std::vector<int32_t>* ids) {
  for (const Json& id : value) {
    if (!rt::IsJsonInt(id) || rt::JsonInt(id) < std::numeric_limits<int32_t>::min() ||
        rt::JsonInt(id) > std::numeric_limits<int32_t>::max()) {
      return BadRequest(absl::StrCat("'", field, "' must be a string or a list of token ids"),
                        field);
    }
    ids->push_back(static_cast<int32_t>(rt::JsonInt(id)));
  }
  return std::nullopt;
}

// The template's context for `messages`: add_generation_prompt, the chat_template_kwargs.
// OpenAI clients send a tool call's arguments as a JSON string; Gemma 4's template wants the
// object (the 2026-07 copy raises on a string), as vLLM passes it: strings that hold a JSON object
// are parsed.
// An image_url part reaches the template without its URL (the template renders the placeholder
// from the part's type; the data: URL can be megabytes).
Json TemplateMessages(const Json& messages) {
  Json out = messages;
  for (Json& message : out) {
    if (message.is_object() && message.contains("content") && message["content"].is_array()) {
      for (Json& part : message["content"]) {
        if (part.is_object() && part.contains("type") && part["type"] == "image_url") {
          part["image_url"] = Json::object();
        }
      }
    }
    Json* calls = message.is_object() && message.contains("tool_calls") ? &message["tool_calls"]
                                                                         : nullptr;
    if (calls == nullptr || !calls->is_array()) continue;
    for (Json& call : *calls) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      Json& function = call["function"];
      if (!function.contains("arguments") || !function["arguments"].is_string()) continue;
      Json parsed = Json::parse(function["arguments"].get<std::string>(), nullptr, false);
      if (parsed.is_object()) function["arguments"] = std::move(parsed);
    }
  }
  return out;
}

Expected<std::vector<int32_t>> RenderChat(const Json& messages, const Json* kwargs,
                                          bool add_generation_prompt,
                                          const ServeContext& context,
                                          const Json* tools = nullptr) {
  if (context.chat_template == nullptr) {
    ApiError error = BadRequest(
        "this server has no chat template (the tokenizer directory has no chat_template.jinja): "
        "use /v1/completions");
    return error;
  }
  Json template_context = Json::object();
  template_context["messages"] = TemplateMessages(messages);
  if (tools != nullptr) template_context["tools"] = *tools;
  template_context["add_generation_prompt"] = add_generation_prompt;
  template_context["enable_thinking"] = false;
  if (kwargs != nullptr && !kwargs->is_null()) {
    if (!kwargs->is_object()) return WrongType("chat_template_kwargs", "an object", *kwargs);
    for (const auto& item : kwargs->items()) {
      if (item.key() == "messages" || item.key() == "add_generation_prompt" ||
          item.key() == "tools") {
        return BadRequest(absl::StrCat("chat_template_kwargs may not set '", item.key(), "'"),
                          "chat_template_kwargs");
      }
      template_context[item.key()] = item.value();
    }
  }
  absl::StatusOr<std::string> rendered = context.chat_template->Render(template_context);
  if (!rendered.ok()) {
    return BadRequest(absl::StrCat("the chat template refused the messages: ",
                                   rendered.status().message()),
                      "messages");
  }
  absl::StatusOr<std::vector<int32_t>> ids =
      context.tokenizer->Encode(*rendered, /*add_special_tokens=*/false);
  if (!ids.ok()) return BadRequest(std::string(ids.status().message()), "messages");
  return *std::move(ids);
}

}  // namespace

Expected<Json> ParseBody(absl::string_view body) {
  absl::StatusOr<Json> json = rt::ParseJson(body);
  if (!json.ok()) {
    return BadRequest(absl::StrCat("the request body is not valid JSON: ", json.status().message()));
  }
  if (!json->is_object()) {
    return BadRequest(absl::StrCat("the request body must be a JSON object, got ",
                                   rt::JsonTypeName(*json)));
  }
  return *std::move(json);
}

// The images of a chat request's image_url parts, in message and part order (as the template
// renders their placeholders): each a data: URL of a base64 PNG or JPEG, decoded and
// preprocessed for the server's budget. A remote URL is refused (the server fetches nothing).
Expected<std::vector<rt::ImagePatches>> ReadImages(const Json& messages,
                                                   const ServeContext& context) {
  std::vector<rt::ImagePatches> images;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json* content = rt::FindMember(messages[i], "content");
    if (content == nullptr || !content->is_array()) continue;
    for (size_t j = 0; j < content->size(); ++j) {
      const Json& part = (*content)[j];
      if (*rt::FindMember(part, "type") != "image_url") continue;  // CheckContent: a string type
      const std::string field = absl::StrCat("messages[", i, "].content[", j, "].image_url");
      if (!context.takes_images) {
        return BadRequest(absl::StrCat(field, ": this model takes no images (it was compiled "
                                              "without a vision tower)"),
                          field);
      }
      const Json* image = rt::FindMember(part, "image_url");
      const std::string url =
          (image->is_object() ? *rt::FindMember(*image, "url") : *image).get<std::string>();
      const absl::string_view view(url);
      if (absl::StartsWithIgnoreCase(view, "http://") ||
          absl::StartsWithIgnoreCase(view, "https://")) {
        return BadRequest(absl::StrCat(field, ": remote image URLs are not fetched (this server "
                                              "assumes no network): send the image inline as "
                                              "data:image/png;base64,... or data:image/jpeg;base64,..."),
                          field);
      }
      const size_t comma = view.find(',');
      const absl::string_view header = view.substr(0, comma);
      if (!absl::StartsWithIgnoreCase(view, "data:image/") || comma == absl::string_view::npos ||
          !absl::EndsWithIgnoreCase(header, ";base64")) {
        return BadRequest(absl::StrCat(field, ": expected a data URL of a base64 image "
                                              "(data:image/png;base64,... or "
                                              "data:image/jpeg;base64,...)"),
                          field);
      }
      std::string bytes;
      if (!absl::Base64Unescape(view.substr(comma + 1), &bytes)) {
        return BadRequest(absl::StrCat(field, ": the data URL's base64 does not decode"), field);
      }
      absl::StatusOr<rt::RgbImage> decoded = rt::DecodeImage(
          absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
          field, context.image_limits);
      if (!decoded.ok()) return BadRequest(std::string(decoded.status().message()), field);
      absl::StatusOr<rt::ImagePatches> patches =
          rt::PreprocessImage(*decoded, context.image_tokens);
      if (!patches.ok()) return BadRequest(std::string(patches.status().message()), field);
      images.push_back(*std::move(patches));
    }
  }
  return images;
}

Expected<GenerationRequest> ParseChatRequest(const Json& body, const ServeContext& context) {
  GenerationRequest request;
  request.endpoint = Endpoint::kChat;
  std::optional<int64_t> max_tokens;
  if (auto error = ReadCommon(body, context,
                              {"messages", "max_completion_tokens", "chat_template_kwargs", "tools"},
                              &request, &max_tokens)) {
    return *error;
  }
  const Json* messages = rt::FindMember(body, "messages");
  if (auto error = CheckMessages(messages)) return *error;
  const Json* tools = rt::FindMember(body, "tools");
  if (tools != nullptr && !tools->is_null()) {
    if (!tools->is_array()) return WrongType("tools", "a list of tools", *tools);
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& tool = (*tools)[i];
      const Json* type = rt::FindMember(tool, "type");
      const Json* function = rt::FindMember(tool, "function");
      const Json* name = function == nullptr ? nullptr : rt::FindMember(*function, "name");
      if (type == nullptr || !type->is_string() || type->get<std::string>() != "function" ||
          name == nullptr || !name->is_string()) {
        return BadRequest(absl::StrCat("tools[", i, "] must be {\"type\": \"function\", "
                                       "\"function\": {\"name\": ..., ...}}"),
                          "tools");
      }
    }
  }
  // tool_choice "none": the tools are not shown to the model.
  const Json* choice = rt::FindMember(body, "tool_choice");
  const bool show_tools = tools != nullptr && !tools->is_null() && !tools->empty() &&
                          !(choice != nullptr && choice->is_string() &&
                            choice->get<std::string>() == "none");
  Expected<std::vector<int32_t>> ids =
      RenderChat(*messages, rt::FindMember(body, "chat_template_kwargs"), true, context,
                 show_tools ? tools : nullptr);
  if (std::holds_alternative<ApiError>(ids)) return std::get<ApiError>(ids);
  request.prompt = std::get<std::vector<int32_t>>(std::move(ids));
  // Each image's placeholder (the template renders one per image part) becomes its soft tokens,
  // before the context length is checked.
  Expected<std::vector<rt::ImagePatches>> images = ReadImages(*messages, context);
  if (std::holds_alternative<ApiError>(images)) return std::get<ApiError>(images);
  request.images = std::get<std::vector<rt::ImagePatches>>(std::move(images));
  if (!request.images.empty() ||
      (context.takes_images &&
       std::count(request.prompt.begin(), request.prompt.end(),
                  static_cast<int32_t>(context.model_info.image_token_id)) > 0)) {
    std::vector<int64_t> soft_tokens;
    for (const rt::ImagePatches& image : request.images) soft_tokens.push_back(image.soft_tokens);
    absl::StatusOr<rt::ExpandedImagePrompt> expanded =
        rt::ExpandImagePlaceholders(context.model_info, request.prompt, soft_tokens);
    if (!expanded.ok()) return BadRequest(std::string(expanded.status().message()), "messages");
    request.prompt = std::move(expanded->ids);
    request.image_positions = std::move(expanded->first_soft_position);
  }
  if (auto error = FitLength(context, max_tokens, std::numeric_limits<int64_t>::max(), &request)) {
    return *error;
  }
  return request;
}

Expected<GenerationRequest> ParseCompletionRequest(const Json& body, const ServeContext& context) {
  GenerationRequest request;
  request.endpoint = Endpoint::kCompletion;
  std::optional<int64_t> max_tokens;
  if (auto error = ReadCommon(body, context, {"prompt"}, &request, &max_tokens)) return *error;
  const Json* prompt = rt::FindMember(body, "prompt");
  if (prompt == nullptr) return BadRequest("'prompt' is required", "prompt");
  // One prompt: a string, a list of ids, or a list holding one of them.
  const Json* one = prompt;
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    one = &(*prompt)[0];
  } else if (prompt->is_array() && !prompt->empty() &&
             ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    return BadRequest("'prompt' holds several prompts: send one per request", "prompt");
  }
  if (one->is_string()) {
    absl::StatusOr<std::vector<int32_t>> ids =
        context.tokenizer->Encode(one->get<std::string>(), /*add_special_tokens=*/true);
    if (!ids.ok()) return BadRequest(std::string(ids.status().message()), "prompt");
    request.prompt = *std::move(ids);
  } else if (one->is_array()) {
    if (auto error = ReadIds(*one, "prompt", &request.prompt)) return *error;
    if (auto error = ValidateIds(request.prompt, context, "prompt")) return *error;
  } else {
    return WrongType("prompt", "a string or a list of token ids", *prompt);
  }
  // OpenAI's default for /v1/completions.
  if (auto error = FitLength(context, max_tokens, 16, &request)) return *error;
  return request;
}

Expected<Json> Tokenize(const Json& body, const ServeContext& context) {
  for (const auto& item : body.items()) {
    if (item.key() != "prompt" && item.key() != "messages" && item.key() != "model" &&
        item.key() != "add_special_tokens" && item.key() != "add_generation_prompt" &&
        item.key() != "chat_template_kwargs") {
      return BadRequest(absl::StrCat("unsupported field '", item.key(), "'"), item.key());
    }
  }
  const Json* prompt = rt::FindMember(body, "prompt");
  const Json* messages = rt::FindMember(body, "messages");
  if ((prompt == nullptr) == (messages == nullptr)) {
    return BadRequest("give exactly one of 'prompt' (text) and 'messages' (a chat)");
  }
  const auto flag = [&](const char* key, bool fallback) -> Expected<bool> {
    const Json* value = rt::FindMember(body, key);
    if (value == nullptr || value->is_null()) return fallback;
    if (!value->is_boolean()) return WrongType(key, "a boolean", *value);
    return value->get<bool>();
  };
  std::vector<int32_t> ids;
  if (prompt != nullptr) {
    if (!prompt->is_string()) return WrongType("prompt", "a string", *prompt);
    Expected<bool> special = flag("add_special_tokens", true);
    if (std::holds_alternative<ApiError>(special)) return std::get<ApiError>(special);
    absl::StatusOr<std::vector<int32_t>> encoded =
        context.tokenizer->Encode(prompt->get<std::string>(), std::get<bool>(special));
    if (!encoded.ok()) return BadRequest(std::string(encoded.status().message()), "prompt");
    ids = *std::move(encoded);
  } else {
    if (auto error = CheckMessages(messages)) return *error;
    Expected<bool> generation = flag("add_generation_prompt", true);
    if (std::holds_alternative<ApiError>(generation)) return std::get<ApiError>(generation);
    Expected<std::vector<int32_t>> rendered = RenderChat(
        *messages, rt::FindMember(body, "chat_template_kwargs"), std::get<bool>(generation), context);
    if (std::holds_alternative<ApiError>(rendered)) return std::get<ApiError>(rendered);
    ids = std::get<std::vector<int32_t>>(std::move(rendered));
  }
  Json out = Json::object();
  out["tokens"] = ids;
  out["count"] = ids.size();
  out["max_model_len"] = context.max_length;
  return out;
}

Expected<Json> Detokenize(const Json& body, const ServeContext& context) {
  for (const auto& item : body.items()) {
    if (item.key() != "tokens" && item.key() != "model") {
      return BadRequest(absl::StrCat("unsupported field '", item.key(), "'"), item.key());
    }
  }
  const Json* tokens = rt::FindMember(body, "tokens");
  if (tokens == nullptr || !tokens->is_array()) {
    return BadRequest("'tokens' (a list of token ids) is required", "tokens");
  }
  std::vector<int32_t> ids;
  if (auto error = ReadIds(*tokens, "tokens", &ids)) return *error;
  if (auto error = ValidateIds(ids, context, "tokens")) return *error;
  absl::StatusOr<std::string> text = context.tokenizer->Decode(ids, /*skip_special_tokens=*/false);
  if (!text.ok()) return BadRequest(std::string(text.status().message()), "tokens");
  Json out = Json::object();
  out["prompt"] = *text;
  return out;
}

Json ErrorJson(const ApiError& error) {
  Json inner = Json::object();
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = error.param ? Json(*error.param) : Json(nullptr);
  inner["code"] = error.code ? Json(*error.code) : Json(nullptr);
  Json out = Json::object();
  out["error"] = std::move(inner);
  return out;
}

std::string FinishReason(const rt::GenerateResult& result) {
  if (result.cancelled) return "abort";  // the server stopped it (vLLM's name)
  return result.stopped_at_eos || result.stopped_by_caller ? "stop" : "length";
}

Json UsageJson(int64_t prompt_tokens, int64_t completion_tokens) {
  Json usage = Json::object();
  usage["prompt_tokens"] = prompt_tokens;
  usage["completion_tokens"] = completion_tokens;
  usage["total_tokens"] = prompt_tokens + completion_tokens;
  return usage;
}

namespace {

Json Envelope(const std::string& id, const char* object, int64_t created, const std::string& model) {
  Json out = Json::object();
  out["id"] = id;
  out["object"] = object;
  out["created"] = created;
  out["model"] = model;
  return out;
}

Json FinishJson(const std::string& finish_reason) {
  return finish_reason.empty() ? Json(nullptr) : Json(finish_reason);
}

}  // namespace

void AddToolCalls(const std::vector<std::string>& calls, GenerationOutput* output) {
  for (const std::string& text : calls) {
    absl::StatusOr<rt::ToolCall> call = rt::ParseToolCall(text);
    if (call.ok()) {
      output->tool_calls.push_back(*std::move(call));
    } else {
      output->text += absl::StrCat("<|tool_call>", text, "<tool_call|>");
    }
  }
  if (!output->tool_calls.empty() && output->finish_reason != "abort") {
    output->finish_reason = "tool_calls";
  }
}

Json ToolCallJson(const rt::ToolCall& call, const std::string& id, size_t index, bool with_index) {
  Json function = Json::object();
  function["name"] = call.name;
  function["arguments"] = call.arguments;
  Json out = Json::object();
  if (with_index) out["index"] = index;
  const size_t dash = id.find('-');
  out["id"] = absl::StrCat("call_", dash == std::string::npos ? id : id.substr(dash + 1), "_", index);
  out["type"] = "function";
  out["function"] = std::move(function);
  return out;
}

Json ChatResponseJson(const std::string& id, int64_t created, const std::string& model,
                      const GenerationOutput& output) {
  Json out = Envelope(id, "chat.completion", created, model);
  Json message = Json::object();
  message["role"] = "assistant";
  message["content"] = output.tool_calls.empty() || !output.text.empty() ? Json(output.text)
                                                                          : Json(nullptr);
  if (!output.reasoning.empty()) message["reasoning_content"] = output.reasoning;
  if (!output.tool_calls.empty()) {
    Json calls = Json::array();
    for (size_t i = 0; i < output.tool_calls.size(); ++i) {
      calls.push_back(ToolCallJson(output.tool_calls[i], id, i, false));
    }
    message["tool_calls"] = std::move(calls);
  }
  Json choice = Json::object();
  choice["index"] = 0;
  choice["message"] = std::move(message);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = output.finish_reason;
  out["choices"] = Json::array({std::move(choice)});
  out["usage"] = UsageJson(output.prompt_tokens, output.completion_tokens);
  return out;
}

Json CompletionResponseJson(const std::string& id, int64_t created, const std::string& model,
                            const GenerationOutput& output) {
  Json out = Envelope(id, "text_completion", created, model);
  Json choice = Json::object();
  choice["index"] = 0;
  choice["text"] = output.text;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = output.finish_reason;
  out["choices"] = Json::array({std::move(choice)});
  out["usage"] = UsageJson(output.prompt_tokens, output.completion_tokens);
  return out;
}

Json ChatChunkJson(const std::string& id, int64_t created, const std::string& model,
                   const std::string& field, const std::string& value,
                   const std::string& finish_reason) {
  Json out = Envelope(id, "chat.completion.chunk", created, model);
  Json delta = Json::object();
  if (!field.empty()) delta[field] = value;
  Json choice = Json::object();
  choice["index"] = 0;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = FinishJson(finish_reason);
  out["choices"] = Json::array({std::move(choice)});
  return out;
}

Json ChatToolCallChunkJson(const std::string& id, int64_t created, const std::string& model,
                           const rt::ToolCall& call, size_t index) {
  Json out = ChatChunkJson(id, created, model, "", "", "");
  out["choices"][0]["delta"]["tool_calls"] = Json::array({ToolCallJson(call, id, index, true)});
  return out;
}

Json CompletionChunkJson(const std::string& id, int64_t created, const std::string& model,
                         const std::string& text, const std::string& finish_reason) {
  Json out = Envelope(id, "text_completion", created, model);
  Json choice = Json::object();
  choice["index"] = 0;
  choice["text"] = text;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = FinishJson(finish_reason);
  out["choices"] = Json::array({std::move(choice)});
  return out;
}

Json UsageChunkJson(Endpoint endpoint, const std::string& id, int64_t created,
                    const std::string& model, int64_t prompt_tokens, int64_t completion_tokens) {
  Json out = Envelope(id, endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion",
                      created, model);
  out["choices"] = Json::array();
  out["usage"] = UsageJson(prompt_tokens, completion_tokens);
  return out;
}

std::string ServerSentEvent(const Json& value) {
  return absl::StrCat("data: ", rt::SerializeJson(value), "\n\n");
}

}  // namespace serve
}  // namespace spark

#include "spark/runtime/chat_template.h"

#include <ctime>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "file_util.h"
#include "jinja_interpreter.h"
#include "jinja_parser.h"
#include "jinja_value.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/status_macros.h"

namespace spark::rt {
namespace {

// A special token of tokenizer_config.json: a string, or an AddedToken object {"content": ...}.
std::optional<std::string> SpecialToken(const nlohmann::ordered_json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    const auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  return std::nullopt;
}

std::tm LocalNow() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  return local;
}

std::string FormatTime(const std::string& format, const std::tm& local) {
  // strftime has no way to tell an empty result from a too-small buffer: grow a few times.
  for (size_t size = 256; size <= (size_t{1} << 20); size *= 4) {
    std::string buffer(size, '\0');
    const size_t n = std::strftime(buffer.data(), buffer.size(), format.c_str(), &local);
    if (n > 0 || format.empty()) {
      buffer.resize(n);
      return buffer;
    }
  }
  return "";
}

}  // namespace

absl::string_view ChatTemplateRaisedPayload() { return jinja::kRaisedMessagePayload; }

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(absl::string_view source,
                                                 absl::string_view origin) {
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<jinja::Template> parsed,
                         jinja::ParseTemplate(source, PrintableText(origin)));
  ChatTemplate result;
  result.template_ = std::move(parsed);
  return result;
}

absl::StatusOr<ChatTemplate> ChatTemplate::Load(const std::string& directory) {
  const std::string jinja_path = JoinPath(directory, "chat_template.jinja");
  const std::string config_path = JoinPath(directory, "tokenizer_config.json");
  nlohmann::ordered_json config;
  const bool has_config = IsRegularFile(config_path);
  if (has_config) {
    SPARK_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(config_path));
    config = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(PrintableText(config_path), ": not a JSON object"));
    }
  }
  const std::string processor_path = JoinPath(directory, "chat_template.json");
  absl::StatusOr<ChatTemplate> result = absl::NotFoundError("unset");
  if (IsRegularFile(jinja_path)) {
    SPARK_ASSIGN_OR_RETURN(const std::string source, ReadFileToString(jinja_path));
    result = Parse(source, jinja_path);
  } else if (IsRegularFile(processor_path)) {
    // A processor's template, as multimodal checkpoints ship it: {"chat_template": "..."}.
    SPARK_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(processor_path));
    const nlohmann::ordered_json processor =
        nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (processor.is_discarded() || !processor.is_object() ||
        !processor.contains("chat_template") || !processor["chat_template"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          PrintableText(processor_path), ": expected a JSON object with a string \"chat_template\""));
    }
    result = Parse(processor["chat_template"].get<std::string>(),
                   absl::StrCat(processor_path, ":chat_template"));
  } else {
    const auto it = has_config ? config.find("chat_template") : config.end();
    if (!has_config || it == config.end()) {
      return absl::NotFoundError(absl::StrCat(
          "no chat template in ", PrintableText(directory), ": looked for ",
          PrintableText(jinja_path), ", ", PrintableText(processor_path),
          " and the \"chat_template\" key of ",
          PrintableText(config_path), has_config ? "" : " (which does not exist)"));
    }
    const std::string origin = absl::StrCat(config_path, ":chat_template");
    if (it->is_string()) {
      result = Parse(it->get<std::string>(), origin);
    } else if (it->is_array()) {
      const nlohmann::ordered_json* chosen = nullptr;
      for (const auto& entry : *it) {
        if (entry.is_object() && entry.contains("name") && entry["name"] == "default" &&
            entry.contains("template") && entry["template"].is_string()) {
          chosen = &entry["template"];
        }
      }
      if (chosen == nullptr) {
        return absl::NotFoundError(absl::StrCat(
            PrintableText(config_path),
            ": \"chat_template\" is a list without an entry {\"name\": \"default\", "
            "\"template\": \"...\"}"));
      }
      result = Parse(chosen->get<std::string>(), origin + "[default]");
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          PrintableText(config_path),
          ": \"chat_template\" must be a string or a list of {name, template}"));
    }
  }
  if (!result.ok()) return result.status();
  if (has_config) {
    result->bos_token_ = SpecialToken(config, "bos_token");
    result->eos_token_ = SpecialToken(config, "eos_token");
  }
  return result;
}

const std::string& ChatTemplate::origin() const { return template_->origin; }

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) {
    return absl::InvalidArgumentError("the chat template context must be a JSON object");
  }
  if (!context.contains("messages")) {
    return absl::InvalidArgumentError("the chat template context has no \"messages\"");
  }
  if (jinja::JsonDeeperThan(context, 200)) {
    return absl::InvalidArgumentError(
        "the chat template context nests arrays/objects deeper than 200 levels");
  }
  // The keyword arguments of transformers' render call, in its order.
  jinja::Dict vars;
  vars.Set("messages", jinja::Value::FromJson(context["messages"]));
  vars.Set("tools", context.contains("tools") ? jinja::Value::FromJson(context["tools"])
                                              : jinja::Value::None());
  vars.Set("documents", context.contains("documents")
                            ? jinja::Value::FromJson(context["documents"])
                            : jinja::Value::None());
  vars.Set("add_generation_prompt", context.contains("add_generation_prompt")
                                        ? jinja::Value::FromJson(context["add_generation_prompt"])
                                        : jinja::Value::Bool(false));
  if (bos_token_) vars.Set("bos_token", jinja::Value::String(*bos_token_));
  if (eos_token_) vars.Set("eos_token", jinja::Value::String(*eos_token_));
  for (const auto& [key, value] : context.items()) {
    if (key == "messages" || key == "tools" || key == "documents" ||
        key == "add_generation_prompt") {
      continue;
    }
    vars.Set(key, jinja::Value::FromJson(value));
  }
  jinja::Limits limits;
  limits.max_output_bytes = limits_.max_output_bytes;
  limits.max_call_depth = limits_.max_call_depth;
  limits.max_steps = limits_.max_steps;
  const std::function<std::tm()> clock = clock_;
  jinja::Interpreter interpreter(*template_, limits, [clock](const std::string& format) {
    return FormatTime(format, clock ? clock() : LocalNow());
  });
  return interpreter.Render(vars);
}

}  // namespace spark::rt

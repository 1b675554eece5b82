#include "spark/runtime/generation_config.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "spark/runtime/printable_text.h"

namespace spark {
namespace rt {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxConfigBytes = 1 << 20;

// Honoured: they decide which tokens are generated and Spark does what they say.
constexpr const char* kHonoured[] = {"eos_token_id", "temperature", "top_k", "top_p", "do_sample"};
// No effect on the tokens generated.
constexpr const char* kNoEffect[] = {
    "bos_token_id",  "pad_token_id",          "transformers_version", "_from_model_config",
    "use_cache",     "cache_implementation",  "output_attentions",    "output_hidden_states",
    "output_scores", "output_logits",         "return_dict_in_generate"};

template <size_t N>
bool Named(const char* const (&keys)[N], const std::string& key) {
  return std::any_of(std::begin(keys), std::end(keys), [&](const char* k) { return key == k; });
}

}  // namespace

std::string TextFilesDirectory(const std::string& tokenizer, const std::string& weights) {
  const std::string path = tokenizer.empty() ? weights : tokenizer;
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return path;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

absl::StatusOr<GenerationConfig> LoadGenerationConfig(const std::string& dir) {
  GenerationConfig config;
  const std::string path = dir + "/generation_config.json";
  std::ifstream file(path, std::ios::binary);
  if (!file) return config;  // optional
  std::string text;
  text.resize(kMaxConfigBytes + 1);
  file.read(&text[0], static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(file.gcount()));
  if (text.size() > kMaxConfigBytes) {
    return absl::InvalidArgumentError(PrintableText(
        absl::StrCat(path, ": larger than 1 MiB; not a generation_config.json")));
  }
  config.path = path;
  const Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) {
    return absl::InvalidArgumentError(PrintableText(absl::StrCat(
        path, ": not a JSON object (expected the checkpoint's generation_config.json)")));
  }
  for (const auto& item : json.items()) {
    if (Named(kHonoured, item.key()) || Named(kNoEffect, item.key()) || item.value().is_null()) {
      continue;
    }
    return absl::InvalidArgumentError(PrintableText(absl::StrCat(
        path, ": sets ", item.key(), " = ", item.value().dump(),
        ", which Spark does not implement (it honours eos_token_id, temperature, top_k, top_p and "
        "do_sample); remove the setting to generate without it, or give token ids")));
  }
  const auto eos = json.find("eos_token_id");
  if (eos != json.end() && !eos->is_null()) {
    const Json ids = eos->is_array() ? *eos : Json::array({*eos});
    for (const Json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError(PrintableText(absl::StrCat(
            path, ": eos_token_id must be a token id or a list of them, found ", eos->dump())));
      }
      config.eos_token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  const auto number = [&](const char* key) -> std::optional<double> {
    const auto it = json.find(key);
    if (it == json.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  if (const auto t = number("temperature")) config.temperature = static_cast<float>(*t);
  if (const auto p = number("top_p")) config.top_p = static_cast<float>(*p);
  if (const auto k = number("top_k"); k && *k >= 0 && *k <= std::numeric_limits<int32_t>::max()) {
    config.top_k = static_cast<int32_t>(*k);
  }
  const auto do_sample = json.find("do_sample");
  if (do_sample != json.end() && do_sample->is_boolean() && !do_sample->get<bool>()) {
    config.temperature = 0.0f;  // transformers: greedy whatever the temperature
  }
  return config;
}

void ApplySamplingDefaults(const GenerationConfig& config, const SamplerFieldsGiven& given,
                           SamplerOptions* sampler) {
  if (!given.temperature && config.temperature) sampler->temperature = *config.temperature;
  if (!given.top_p && config.top_p) sampler->top_p = *config.top_p;
  if (!given.top_k && config.top_k) sampler->top_k = *config.top_k;
}

}  // namespace rt
}  // namespace spark

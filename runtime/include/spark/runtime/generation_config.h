// A checkpoint's generation_config.json: the ids that end a generation and the sampling defaults
// (transformers' GenerationConfig, the keys Spark honours). Read by spark-run and spark-serve.
#ifndef SPARK_RUNTIME_GENERATION_CONFIG_H_
#define SPARK_RUNTIME_GENERATION_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "spark/runtime/sampler.h"

namespace spark {
namespace rt {

struct GenerationConfig {
  std::string path;                    // the file read; empty when there was none
  std::vector<int32_t> eos_token_ids;  // eos_token_id: an id or a list
  std::optional<float> temperature;    // 0 when do_sample is false (greedy, as transformers)
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
};

// The directory of a checkpoint's text files (tokenizer.json, tokenizer_config.json,
// chat_template.jinja, generation_config.json): `tokenizer` (a directory, or the one of a
// tokenizer.json file) when given, else `weights` (a directory, or the one of a .safetensors file).
std::string TextFilesDirectory(const std::string& tokenizer, const std::string& weights);

// Reads DIR/generation_config.json; no file gives an empty config. INVALID_ARGUMENT naming the
// file for text that is not a JSON object, a bad eos_token_id, or a key that would change the
// tokens generated and that Spark does not implement (repetition_penalty, min_p, ...): refused,
// never silently ignored. Keys without effect on the tokens (bos_token_id, use_cache, ...) pass.
absl::StatusOr<GenerationConfig> LoadGenerationConfig(const std::string& dir);

// The config's sampling defaults, applied to the fields of `sampler` that `given` does not mark
// as set by the user.
struct SamplerFieldsGiven {
  bool temperature = false, top_p = false, top_k = false;
};
void ApplySamplingDefaults(const GenerationConfig& config, const SamplerFieldsGiven& given,
                           SamplerOptions* sampler);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_GENERATION_CONFIG_H_

// spark-quantize: a bf16 Gemma 4 checkpoint -> the same checkpoint with its linear layers in
// NVIDIA ModelOpt's NVFP4 or FP8 layout (the work is the runtime's checkpoint_quantizer.h;
// docs/quantization.md has the user's view). A thin main: flags with CLI11, progress on a
// terminal, every failure an absl::Status on stderr with exit code 1.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "spark/runtime/artifact.h"
#include "spark/runtime/artifact_cache.h"
#include "spark/runtime/calibration.h"
#include "spark/runtime/checkpoint_quantizer.h"
#include "spark/runtime/cuda_executor.h"
#include "spark/runtime/device.h"
#include "spark/runtime/generator.h"
#include "spark/runtime/host_executor.h"
#include "spark/runtime/safetensors.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace {

std::string FormatBytes(uint64_t n) {
  char text[32];
  if (n >= (uint64_t{1} << 30)) {
    std::snprintf(text, sizeof(text), "%.2f GiB", n / 1073741824.0);
  } else {
    std::snprintf(text, sizeof(text), "%.1f MiB", n / 1048576.0);
  }
  return text;
}

// The prompts of --calibration-prompt-ids: one per line, token ids separated by commas and/or
// spaces; empty lines and lines starting with '#' are skipped.
absl::StatusOr<std::vector<std::vector<int32_t>>> ReadPromptIds(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    absl::StatusOr<std::vector<int32_t>> ids = rt::ParseTokenIds(
        absl::StrJoin(absl::StrSplit(text, absl::ByAnyChar(", \t"), absl::SkipEmpty()), ","));
    if (!ids.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " line ", number, ": ", ids.status().message()));
    }
    prompts.push_back(*std::move(ids));
  }
  if (prompts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " holds no prompt (one line of token "
                                                   "ids per prompt)"));
  }
  return prompts;
}

// Runs the prompts through the bf16 checkpoint `input` (imported and compiled by spark-import and
// spark-compile into the artifact cache, as spark-serve does) on `device`, and returns the amax of
// every linear module's input (calibration.h).
absl::StatusOr<std::map<std::string, float>> Calibrate(const std::string& input,
                                                       const std::string& prompts_path,
                                                       const std::string& device) {
  SPARK_ASSIGN_OR_RETURN(const std::vector<std::vector<int32_t>> prompts,
                         ReadPromptIds(prompts_path));
  std::vector<rt::DeviceInfo> devices;
  if (device == "cuda") {
    SPARK_ASSIGN_OR_RETURN(devices, rt::ListDevices());  // not empty when it succeeds
  }
  const std::string target = rt::ArtifactTargetFor(devices.empty() ? nullptr : &devices.front());
  SPARK_ASSIGN_OR_RETURN(
      const std::string image,
      rt::CompiledArtifact(rt::DefaultCompileRequest(input, target), [](absl::string_view text) {
        std::fprintf(stderr, "spark-quantize: %s\n", std::string(text).c_str());
      }));
  SPARK_ASSIGN_OR_RETURN(const rt::Artifact artifact, rt::LoadArtifact(image));
  int64_t tokens = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const absl::Status valid = rt::ValidatePrompt(artifact.plan.model, prompts[p],
                                                  static_cast<int64_t>(prompts[p].size()));
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(prompts_path, " prompt ", p + 1, ": ", valid.message()));
    }
    tokens += static_cast<int64_t>(prompts[p].size());
  }
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<rt::Checkpoint> checkpoint, rt::Checkpoint::Open(input));
  std::unique_ptr<rt::Executor> executor;
  if (device == "cuda") {
    rt::CudaExecutorOptions options;
    options.device = devices.front();
    options.use_graphs = false;  // every step observed
    SPARK_ASSIGN_OR_RETURN(executor, rt::CreateCudaExecutor(artifact, *checkpoint, options));
  } else {
    SPARK_ASSIGN_OR_RETURN(std::vector<rt::WeightData> weights,
                           rt::BindWeights(artifact.plan, *checkpoint));
    SPARK_ASSIGN_OR_RETURN(executor, rt::CreateHostExecutor(artifact.plan, std::move(weights)));
  }
  std::fprintf(stderr, "spark-quantize: calibrating: %zu prompts, %lld tokens on the %s\n",
               prompts.size(), static_cast<long long>(tokens),
               device == "cuda" ? devices.front().name.c_str() : "host reference executor");
  return rt::MeasureLinearInputRanges(artifact.plan, *executor, prompts);
}

absl::StatusOr<rt::QuantizeCheckpointResult> Quantize(rt::QuantizeCheckpointOptions options,
                                                     const std::string& format,
                                                     const std::string& calibration,
                                                     const std::string& device) {
  SPARK_ASSIGN_OR_RETURN(options.format, rt::ParseQuantizedFormat(format));
  if (!calibration.empty()) {
    SPARK_ASSIGN_OR_RETURN(options.input_amax, Calibrate(options.input, calibration, device));
  }
  const bool terminal = isatty(STDERR_FILENO) != 0;
  if (terminal) {
    options.on_progress = [](uint64_t done, uint64_t total, const std::string& file) {
      std::fprintf(stderr, "\rspark-quantize: %3d%% (%s of %s) %s",
                   total == 0 ? 100 : static_cast<int>(done * 100 / total),
                   FormatBytes(done).c_str(), FormatBytes(total).c_str(), file.c_str());
      std::fflush(stderr);
    };
  }
  SPARK_ASSIGN_OR_RETURN(const rt::QuantizeCheckpointResult result,
                         rt::QuantizeCheckpoint(options));
  if (terminal) std::fprintf(stderr, "\n");
  std::printf("spark-quantize: %s: %d linear layers in %s, %s -> %s (%s)%s\n",
              options.output.c_str(), result.quantized_layers, format == "nvfp4" ? "NVFP4" : "FP8",
              FormatBytes(result.input_bytes).c_str(), FormatBytes(result.output_bytes).c_str(),
              result.narrow_layers == 0
                  ? "the rest bf16"
                  : absl::StrCat(result.narrow_layers, " narrow linears and the rest bf16").c_str(),
              result.input_scales == 0
                  ? ""
                  : absl::StrCat("; ", result.input_scales, " input scales from calibration").c_str());
  return result;
}

}  // namespace
}  // namespace spark

int main(int argc, char** argv) {
  spark::rt::QuantizeCheckpointOptions options;
  std::string format;
  CLI::App app{
      "spark-quantize: writes a bf16 Gemma 4 checkpoint's linear layers in NVIDIA ModelOpt's NVFP4 "
      "or FP8 layout (ModelOpt's rounding), for spark-import; embeddings, the LM head, norms, the "
      "MoE router and any vision/audio tower stay bf16. MoE experts are written one linear per "
      "expert, as ModelOpt does (--exclude '*experts*' keeps them bf16). The output is sharded like "
      "the input, with config.json (quantization_config), hf_quant_config.json and the other "
      "files (tokenizer, chat template) copied. Progress on a terminal.\n"
      "  spark-quantize IN_DIR OUT_DIR --format nvfp4|fp8 [--exclude PATTERN]... "
      "[--calibration-prompt-ids FILE [--calibration-device host|cuda]]",
      "spark-quantize"};
  app.add_option("input", options.input, "the bf16 checkpoint's directory")->required();
  app.add_option("output", options.output, "a new (or empty) directory for the result")
      ->required();
  app.add_option("--format", format,
                 "nvfp4 (4-bit E2M1 codes, e4m3 scales per 16 inputs, ~4.5 bits per weight) or "
                 "fp8 (e4m3, one scale per tensor)")
      ->required();
  app.add_option("--exclude", options.exclude,
                 "keep the linear modules matching this wildcard in bf16 (fnmatch over full "
                 "module names, e.g. '*self_attn*'); may be given more than once")
      ->allow_extra_args(false);
  std::string calibration, device = "host";
  app.add_option("--calibration-prompt-ids", calibration,
                 "calibrate the activation scales: run these prompts (a file of token ids, one "
                 "prompt per line, ids separated by commas or spaces) through the bf16 model and "
                 "write each quantized linear's input_scale (ModelOpt's static activation scale, "
                 "amax / (6 * 448) for NVFP4, amax / 448 for FP8), which W4A4 / W8A8 engines read; "
                 "the model is imported and compiled into the artifact cache first (spark-import "
                 "and spark-compile, as spark-serve does)");
  app.add_option("--calibration-device", device,
                 "where the calibration prompts run: host (the host reference executor; slow for "
                 "large models) or cuda (the first GPU)")
      ->check(CLI::IsMember({"host", "cuda"}))
      ->needs(app.get_option("--calibration-prompt-ids"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 1;
  }
  absl::StatusOr<spark::rt::QuantizeCheckpointResult> result = spark::Quantize(options, format, calibration, device);
  std::fflush(stdout);
  if (!result.ok()) {
    std::fprintf(stderr, "spark-quantize: %s\n", result.status().ToString().c_str());
    return 1;
  }
  return 0;
}

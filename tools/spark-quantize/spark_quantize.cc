// spark-quantize: a bf16 Gemma 4 checkpoint -> the same checkpoint with its linear layers in
// NVIDIA ModelOpt's NVFP4 or FP8 layout (the work is the runtime's checkpoint_quantizer.h;
// docs/quantization.md has the user's view). A thin main: flags with CLI11, progress on a
// terminal, every failure an absl::Status on stderr with exit code 1.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "spark/runtime/checkpoint_quantizer.h"
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

absl::StatusOr<rt::QuantizeCheckpointResult> Quantize(rt::QuantizeCheckpointOptions options,
                                                     const std::string& format) {
  SPARK_ASSIGN_OR_RETURN(options.format, rt::ParseQuantizedFormat(format));
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
  std::printf("spark-quantize: %s: %d linear layers in %s, %s -> %s (%s)\n",
              options.output.c_str(), result.quantized_layers, format == "nvfp4" ? "NVFP4" : "FP8",
              FormatBytes(result.input_bytes).c_str(), FormatBytes(result.output_bytes).c_str(),
              result.narrow_layers == 0
                  ? "the rest bf16"
                  : absl::StrCat(result.narrow_layers, " narrow linears and the rest bf16").c_str());
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
      "  spark-quantize IN_DIR OUT_DIR --format nvfp4|fp8 [--exclude PATTERN]...",
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 1;
  }
  absl::StatusOr<spark::rt::QuantizeCheckpointResult> result = spark::Quantize(options, format);
  std::fflush(stdout);
  if (!result.ok()) {
    std::fprintf(stderr, "spark-quantize: %s\n", result.status().ToString().c_str());
    return 1;
  }
  return 0;
}

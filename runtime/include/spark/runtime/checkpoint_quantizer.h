// Quantizes a bf16 Gemma 4 checkpoint: its text decoder's linear layers into NVIDIA ModelOpt's
// NVFP4 or FP8 layout (quantize.h: ModelOpt's rounding), everything else copied, as a new
// checkpoint spark-import reads like one NVIDIA publishes (docs/quantization.md). What
// spark-quantize does; a library so that it is tested as one.
#ifndef SPARK_RUNTIME_CHECKPOINT_QUANTIZER_H_
#define SPARK_RUNTIME_CHECKPOINT_QUANTIZER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spark {
namespace rt {

enum class QuantizedFormat { kNvfp4, kFp8 };

// "nvfp4" or "fp8"; kInvalidArgument otherwise.
absl::StatusOr<QuantizedFormat> ParseQuantizedFormat(absl::string_view name);

struct QuantizeCheckpointOptions {
  std::string input;   // the bf16 checkpoint's directory
  std::string output;  // a new or empty directory
  QuantizedFormat format = QuantizedFormat::kNvfp4;
  // Linear modules kept in bf16 (fnmatch wildcards over full module names), after the defaults:
  // lm_head, *embed_tokens*, *router*, *vision*, *audio*. Fused MoE experts are written one
  // linear per expert (<layer>.experts.<e>.{gate,up,down}_proj) unless all are excluded.
  std::vector<std::string> exclude;
  // Calibration (spark-quantize --calibration-prompt-ids; calibration.h): the amax of each linear
  // module's input. When not empty, every quantized module gets ModelOpt's static activation scale
  // `<module>.input_scale` (F32 scalar): amax / (6 * 448) for NVFP4, amax / 448 for FP8 (1 for an
  // amax of 0). An expert no calibration token was routed to takes the largest amax of its layer's
  // experts for that projection; any other quantized module without an amax is an error.
  std::map<std::string, float> input_amax;
  int threads = 0;  // 0: every hardware thread
  // Called as tensors are written: bytes of the input done, of the input in all, the file.
  std::function<void(uint64_t done, uint64_t total, const std::string& file)> on_progress;
};

struct QuantizeCheckpointResult {
  int quantized_layers = 0;
  int input_scales = 0;  // input_scale tensors written (calibration)
  int narrow_layers = 0;  // NVFP4 linears kept bf16: input width no multiple of 16
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;
};

// Writes `output`: the same shards as the input (and an index when it has one), every tensor
// aligned for reading in place (16 bytes where its size allows, else its element size),
// config.json with a quantization_config, hf_quant_config.json, and the input's other files.
// Errors (nothing is left in `output`): kNotFound for an input that is no checkpoint directory,
// kInvalidArgument for an already-quantized input, a NaN or infinite weight, a linear that is
// not bf16 or an empty --exclude pattern, kAlreadyExists for an output that is not new or empty.
absl::StatusOr<QuantizeCheckpointResult> QuantizeCheckpoint(
    const QuantizeCheckpointOptions& options);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_CHECKPOINT_QUANTIZER_H_

// Quantizing a bf16 checkpoint into NVIDIA ModelOpt's NVFP4 / FP8 layout (spark-quantize's work;
// quantize.h has the rules per tensor, docs/quantization.md the user's view).
#include "spark/runtime/checkpoint_quantizer.h"

#include <fnmatch.h>

#include <algorithm>
#include <deque>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "file_util.h"
#include "json_document.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/quantize.h"
#include "spark/runtime/quantized_weights.h"
#include "spark/runtime/safetensors.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

namespace fs = std::filesystem;
using Format = QuantizedFormat;
using Options = QuantizeCheckpointOptions;

// Kept in bf16 whatever the user says: what ModelOpt and NVIDIA's Gemma 4 checkpoints keep
// (gemma4-ecosystem.md section 6).
const char* const kDefaultExcludes[] = {"lm_head", "*embed_tokens*", "*router*", "*vision*",
                                        "*audio*"};
// The linear layers of a Gemma 4 text decoder, by the last component of their module name.
const char* const kLinearNames[] = {"q_proj",    "k_proj",  "v_proj",
                                    "o_proj",    "gate_proj", "up_proj",
                                    "down_proj", "per_layer_input_gate", "per_layer_projection",
                                    "per_layer_model_projection"};

// The output's configs and index are new files (WriteNewFile: never through a link).
absl::Status WriteText(const fs::path& path, const std::string& text) {
  return WriteNewFile(path.string(), text);
}

absl::StatusOr<Json> ReadJson(const fs::path& path) {
  SPARK_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path.string()));
  absl::StatusOr<Json> json = ParseJson(text);
  if (!json.ok()) {
    return absl::InvalidArgumentError(
        PrintableText(absl::StrCat(path.string(), ": ", json.status().message())));
  }
  if (!json->is_object()) {
    return absl::InvalidArgumentError(
        PrintableText(absl::StrCat(path.string(), ": not a JSON object")));
  }
  return *std::move(json);
}

// The module of a tensor named "<module>.weight", or empty.
std::string ModuleOf(const std::string& tensor) {
  return absl::EndsWith(tensor, ".weight") ? tensor.substr(0, tensor.size() - 7) : std::string();
}

bool Matches(const std::vector<std::string>& patterns, const std::string& module) {
  for (const std::string& pattern : patterns) {
    if (fnmatch(pattern.c_str(), module.c_str(), 0) == 0) return true;
  }
  return false;
}

// Whether the tensor is the weight of a linear layer of the text decoder this run quantizes
// (before the NVFP4 width check; its dtype is the caller's to check).
bool IsQuantizable(const TensorView& tensor, const std::vector<std::string>& exclude) {
  const std::string module = ModuleOf(tensor.name);
  if (module.empty() || tensor.shape.size() != 2) return false;
  const std::vector<std::string> parts = absl::StrSplit(module, '.');
  if (std::find(std::begin(kLinearNames), std::end(kLinearNames), parts.back()) ==
      std::end(kLinearNames)) {
    return false;
  }
  if (std::find(parts.begin(), parts.end(), "router") != parts.end()) return false;
  if (absl::StrContains(module, "vision") || absl::StrContains(module, "audio")) return false;
  return !Matches(exclude, module);
}

// The MoE experts of a bf16 Gemma 4 checkpoint are fused: `<layer>.experts.gate_up_proj`
// [E, 2I, H] (gate rows first) and `<layer>.experts.down_proj` [E, H, I]. ModelOpt's quantized
// checkpoints hold one linear per expert and projection instead (`<layer>.experts.<e>.gate_proj`,
// `up_proj`, `down_proj`, each [rows, cols] with its own scales): the per-expert weights of a
// fused tensor, as views of its rows, in that order (expert by expert, gate before up), or none
// when `t` is not a fused expert tensor.
std::vector<TensorView> ExpertLinears(const TensorView& t) {
  const bool gate_up = absl::EndsWith(t.name, ".experts.gate_up_proj");
  if ((!gate_up && !absl::EndsWith(t.name, ".experts.down_proj")) || t.shape.size() != 3 ||
      t.dtype != "BF16" || (gate_up && t.shape[1] % 2 != 0)) {
    return {};
  }
  const std::string experts = t.name.substr(0, t.name.rfind('.'));
  const int64_t count = t.shape[0], cols = t.shape[2];
  const int64_t rows = gate_up ? t.shape[1] / 2 : t.shape[1];
  const std::vector<std::string> projections =
      gate_up ? std::vector<std::string>{"gate_proj", "up_proj"}
              : std::vector<std::string>{"down_proj"};
  std::vector<TensorView> linears;
  const uint64_t bytes = static_cast<uint64_t>(rows * cols) * 2;
  for (int64_t e = 0; e < count; ++e) {
    for (size_t p = 0; p < projections.size(); ++p) {
      TensorView view;
      view.name = absl::StrCat(experts, ".", e, ".", projections[p], ".weight");
      view.dtype = "BF16";
      view.shape = {rows, cols};
      view.data = t.data + (static_cast<uint64_t>(e) * projections.size() + p) * bytes;
      view.num_bytes = bytes;
      linears.push_back(std::move(view));
    }
  }
  return linears;
}

std::string FloatBytes(float value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof(value));
}

// A NaN or infinite weight has no quantized value (the checkpoint is damaged).
absl::Status CheckFinite(const TensorView& tensor) {
  const auto* bf16 = reinterpret_cast<const uint16_t*>(tensor.data);
  for (uint64_t i = 0; i < tensor.num_bytes / 2; ++i) {
    const uint16_t bits = bf16[i];
    if ((bits & 0x7f80u) == 0x7f80u) {
      return absl::InvalidArgumentError(PrintableText(absl::StrCat(
          "tensor ", tensor.name, ": element ", i, " is ", (bits & 0x7fu) != 0 ? "NaN" : "infinite",
          "; a weight must be finite to be quantized")));
    }
  }
  return absl::OkStatus();
}

uint64_t TensorBytes(const TensorHeader& header) {
  uint64_t n = static_cast<uint64_t>(SafetensorsDTypeSize(header.dtype));
  for (int64_t d : header.shape) n *= static_cast<uint64_t>(d);
  return n;
}

// One tensor of an output file: a copy of an input tensor, or one part of a quantized module.
struct OutputTensor {
  TensorHeader header;
  const TensorView* source = nullptr;  // the input tensor (the module's weight)
  enum class Part { kCopy, kCodes, kBlockScales, kTensorScale, kInputScale } part = Part::kCopy;
};

class Quantizer {
 public:
  Quantizer(const Options& options, Format format, const Checkpoint& checkpoint)
      : options_(options), format_(format), checkpoint_(checkpoint) {
    exclude_.assign(std::begin(kDefaultExcludes), std::end(kDefaultExcludes));
    exclude_.insert(exclude_.end(), options.exclude.begin(), options.exclude.end());
  }

  absl::StatusOr<QuantizeCheckpointResult> Run();

 private:
  std::vector<OutputTensor> Plan(const std::vector<const TensorView*>& inputs);
  // The bytes of `tensor`: a view of the input's mapping for a copy, of `produced_` (valid until
  // the next call) for a quantized part.
  absl::StatusOr<absl::string_view> Produce(const OutputTensor& tensor);
  absl::Status WriteConfigs(const fs::path& in, const fs::path& out) const;
  // The static activation scale of `module` from options_.input_amax.
  absl::StatusOr<float> InputScale(const std::string& module) const;
  void Progress(const std::string& file) const {
    if (options_.on_progress) options_.on_progress(done_bytes_, checkpoint_.total_bytes(), file);
  }

  const Options& options_;
  Format format_;
  const Checkpoint& checkpoint_;
  std::vector<std::string> exclude_;
  std::vector<std::string> kept_narrow_;  // NVFP4 linears whose width is no multiple of 16
  // Quantized modules whose parts are not all written yet.
  std::map<std::string, quant::Nvfp4Weight> nvfp4_;
  std::map<std::string, quant::Fp8Weight> fp8_;
  std::map<std::string, int> parts_left_;
  absl::Status refused_;  // a linear Plan() cannot quantize
  std::deque<TensorView> expert_linears_;  // views of the fused expert tensors (ExpertLinears)
  std::string produced_;  // the part Produce() returned last
  uint64_t done_bytes_ = 0;
  int quantized_ = 0;
  int input_scales_ = 0;
  int threads_ = options_.threads > 0
                     ? options_.threads
                     : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
};

std::vector<OutputTensor> Quantizer::Plan(const std::vector<const TensorView*>& file_inputs) {
  std::vector<OutputTensor> out;
  // Fused expert tensors become their per-expert linears, all quantized or (excluded, or too
  // narrow for NVFP4's blocks) the fused tensor copied as it is: Spark runs every expert's
  // projection in one format.
  std::vector<const TensorView*> inputs;
  for (const TensorView* t : file_inputs) {
    std::vector<TensorView> linears = ExpertLinears(*t);
    size_t quantizable = 0;
    for (const TensorView& linear : linears) quantizable += IsQuantizable(linear, exclude_);
    if (linears.empty() || quantizable == 0) {
      inputs.push_back(t);
      continue;
    }
    if (quantizable != linears.size()) {
      if (refused_.ok()) refused_ = absl::InvalidArgumentError(PrintableText(absl::StrCat(
          "--exclude keeps some of the linears of ", t->name, " in bf16 but not all (",
          quantizable, " of ", linears.size(), " would be quantized): Spark runs every "
          "expert's projection in one format; exclude all of them (e.g. \"*experts*\") or none")));
      inputs.push_back(t);
      continue;
    }
    if (format_ == Format::kNvfp4 && t->shape[2] % quant::kNvfp4BlockSize != 0) {
      // (Named in the config's ignore list as fnmatch patterns: <layer>.experts.*.gate_proj.)
      const std::string experts = t->name.substr(0, t->name.rfind('.'));
      for (size_t p = 0; p < linears.size() && p < 2; ++p) {
        const std::string& name = linears[p].name;  // <experts>.0.<projection>.weight
        const std::string projection = ModuleOf(name).substr(ModuleOf(name).rfind('.') + 1);
        if (p == 1 && projection == "down_proj") break;
        kept_narrow_.push_back(absl::StrCat(experts, ".*.", projection));
      }
      inputs.push_back(t);
      continue;
    }
    for (TensorView& linear : linears) {
      expert_linears_.push_back(std::move(linear));
      inputs.push_back(&expert_linears_.back());
    }
  }
  for (const TensorView* t : inputs) {
    if (IsQuantizable(*t, exclude_) && t->dtype != "BF16") {
      refused_ = absl::InvalidArgumentError(PrintableText(absl::StrCat(
          "tensor ", t->name, " is ", t->dtype, ": spark-quantize takes a bf16 checkpoint (or "
          "keep the layer unquantized with --exclude)")));
    }
    if (!IsQuantizable(*t, exclude_) || t->dtype != "BF16") {
      out.push_back({{t->name, t->dtype, t->shape}, t, OutputTensor::Part::kCopy});
      continue;
    }
    const std::string module = ModuleOf(t->name);
    const int64_t rows = t->shape[0], cols = t->shape[1];
    if (format_ == Format::kNvfp4 && cols % quant::kNvfp4BlockSize != 0) {
      kept_narrow_.push_back(module);
      out.push_back({{t->name, t->dtype, t->shape}, t, OutputTensor::Part::kCopy});
      continue;
    }
    ++quantized_;
    if (format_ == Format::kNvfp4) {
      out.push_back({{t->name, "U8", {rows, cols / 2}}, t, OutputTensor::Part::kCodes});
      out.push_back({{module + ".weight_scale", "F8_E4M3", {rows, cols / quant::kNvfp4BlockSize}},
                     t, OutputTensor::Part::kBlockScales});
      out.push_back({{module + ".weight_scale_2", "F32", {}}, t, OutputTensor::Part::kTensorScale});
      parts_left_[module] = 3;
    } else {
      out.push_back({{t->name, "F8_E4M3", {rows, cols}}, t, OutputTensor::Part::kCodes});
      out.push_back({{module + ".weight_scale", "F32", {}}, t, OutputTensor::Part::kTensorScale});
      parts_left_[module] = 2;
    }
    if (!options_.input_amax.empty()) {
      out.push_back({{module + ".input_scale", "F32", {}}, t, OutputTensor::Part::kInputScale});
    }
  }
  // Laid out so that the GPU can read every tensor in place (an integrated device): the header
  // is padded to 16 bytes, then come the tensors whose size is a multiple of 16 (each 16-byte
  // aligned, for the kernels' 16-byte loads), then the rest by element size, largest first
  // (each aligned to its element size); names in order within each group.
  std::stable_sort(out.begin(), out.end(), [](const OutputTensor& a, const OutputTensor& b) {
    const bool a16 = TensorBytes(a.header) % 16 == 0, b16 = TensorBytes(b.header) % 16 == 0;
    if (a16 != b16) return a16;
    const int a_size = SafetensorsDTypeSize(a.header.dtype);
    const int b_size = SafetensorsDTypeSize(b.header.dtype);
    if (a_size != b_size) return a_size > b_size;
    return a.header.name < b.header.name;
  });
  return out;
}

absl::StatusOr<float> Quantizer::InputScale(const std::string& module) const {
  auto found = options_.input_amax.find(module);
  float amax = found != options_.input_amax.end() ? found->second : -1.0f;
  // An expert no calibration token reached: the largest amax of its layer's experts for the same
  // projection ("<layer>.experts.<e>.<projection>").
  const size_t experts = module.find(".experts.");
  if (amax < 0.0f && experts != std::string::npos) {
    const size_t dot = module.find('.', experts + 9);
    const std::string layer = module.substr(0, experts + 9);
    const std::string projection = dot == std::string::npos ? "" : module.substr(dot);
    for (const auto& [name, value] : options_.input_amax) {
      if (absl::StartsWith(name, layer) && absl::EndsWith(name, projection) &&
          name.find('.', experts + 9) == name.size() - projection.size()) {
        amax = std::max(amax, value);
      }
    }
  }
  if (amax < 0.0f) {
    return absl::InternalError(PrintableText(absl::StrCat(
        "calibration measured no input for ", module, " (it is quantized but no step of the "
        "model's plan read it)")));
  }
  if (amax == 0.0f) return 1.0f;
  return amax / (format_ == Format::kNvfp4 ? quant::kE2M1Max * quant::kE4M3Max : quant::kE4M3Max);
}

absl::StatusOr<absl::string_view> Quantizer::Produce(const OutputTensor& tensor) {
  const TensorView& source = *tensor.source;
  if (tensor.part == OutputTensor::Part::kInputScale) {
    SPARK_ASSIGN_OR_RETURN(const float scale, InputScale(ModuleOf(source.name)));
    ++input_scales_;
    produced_ = FloatBytes(scale);
    return absl::string_view(produced_);
  }
  if (tensor.part == OutputTensor::Part::kCopy) {
    done_bytes_ += source.num_bytes;
    return absl::string_view(reinterpret_cast<const char*>(source.data), source.num_bytes);
  }
  const std::string module = ModuleOf(source.name);
  const auto* bf16 = reinterpret_cast<const uint16_t*>(source.data);
  const bool first_part = nvfp4_.count(module) == 0 && fp8_.count(module) == 0;
  if (first_part) {
    SPARK_RETURN_IF_ERROR(CheckFinite(source));
    done_bytes_ += source.num_bytes;
  }
  std::string bytes;
  if (format_ == Format::kNvfp4) {
    auto it = nvfp4_.find(module);
    if (it == nvfp4_.end()) {
      it = nvfp4_.emplace(module, quant::QuantizeNvfp4(bf16, source.shape[0], source.shape[1],
                                                       threads_))
               .first;
    }
    bytes = tensor.part == OutputTensor::Part::kCodes         ? std::move(it->second.codes)
            : tensor.part == OutputTensor::Part::kBlockScales ? std::move(it->second.block_scales)
                                                              : FloatBytes(it->second.tensor_scale);
  } else {
    auto it = fp8_.find(module);
    if (it == fp8_.end()) {
      it = fp8_.emplace(module,
                        quant::QuantizeFp8(bf16, source.shape[0] * source.shape[1], threads_))
               .first;
    }
    bytes = tensor.part == OutputTensor::Part::kCodes ? std::move(it->second.elements)
                                                      : FloatBytes(it->second.scale);
  }
  if (--parts_left_[module] == 0) {
    nvfp4_.erase(module);
    fp8_.erase(module);
  }
  produced_ = std::move(bytes);
  return absl::string_view(produced_);
}

absl::Status Quantizer::WriteConfigs(const fs::path& in, const fs::path& out) const {
  SPARK_ASSIGN_OR_RETURN(Json config, ReadJson(in / "config.json"));
  std::vector<std::string> exclude = exclude_;
  std::vector<std::string> narrow = kept_narrow_;
  std::sort(narrow.begin(), narrow.end());
  exclude.insert(exclude.end(), narrow.begin(), narrow.end());
  const std::string algo = format_ == Format::kNvfp4 ? "NVFP4" : "FP8";
  Json quantization = Json::object();
  quantization["quant_method"] = "modelopt";
  quantization["quant_algo"] = algo;
  if (format_ == Format::kNvfp4) quantization["group_size"] = quant::kNvfp4BlockSize;
  quantization["ignore"] = exclude;
  quantization["producer"] = {{"name", "spark-quantize"}};
  config["quantization_config"] = quantization;
  SPARK_RETURN_IF_ERROR(WriteText(out / "config.json", config.dump(2) + "\n"));
  Json hf = Json::object();
  hf["producer"] = {{"name", "spark-quantize"}};
  Json body = Json::object();
  body["quant_algo"] = algo;
  body["kv_cache_quant_algo"] = nullptr;
  if (format_ == Format::kNvfp4) body["group_size"] = quant::kNvfp4BlockSize;
  body["exclude_modules"] = exclude;
  hf["quantization"] = body;
  return WriteText(out / "hf_quant_config.json", hf.dump(2) + "\n");
}

absl::StatusOr<QuantizeCheckpointResult> Quantizer::Run() {
  const fs::path in(options_.input), out(options_.output);
  // The tensors of each input file, in file order (Checkpoint::tensors() lists them so).
  std::vector<std::vector<const TensorView*>> by_file(checkpoint_.files().size());
  for (const TensorView& t : checkpoint_.tensors()) {
    for (size_t f = 0; f < checkpoint_.files().size(); ++f) {
      const Checkpoint::File& file = checkpoint_.files()[f];
      if (t.data >= file.data && t.data + t.num_bytes <= file.data + file.size) {
        by_file[f].push_back(&t);
        break;
      }
    }
  }
  Json weight_map = Json::object();
  uint64_t total_size = 0;
  for (size_t f = 0; f < by_file.size(); ++f) {
    const std::string name = fs::path(checkpoint_.files()[f].path).filename().string();
    const std::vector<OutputTensor> tensors = Plan(by_file[f]);
    std::vector<TensorHeader> headers;
    SPARK_RETURN_IF_ERROR(refused_);
    for (const OutputTensor& t : tensors) {
      headers.push_back(t.header);
      weight_map[t.header.name] = name;
      total_size += TensorBytes(t.header);
    }
    Progress(name);
    SPARK_RETURN_IF_ERROR(WriteSafetensorsStreamed(
        (out / name).string(), headers,
        [&](size_t i) -> absl::StatusOr<absl::string_view> {
          absl::StatusOr<absl::string_view> bytes = Produce(tensors[i]);
          Progress(name);
          return bytes;
        },
        {{"format", "pt"}}));
  }
  std::error_code error;
  if (fs::exists(in / "model.safetensors.index.json", error)) {
    SPARK_ASSIGN_OR_RETURN(Json index, ReadJson(in / "model.safetensors.index.json"));
    if (!index.contains("metadata") || !index["metadata"].is_object()) {
      index["metadata"] = Json::object();
    }
    index["metadata"]["total_size"] = total_size;
    index["weight_map"] = weight_map;
    SPARK_RETURN_IF_ERROR(WriteText(out / "model.safetensors.index.json", index.dump(2) + "\n"));
  }
  SPARK_RETURN_IF_ERROR(WriteConfigs(in, out));
  // The tokenizer, chat template, generation config, ...: every other plain file.
  for (const fs::directory_entry& entry : fs::directory_iterator(in, error)) {
    const std::string file = entry.path().filename().string();
    if (!entry.is_regular_file(error) || absl::EndsWith(file, ".safetensors") ||
        file == "model.safetensors.index.json" || file == "config.json") {
      continue;
    }
    fs::copy_file(entry.path(), out / file, error);
    if (error) {
      return absl::InternalError(PrintableText(
          absl::StrCat("cannot copy ", entry.path().string(), ": ", error.message())));
    }
  }
  QuantizeCheckpointResult result;
  result.quantized_layers = quantized_;
  result.input_scales = input_scales_;
  result.narrow_layers = static_cast<int>(kept_narrow_.size());
  result.input_bytes = checkpoint_.total_bytes();
  result.output_bytes = total_size;
  return result;
}

}  // namespace

absl::StatusOr<QuantizedFormat> ParseQuantizedFormat(absl::string_view name) {
  if (name == "nvfp4") return QuantizedFormat::kNvfp4;
  if (name == "fp8") return QuantizedFormat::kFp8;
  return absl::InvalidArgumentError(
      PrintableText(absl::StrCat("--format ", name, ": expected nvfp4 or fp8")));
}

absl::StatusOr<QuantizeCheckpointResult> QuantizeCheckpoint(const Options& options) {
  const Format format = options.format;
  const fs::path in(options.input), out(options.output);
  std::error_code error;
  if (!fs::is_directory(in, error)) {
    return absl::NotFoundError(PrintableText(
        absl::StrCat(options.input, " is not a directory; name a bf16 checkpoint's directory")));
  }
  if (!fs::exists(in / "config.json", error)) {
    return absl::NotFoundError(
        PrintableText(absl::StrCat(options.input, " has no config.json; is it a checkpoint?")));
  }
  SPARK_ASSIGN_OR_RETURN(const Json config, ReadJson(in / "config.json"));
  const Json* text = config.contains("text_config") ? &config["text_config"] : &config;
  if (config.contains("quantization_config") || text->contains("quantization_config") ||
      fs::exists(in / "hf_quant_config.json", error)) {
    return absl::InvalidArgumentError(PrintableText(
        absl::StrCat(options.input, " is already quantized (its config has a "
                                    "quantization_config or it has hf_quant_config.json); "
                                    "spark-quantize takes a bf16 checkpoint")));
  }
  if (fs::exists(out, error)) {
    if (fs::equivalent(in, out, error)) {
      return absl::InvalidArgumentError("the output directory is the input directory");
    }
    if (!fs::is_directory(out, error) || !fs::is_empty(out, error)) {
      return absl::AlreadyExistsError(PrintableText(
          absl::StrCat(options.output, " exists and is not an empty directory; name a new one")));
    }
  }
  for (const std::string& pattern : options.exclude) {
    if (pattern.empty()) return absl::InvalidArgumentError("--exclude: an empty pattern");
  }
  SPARK_ASSIGN_OR_RETURN(const std::unique_ptr<Checkpoint> checkpoint,
                         Checkpoint::Open(options.input));
  const bool created = !fs::exists(out, error);
  fs::create_directories(out, error);
  if (error) {
    return absl::InternalError(PrintableText(
        absl::StrCat("cannot create ", options.output, ": ", error.message())));
  }
  Quantizer quantizer(options, format, *checkpoint);
  absl::StatusOr<QuantizeCheckpointResult> result;
  try {
    result = quantizer.Run();
  } catch (const std::exception& e) {  // std::thread, nlohmann-json, std::filesystem
    result = absl::InternalError(PrintableText(absl::StrCat("quantizing failed: ", e.what())));
  }
  if (!result.ok()) {
    // Nothing half-written stays behind: the directory was new or empty.
    for (const fs::directory_entry& entry : fs::directory_iterator(out, error)) {
      fs::remove_all(entry.path(), error);
    }
    if (created) fs::remove(out, error);
  }
  return result;
}

}  // namespace rt
}  // namespace spark


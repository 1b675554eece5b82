// spark-run: runs a compiled Spark model (design.md). A thin main over the runtime library:
// every failure is an absl::Status, printed with ToString() on stderr, exit code 1.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <set>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "spark/runtime/artifact.h"
#include "spark/runtime/chat_template.h"
#include "spark/runtime/cuda_executor.h"
#include "spark/runtime/device.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/generator.h"
#include "spark/runtime/host_executor.h"
#include "spark/runtime/memory_estimator.h"
#include "spark/runtime/module_resolver.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/safetensors.h"
#include "spark/runtime/sampler.h"
#include "spark/runtime/step_profile.h"
#include "spark/runtime/tokenizer.h"

ABSL_FLAG(std::string, weights, "", "checkpoint directory or .safetensors file");
ABSL_FLAG(std::string, prompt_ids, "", "comma-separated prompt token ids, e.g. 2,818,5192");
ABSL_FLAG(std::string, prompt, "", "prompt text, tokenized as it is (no chat template)");
ABSL_FLAG(std::string, chat, "", "a user message, rendered with the checkpoint's chat template");
ABSL_FLAG(std::string, system, "", "with --chat: a system message before the user's");
ABSL_FLAG(bool, enable_thinking, false, "with --chat: enable_thinking for the chat template");
ABSL_FLAG(std::string, tokenizer, "",
          "directory with tokenizer.json, tokenizer_config.json, chat_template.jinja and "
          "generation_config.json, or a tokenizer.json file; default: the --weights directory");
ABSL_FLAG(int64_t, max_new_tokens, 32, "tokens to generate at most");
ABSL_FLAG(std::string, device, "auto", "auto, cuda or host");
ABSL_FLAG(int64_t, max_length, 0,
          "tokens per sequence (prompt + output) to allocate for; 0: min(4096, the model's "
          "max_position_embeddings)");
ABSL_FLAG(double, device_memory_utilization, 0.9, "fraction of the memory pool the model may use");
ABSL_FLAG(double, temperature, 0.0, "sampling temperature; 0: greedy");
ABSL_FLAG(int32_t, top_k, 0, "sample from the k most likely tokens; 0: all");
ABSL_FLAG(double, top_p, 1.0, "sample from the smallest set of tokens holding this probability");
ABSL_FLAG(uint64_t, seed, 0, "random seed for sampling");
ABSL_FLAG(std::string, soft_tokens, "",
          "safetensors file with 'embeddings' F32 [n, hidden] and 'positions' I64 [n]");
ABSL_FLAG(std::string, logits_out, "",
          "write the logits of every processed position to this safetensors file");
ABSL_FLAG(std::string, dump, "", "write every step's outputs to DIR/runNNN.safetensors");
ABSL_FLAG(bool, profile, false,
          "time every step (no CUDA graph) and print per-op time, GB/s and TFLOP/s");
ABSL_FLAG(bool, json, false, "print one JSON object (ids, timings, memory) on stdout");
ABSL_FLAG(bool, v, false, "verbose: every resolution decision, the memory table");
ABSL_FLAG(std::vector<std::string>, module_path, {},
          "directories searched first for the model image (repeatable, or a comma list)");
ABSL_FLAG(bool, explain_resolution, false, "explain which image would be loaded, and exit");
ABSL_FLAG(std::string, device_cc, "", "compute capability for --explain-resolution, e.g. 12.1");
ABSL_FLAG(bool, estimate, false, "print the memory estimate, and exit");
ABSL_FLAG(std::string, device_profile, "auto", "device for --estimate: a profile name or auto");
ABSL_FLAG(bool, list_devices, false, "list the CUDA devices, and exit");

namespace spark {
namespace rt {
namespace {

// --json output, through nlohmann-json; objects keep the order the fields are written in.
using Json = nlohmann::ordered_json;
void Put(Json& object, const std::string& key, Json value) { object[key] = std::move(value); }

constexpr char kUsage[] = R"(spark-run: runs a model compiled by spark-compile.

usage:
  spark-run MODEL.cubin --weights CHECKPOINT --prompt-ids 2,818,5192 [options]
  spark-run MODEL.cubin --weights CHECKPOINT [--tokenizer DIR] --prompt "raw text" [options]
  spark-run MODEL.cubin --weights CHECKPOINT [--tokenizer DIR] --chat "message" [--system "..."]
            [--enable-thinking] [--stop STRING]... [options]
  spark-run MODEL.cubin --explain-resolution [--device-cc 12.1] [--module-path DIR]
  spark-run MODEL.cubin --estimate [--device-profile NAME|auto] [--max-length N]
  spark-run --list-devices

generation:
  --weights PATH                 checkpoint directory or .safetensors file (required)
  --prompt-ids IDS               comma-separated prompt token ids
  --prompt TEXT                  prompt text, tokenized as it is (the tokenizer's post-processor
                                 adds <bos> if it says so; no chat template); text streams out
  --chat TEXT                    one user message, rendered with the checkpoint's chat template
                                 (add_generation_prompt); the answer streams out as text
  --system TEXT                  with --chat: a system message first
  --enable-thinking              with --chat: enable_thinking = true for the template
  --tokenizer PATH               tokenizer directory (tokenizer.json, tokenizer_config.json,
                                 chat_template.jinja, generation_config.json) or tokenizer.json
                                 file (default: the --weights directory)
  --stop STRING                  with --prompt/--chat: stop when the text ends with STRING (not
                                 printed; repeatable). Generation also stops at the ids of
                                 generation_config.json's eos_token_id
                                 (exactly one of --prompt-ids, --prompt, --chat is required)
  --max-new-tokens N             tokens to generate at most (default 32); stops at an EOS token
  --device auto|cuda|host        auto (default): the GPU when the driver loads, a device exists
                                 and an image fits it; otherwise the host, saying why
  --max-length N                 tokens per sequence, prompt + output (default: the smaller of
                                 4096 and the model's max_position_embeddings)
  --device-memory-utilization F  fraction of the memory pool the model may use (default 0.9)
  --temperature T                sampling temperature (default 0: greedy; with --prompt/--chat,
                                 generation_config.json's when it has one)
  --top-k K                      sample among the K most likely tokens (default 0: all; with
                                 --prompt/--chat, generation_config.json's)
  --top-p P                      nucleus sampling threshold (default 1: off; with
                                 --prompt/--chat, generation_config.json's)
  --seed S                       sampling seed (default 0)
  --soft-tokens FILE             safetensors file: 'embeddings' F32 [n, hidden] and 'positions'
                                 I64 [n] (prompt positions they replace; others are skipped)
  --logits-out FILE              safetensors file: 'logits' F32 [prompt + generated - 1, vocab]
  --dump DIR                     every step's outputs, DIR/runNNN.safetensors per executor call
  --profile                      time every step on its own (CUDA events; decode then runs
                                 without its CUDA graph, so tokens/s is lower) and print, per op,
                                 launches, ms per call, share, modelled MB moved, GB/s, TFLOP/s
  --json                         print {"ids", ["text"], "timings", "memory", ["profile"]} as
                                 JSON on stdout (instead of the streamed text or the ids)
  -v                             print every resolution decision and the memory table
  --module-path DIR              searched first for the image (repeatable, or a comma list)

other modes:
  --explain-resolution           print the module resolution decisions and exit
  --device-cc M.m                compute capability to resolve for (default: CUDA device 0)
  --estimate                     print the memory estimate and exit (exit 1 if it does not fit)
  --device-profile NAME|auto     device to estimate for: dgx-spark, h200, h100, a100-80gb,
                                 rtx-5090, rtx-4090, l4, or auto (CUDA device 0, else the host)
  --list-devices                 list the CUDA devices and exit

Output: with --prompt-ids, the generated ids on stdout, space-separated on one line; with
--prompt or --chat, the generated text, streamed as it is generated (the stopping token and stop
string not included). Decisions, the memory estimate and tokens/s on stderr. Flags may be written with - or _ (--max-new-tokens, --max_new_tokens).
)";

// ---- command line ----

// absl flag names cannot contain '-': rewrites --max-new-tokens to --max_new_tokens, merges
// repeated --module-path flags into one comma list, and takes out the --stop strings.
// The flags the command line names (as absl spells them: max_new_tokens), so that the defaults of
// generation_config.json apply only to the others.
std::set<std::string>& SeenFlags() {
  static std::set<std::string>* const seen = new std::set<std::string>();
  return *seen;
}

// --stop values, collected here (not by absl: a stop string may hold a comma).
std::vector<std::string>& StopStrings() {
  static std::vector<std::string>* const stops = new std::vector<std::string>();
  return *stops;
}

std::vector<std::string> NormalizeArgs(int argc, char** argv) {
  std::vector<std::string> out = {argv[0]};
  std::vector<std::string> module_paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      for (; i < argc; ++i) out.push_back(argv[i]);
      break;
    }
    const size_t begin = arg.find_first_not_of('-');
    if (begin == 0 || begin > 2 || begin == std::string::npos || !absl::ascii_isalpha(arg[begin])) {
      out.push_back(arg);  // a value (e.g. -1), a positional argument, or not a flag
      continue;
    }
    const size_t eq = arg.find('=');
    std::string name = arg.substr(begin, eq == std::string::npos ? std::string::npos : eq - begin);
    std::replace(name.begin(), name.end(), '-', '_');
    SeenFlags().insert(name);
    if (name == "stop") {
      if (eq != std::string::npos) {
        StopStrings().push_back(arg.substr(eq + 1));
        continue;
      }
      if (i + 1 < argc) {
        StopStrings().push_back(argv[++i]);
        continue;
      }
    }
    if (name == "module_path") {
      if (eq != std::string::npos) {
        module_paths.push_back(arg.substr(eq + 1));
        continue;
      }
      if (i + 1 < argc) {
        module_paths.push_back(argv[++i]);
        continue;
      }
    }
    out.push_back(absl::StrCat("--", name, eq == std::string::npos ? "" : arg.substr(eq)));
  }
  if (!module_paths.empty()) {
    out.push_back(absl::StrCat("--module_path=", absl::StrJoin(module_paths, ",")));
  }
  return out;
}

bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "-h") return true;
    if (arg == "--") break;
  }
  return false;
}

enum class DeviceMode { kAuto, kCuda, kHost };

absl::StatusOr<DeviceMode> ParseDeviceMode(absl::string_view text) {
  if (text == "auto") return DeviceMode::kAuto;
  if (text == "cuda") return DeviceMode::kCuda;
  if (text == "host") return DeviceMode::kHost;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --device '", text, "' (expected auto, cuda or host)"));
}

absl::StatusOr<std::pair<int, int>> ParseComputeCapability(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
  int major = 0, minor = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &major) ||
      !absl::SimpleAtoi(parts[1], &minor) || major < 1 || minor < 0 || minor > 9) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad --device-cc '", text, "': expected MAJOR.MINOR, e.g. 12.1 or 9.0"));
  }
  return std::make_pair(major, minor);
}

void Note(absl::string_view text) {
  std::fprintf(stderr, "spark-run: %.*s\n", static_cast<int>(text.size()), text.data());
}

// The install prefix is where the binary lives: <prefix>/bin/spark-run.
std::string InstallPrefix() {
  char path[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "";
  std::string exe(path, n);
  for (int up = 0; up < 2; ++up) {
    const size_t slash = exe.rfind('/');
    if (slash == std::string::npos) return "";
    exe.resize(slash);
  }
  return exe.empty() ? "/" : exe;
}

ResolveRequest MakeResolveRequest(const std::string& model, int cc_major, int cc_minor) {
  ResolveRequest request;
  request.artifact_path = model;
  request.cc_major = cc_major;
  request.cc_minor = cc_minor;
  request.module_path = absl::GetFlag(FLAGS_module_path);
  const char* env = std::getenv("SPARK_MODULE_PATH");
  request.env_module_path = env == nullptr ? "" : env;
  request.install_prefix = InstallPrefix();
  return request;
}

absl::StatusOr<DeviceInfo> FirstDevice() {
  absl::StatusOr<std::vector<DeviceInfo>> devices = ListDevices();
  if (!devices.ok()) return devices.status();
  return devices->front();  // ListDevices fails rather than return no device
}

// ---- --list-devices ----

absl::Status ListDevicesCommand() {
  absl::StatusOr<std::vector<DeviceInfo>> devices = ListDevices();
  if (!devices.ok()) return devices.status();
  for (const DeviceInfo& d : *devices) {
    std::printf("cuda:%d  %s  cc %d.%d  %s  %s total, %s free  %d SMs\n", d.ordinal, d.name.c_str(),
                d.cc_major, d.cc_minor, d.integrated ? "integrated" : "discrete",
                FormatBytes(d.total_bytes).c_str(), FormatBytes(d.free_bytes).c_str(),
                d.multiprocessors);
  }
  return absl::OkStatus();
}

// ---- --explain-resolution ----

absl::Status ExplainCommand(const std::string& model) {
  std::pair<int, int> cc;
  const std::string cc_flag = absl::GetFlag(FLAGS_device_cc);
  if (!cc_flag.empty()) {
    absl::StatusOr<std::pair<int, int>> parsed = ParseComputeCapability(cc_flag);
    if (!parsed.ok()) return parsed.status();
    cc = *parsed;
  } else {
    absl::StatusOr<DeviceInfo> device = FirstDevice();
    if (!device.ok()) {
      return absl::Status(device.status().code(),
                          absl::StrCat(device.status().message(),
                                       " (give --device-cc M.m to resolve without a device)"));
    }
    cc = {device->cc_major, device->cc_minor};
  }
  absl::StatusOr<Resolution> resolution =
      ResolveModule(MakeResolveRequest(model, cc.first, cc.second));
  if (!resolution.ok()) return resolution.status();
  std::printf("%s\n", ExplainResolution(*resolution).c_str());
  return absl::OkStatus();
}

// ---- memory ----

// The host as an estimator device: its memory is the pool (like an integrated GPU's).
absl::StatusOr<DeviceMemory> HostMemory() {
  DeviceInfo host;
  host.name = "host";
  host.integrated = true;
  absl::StatusOr<DeviceMemory> memory = MeasureDeviceMemory(host);
  if (memory.ok()) memory->source = "host memory (--device host)";
  return memory;
}

absl::StatusOr<MemoryEstimate> EstimateMemory(const Plan& plan, const DeviceMemory& device,
                                              int64_t max_length) {
  EstimateOptions options;
  options.max_length = max_length;
  options.utilization = absl::GetFlag(FLAGS_device_memory_utilization);
  return Estimate(SizesFromPlan(plan), device, options);
}

void PrintEstimate(const MemoryEstimate& estimate, FILE* out) {
  const std::string text =
      absl::GetFlag(FLAGS_v) ? FormatEstimateTable(estimate) : FormatEstimateLine(estimate);
  std::fprintf(out, "%s\n", text.c_str());
}

// --device-profile: a named profile, or auto (CUDA device 0, else the host).
absl::StatusOr<DeviceMemory> EstimateTarget() {
  const std::string profile = absl::GetFlag(FLAGS_device_profile);
  if (profile != "auto") return DeviceProfile(profile);
  absl::StatusOr<DeviceInfo> device = FirstDevice();
  if (device.ok()) return MeasureDeviceMemory(*device);
  Note(absl::StrCat("estimating for the host: ", device.status().message()));
  return HostMemory();
}

absl::Status EstimateCommand(const std::string& model) {
  absl::StatusOr<Artifact> artifact = LoadArtifact(model);
  if (!artifact.ok()) return artifact.status();
  absl::StatusOr<int64_t> max_length =
      ResolveMaxLength(artifact->plan.model, absl::GetFlag(FLAGS_max_length));
  if (!max_length.ok()) return max_length.status();
  absl::StatusOr<DeviceMemory> device = EstimateTarget();
  if (!device.ok()) return device.status();
  absl::StatusOr<MemoryEstimate> estimate = EstimateMemory(artifact->plan, *device, *max_length);
  if (!estimate.ok()) return estimate.status();
  std::printf("%s\n", FormatEstimateTable(*estimate).c_str());
  return CheckFits(*estimate);
}

// ---- generation ----

// Text in and out (--prompt, --chat): the checkpoint's tokenizer, and what stops the stream.
struct TextIo {
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<std::string> stop_strings;
};

struct RunOptions {
  DeviceMode mode = DeviceMode::kAuto;
  std::vector<int32_t> prompt;
  GenerateOptions generate;
  std::string weights;
  absl::optional<TextIo> text;  // with --prompt / --chat
};

bool SpecifiedOnCommandLine(absl::string_view flag) {
  return SeenFlags().count(std::string(flag)) > 0;
}

// The directory of the tokenizer files: --tokenizer (a directory, or the one of a tokenizer.json
// file), else the --weights directory (or the one of a .safetensors file).
std::string TokenizerDirectory(const std::string& flag, const std::string& weights) {
  const std::string path = flag.empty() ? weights : flag;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return path;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

// generation_config.json of the tokenizer directory, when there is one: its eos_token_id (an id
// or a list) stops the generation, and its sampling settings are the defaults of the flags not
// given (do_sample false: greedy).
absl::Status ApplyGenerationConfig(const std::string& dir, GenerateOptions* generate) {
  const std::string path = dir + "/generation_config.json";
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return absl::OkStatus();  // optional
  std::string text;
  char buffer[1 << 14];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0 && text.size() < (1 << 20)) {
    text.append(buffer, n);
  }
  std::fclose(file);
  const Json config = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        PrintableText(absl::StrCat(path, ": not a JSON object (expected the checkpoint's "
                                         "generation_config.json)")));
  }
  // Every key is honoured, or has no effect on the tokens generated; any other setting (e.g.
  // repetition_penalty, min_p) is refused rather than silently ignored.
  static constexpr const char* kHonoured[] = {"eos_token_id", "temperature", "top_k", "top_p",
                                              "do_sample"};
  static constexpr const char* kNoEffect[] = {
      "bos_token_id", "pad_token_id", "transformers_version", "_from_model_config", "use_cache",
      "cache_implementation", "output_attentions", "output_hidden_states", "output_scores",
      "output_logits", "return_dict_in_generate"};
  for (const auto& item : config.items()) {
    const auto named = [&](const auto& keys) {
      return std::any_of(std::begin(keys), std::end(keys),
                         [&](const char* key) { return item.key() == key; });
    };
    if (named(kHonoured) || named(kNoEffect) || item.value().is_null()) continue;
    return absl::InvalidArgumentError(PrintableText(absl::StrCat(
        path, ": sets ", item.key(), " = ", item.value().dump(),
        ", which spark-run does not implement (it honours eos_token_id, temperature, top_k, "
        "top_p and do_sample); remove the setting to generate without it, or use --prompt-ids")));
  }
  const auto eos = config.find("eos_token_id");
  if (eos != config.end()) {
    const Json ids = eos->is_array() ? *eos : Json::array({*eos});
    for (const Json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return absl::InvalidArgumentError(PrintableText(
            absl::StrCat(path, ": eos_token_id must be a token id or a list of them, found ",
                         eos->dump())));
      }
      generate->stop_token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  const auto number = [&](const char* key, double* out) {
    const auto it = config.find(key);
    if (it != config.end() && it->is_number()) *out = it->get<double>();
  };
  double temperature = generate->sampler.temperature, top_p = generate->sampler.top_p;
  double top_k = generate->sampler.top_k;
  number("temperature", &temperature);
  number("top_p", &top_p);
  number("top_k", &top_k);
  const auto do_sample = config.find("do_sample");
  if (do_sample != config.end() && do_sample->is_boolean() && !do_sample->get<bool>()) {
    temperature = 0.0;  // transformers: greedy whatever the temperature
  }
  if (!SpecifiedOnCommandLine("temperature")) generate->sampler.temperature = static_cast<float>(temperature);
  if (!SpecifiedOnCommandLine("top_p")) generate->sampler.top_p = static_cast<float>(top_p);
  if (!SpecifiedOnCommandLine("top_k") && top_k >= 0 && top_k <= INT32_MAX) {
    generate->sampler.top_k = static_cast<int32_t>(top_k);
  }
  return absl::OkStatus();
}

// --prompt / --chat: the tokenizer and the prompt's ids.
absl::Status ReadTextPrompt(RunOptions* options) {
  const std::string flag = absl::GetFlag(FLAGS_tokenizer);
  const std::string dir = TokenizerDirectory(flag, options->weights);
  const std::string where = flag.empty() ? absl::StrCat(" (the --weights directory ", dir,
                                                        "; name another with --tokenizer DIR)")
                                         : std::string();
  TextIo text;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::Load(flag.empty() ? dir : flag);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat("cannot load the tokenizer", where, ": ",
                                     tokenizer.status().message()));
  }
  text.tokenizer = *std::move(tokenizer);
  absl::StatusOr<std::vector<int32_t>> ids;
  if (!absl::GetFlag(FLAGS_prompt).empty()) {
    // As HF encodes a raw prompt: the post-processor adds what the tokenizer says (Gemma: <bos>).
    ids = text.tokenizer->Encode(absl::GetFlag(FLAGS_prompt), /*add_special_tokens=*/true);
  } else {
    absl::StatusOr<ChatTemplate> chat = ChatTemplate::Load(dir);
    if (!chat.ok()) {
      return absl::Status(chat.status().code(), absl::StrCat("--chat needs the checkpoint's chat "
                                                             "template", where, ": ",
                                                             chat.status().message()));
    }
    Json messages = Json::array();
    if (SpecifiedOnCommandLine("system")) {  // an empty --system "" is an empty system turn
      messages.push_back(Json::object({{"role", "system"}, {"content", absl::GetFlag(FLAGS_system)}}));
    }
    messages.push_back(Json::object({{"role", "user"}, {"content", absl::GetFlag(FLAGS_chat)}}));
    Json context = Json::object();
    Put(context, "messages", std::move(messages));
    Put(context, "add_generation_prompt", Json(true));
    Put(context, "enable_thinking", Json(absl::GetFlag(FLAGS_enable_thinking)));
    absl::StatusOr<std::string> rendered = chat->Render(context);
    if (!rendered.ok()) return rendered.status();
    // The template writes the special tokens (<bos>, <|turn>) itself: none are added.
    ids = text.tokenizer->Encode(*rendered, /*add_special_tokens=*/false);
  }
  if (!ids.ok()) return ids.status();
  options->prompt = *std::move(ids);
  const absl::Status config = ApplyGenerationConfig(dir, &options->generate);
  if (!config.ok()) return config;
  text.stop_strings = StopStrings();
  for (const std::string& stop : text.stop_strings) {
    if (stop.empty()) return absl::InvalidArgumentError("--stop: the stop string is empty");
  }
  options->text = std::move(text);
  return absl::OkStatus();
}

absl::StatusOr<RunOptions> ReadRunOptions() {
  RunOptions options;
  absl::StatusOr<DeviceMode> mode = ParseDeviceMode(absl::GetFlag(FLAGS_device));
  if (!mode.ok()) return mode.status();
  options.mode = *mode;
  const bool ids_mode = !absl::GetFlag(FLAGS_prompt_ids).empty();
  const bool prompt_mode = SpecifiedOnCommandLine("prompt");
  const bool chat_mode = SpecifiedOnCommandLine("chat");
  if (ids_mode + prompt_mode + chat_mode != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        ids_mode + prompt_mode + chat_mode == 0 ? "no prompt given" : "more than one prompt given",
        ": exactly one of --prompt-ids IDS (e.g. 2,818,5192), --prompt TEXT or --chat TEXT is "
        "required"));
  }
  if (!chat_mode && (SpecifiedOnCommandLine("system") || absl::GetFlag(FLAGS_enable_thinking))) {
    return absl::InvalidArgumentError("--system and --enable-thinking need --chat");
  }
  if (ids_mode && (!StopStrings().empty() || SpecifiedOnCommandLine("tokenizer"))) {
    return absl::InvalidArgumentError(
        "--stop and --tokenizer need --prompt or --chat (with --prompt-ids, ids go in and out)");
  }
  if ((prompt_mode && absl::GetFlag(FLAGS_prompt).empty()) ||
      (chat_mode && absl::GetFlag(FLAGS_chat).empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat(prompt_mode ? "--prompt" : "--chat", ": the text is empty"));
  }
  options.generate.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  options.generate.sampler.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  options.generate.sampler.top_k = absl::GetFlag(FLAGS_top_k);
  options.generate.sampler.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  options.generate.sampler.seed = absl::GetFlag(FLAGS_seed);
  options.generate.collect_logits = !absl::GetFlag(FLAGS_logits_out).empty();
  options.weights = absl::GetFlag(FLAGS_weights);
  if (options.weights.empty()) {
    return absl::InvalidArgumentError(
        "--weights is required (a checkpoint directory or .safetensors file)");
  }
  if (ids_mode) {
    absl::StatusOr<std::vector<int32_t>> ids = ParseTokenIds(absl::GetFlag(FLAGS_prompt_ids));
    if (!ids.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--prompt-ids: ", ids.status().message()));
    }
    options.prompt = *std::move(ids);
  } else {
    const absl::Status text = ReadTextPrompt(&options);
    if (!text.ok()) return text;
  }
  const absl::Status sampler = ValidateSamplerOptions(options.generate.sampler);
  if (!sampler.ok()) return sampler;
  return options;
}

// Streams generated text to stdout: each id's text as soon as it is complete UTF-8, holding back
// what could still become a stop string; the stopping id and the stop string are not printed.
class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings,
             std::vector<int32_t> stop_ids, bool print)
      : detokenizer_(tokenizer, /*skip_special_tokens=*/true),
        stop_strings_(std::move(stop_strings)), stop_ids_(std::move(stop_ids)), print_(print) {
    for (const std::string& stop : stop_strings_) hold_ = std::max(hold_, stop.size() - 1);
  }

  // The generator's on_token: false once a stop string has appeared.
  bool OnToken(int32_t id) {
    if (std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) return true;
    absl::StatusOr<std::string> piece = detokenizer_.Push(id);
    if (!piece.ok()) {
      error_ = piece.status();
      return false;
    }
    return Add(*piece);
  }

  // Ends the stream (after the generation): what was held back.
  void Finish() {
    if (!stopped_) Add(detokenizer_.Finish());
    if (!stopped_) Emit(pending_.size());
    if (print_) {
      std::fputc('\n', stdout);
      std::fflush(stdout);
    }
  }

  const std::string& text() const { return text_; }
  const absl::Status& error() const { return error_; }

 private:
  bool Add(const std::string& piece) {
    if (stopped_) return false;
    pending_ += piece;
    for (const std::string& stop : stop_strings_) {
      const size_t at = pending_.find(stop);
      if (at != std::string::npos) {
        Emit(at);
        stopped_ = true;
        return false;
      }
    }
    // Keep the last hold_ bytes (a stop string may still end there), and never split a UTF-8
    // character between what is printed and what is kept.
    size_t ready = pending_.size() > hold_ ? pending_.size() - hold_ : 0;
    while (ready > 0 && ready < pending_.size() &&
           (static_cast<unsigned char>(pending_[ready]) & 0xC0) == 0x80) {
      --ready;
    }
    Emit(ready);
    return true;
  }

  void Emit(size_t bytes) {
    if (bytes == 0) return;
    const std::string out = pending_.substr(0, bytes);
    pending_.erase(0, bytes);
    text_ += out;
    if (print_) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      std::fflush(stdout);
    }
  }

  StreamingDetokenizer detokenizer_;
  std::vector<std::string> stop_strings_;
  std::vector<int32_t> stop_ids_;
  bool print_;
  size_t hold_ = 0;
  std::string pending_;
  std::string text_;
  bool stopped_ = false;
  absl::Status error_;
};

// Where the model runs: a CUDA device with the image the resolver chose, or the host.
struct Placement {
  bool cuda = false;
  DeviceInfo device;
  std::unique_ptr<Resolution> resolution;
};

absl::StatusOr<Placement> FindGpu(const std::string& model) {
  absl::StatusOr<DeviceInfo> device = FirstDevice();
  if (!device.ok()) return device.status();
  absl::StatusOr<Resolution> resolution =
      ResolveModule(MakeResolveRequest(model, device->cc_major, device->cc_minor));
  if (!resolution.ok()) return resolution.status();
  Placement placement;
  placement.cuda = true;
  placement.device = *device;
  placement.resolution = std::make_unique<Resolution>(*std::move(resolution));
  return placement;
}

absl::StatusOr<Placement> Place(DeviceMode mode, const std::string& model) {
  if (mode == DeviceMode::kHost) return Placement();
  absl::StatusOr<Placement> gpu = FindGpu(model);
  if (gpu.ok() || mode == DeviceMode::kCuda) return gpu;
  Note(absl::StrCat("running on the host: ", gpu.status().ToString()));
  return Placement();
}

void ReportPlacement(const Placement& placement, const Artifact& artifact) {
  if (!placement.cuda) {
    Note(absl::StrCat("device: host reference executor; image ", artifact.path, " (plan only)"));
    return;
  }
  const Resolution& r = *placement.resolution;
  const DeviceInfo& d = placement.device;
  Note(absl::StrCat("device: cuda:", d.ordinal, " ", d.name, " (cc ", d.cc_major, ".", d.cc_minor,
                    d.integrated ? ", integrated" : "", "); image ", r.artifact.path, " (",
                    r.artifact.target, ", ", ImageKindName(r.kind), ")"));
  const std::string note = FallbackNote(r);
  if (!note.empty()) Note(note);
  if (absl::GetFlag(FLAGS_v)) std::fprintf(stderr, "%s\n", ExplainResolution(r).c_str());
}

// The image's number formats, when it departs from the default (f32 activations and KV caches).
void ReportPrecision(const Plan& plan) {
  bool bf16_cache = false;
  for (const KvCacheInfo& cache : plan.kv_caches) bf16_cache |= cache.dtype == DType::kBF16;
  if (plan.activation_precision != DType::kBF16 && !bf16_cache) return;
  Note(absl::StrCat("precision: weights bf16, activations ",
                    plan.activation_precision == DType::kBF16 ? "bf16 (rounded, in f32 buffers)"
                                                              : "f32",
                    ", KV cache ", bf16_cache ? "bf16" : "f32"));
}

// Weight upload progress, drawn on a terminal only.
void ShowProgress(uint64_t done, uint64_t total) {
  static int last_percent = -1;
  const int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
  if (percent == last_percent) return;
  last_percent = percent;
  std::fprintf(stderr, "\rspark-run: loading weights %3d%% (%s of %s)%s", percent,
               FormatBytes(done).c_str(), FormatBytes(total).c_str(), percent == 100 ? "\n" : "");
}

absl::StatusOr<std::unique_ptr<Executor>> MakeExecutor(const Placement& placement,
                                                       const Artifact& artifact,
                                                       const Checkpoint& checkpoint) {
  if (!placement.cuda) {
    absl::StatusOr<std::vector<WeightData>> weights = BindWeights(artifact.plan, checkpoint);
    if (!weights.ok()) return weights.status();
    return CreateHostExecutor(artifact.plan, *std::move(weights));
  }
  CudaExecutorOptions options;
  options.device = placement.device;
  options.on_notice = Note;
  if (isatty(STDERR_FILENO)) options.on_progress = ShowProgress;
  return CreateCudaExecutor(placement.resolution->artifact, checkpoint, options);
}

absl::Status MakeDirectory(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) {
    struct stat info;
    if (stat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--dump ", dir, ": cannot create the directory (", std::strerror(errno), ")"));
}

Json TimingsJson(const GenerateResult& result) {
  Json timings = Json::object();
  Put(timings, "prefill_tokens", Json(result.prefill_tokens));
  Put(timings, "prefill_seconds", Json(result.prefill_seconds));
  Put(timings, "prefill_tokens_per_second", Json(result.prefill_tokens_per_second()));
  Put(timings, "decode_tokens", Json(result.decode_tokens));
  Put(timings, "decode_seconds", Json(result.decode_seconds));
  Put(timings, "decode_tokens_per_second", Json(result.decode_tokens_per_second()));
  return timings;
}

Json MeasuredJson(const MemoryEstimate& estimate, const MemoryUsage& usage) {
  const MemoryComparison comparison = CompareWithUsage(estimate, usage);
  Json measured = Json::object();
  Put(measured, "peak_allocated_bytes", Json(static_cast<int64_t>(usage.peak_allocated_bytes)));
  Put(measured, "estimated_allocations_bytes",
               Json(static_cast<int64_t>(comparison.estimated_allocations)));
  Put(measured, "weight_bytes", Json(static_cast<int64_t>(usage.weight_bytes)));
  Put(measured, "registered_bytes", Json(static_cast<int64_t>(usage.registered_bytes)));
  Put(measured, "driver_used_bytes", Json(static_cast<int64_t>(usage.driver_used_bytes)));
  Put(measured, "estimated_driver_bytes",
               Json(static_cast<int64_t>(comparison.estimated_driver)));
  return measured;
}

Json MemoryJson(const MemoryEstimate& estimate, const MemoryUsage& usage) {
  Json memory = Json::object();
  Json components = Json::object();
  for (const MemoryComponent& c : estimate.components) Put(components, c.name, Json(c.bytes));
  Put(memory, "components", std::move(components));
  Put(memory, "total_bytes", Json(static_cast<int64_t>(estimate.total)));
  Put(memory, "available_bytes", Json(static_cast<int64_t>(estimate.budget.bytes)));
  Put(memory, "available_source", Json(estimate.budget.source));
  Put(memory, "fits", Json(estimate.fits));
  Put(memory, "measured", MeasuredJson(estimate, usage));
  return memory;
}

Json OpTimingsJson(const Plan& plan, const std::vector<StepTiming>& steps) {
  Json ops = Json::array();
  for (const OpTiming& op : SumByOp(plan, steps)) {
    Json row = Json::object();
    Put(row, "op", Json(op.op));
    Put(row, "launches", Json(op.timing.launches));
    Put(row, "seconds", Json(op.timing.seconds));
    Put(row, "weight_bytes", Json(op.timing.cost.weight_bytes));
    Put(row, "kv_bytes", Json(op.timing.cost.kv_bytes));
    Put(row, "activation_bytes", Json(op.timing.cost.activation_bytes));
    Put(row, "flops", Json(op.timing.cost.flops));
    ops.push_back(std::move(row));
  }
  return ops;
}

Json ProfileJson(const RunProfile& profile) {
  const Plan& plan = profile.plan();
  Json out = Json::object();
  Put(out, "decode_calls", Json(profile.decode_calls()));
  Put(out, "decode", OpTimingsJson(plan, profile.decode()));
  Put(out, "prefill_calls", Json(profile.prefill_calls()));
  Put(out, "prefill_tokens", Json(profile.prefill_tokens()));
  Put(out, "prefill", OpTimingsJson(plan, profile.prefill()));
  return out;
}

void PrintResult(const GenerateResult& result, const Executor& executor, bool cuda,
                 const MemoryEstimate& estimate, const TextStream* text) {
  for (const std::string& notice : result.notices) Note(notice);
  Note(absl::StrFormat("prefill: %d tokens in %.3f s (%.1f tokens/s)", result.prefill_tokens,
                       result.prefill_seconds, result.prefill_tokens_per_second()));
  Note(absl::StrFormat("decode: %d tokens in %.3f s (%.1f tokens/s)%s", result.decode_tokens,
                       result.decode_seconds, result.decode_tokens_per_second(),
                       result.stopped_at_eos      ? "; stopped at EOS"
                       : result.stopped_by_caller ? "; stopped at a stop string"
                                                  : ""));
  if (absl::GetFlag(FLAGS_v)) {
    Note(FormatMemoryComparison(CompareWithUsage(estimate, executor.memory_usage())));
  }
  const RunProfile* profile = executor.profile();
  if (profile != nullptr) {
    std::fputs(FormatProfile(*profile,
                             cuda ? "CUDA events around each launch, no graph"
                                  : "host wall clock per step")
                   .c_str(),
               stderr);
  }
  if (!absl::GetFlag(FLAGS_json)) {
    // Text was streamed as it was generated.
    if (text == nullptr) std::printf("%s\n", absl::StrJoin(result.tokens, " ").c_str());
    return;
  }
  Json ids = Json::array();
  for (int32_t id : result.tokens) ids.push_back(Json(id));
  Json out = Json::object();
  Put(out, "ids", std::move(ids));
  if (text != nullptr) Put(out, "text", Json(text->text()));
  Put(out, "stopped_at_eos", Json(result.stopped_at_eos));
  if (text != nullptr) Put(out, "stopped_at_stop_string", Json(result.stopped_by_caller));
  Put(out, "device", Json(executor.name()));
  Put(out, "timings", TimingsJson(result));
  Put(out, "memory", MemoryJson(estimate, executor.memory_usage()));
  if (profile != nullptr) Put(out, "profile", ProfileJson(*profile));
  std::printf("%s\n", out.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
}

absl::Status GenerateCommand(const std::string& model) {
  absl::StatusOr<RunOptions> options = ReadRunOptions();
  if (!options.ok()) return options.status();
  absl::StatusOr<Artifact> artifact = LoadArtifact(model);
  if (!artifact.ok()) return artifact.status();
  const ModelInfo& info = artifact->plan.model;
  absl::StatusOr<int64_t> max_length = ResolveMaxLength(info, absl::GetFlag(FLAGS_max_length));
  if (!max_length.ok()) return max_length.status();
  options->generate.max_length = *max_length;
  absl::Status status = ValidatePrompt(info, options->prompt, *max_length);
  if (!status.ok()) return status;
  if (static_cast<int64_t>(options->prompt.size()) == *max_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt has ", options->prompt.size(), " tokens, as many as the max length ",
        *max_length, ": no room for a new token (raise --max-length to at least ",
        *max_length + 1, ")"));
  }
  absl::optional<SoftTokens> soft;
  if (!absl::GetFlag(FLAGS_soft_tokens).empty()) {
    absl::StatusOr<SoftTokens> loaded =
        LoadSoftTokens(absl::GetFlag(FLAGS_soft_tokens), info.hidden_size);
    if (!loaded.ok()) return loaded.status();
    soft = *std::move(loaded);
  }
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint = Checkpoint::Open(options->weights);
  if (!checkpoint.ok()) return checkpoint.status();
  absl::StatusOr<Placement> placement = Place(options->mode, model);
  if (!placement.ok()) return placement.status();
  const Artifact& image = placement->cuda ? placement->resolution->artifact : *artifact;
  status = CheckPlanWeights(image.plan, **checkpoint);
  if (!status.ok()) return status;
  ReportPlacement(*placement, *artifact);
  ReportPrecision(image.plan);
  absl::StatusOr<DeviceMemory> memory =
      placement->cuda ? MeasureDeviceMemory(placement->device) : HostMemory();
  if (!memory.ok()) return memory.status();
  absl::StatusOr<MemoryEstimate> estimate = EstimateMemory(image.plan, *memory, *max_length);
  if (!estimate.ok()) return estimate.status();
  PrintEstimate(*estimate, stderr);
  status = CheckFits(*estimate);
  if (!status.ok()) return status;
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      MakeExecutor(*placement, image, **checkpoint);
  if (!executor.ok()) return executor.status();
  status = (*executor)->Prepare(*max_length);
  if (!status.ok()) return status;
  if (absl::GetFlag(FLAGS_profile)) (*executor)->set_profile(std::make_unique<RunProfile>(image.plan));
  if (!absl::GetFlag(FLAGS_dump).empty()) {
    status = MakeDirectory(absl::GetFlag(FLAGS_dump));
    if (!status.ok()) return status;
    *executor = WithStepDump(*std::move(executor), absl::GetFlag(FLAGS_dump));
  }
  std::unique_ptr<TextStream> stream;
  if (options->text) {
    std::vector<int32_t> stop_ids = options->generate.stop_token_ids;
    stop_ids.insert(stop_ids.end(), info.eos_token_ids.begin(), info.eos_token_ids.end());
    stream = std::make_unique<TextStream>(*options->text->tokenizer, options->text->stop_strings,
                                          std::move(stop_ids), !absl::GetFlag(FLAGS_json));
    TextStream* out = stream.get();
    options->generate.on_token = [out](int32_t id) { return out->OnToken(id); };
  }
  absl::StatusOr<GenerateResult> result =
      Generate(**executor, image.plan, options->prompt, soft ? &*soft : nullptr, options->generate);
  if (stream != nullptr) {
    stream->Finish();
    if (!stream->error().ok()) return stream->error();
  }
  if (!result.ok()) return result.status();
  if (options->generate.collect_logits) {
    status = WriteLogits(absl::GetFlag(FLAGS_logits_out), *result, info.vocab_size);
    if (!status.ok()) return status;
  }
  PrintResult(*result, **executor, placement->cuda, *estimate, stream.get());
  return absl::OkStatus();
}

absl::Status Run(const std::vector<char*>& positional) {
  if (absl::GetFlag(FLAGS_list_devices)) return ListDevicesCommand();
  if (positional.size() != 2) {
    return absl::InvalidArgumentError(positional.size() < 2
                                          ? "no model given: spark-run MODEL.cubin ... (see --help)"
                                          : absl::StrCat("expected one model file, got ",
                                                         positional.size() - 1, " (see --help)"));
  }
  const std::string model = positional[1];
  // Checked here, not only when resolving: --device auto falls back to the host on a resolution
  // error, which would turn this mistake into a note.
  const absl::Status module_path = CheckModulePath(absl::GetFlag(FLAGS_module_path));
  if (!module_path.ok()) return module_path;
  if (absl::GetFlag(FLAGS_explain_resolution)) return ExplainCommand(model);
  if (absl::GetFlag(FLAGS_estimate)) return EstimateCommand(model);
  return GenerateCommand(model);
}

}  // namespace
}  // namespace rt
}  // namespace spark

int main(int argc, char** argv) {
  if (spark::rt::WantsHelp(argc, argv)) {
    std::fputs(spark::rt::kUsage, stdout);
    return 0;
  }
  std::vector<std::string> args = spark::rt::NormalizeArgs(argc, argv);
  std::vector<char*> c_args;
  for (std::string& arg : args) c_args.push_back(&arg[0]);
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(c_args.size()), c_args.data());
  absl::Status status;
  try {
    status = spark::rt::Run(positional);
  } catch (const std::bad_alloc&) {
    // The runtime turns the allocations it sizes from its inputs into RESOURCE_EXHAUSTED; this
    // catches any other one (a vector of the generated tokens, a message) the same way.
    status = absl::ResourceExhaustedError(
        "out of host memory (std::bad_alloc); free memory, or raise this process's limit "
        "(ulimit -v, the container's or cgroup's memory limit)");
  }
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

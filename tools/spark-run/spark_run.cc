// spark-run: runs a compiled Spark model (design.md). A thin client of the runtime's public API
// (engine.h: Engine, Model; session.h: Session) and of its text library (tokenizer, chat
// template, text stream): every failure is an absl::Status, printed with ToString() on stderr,
// exit code 1. The command line is CLI11's (Debian libcli11-dev), its help generated from the
// options declared below.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "spark/runtime/artifact.h"
#include "spark/runtime/chat_template.h"
#include "spark/runtime/image.h"
#include "spark/runtime/image_prompt.h"
#include "spark/runtime/device.h"
#include "spark/runtime/engine.h"
#include "spark/runtime/generation_config.h"
#include "spark/runtime/generator.h"
#include "spark/runtime/memory_estimator.h"
#include "spark/runtime/module_resolver.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/sampler.h"
#include "spark/runtime/session.h"
#include "spark/runtime/status_macros.h"
#include "spark/runtime/step_profile.h"
#include "spark/runtime/text_stream.h"
#include "spark/runtime/tokenizer.h"

namespace spark {
namespace rt {
namespace {

// --json output, through nlohmann-json; objects keep the order the fields are written in.
using Json = nlohmann::ordered_json;
void Put(Json& object, const std::string& key, Json value) { object[key] = std::move(value); }

// Every flag's value, as CLI11 parsed it.
struct Flags {
  std::vector<std::string> positional;
  std::string weights;
  std::string prompt_ids;
  std::string prompt;
  std::string chat;
  bool interactive = false;
  std::string system;
  bool enable_thinking = false;
  bool hide_thinking = false;
  std::string tokenizer;
  std::vector<std::string> stop;
  int64_t max_new_tokens = 32;
  std::string device = "auto";
  int64_t max_length = 0;
  int64_t tensor_parallel = 0;
  double device_memory_utilization = 0.9;
  double temperature = 0.0;
  int32_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  std::string soft_tokens;
  std::vector<std::string> images;  // --image, in order
  std::string soft_tokens_out;
  int64_t image_tokens = 280;
  std::string logits_out;
  std::string dump;
  bool profile = false;
  bool json = false;
  bool verbose = false;
  std::vector<std::string> module_path;  // each entry may be a comma list
  bool explain_resolution = false;
  bool dump_plan = false;
  std::string device_cc;
  bool estimate = false;
  std::string device_profile = "auto";
  bool list_devices = false;
  int64_t streams = 0;
  double compare_logits = 0.0;  // with --streams: > 0 compares the logits rows at this tolerance
  int64_t kv_pool_sequences = 0;  // with --streams: the pool's full-length sessions (0: all)
  bool no_prefix_sharing = false;  // with --streams: ModelOptions::share_kv_prefixes off
  // Which of them the command line gave (the defaults of generation_config.json apply to the
  // others).
  bool given_prompt = false, given_chat = false, given_system = false, given_tokenizer = false;
  bool given_image_tokens = false;
  SamplerFieldsGiven given_sampling;
};

const Flags* g_flags = nullptr;
const Flags& F() { return *g_flags; }

// Cold start: from the start of main to the first generated token of a one-prompt run (-v and
// --json report it with the model's load phases).
struct Startup {
  std::chrono::steady_clock::time_point process_start = std::chrono::steady_clock::now();
  double to_first_token = -1.0;  // seconds; < 0: not measured (no token yet, or another mode)
};
Startup g_startup;

void Note(absl::string_view text) {
  std::fprintf(stderr, "spark-run: %.*s\n", static_cast<int>(text.size()), text.data());
}

// --module-path: repeatable, each a comma list; empty entries are kept (CheckModulePath refuses
// them with their position).
std::vector<std::string> ModulePath() {
  std::vector<std::string> entries;
  for (const std::string& flag : F().module_path) {
    for (absl::string_view part : absl::StrSplit(flag, ',')) entries.emplace_back(part);
  }
  return entries;
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


std::string EnvModulePath() {
  const char* env = std::getenv("SPARK_MODULE_PATH");
  return env == nullptr ? "" : env;
}

absl::StatusOr<DeviceInfo> FirstDevice() {
  SPARK_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, ListDevices());
  return devices.front();  // ListDevices fails rather than return no device
}

// ---- --list-devices ----

absl::Status ListDevicesCommand() {
  SPARK_ASSIGN_OR_RETURN(const std::vector<DeviceInfo> devices, ListDevices());
  for (const DeviceInfo& d : devices) {
    std::printf("cuda:%d  %s  cc %d.%d  %s  %s total, %s free  %d SMs\n", d.ordinal, d.name.c_str(),
                d.cc_major, d.cc_minor, d.integrated ? "integrated" : "discrete",
                FormatBytes(d.total_bytes).c_str(), FormatBytes(d.free_bytes).c_str(),
                d.multiprocessors);
  }
  return absl::OkStatus();
}

// ---- --dump-plan ----

// The model file's plan (its .spark.plan section, or the .plan beside a PTX file), read and
// validated as a run would, printed as indented JSON on stdout (docs/plan-format.md).
absl::Status DumpPlanCommand(const std::string& model) {
  SPARK_ASSIGN_OR_RETURN(const Artifact artifact, LoadArtifact(model));
  std::printf("%s\n", PlanJsonText(artifact.plan, 2).c_str());
  return absl::OkStatus();
}

// ---- --explain-resolution ----

absl::Status ExplainCommand(const std::string& model) {
  std::pair<int, int> cc;
  if (!F().device_cc.empty()) {
    SPARK_ASSIGN_OR_RETURN(cc, ParseComputeCapability(F().device_cc));
  } else {
    absl::StatusOr<DeviceInfo> device = FirstDevice();
    if (!device.ok()) {
      return absl::Status(device.status().code(),
                          absl::StrCat(device.status().message(),
                                       " (give --device-cc M.m to resolve without a device)"));
    }
    cc = {device->cc_major, device->cc_minor};
  }
  ResolveRequest request;
  request.artifact_path = model;
  request.cc_major = cc.first;
  request.cc_minor = cc.second;
  request.module_path = ModulePath();
  request.env_module_path = EnvModulePath();
  request.install_prefix = RunningInstallPrefix();
  SPARK_ASSIGN_OR_RETURN(const Resolution resolution, ResolveModule(request));
  std::printf("%s\n", ExplainResolution(resolution).c_str());
  return absl::OkStatus();
}

// ---- --estimate ----

void PrintEstimate(const MemoryEstimate& estimate) {
  const std::string text = F().verbose ? FormatEstimateTable(estimate) : FormatEstimateLine(estimate);
  std::fprintf(stderr, "%s\n", text.c_str());
}

// --device-profile: a named profile, or auto (CUDA device 0, else the host).
absl::StatusOr<DeviceMemory> EstimateTarget() {
  if (F().device_profile != "auto") return DeviceProfile(F().device_profile);
  absl::StatusOr<DeviceInfo> device = FirstDevice();
  if (device.ok()) return MeasureDeviceMemory(*device);
  Note(absl::StrCat("estimating for the host: ", device.status().message()));
  return HostMemory();
}

absl::Status EstimateCommand(const std::string& model) {
  SPARK_ASSIGN_OR_RETURN(const Artifact artifact, LoadArtifact(model));
  SPARK_RETURN_IF_ERROR(CheckTensorParallel(artifact.plan, F().tensor_parallel));
  EstimateOptions options;
  SPARK_ASSIGN_OR_RETURN(options.max_length, ResolveMaxLength(artifact.plan.model, F().max_length));
  options.utilization = F().device_memory_utilization;
  SPARK_ASSIGN_OR_RETURN(const DeviceMemory device, EstimateTarget());
  SPARK_ASSIGN_OR_RETURN(const MemoryEstimate estimate,
                         Estimate(SizesFromPlan(artifact.plan), device, options));
  std::printf("%s\n", FormatEstimateTable(estimate).c_str());
  return CheckFits(estimate);
}

// ---- generation ----

enum class PromptMode { kIds, kText, kChat, kInteractive };

// Text in and out (--prompt, --chat, --interactive): the checkpoint's tokenizer and chat
// template, and what stops the stream.
struct TextIo {
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat;  // --chat, --interactive
  std::vector<std::string> stop_strings;
};

struct RunOptions {
  PromptMode mode = PromptMode::kIds;
  std::vector<int32_t> prompt;  // all modes but --interactive
  GenerateOptions generate;
  std::optional<TextIo> text;
};

// The messages of a chat so far, plus the start of the model's turn, as the template renders
// them, in ids.
absl::StatusOr<std::vector<int32_t>> EncodeChat(const TextIo& text, const Json& messages) {
  Json context = Json::object();
  Put(context, "messages", messages);
  Put(context, "add_generation_prompt", Json(true));
  Put(context, "enable_thinking", Json(F().enable_thinking));
  SPARK_ASSIGN_OR_RETURN(const std::string rendered, text.chat->Render(context));
  // The template writes the special tokens (<bos>, <|turn>) itself: none are added.
  return text.tokenizer->Encode(rendered, /*add_special_tokens=*/false);
}

// The --chat turn's content: the text, or with --image a list of parts as OpenAI clients send
// them, each "<image>" of the text an image part (in --image order), all of them before the text
// when it has none. The template renders an image part as the image placeholder.
Json ChatContent() {
  if (F().images.empty()) return Json(F().chat);
  const std::string marker = "<image>";
  Json parts = Json::array();
  const auto text = [&](absl::string_view piece) {
    if (!piece.empty()) {
      parts.push_back(Json::object({{"type", "text"}, {"text", std::string(piece)}}));
    }
  };
  const auto image = [&] { parts.push_back(Json::object({{"type", "image"}})); };
  const std::vector<absl::string_view> pieces = absl::StrSplit(F().chat, marker);
  if (pieces.size() == 1) {
    for (size_t i = 0; i < F().images.size(); ++i) image();
    text(pieces[0]);
    return parts;
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i > 0) image();
    text(pieces[i]);
  }
  return parts;
}

Json FirstMessages() {
  Json messages = Json::array();
  if (F().given_system) {  // an empty --system "" is an empty system turn
    messages.push_back(Json::object({{"role", "system"}, {"content", F().system}}));
  }
  return messages;
}

// --prompt / --chat / --interactive: the tokenizer (and template), the prompt's ids, and
// generation_config.json's stop ids and sampling defaults.
absl::Status ReadTextPrompt(RunOptions* options) {
  const std::string& flag = F().tokenizer;
  const std::string dir = TextFilesDirectory(flag, F().weights);
  const std::string where = flag.empty() ? absl::StrCat(" (the --weights directory ", dir,
                                                        "; name another with --tokenizer DIR)")
                                         : std::string();
  TextIo text;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Load(flag.empty() ? dir : flag);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(), absl::StrCat("cannot load the tokenizer", where,
                                                                ": ", tokenizer.status().message()));
  }
  text.tokenizer = *std::move(tokenizer);
  if (options->mode == PromptMode::kText) {
    // As HF encodes a raw prompt: the post-processor adds what the tokenizer says (Gemma: <bos>).
    SPARK_ASSIGN_OR_RETURN(options->prompt,
                           text.tokenizer->Encode(F().prompt, /*add_special_tokens=*/true));
  } else {
    absl::StatusOr<ChatTemplate> chat = ChatTemplate::Load(dir);
    if (!chat.ok()) {
      return absl::Status(chat.status().code(),
                          absl::StrCat(options->mode == PromptMode::kChat ? "--chat" : "--interactive",
                                       " needs the checkpoint's chat template", where, ": ",
                                       chat.status().message()));
    }
    text.chat = *std::move(chat);
    if (options->mode == PromptMode::kChat) {
      Json messages = FirstMessages();
      messages.push_back(Json::object({{"role", "user"}, {"content", ChatContent()}}));
      SPARK_ASSIGN_OR_RETURN(options->prompt, EncodeChat(text, messages));
    }
  }
  SPARK_ASSIGN_OR_RETURN(const GenerationConfig config, LoadGenerationConfig(dir));
  options->generate.stop_token_ids = config.eos_token_ids;
  ApplySamplingDefaults(config, F().given_sampling, &options->generate.sampler);
  text.stop_strings = F().stop;
  for (const std::string& stop : text.stop_strings) {
    if (stop.empty()) return absl::InvalidArgumentError("--stop: the stop string is empty");
  }
  options->text = std::move(text);
  return absl::OkStatus();
}

absl::StatusOr<RunOptions> ReadRunOptions() {
  RunOptions options;
  const bool ids_mode = !F().prompt_ids.empty();
  const int modes = ids_mode + F().given_prompt + F().given_chat + F().interactive;
  if (modes != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        modes == 0 ? "no prompt given" : "more than one prompt given",
        ": exactly one of --prompt-ids IDS (e.g. 2,818,5192), --prompt TEXT, --chat TEXT or "
        "--interactive is required"));
  }
  options.mode = ids_mode          ? PromptMode::kIds
                 : F().given_prompt ? PromptMode::kText
                 : F().given_chat   ? PromptMode::kChat
                                    : PromptMode::kInteractive;
  const bool chat_like = options.mode == PromptMode::kChat || options.mode == PromptMode::kInteractive;
  if (!chat_like && (F().given_system || F().enable_thinking || F().hide_thinking)) {
    return absl::InvalidArgumentError(
        "--system, --enable-thinking and --hide-thinking need --chat or --interactive");
  }
  if (ids_mode && (!F().stop.empty() || F().given_tokenizer)) {
    return absl::InvalidArgumentError(
        "--stop and --tokenizer need --prompt, --chat or --interactive (with --prompt-ids, ids go "
        "in and out)");
  }
  if ((options.mode == PromptMode::kText && F().prompt.empty()) ||
      (options.mode == PromptMode::kChat && F().chat.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.mode == PromptMode::kText ? "--prompt" : "--chat", ": the text is empty"));
  }
  if (options.mode == PromptMode::kInteractive &&
      (!F().logits_out.empty() || !F().soft_tokens.empty() || !F().dump.empty())) {
    return absl::InvalidArgumentError(
        "--logits-out, --soft-tokens and --dump are for one generation, not --interactive");
  }
  options.generate.max_new_tokens = F().max_new_tokens;
  options.generate.sampler.temperature = static_cast<float>(F().temperature);
  options.generate.sampler.top_k = F().top_k;
  options.generate.sampler.top_p = static_cast<float>(F().top_p);
  options.generate.sampler.seed = F().seed;
  options.generate.collect_logits = !F().logits_out.empty();
  if (F().weights.empty()) {
    return absl::InvalidArgumentError(
        "--weights is required (a checkpoint directory or .safetensors file)");
  }
  if (ids_mode) {
    absl::StatusOr<std::vector<int32_t>> ids = ParseTokenIds(F().prompt_ids);
    if (!ids.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--prompt-ids: ", ids.status().message()));
    }
    options.prompt = *std::move(ids);
  } else {
    SPARK_RETURN_IF_ERROR(ReadTextPrompt(&options));
  }
  SPARK_RETURN_IF_ERROR(ValidateSamplerOptions(options.generate.sampler));
  return options;
}

// Where the model runs and in which number formats: printed as OpenModel places it.
void ReportPlacement(const Model& model) {
  if (!model.on_cuda()) {
    const int64_t ranks = model.plan().ranks;
    Note(absl::StrCat("device: host reference executor",
                      ranks > 1 ? absl::StrCat(", ", ranks, " ranks in this process (tensor "
                                                            "parallel)")
                                : "",
                      "; image ", model.artifact().path, " (plan only)"));
  } else {
    const Resolution& r = *model.resolution();
    const DeviceInfo& d = model.device();
    Note(absl::StrCat("device: cuda:", d.ordinal, " ", d.name, " (cc ", d.cc_major, ".",
                      d.cc_minor, d.integrated ? ", integrated" : "", "); image ", r.artifact.path,
                      " (", r.artifact.target, ", ", ImageKindName(r.kind), ")"));
    const std::string note = FallbackNote(r);
    if (!note.empty()) Note(note);
    if (F().verbose) std::fprintf(stderr, "%s\n", ExplainResolution(r).c_str());
  }
  // The image's number formats, when it departs from the default (f32 activations and caches).
  const Plan& plan = model.plan();
  bool bf16_cache = false;
  for (const KvCacheInfo& cache : plan.kv_caches) bf16_cache |= cache.dtype == DType::kBF16;
  if (plan.activation_precision != DType::kBF16 && !bf16_cache) return;
  Note(absl::StrCat("precision: weights bf16, activations ",
                    plan.activation_precision == DType::kBF16 ? "bf16 (bf16 buffers)"
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

absl::Status MakeDirectory(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) {
    struct stat info;
    if (stat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--dump ", dir, ": cannot create the directory (", std::strerror(errno), ")"));
}

absl::StatusOr<std::shared_ptr<Model>> OpenModel(const std::string& artifact) {
  EngineOptions engine_options;
  SPARK_ASSIGN_OR_RETURN(engine_options.device, ParseDeviceMode(F().device));
  engine_options.module_path = ModulePath();
  engine_options.env_module_path = EnvModulePath();
  engine_options.install_prefix = RunningInstallPrefix();
  engine_options.device_memory_utilization = F().device_memory_utilization;
  engine_options.on_notice = Note;
  if (isatty(STDERR_FILENO)) engine_options.on_progress = ShowProgress;
  engine_options.on_placed = ReportPlacement;
  engine_options.on_estimate = PrintEstimate;
  ModelOptions model_options;
  model_options.artifact = artifact;
  model_options.weights = F().weights;
  model_options.max_length = F().max_length;
  model_options.profile = F().profile;
  model_options.max_sessions = std::max<int64_t>(1, F().streams);
  model_options.kv_pool_sessions = F().kv_pool_sequences;
  model_options.share_kv_prefixes = !F().no_prefix_sharing;
  model_options.tensor_parallel = F().tensor_parallel;
  if (!F().dump.empty()) {
    SPARK_RETURN_IF_ERROR(MakeDirectory(F().dump));
    model_options.dump_dir = F().dump;
  }
  return Engine(std::move(engine_options)).OpenModel(model_options);
}

// ---- --json ----

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

// The load phases, the first prefill and what else came before the first token (process start,
// tokenizer, prompt): sums to startup.to_first_token.
std::vector<LoadPhase> StartupRows(const Startup& startup, const Model& model,
                                   const GenerateResult& result) {
  std::vector<LoadPhase> rows;
  double counted = 0.0;
  for (const LoadPhase& phase : model.load_phases()) {
    rows.push_back(phase);
    counted += phase.seconds;
  }
  rows.push_back({absl::StrCat("first prefill (", result.prefill_tokens, " tokens)"),
                  result.prefill_seconds});
  counted += result.prefill_seconds;
  rows.push_back({"the rest (process start, tokenizer, prompt, first sampling)",
                  std::max(0.0, startup.to_first_token - counted)});
  return rows;
}

std::string FormatStartup(const Startup& startup, const Model& model,
                          const GenerateResult& result) {
  std::string text = absl::StrFormat("startup: %.3f s from process start to the first token",
                                     startup.to_first_token);
  for (const LoadPhase& row : StartupRows(startup, model, result)) {
    absl::StrAppendFormat(&text, "\n  %-58s %8.3f s", row.name, row.seconds);
    if (row.bytes > 0) {
      absl::StrAppend(&text, "  ", FormatBytes(row.bytes));
      if (row.copied && row.seconds > 0) {
        absl::StrAppendFormat(&text, " (%.2f GB/s)", static_cast<double>(row.bytes) / 1e9 /
                                                         row.seconds);
      }
    }
  }
  return text;
}

Json StartupJson(const Startup& startup, const Model& model, const GenerateResult& result) {
  Json phases = Json::array();
  for (const LoadPhase& row : StartupRows(startup, model, result)) {
    Json entry = Json::object();
    Put(entry, "phase", Json(row.name));
    Put(entry, "seconds", Json(row.seconds));
    if (row.bytes > 0) Put(entry, "bytes", Json(static_cast<int64_t>(row.bytes)));
    phases.push_back(std::move(entry));
  }
  Json out = Json::object();
  Put(out, "to_first_token_seconds", Json(startup.to_first_token));
  Put(out, "phases", std::move(phases));
  return out;
}

Json ProfileJson(const RunProfile& profile) {
  const Plan& plan = profile.plan();
  Json out = Json::object();
  Put(out, "decode_calls", Json(profile.decode_calls()));
  Put(out, "decode", OpTimingsJson(plan, profile.decode()));
  // Decode steps of several sequences (--streams, spark-serve): one entry per step size.
  Json batched = Json::array();
  for (const auto& [sequences, decode] : profile.decode_by_sequences()) {
    if (sequences == 1) continue;
    Json entry = Json::object();
    Put(entry, "sequences", Json(sequences));
    Put(entry, "calls", Json(decode.calls));
    Put(entry, "ops", OpTimingsJson(plan, decode.steps));
    batched.push_back(std::move(entry));
  }
  Put(out, "batched_decode", std::move(batched));
  Put(out, "prefill_calls", Json(profile.prefill_calls()));
  Put(out, "prefill_tokens", Json(profile.prefill_tokens()));
  Put(out, "prefill", OpTimingsJson(plan, profile.prefill()));
  return out;
}


// --profile: the tables of every step the model's executor ran so far, on stderr.
void PrintProfile(const Model& model) {
  const RunProfile* profile = model.profile();
  if (profile == nullptr) return;
  std::fputs(FormatProfile(*profile, model.on_cuda() ? "CUDA events around each launch, no graph"
                                                     : "host wall clock per step")
                 .c_str(),
             stderr);
}

// Prints what a generation took, and with --json the whole result, after the text streamed.
void PrintResult(const GenerateResult& result, const Model& model, const TextStream* text) {
  for (const std::string& notice : result.notices) Note(notice);
  Note(absl::StrFormat("prefill: %d tokens in %.3f s (%.1f tokens/s)%s", result.prefill_tokens,
                       result.prefill_seconds, result.prefill_tokens_per_second(),
                       result.reused_tokens > 0
                           ? absl::StrCat("; ", result.reused_tokens, " reused from the cache")
                           : ""));
  Note(absl::StrFormat("decode: %d tokens in %.3f s (%.1f tokens/s)%s", result.decode_tokens,
                       result.decode_seconds, result.decode_tokens_per_second(),
                       result.cancelled           ? "; stopped (Ctrl-C)"
                       : result.stopped_at_eos    ? "; stopped at EOS"
                       : result.stopped_by_caller ? "; stopped at a stop string"
                                                  : ""));
  if (F().verbose) {
    Note(FormatMemoryComparison(CompareWithUsage(model.estimate(), model.memory_usage())));
    if (g_startup.to_first_token >= 0) Note(FormatStartup(g_startup, model, result));
  }
  PrintProfile(model);
  if (!F().json) {
    // Text was streamed as it was generated.
    if (text == nullptr) std::printf("%s\n", absl::StrJoin(result.tokens, " ").c_str());
    return;
  }
  Json ids = Json::array();
  for (int32_t id : result.tokens) ids.push_back(Json(id));
  Json out = Json::object();
  Put(out, "ids", std::move(ids));
  if (text != nullptr) {
    Put(out, "text", Json(text->text()));
    if (!text->thinking().empty()) Put(out, "thinking", Json(text->thinking()));
  }
  Put(out, "stopped_at_eos", Json(result.stopped_at_eos));
  if (text != nullptr) Put(out, "stopped_at_stop_string", Json(result.stopped_by_caller));
  if (result.cancelled) Put(out, "cancelled", Json(true));
  Put(out, "device", Json(model.executor_name()));
  Put(out, "timings", TimingsJson(result));
  if (result.reused_tokens > 0) Put(out, "reused_tokens", Json(result.reused_tokens));
  Put(out, "memory", MemoryJson(model.estimate(), model.memory_usage()));
  if (g_startup.to_first_token >= 0) Put(out, "startup", StartupJson(g_startup, model, result));
  if (model.profile() != nullptr) Put(out, "profile", ProfileJson(*model.profile()));
  std::printf("%s\n", out.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
  std::fflush(stdout);
}

// Where generated text goes: stdout (unless --json), thinking dimmed on a terminal or dropped
// with --hide-thinking.
TextStream::Sink StdoutSink() {
  if (F().json) return nullptr;
  const bool terminal = isatty(STDOUT_FILENO);
  return [terminal](absl::string_view piece, TextChannel channel) {
    if (channel == TextChannel::kThinking) {
      if (F().hide_thinking) return;
      if (terminal) std::fputs("\033[2m", stdout);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      if (terminal) std::fputs("\033[0m", stdout);
    } else if (channel == TextChannel::kToolCall) {
      std::printf("[tool call: %.*s]", static_cast<int>(piece.size()), piece.data());
    } else {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
    }
    std::fflush(stdout);
  };
}

std::unique_ptr<TextStream> MakeStream(const TextIo& text, const Model& model,
                                       const GenerateOptions& generate) {
  std::vector<int32_t> stop_ids = generate.stop_token_ids;
  stop_ids.insert(stop_ids.end(), model.info().eos_token_ids.begin(),
                  model.info().eos_token_ids.end());
  return std::make_unique<TextStream>(*text.tokenizer, text.stop_strings, std::move(stop_ids),
                                      StdoutSink());
}

absl::Status CheckRoom(size_t prompt_tokens, int64_t max_length) {
  if (static_cast<int64_t>(prompt_tokens) < max_length) return absl::OkStatus();
  return absl::InvalidArgumentError(
      static_cast<int64_t>(prompt_tokens) == max_length
          ? absl::StrCat("the prompt has ", prompt_tokens, " tokens, as many as the max length ",
                         max_length, ": no room for a new token (raise --max-length to at least ",
                         max_length + 1, ")")
          : absl::StrCat("the prompt has ", prompt_tokens, " tokens, more than the max length ",
                         max_length, " (raise --max-length)"));
}

// ---- --interactive ----

// Ctrl-C: ends the answer being generated (Session::Cancel is async-signal-safe), or, at the
// prompt, the chat.
std::atomic<Session*> g_generating{nullptr};
volatile sig_atomic_t g_interrupted = 0;

void OnInterrupt(int) {
  Session* session = g_generating.load();
  if (session != nullptr) {
    session->Cancel();
  } else {
    g_interrupted = 1;
  }
}

// One line from stdin, without its newline; nullopt at end of input or on Ctrl-C.
std::optional<std::string> ReadLine() {
  char* line = nullptr;
  size_t capacity = 0;
  const ssize_t n = getline(&line, &capacity, stdin);
  std::optional<std::string> result;
  if (n >= 0 && !g_interrupted) {
    result.emplace(line, static_cast<size_t>(n));
    if (!result->empty() && result->back() == '\n') result->pop_back();
  }
  std::free(line);
  return result;
}

absl::Status InteractiveCommand(Model& model, RunOptions& options) {
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, model.NewSession());
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: Ctrl-C at the prompt ends the read
  sigaction(SIGINT, &action, nullptr);
  const bool terminal = isatty(STDIN_FILENO);
  if (terminal) {
    Note("chat: type a message and press Enter; Ctrl-C stops an answer, Ctrl-D (or Ctrl-C at the "
         "prompt) ends the chat");
  }
  const TextIo& text = *options.text;
  Json messages = FirstMessages();
  for (int turn = 1;; ++turn) {
    if (terminal) std::fputs("> ", stderr);
    const std::optional<std::string> line = ReadLine();
    if (!line) break;
    if (line->empty()) {
      --turn;
      continue;
    }
    messages.push_back(Json::object({{"role", "user"}, {"content", *line}}));
    absl::StatusOr<std::vector<int32_t>> prompt = EncodeChat(text, messages);
    absl::Status room = prompt.ok() ? CheckRoom(prompt->size(), session->max_length())
                                    : prompt.status();
    if (!room.ok()) {
      // This turn cannot run; the chat goes on without it.
      Note(absl::StrCat("turn ", turn, " skipped: ", room.ToString()));
      messages.erase(messages.end() - 1);
      --turn;
      continue;
    }
    std::unique_ptr<TextStream> stream = MakeStream(text, model, options.generate);
    GenerateOptions generate = options.generate;
    TextStream* out = stream.get();
    generate.on_token = [out](int32_t id) { return out->OnToken(id); };
    g_generating.store(session.get());
    absl::StatusOr<GenerateResult> result = session->Generate(*prompt, nullptr, generate);
    g_generating.store(nullptr);
    stream->Finish();
    if (!F().json) {
      std::fputc('\n', stdout);
      std::fflush(stdout);
    }
    if (!stream->error().ok()) return stream->error();
    if (!result.ok()) return result.status();
    // The answer goes back into the history without its thinking (the template drops it).
    messages.push_back(Json::object({{"role", "assistant"}, {"content", stream->text()}}));
    PrintResult(*result, model, stream.get());
  }
  if (terminal) std::fputc('\n', stderr);
  return absl::OkStatus();
}

// ---- --streams ----

// Stream i's prompt: the prompt without its last i % 4 tokens (at least one left), so that the
// streams' prompts differ in length.
std::vector<int32_t> StreamPrompt(const std::vector<int32_t>& prompt, int64_t i) {
  const size_t drop = std::min<size_t>(static_cast<size_t>(i % 4), prompt.size() - 1);
  return std::vector<int32_t>(prompt.begin(), prompt.end() - drop);
}

struct StreamsRun {
  std::vector<GenerateResult> results;
  double seconds = 0.0;          // wall time of the whole run
  int64_t tokens = 0;            // generated, all streams
  double mean_token_gap_ms = 0;  // mean time between two tokens of one stream
};

// Generates every stream's prompt, all at once (concurrent sessions in threads: continuous
// batching) or one after another.
absl::StatusOr<StreamsRun> RunStreams(Model& model, const RunOptions& options, bool together) {
  const int64_t n = F().streams;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int64_t i = 0; i < n; ++i) {
    SPARK_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, model.NewSession());
    sessions.push_back(std::move(session));
  }
  StreamsRun run;
  std::vector<absl::StatusOr<GenerateResult>> results(n, absl::UnknownError("not run"));
  std::vector<double> gaps(n, 0.0);
  std::vector<int64_t> gap_count(n, 0);
  const auto generate = [&](int64_t i) {
    GenerateOptions generate = options.generate;
    generate.collect_logits = F().compare_logits > 0;
    std::chrono::steady_clock::time_point last{};
    generate.on_token = [&, i](int32_t) {
      const auto now = std::chrono::steady_clock::now();
      if (last != std::chrono::steady_clock::time_point{}) {
        gaps[i] += std::chrono::duration<double, std::milli>(now - last).count();
        ++gap_count[i];
      }
      last = now;
      return true;
    };
    results[i] = sessions[i]->Generate(StreamPrompt(options.prompt, i), nullptr, generate);
  };
  const auto start = std::chrono::steady_clock::now();
  if (together) {
    std::vector<std::thread> threads;
    for (int64_t i = 0; i < n; ++i) threads.emplace_back(generate, i);
    for (std::thread& t : threads) t.join();
  } else {
    for (int64_t i = 0; i < n; ++i) generate(i);
  }
  run.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double gap_sum = 0.0;
  int64_t gap_n = 0;
  for (int64_t i = 0; i < n; ++i) {
    SPARK_RETURN_IF_ERROR(results[i].status());
    run.tokens += static_cast<int64_t>(results[i]->tokens.size());
    run.results.push_back(*std::move(results[i]));
    gap_sum += gaps[i];
    gap_n += gap_count[i];
  }
  run.mean_token_gap_ms = gap_n > 0 ? gap_sum / static_cast<double>(gap_n) : 0.0;
  return run;
}

// --compare-logits: a stream's rows together against alone, over the rows both runs computed
// from the same inputs (every prompt row, then up to the first token the runs drew differently).
// The largest |difference| relative to the row's largest |logit| alone; and, where the ids differ,
// whether the first differing draw was a near-tie alone (the two ids' logits within
// 2 x rtol x the row's largest |logit|), which a difference within rtol may flip.
struct LogitsComparison {
  double worst = 0.0;
  int64_t worst_row = 0;  // a position
  int64_t first_row = 0;  // the first position compared
  double worst_prompt = 0.0;  // over the prompt's rows (prefill)
  int64_t rows = 0;
  bool diverged_at_near_tie = true;
};
LogitsComparison CompareStreamLogits(const GenerateResult& alone, const GenerateResult& together,
                                     int64_t prompt_length, int64_t vocab, double rtol) {
  LogitsComparison out;
  size_t first = 0;  // the first generated token the runs drew differently
  while (first < alone.tokens.size() && first < together.tokens.size() &&
         alone.tokens[first] == together.tokens[first]) {
    ++first;
  }
  const bool diverged = first < alone.tokens.size() || first < together.tokens.size();
  // A result's row i is position reused_tokens + i (a prefix read from the cache has no rows:
  // its own session's or another's, shared). Position prompt_length - 1 + k produced token k;
  // positions up to the divergent token's, from the later first row of the two, are comparable.
  const int64_t from = std::max(alone.reused_tokens, together.reused_tokens);
  const int64_t end = std::min<int64_t>({alone.reused_tokens + alone.logits_rows,
                                         together.reused_tokens + together.logits_rows,
                                         prompt_length + static_cast<int64_t>(first)});
  out.rows = std::max<int64_t>(0, end - from);
  out.first_row = from;
  for (int64_t r = 0; r < out.rows; ++r) {
    const float* a = alone.logits.data() + (from + r - alone.reused_tokens) * vocab;
    const float* b = together.logits.data() + (from + r - together.reused_tokens) * vocab;
    double scale = 0.0, diff = 0.0;
    for (int64_t v = 0; v < vocab; ++v) {
      scale = std::max(scale, static_cast<double>(std::fabs(a[v])));
      diff = std::max(diff, static_cast<double>(std::fabs(a[v] - b[v])));
    }
    const double relative = scale > 0 ? diff / scale : diff;
    if (relative > out.worst) {
      out.worst = relative;
      out.worst_row = from + r;
    }
    if (from + r < prompt_length) out.worst_prompt = std::max(out.worst_prompt, relative);
  }
  if (diverged && first < alone.tokens.size() && first < together.tokens.size()) {
    const int64_t r = prompt_length - 1 + static_cast<int64_t>(first) - alone.reused_tokens;
    if (r >= 0 && r < alone.logits_rows) {
      const float* a = alone.logits.data() + r * vocab;
      double scale = 0.0;
      for (int64_t v = 0; v < vocab; ++v) scale = std::max(scale, static_cast<double>(std::fabs(a[v])));
      const double margin = std::fabs(a[alone.tokens[first]] - a[together.tokens[first]]);
      out.diverged_at_near_tie = margin <= 2.0 * rtol * scale;
    }
  }
  return out;
}

// --streams N: each stream alone, then all of them at once; the same tokens both ways (or, with
// --compare-logits, logits within the tolerance and ids that differ only past a near-tie), and
// the aggregate rates.
absl::Status StreamsCommand(Model& model, const RunOptions& options) {
  const int64_t n = F().streams;
  const double rtol = F().compare_logits;
  SPARK_ASSIGN_OR_RETURN(const StreamsRun alone, RunStreams(model, options, false));
  const BatchingStats before = model.batching_stats();
  SPARK_ASSIGN_OR_RETURN(const StreamsRun together, RunStreams(model, options, true));
  const BatchingStats after = model.batching_stats();
  int64_t differing = 0, failing = 0;
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const bool same = alone.results[i].tokens == together.results[i].tokens;
    if (rtol > 0) {
      const LogitsComparison c = CompareStreamLogits(
          alone.results[i], together.results[i],
          static_cast<int64_t>(StreamPrompt(options.prompt, i).size()), model.info().vocab_size,
          rtol);
      worst = std::max(worst, c.worst);
      const bool ok = c.worst <= rtol && (same || c.diverged_at_near_tie);
      if (!ok) ++failing;
      if (!same || !ok) {
        Note(absl::StrFormat("stream %d: logits of positions %d..%d within %.3e of alone (worst: "
                             "position %d; prompt positions within %.3e; tolerance %.1e)%s",
                             i, c.first_row, c.first_row + c.rows - 1, c.worst, c.worst_row,
                             c.worst_prompt, rtol,
                             same ? "" : c.diverged_at_near_tie
                                             ? "; ids differ past a near-tie"
                                             : "; ids differ where alone had a clear margin"));
      }
    }
    if (same) continue;
    ++differing;
    if (rtol > 0) continue;
    Note(absl::StrCat("stream ", i, ": alone ", absl::StrJoin(alone.results[i].tokens, " "),
                      "; together ", absl::StrJoin(together.results[i].tokens, " ")));
  }
  if (rtol > 0) {
    Note(absl::StrFormat("logits: worst row-relative difference together against alone %.3e "
                         "(tolerance %.1e); %d of %d streams fail",
                         worst, rtol, failing, n));
  }
  const auto rate = [](const StreamsRun& run) {
    return run.seconds > 0 ? static_cast<double>(run.tokens) / run.seconds : 0.0;
  };
  const int64_t steps = after.steps - before.steps, calls = after.calls - before.calls;
  const int64_t merged = after.merged_steps - before.merged_steps;
  Note(absl::StrFormat(
      "streams: %d; one after another: %d tokens in %.3f s (%.1f tokens/s, %.2f ms between "
      "tokens); all at once: %d tokens in %.3f s (%.1f tokens/s, %.2f ms between tokens of a "
      "stream), %.2fx; %d steps served %d calls (%d merged, at most %d calls in one); prefix "
      "shared %d times (%d tokens; %d waited for another stream to prefill it)%s",
      n, alone.tokens, alone.seconds, rate(alone), alone.mean_token_gap_ms, together.tokens,
      together.seconds, rate(together), together.mean_token_gap_ms,
      rate(alone) > 0 ? rate(together) / rate(alone) : 0.0, steps, calls, merged, after.max_calls,
      model.kv_pool_stats().shared, model.kv_pool_stats().shared_tokens,
      model.kv_pool_stats().awaited, model.kv_pool_sessions() < model.max_sessions()
          ? absl::StrFormat("; KV pool of %d full-length streams: %d evicted, %d preempted",
                            model.kv_pool_sessions(), model.kv_pool_stats().evicted,
                            model.kv_pool_stats().preempted)
          : std::string()));
  PrintProfile(model);  // both runs: decode steps of one sequence alone, of several together
  if (F().json) {
    Json out = Json::object();
    Put(out, "streams", Json(n));
    Put(out, "device", Json(model.executor_name()));
    Put(out, "alone", Json::object({{"tokens", alone.tokens},
                                    {"seconds", alone.seconds},
                                    {"tokens_per_second", rate(alone)},
                                    {"ms_between_tokens", alone.mean_token_gap_ms}}));
    Put(out, "together", Json::object({{"tokens", together.tokens},
                                       {"seconds", together.seconds},
                                       {"tokens_per_second", rate(together)},
                                       {"ms_between_tokens", together.mean_token_gap_ms},
                                       {"steps", steps},
                                       {"merged_steps", merged},
                                       {"mixed_steps", after.mixed_steps - before.mixed_steps},
                                       {"max_calls_per_step", after.max_calls}}));
    Put(out, "kv_pool", Json::object({{"full_length_streams", model.kv_pool_sessions()},
                                      {"evicted", model.kv_pool_stats().evicted},
                                      {"preempted", model.kv_pool_stats().preempted},
                                      {"shared", model.kv_pool_stats().shared},
                                      {"shared_tokens", model.kv_pool_stats().shared_tokens},
                                      {"awaited", model.kv_pool_stats().awaited}}));
    // Each stream of a run: what it read from caches instead of prefilling (prefix sharing) and
    // its prefill time (from its first step: a wait for another stream's prefill is not in it).
    const auto each = [](const StreamsRun& run) {
      Json streams = Json::array();
      for (const GenerateResult& r : run.results) {
        streams.push_back(Json::object({{"reused_tokens", r.reused_tokens},
                                        {"prefill_tokens", r.prefill_tokens},
                                        {"prefill_seconds", r.prefill_seconds}}));
      }
      return streams;
    };
    Put(out, "alone_streams", each(alone));
    Put(out, "differing_streams", Json(differing));
    if (rtol > 0) {
      Put(out, "logits", Json::object({{"tolerance", rtol},
                                       {"worst_row_relative", worst},
                                       {"failing_streams", failing}}));
    }
    Put(out, "together_streams", each(together));
    Json ids = Json::array();
    for (const GenerateResult& r : together.results) ids.push_back(Json(r.tokens));
    Put(out, "ids", std::move(ids));
    if (model.profile() != nullptr) Put(out, "profile", ProfileJson(*model.profile()));
    std::printf("%s\n", out.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    for (const GenerateResult& r : together.results) {
      std::printf("%s\n", absl::StrJoin(r.tokens, " ").c_str());
    }
  }
  std::fflush(stdout);
  if (rtol > 0) {
    if (failing == 0) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(failing, " of ", n,
                                            " streams' logits differ beyond --compare-logits ",
                                            rtol, " (or their ids past a clear margin)"));
  }
  if (differing > 0) {
    return absl::InternalError(absl::StrCat(
        differing, " of ", n, " streams generated other tokens together than alone"));
  }
  return absl::OkStatus();
}

// ---- one generation ----

absl::Status GenerateCommand(const std::string& artifact) {
  SPARK_ASSIGN_OR_RETURN(RunOptions options, ReadRunOptions());
  // The images are read before the model is opened: a file that cannot be decoded costs no load.
  // --image: a PNG or JPEG, decoded here, or the processor's output (a safetensors file of
  // pixel_values and image_position_ids), read here.
  std::vector<std::optional<RgbImage>> decoded;
  std::vector<ImagePatches> images;
  for (const std::string& path : F().images) {
    if (IsSafetensorsFile(path)) {
      SPARK_ASSIGN_OR_RETURN(ImagePatches patches, ReadImagePatchesFile(path));
      images.push_back(std::move(patches));
      decoded.emplace_back();
    } else {
      SPARK_ASSIGN_OR_RETURN(RgbImage image, ReadImageFile(path));
      images.emplace_back();
      decoded.emplace_back(std::move(image));
    }
  }
  SPARK_ASSIGN_OR_RETURN(std::shared_ptr<Model> model, OpenModel(artifact));
  // The budget matters to the pictures Spark preprocesses (a patches file has its own).
  const bool pictures =
      std::any_of(decoded.begin(), decoded.end(), [](const auto& d) { return d.has_value(); });
  if (!pictures && F().given_image_tokens) {
    return absl::InvalidArgumentError(
        "--image-tokens sets the budget of PNG / JPEG images, but every --image is a patches file "
        "(the processor's output, whose patches fix its soft tokens): leave --image-tokens out");
  }
  if (pictures) {
    SPARK_RETURN_IF_ERROR(CheckImageBudget(*model, F().image_tokens));
    for (size_t i = 0; i < images.size(); ++i) {
      if (decoded[i]) {
        SPARK_ASSIGN_OR_RETURN(images[i], PreprocessImage(*decoded[i], F().image_tokens));
      }
    }
  }
  if (options.mode == PromptMode::kInteractive) return InteractiveCommand(*model, options);
  if (F().streams > 0) {  // (the command line refuses --soft-tokens and --logits-out with it)
    SPARK_RETURN_IF_ERROR(ValidatePrompt(model->info(), options.prompt, model->max_length()));
    SPARK_RETURN_IF_ERROR(CheckRoom(options.prompt.size(), model->max_length()));
    return StreamsCommand(*model, options);
  }
  std::optional<SoftTokens> soft;
  if (!images.empty()) {
    // Each placeholder expanded to the image's soft tokens (and boi/eoi), which the vision tower
    // computes: the prompt checked below is the expanded one.
    const absl::Time encode_start = absl::Now();
    SPARK_ASSIGN_OR_RETURN(ImagePrompt image_prompt,
                           PrepareImagePrompt(*model, options.prompt, images));
    if (F().verbose) {
      Note(absl::StrCat("images: ", absl::StrJoin(image_prompt.soft_tokens_per_image, ", "),
                        " soft tokens (vision tower: ",
                        absl::StrFormat("%.3f", absl::ToDoubleSeconds(absl::Now() - encode_start)),
                        " s); the prompt is ", image_prompt.ids.size(), " tokens"));
    }
    options.prompt = std::move(image_prompt.ids);
    soft = std::move(image_prompt.soft);
    if (!F().soft_tokens_out.empty()) {
      SPARK_RETURN_IF_ERROR(WriteSoftTokens(F().soft_tokens_out, *soft));
    }
  }
  SPARK_RETURN_IF_ERROR(ValidatePrompt(model->info(), options.prompt, model->max_length()));
  SPARK_RETURN_IF_ERROR(CheckRoom(options.prompt.size(), model->max_length()));
  if (!F().soft_tokens.empty()) {
    SPARK_ASSIGN_OR_RETURN(soft, LoadSoftTokens(F().soft_tokens, model->info().hidden_size));
  }
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, model->NewSession());
  std::unique_ptr<TextStream> stream;
  if (options.text) {
    stream = MakeStream(*options.text, *model, options.generate);
    TextStream* out = stream.get();
    options.generate.on_token = [out](int32_t id) { return out->OnToken(id); };
  }
  options.generate.on_token = [then = options.generate.on_token](int32_t id) {
    if (g_startup.to_first_token < 0) {
      g_startup.to_first_token = std::chrono::duration<double>(
                                     std::chrono::steady_clock::now() - g_startup.process_start)
                                     .count();
    }
    return then ? then(id) : true;
  };
  absl::StatusOr<GenerateResult> result =
      session->Generate(options.prompt, soft ? &*soft : nullptr, options.generate);
  if (stream != nullptr) {
    stream->Finish();
    if (!F().json) {
      std::fputc('\n', stdout);
      std::fflush(stdout);
    }
    SPARK_RETURN_IF_ERROR(stream->error());
  }
  SPARK_RETURN_IF_ERROR(result.status());
  if (options.generate.collect_logits) {
    SPARK_RETURN_IF_ERROR(WriteLogits(F().logits_out, *result, model->info().vocab_size));
  }
  PrintResult(*result, *model, stream.get());
  return absl::OkStatus();
}

absl::Status Run() {
  if (F().list_devices) return ListDevicesCommand();
  const std::vector<std::string>& positional = F().positional;
  if (positional.size() != 1) {
    return absl::InvalidArgumentError(positional.empty()
                                          ? "no model given: spark-run MODEL.cubin ... (see --help)"
                                          : absl::StrCat("expected one model file, got ",
                                                         positional.size(), " (see --help)"));
  }
  const std::string& model = positional[0];
  // Checked here, not only when resolving: --device auto falls back to the host on a resolution
  // error, which would turn this mistake into a note.
  SPARK_RETURN_IF_ERROR(CheckModulePath(ModulePath()));
  if (F().explain_resolution) return ExplainCommand(model);
  if (F().dump_plan) return DumpPlanCommand(model);
  if (F().estimate) return EstimateCommand(model);
  return GenerateCommand(model);
}

// Flag names may be written with '_' for '-' (--max_new_tokens), as they could before CLI11; and
// `--flag=` is the flag with an empty value (CLI11 2.1 would take the next argument instead).
std::vector<std::string> DashedFlagNames(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (i > 0 && arg.rfind("--", 0) == 0 && arg.size() > 2) {
      const size_t end = std::min(arg.find('='), arg.size());
      std::replace(arg.begin() + 2, arg.begin() + end, '_', '-');
      if (end + 1 == arg.size()) {
        arg.pop_back();
        args.push_back(std::move(arg));
        args.emplace_back();
        continue;
      }
    }
    args.push_back(std::move(arg));
    if (args.back() == "--") {
      for (++i; i < argc; ++i) args.push_back(argv[i]);
    }
  }
  return args;
}

}  // namespace
}  // namespace rt
}  // namespace spark

int main(int argc, char** argv) {
  using spark::rt::Flags;
  Flags flags;
  spark::rt::g_flags = &flags;
  spark::rt::g_startup.process_start = std::chrono::steady_clock::now();
  CLI::App app{
      "spark-run: runs a model compiled by spark-compile.\n\n"
      "usage:\n"
      "  spark-run MODEL.cubin --weights CHECKPOINT --prompt-ids 2,818,5192 [options]\n"
      "  spark-run MODEL.cubin --weights CHECKPOINT [--tokenizer DIR] --prompt \"raw text\" [options]\n"
      "  spark-run MODEL.cubin --weights CHECKPOINT [--tokenizer DIR] --chat \"message\" [--system \"...\"]\n"
      "            [--enable-thinking] [--stop STRING]... [options]\n"
      "  spark-run MODEL.cubin --weights CHECKPOINT [--tokenizer DIR] --interactive [--system \"...\"] [options]\n"
      "  spark-run MODEL.cubin --explain-resolution [--device-cc 12.1] [--module-path DIR]\n"
      "  spark-run MODEL.cubin --dump-plan\n"
      "  spark-run MODEL.cubin --estimate [--device-profile NAME|auto] [--max-length N]\n"
      "  spark-run --list-devices\n\n"
      "Output: with --prompt-ids, the generated ids on stdout, space-separated on one line; with\n"
      "--prompt, --chat or --interactive, the generated text, streamed as it is generated (the\n"
      "stopping token and stop string not included). Decisions, the memory estimate and tokens/s\n"
      "on stderr. Flag names may be written with - or _ (--max-new-tokens, --max_new_tokens).",
      "spark-run"};
  app.option_defaults()->always_capture_default();
  app.add_option("model", flags.positional, "MODEL.cubin (or .ptx): the compiled model")
      ->type_name("MODEL")->default_str("");
  auto* generation = "generation";
  app.add_option("--weights", flags.weights, "checkpoint directory or .safetensors file (required)")
      ->type_name("PATH")->group(generation);
  app.add_option("--prompt-ids", flags.prompt_ids, "comma-separated prompt token ids, e.g. 2,818,5192")
      ->type_name("IDS")->group(generation);
  CLI::Option* prompt = app.add_option(
      "--prompt", flags.prompt,
      "prompt text, tokenized as it is (the tokenizer's post-processor adds <bos> if it says so; "
      "no chat template); the text streams out")->group(generation);
  CLI::Option* chat = app.add_option(
      "--chat", flags.chat,
      "one user message, rendered with the checkpoint's chat template (add_generation_prompt); "
      "the answer streams out as text")->group(generation);
  app.add_flag("--interactive", flags.interactive,
               "multi-turn chat on stdin/stdout: one user message per line; the conversation's "
               "KV cache is reused, so each turn prefills only what is new; Ctrl-C stops an "
               "answer, Ctrl-D ends")->group(generation);
  CLI::Option* system = app.add_option("--system", flags.system,
                                       "with --chat/--interactive: a system message first")
                            ->type_name("TEXT")->group(generation);
  app.add_flag("--enable-thinking", flags.enable_thinking,
               "with --chat/--interactive: enable_thinking = true for the template; the thinking "
               "streams dimmed on a terminal")->group(generation);
  app.add_flag("--hide-thinking", flags.hide_thinking,
               "with --chat/--interactive: do not print the thinking (--json still has it)")
      ->group(generation);
  CLI::Option* tokenizer = app.add_option(
      "--tokenizer", flags.tokenizer,
      "tokenizer directory (tokenizer.json, tokenizer_config.json, chat_template.jinja, "
      "generation_config.json) or tokenizer.json file (default: the --weights directory)")
      ->type_name("PATH")->group(generation);
  app.add_option("--stop", flags.stop,
                 "with text: stop when the text ends with STRING (not printed; repeatable). "
                 "Generation also stops at generation_config.json's eos_token_id ids")
      ->group(generation)->allow_extra_args(false)->type_name("STRING")->default_str("");
  app.add_option("--max-new-tokens", flags.max_new_tokens,
                 "tokens to generate at most (per turn); stops at an EOS token")->type_name("N")->group(generation);
  app.add_option("--device", flags.device,
                 "auto: the GPU when the driver loads, a device exists and an image fits it; "
                 "otherwise the host, saying why. cuda or host: that one")->type_name("auto|cuda|host")->group(generation);
  app.add_option("--max-length", flags.max_length,
                 "tokens per sequence, prompt + output (0: the smaller of 4096 and the model's "
                 "max_position_embeddings)")->type_name("N")->group(generation);
  app.add_option("--device-memory-utilization", flags.device_memory_utilization,
                 "fraction of the memory pool the model may use")->type_name("F")->group(generation);
  app.add_option("--tensor-parallel", flags.tensor_parallel,
                 "the ranks the model was compiled for (spark-compile --tensor-parallel N); "
                 "refused when it differs. A model of N ranks runs rank r on CUDA device r "
                 "(NCCL), or every rank on the host in this process with --device host "
                 "(docs/multi-gpu.md); 0: as compiled")
      ->type_name("N")->check(CLI::Range(int64_t{0}, int64_t{64}))->group(generation);
  CLI::Option* temperature = app.add_option(
      "--temperature", flags.temperature,
      "sampling temperature (0: greedy; with text, generation_config.json's when it has one)")
      ->type_name("T")->group(generation);
  CLI::Option* top_k = app.add_option(
      "--top-k", flags.top_k,
      "sample among the K most likely tokens (0: all; with text, generation_config.json's)")
      ->type_name("K")->group(generation);
  CLI::Option* top_p = app.add_option(
      "--top-p", flags.top_p,
      "nucleus sampling threshold (1: off; with text, generation_config.json's)")->type_name("P")->group(generation);
  app.add_option("--seed", flags.seed, "sampling seed")->type_name("S")->group(generation);
  app.add_option("--soft-tokens", flags.soft_tokens,
                 "safetensors file: 'embeddings' F32 [n, hidden] and 'positions' I64 [n] (prompt "
                 "positions they replace; others are skipped)")->type_name("FILE")->group(generation);
  app.add_option("--image", flags.images,
                 "a PNG or JPEG the model sees (repeatable, in order; a multimodal model compiled "
                 "with its vision tower), or a safetensors file of the processor's pixel_values "
                 "and image_position_ids: with --prompt-ids, each image_token_id of IDS is where "
                 "one goes; with --chat, each <image> in the text (else all before the text)")
      ->type_name("FILE")->group(generation)->allow_extra_args(false);
  app.add_option("--image-tokens", flags.image_tokens,
                 "soft tokens per image, the processor's budget: 70, 140, 280 (default), 560 or "
                 "1120 (at most spark-compile --max-image-tokens)")
      ->type_name("N")->group(generation);
  app.add_option("--soft-tokens-out", flags.soft_tokens_out,
                 "with --image: write the images' soft tokens (the vision tower's output) to FILE, "
                 "as --soft-tokens reads them")
      ->type_name("FILE")->group(generation);
  app.add_option("--logits-out", flags.logits_out,
                 "safetensors file: 'logits' F32 [prompt + generated - 1, vocab]")->type_name("FILE")->group(generation);
  app.add_option("--dump", flags.dump,
                 "every step's outputs, DIR/runNNN.safetensors per executor call")->type_name("DIR")->group(generation);
  app.add_flag("--profile", flags.profile,
               "time every step on its own (CUDA events; decode then runs without its CUDA graph, "
               "so tokens/s is lower) and print, per op, launches, ms per call, share, modelled MB "
               "moved, GB/s, TFLOP/s")->group(generation);
  app.add_flag("--json", flags.json,
               "print {\"ids\", [\"text\"], \"timings\", \"memory\", [\"startup\"], [\"profile\"]} as JSON on "
               "stdout (one object per turn with --interactive) instead of the streamed text or the ids")
      ->group(generation);
  app.add_flag("-v", flags.verbose, "print every resolution decision, the memory table, what was measured next to it, and the cold start (process start to the first token, phase by phase)")
      ->group(generation);
  app.add_option("--streams", flags.streams,
                 "benchmark and check continuous batching: generate the prompt as N streams "
                 "(stream i without the prompt's last i % 4 tokens), first one after another, "
                 "then all at once (N sessions in threads, their steps merged); print each "
                 "stream's ids and both aggregate rates; exit 1 unless every stream's ids are "
                 "the same both ways")
      ->type_name("N")->group(generation)->check(CLI::Range(int64_t{1}, int64_t{256}));
  app.add_option("--compare-logits", flags.compare_logits,
                 "with --streams: compare every logits row of the two runs instead of the ids "
                 "alone: pass when each row is within RTOL of the row's largest |logit| and the "
                 "ids differ, if at all, only past a near-tie (two candidates within 2 x RTOL)")
      ->type_name("RTOL")->group(generation)->check(CLI::Range(0.0, 1.0));
  app.add_option("--kv-pool-sequences", flags.kv_pool_sequences,
                 "with --streams: a KV cache pool that holds only N of the streams at full "
                 "length (an overcommitted pool: streams that find no free block evict an idle "
                 "stream's caches or are preempted and recomputed); the check is the same")
      ->type_name("N")->group(generation)->check(CLI::Range(int64_t{1}, int64_t{256}));
  app.add_flag("--no-prefix-sharing", flags.no_prefix_sharing,
               "with --streams: streams do not share the KV blocks of a prompt prefix another "
               "(idle) stream holds; by default one that starts with at least 16 tokens more "
               "than its own caches hold reads them instead of prefilling them")
      ->group(generation);
  app.add_option("--module-path", flags.module_path,
                 "directory searched first for the image (repeatable, or a comma list)")
      ->group(generation)->allow_extra_args(false)->type_name("DIR")->default_str("");
  auto* other = "other modes";
  app.add_flag("--explain-resolution", flags.explain_resolution,
               "print the module resolution decisions and exit")->group(other);
  CLI::Option* dump_plan =
      app.add_flag("--dump-plan", flags.dump_plan,
                   "print the model's plan (steps, programs, buffers, weights) as JSON and exit")
          ->group(other);
  app.add_option("--device-cc", flags.device_cc,
                 "compute capability to resolve for, M.m (default: CUDA device 0)")->type_name("M.m")->group(other);
  app.add_flag("--estimate", flags.estimate,
               "print the memory estimate and exit (exit 1 if it does not fit)")->group(other);
  app.add_option("--device-profile", flags.device_profile,
                 "device to estimate for: dgx-spark, h200, h100, a100-80gb, rtx-5090, rtx-4090, l4, "
                 "or auto (CUDA device 0, else the host)")->type_name("NAME|auto")->group(other);
  app.add_flag("--list-devices", flags.list_devices, "list the CUDA devices and exit")->group(other);
  // The other modes read only what their synopsis names (docs/cli.md): a flag of another mode
  // with one is a usage error, not silently dropped. --dump-plan reads only the model file;
  // --explain-resolution the model, --device-cc and --module-path; --estimate the model,
  // --device-profile, --max-length, --device-memory-utilization and -v.
  const std::vector<std::string> generation_flags = {
      "--weights", "--prompt-ids", "--prompt", "--chat", "--interactive", "--system",
      "--enable-thinking", "--hide-thinking", "--tokenizer", "--stop", "--max-new-tokens",
      "--device", "--temperature", "--top-k", "--top-p", "--seed", "--soft-tokens", "--image",
      "--image-tokens", "--soft-tokens-out", "--logits-out", "--dump", "--profile", "--json", "--streams",
      "--compare-logits"};
  const auto exclude = [&](CLI::Option* mode, const std::vector<std::string>& names) {
    for (const std::string& name : names) mode->excludes(app.get_option(name));
  };
  CLI::Option* explain = app.get_option("--explain-resolution");
  CLI::Option* estimate = app.get_option("--estimate");
  exclude(dump_plan, generation_flags);
  exclude(dump_plan, {"--explain-resolution", "--estimate", "--list-devices", "--max-length",
                      "--device-memory-utilization", "--module-path", "--device-cc",
                      "--device-profile", "--tensor-parallel"});
  exclude(explain, generation_flags);
  exclude(explain, {"--estimate", "--list-devices", "--max-length",
                    "--device-memory-utilization", "--device-profile", "--tensor-parallel"});
  exclude(estimate, generation_flags);
  exclude(estimate, {"--list-devices", "--module-path", "--device-cc"});
  // Each mode's own options mean nothing without it.
  app.get_option("--device-cc")->needs(explain);
  app.get_option("--device-profile")->needs(estimate);
  // --streams runs token prompts as N sessions: no chat on the terminal, no soft tokens, no
  // every-row logits file; --compare-logits is its check.
  CLI::Option* streams = app.get_option("--streams");
  exclude(streams, {"--interactive", "--soft-tokens", "--logits-out", "--image"});
  // Images become soft tokens: not beside precomputed ones, nor on an interactive terminal.
  exclude(app.get_option("--image"), {"--soft-tokens", "--interactive"});
  app.get_option("--image-tokens")->needs(app.get_option("--image"));
  app.get_option("--soft-tokens-out")->needs(app.get_option("--image"));
  app.get_option("--compare-logits")->needs(streams);
  app.get_option("--kv-pool-sequences")->needs(streams);
  app.get_option("--no-prefix-sharing")->needs(streams);
  std::vector<std::string> args = spark::rt::DashedFlagNames(argc, argv);
  std::vector<char*> c_args;
  for (std::string& arg : args) c_args.push_back(&arg[0]);
  try {
    app.parse(static_cast<int>(c_args.size()), c_args.data());
  } catch (const CLI::ParseError& error) {
    // --help prints the usage and exits 0; a usage error prints why and exits 1.
    return app.exit(error) == 0 ? 0 : 1;
  }
  flags.given_prompt = prompt->count() > 0;
  flags.given_chat = chat->count() > 0;
  flags.given_system = system->count() > 0;
  flags.given_tokenizer = tokenizer->count() > 0;
  flags.given_image_tokens = app.get_option("--image-tokens")->count() > 0;
  flags.given_sampling.temperature = temperature->count() > 0;
  flags.given_sampling.top_k = top_k->count() > 0;
  flags.given_sampling.top_p = top_p->count() > 0;
  absl::Status status;
  try {
    status = spark::rt::Run();
  } catch (const std::bad_alloc&) {
    // The runtime turns the allocations it sizes from its inputs into RESOURCE_EXHAUSTED; this
    // catches any other one (a vector of the generated tokens, a message) the same way.
    status = absl::ResourceExhaustedError(
        "out of host memory (std::bad_alloc); free memory, or raise this process's limit "
        "(ulimit -v, the container's or cgroup's memory limit)");
  }
  std::fflush(stdout);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

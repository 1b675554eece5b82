// spark-serve: an OpenAI-compatible HTTP server over a compiled Spark model (docs/serving.md).
// A thin main: the command line (CLI11), the model through the runtime's public API (engine.h),
// the checkpoint's text files through spark_text, and the server library (runtime/src/serve:
// OpenAI layer, scheduler, HTTP). It listens first, so that /health answers 503 while the model
// loads; "listening on http://HOST:PORT" is printed once it is ready. SIGINT / SIGTERM: no new
// requests, running ones end (their streams close properly), exit 0.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "http_server.h"
#include "openai_api.h"
#include "scheduler.h"
#include "spark/runtime/artifact_cache.h"
#include "spark/runtime/chat_template.h"
#include "spark/runtime/device.h"
#include "spark/runtime/engine.h"
#include "spark/runtime/image_prompt.h"
#include "spark/runtime/generation_config.h"
#include "spark/runtime/memory_estimator.h"
#include "spark/runtime/module_resolver.h"
#include "spark/runtime/status_macros.h"
#include "spark/runtime/tokenizer.h"

namespace spark {
namespace {

struct Flags {
  std::string model;
  std::string weights;
  std::string tokenizer;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string model_name;
  std::string api_key;
  int64_t max_length = 0;
  int64_t max_queue = 64;
  int64_t max_sequences = 0;  // 0: rt::kAutoSessions (all: the most, up to it, that fit)
  std::string kv_pool_sequences = "fit";  // all, fit or N: the pool's full-length sessions
  bool no_prefix_sharing = false;  // ModelOptions::share_kv_prefixes off
  std::string device = "auto";
  double device_memory_utilization = 0.9;
  std::vector<std::string> module_path;
  int64_t image_tokens = 280;  // soft tokens per image of an image_url part
  bool given_image_tokens = false;
};

void Note(const std::string& text) {
  std::fprintf(stderr, "spark-serve: %s\n", text.c_str());
  std::fflush(stderr);
}


// The model name clients use: --model-name, else the artifact's stem.
std::string ModelName(const Flags& flags) {
  if (!flags.model_name.empty()) return flags.model_name;
  if (rt::IsCheckpointDirectory(flags.model)) {
    std::string dir = flags.model;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return dir.substr(dir.rfind('/') + 1);
  }
  return rt::ModuleStem(flags.model);
}

// Everything the server holds once the model is loaded.
struct Loaded {
  std::shared_ptr<rt::Model> model;
  std::unique_ptr<rt::Tokenizer> tokenizer;
  std::optional<rt::ChatTemplate> chat_template;
  rt::GenerationConfig generation_config;
  std::unique_ptr<serve::Scheduler> scheduler;
};

// MODEL given as a checkpoint directory: the artifact compiled for the device (or, on the host,
// PTX and its plan, which need no ptxas), from the cache or by spark-import and spark-compile.
// --kv-pool-sequences: all, fit or a count in [1, 256], as ModelOptions::kv_pool_sessions.
absl::StatusOr<int64_t> KvPoolSessions(const std::string& value) {
  if (value == "all") return 0;
  if (value == "fit") return rt::kKvPoolFit;
  int64_t n = 0;
  if (absl::SimpleAtoi(value, &n) && n >= 1 && n <= 256) return n;
  return absl::InvalidArgumentError(absl::StrCat(
      "--kv-pool-sequences must be all, fit or a number from 1 to 256, got '", value, "'"));
}

absl::StatusOr<std::string> ArtifactFor(const Flags& flags, rt::DeviceMode mode) {
  absl::StatusOr<std::vector<rt::DeviceInfo>> devices = std::vector<rt::DeviceInfo>{};
  if (mode != rt::DeviceMode::kHost) {
    devices = rt::ListDevices();
    if (!devices.ok() && mode == rt::DeviceMode::kCuda) return devices.status();
  }
  const std::string target = rt::ArtifactTargetFor(
      devices.ok() && !devices->empty() ? &devices->front() : nullptr);
  return rt::CompiledArtifact(rt::DefaultCompileRequest(flags.model, target),
                              [](absl::string_view text) { Note(std::string(text)); });
}

absl::StatusOr<Loaded> Load(const Flags& flags) {
  Loaded loaded;
  const std::string dir = rt::TextFilesDirectory(flags.tokenizer, flags.weights);
  absl::StatusOr<std::unique_ptr<rt::Tokenizer>> tokenizer =
      rt::Tokenizer::Load(flags.tokenizer.empty() ? dir : flags.tokenizer);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat("cannot load the tokenizer (from ", dir,
                                     "; name another with --tokenizer DIR): ",
                                     tokenizer.status().message()));
  }
  loaded.tokenizer = *std::move(tokenizer);
  absl::StatusOr<rt::ChatTemplate> chat = rt::ChatTemplate::Load(dir);
  if (chat.ok()) {
    loaded.chat_template = *std::move(chat);
  } else {
    Note(absl::StrCat("no chat template (", chat.status().message(),
                      "): /v1/chat/completions answers 400; /v1/completions works"));
  }
  SPARK_ASSIGN_OR_RETURN(loaded.generation_config, rt::LoadGenerationConfig(dir));

  rt::EngineOptions engine_options;
  SPARK_ASSIGN_OR_RETURN(engine_options.device, rt::ParseDeviceMode(flags.device));
  for (const std::string& entry : flags.module_path) {
    for (absl::string_view part : absl::StrSplit(entry, ',')) {
      engine_options.module_path.emplace_back(part);
    }
  }
  const char* env = std::getenv("SPARK_MODULE_PATH");
  engine_options.env_module_path = env == nullptr ? "" : env;
  engine_options.install_prefix = rt::RunningInstallPrefix();
  engine_options.device_memory_utilization = flags.device_memory_utilization;
  engine_options.on_notice = [](absl::string_view text) { Note(std::string(text)); };
  engine_options.on_placed = [](const rt::Model& model) {
    if (!model.on_cuda()) {
      Note(absl::StrCat("device: host reference executor; image ", model.artifact().path));
      return;
    }
    const rt::Resolution& r = *model.resolution();
    Note(absl::StrCat("device: cuda:", model.device().ordinal, " ", model.device().name,
                      "; image ", r.artifact.path, " (", r.artifact.target, ", ",
                      rt::ImageKindName(r.kind), ")"));
    const std::string fallback = rt::FallbackNote(r);
    if (!fallback.empty()) Note(fallback);
  };
  engine_options.on_estimate = [](const rt::MemoryEstimate& estimate) {
    Note(rt::FormatEstimateLine(estimate));
  };
  if (isatty(STDERR_FILENO)) {
    engine_options.on_progress = [](uint64_t done, uint64_t total) {
      std::fprintf(stderr, "\rspark-serve: loading weights %3d%%%s",
                   total == 0 ? 100 : static_cast<int>(done * 100 / total),
                   done == total ? "\n" : "");
    };
  }
  rt::ModelOptions model_options;
  model_options.artifact = flags.model;
  if (rt::IsCheckpointDirectory(flags.model)) {
    SPARK_ASSIGN_OR_RETURN(model_options.artifact, ArtifactFor(flags, engine_options.device));
  }
  model_options.weights = flags.weights;
  model_options.max_length = flags.max_length;
  // Requests that generate at once (continuous batching): --max-sequences, or 0: rt::kAutoSessions
  // (with --kv-pool-sequences all: the most, up to it, whose KV caches the memory estimate fits);
  // the pool holds --kv-pool-sequences of them at full length (the engine says how many).
  model_options.max_sessions = flags.max_sequences;
  SPARK_ASSIGN_OR_RETURN(model_options.kv_pool_sessions, KvPoolSessions(flags.kv_pool_sequences));
  model_options.share_kv_prefixes = !flags.no_prefix_sharing;
  SPARK_ASSIGN_OR_RETURN(loaded.model, rt::Engine(engine_options).OpenModel(model_options));
  if (loaded.model->takes_images()) {
    SPARK_RETURN_IF_ERROR(rt::CheckImageBudget(*loaded.model, flags.image_tokens));
  } else if (flags.given_image_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--image-tokens: ", loaded.model->CheckTakesImages().message()));
  }
  SPARK_ASSIGN_OR_RETURN(loaded.scheduler,
                         serve::Scheduler::Create(loaded.model, *loaded.tokenizer, flags.max_queue));
  return loaded;
}

absl::Status Serve(Flags flags) {
  if (flags.weights.empty() && rt::IsCheckpointDirectory(flags.model)) flags.weights = flags.model;
  if (flags.weights.empty()) {
    return absl::InvalidArgumentError(
        "--weights is required (a checkpoint directory or .safetensors file)");
  }
  if (flags.port < 0 || flags.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--port must be in [0, 65535], got ", flags.port));
  }
  if (flags.max_queue < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-queue must be at least 1, got ", flags.max_queue));
  }
  // Signals are taken by this thread (sigwait), never by the server's: blocked before any thread
  // starts (threads inherit the mask). SIGUSR1 is the loader's "done".
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal

  serve::HttpOptions http;
  http.host = flags.host;
  http.port = flags.port;
  http.api_key = flags.api_key;
  http.threads = static_cast<int>(std::min<int64_t>(flags.max_queue + 4, 256));
  serve::HttpServer server(http);
  SPARK_ASSIGN_OR_RETURN(const int port, server.Bind());
  const std::string url = absl::StrCat("http://", flags.host, ":", port);
  std::thread listener([&server] { server.Listen(); });
  Note(absl::StrCat("loading ", flags.model, " (", url, "/health answers 503 until it is ready)"));

  absl::Status status;
  std::optional<Loaded> loaded;
  std::thread loader([&] {
    absl::StatusOr<Loaded> result = Load(flags);
    if (!result.ok()) {
      status = result.status();
    } else {
      loaded = *std::move(result);
    }
    kill(getpid(), SIGUSR1);  // wakes the signal thread: loading is over
  });
  int received = 0;
  sigwait(&signals, &received);
  const bool stopped_while_loading = received != SIGUSR1;
  loader.join();
  if (status.ok() && !stopped_while_loading) {
    serve::ServeContext context;
    context.tokenizer = loaded->tokenizer.get();
    context.chat_template = loaded->chat_template ? &*loaded->chat_template : nullptr;
    context.model_name = ModelName(flags);
    context.max_length = loaded->model->max_length();
    context.vocab_size = loaded->model->info().vocab_size;
    context.generation_config = loaded->generation_config;
    context.takes_images = loaded->model->takes_images();
    context.model_info = loaded->model->info();
    context.image_tokens = flags.image_tokens;
    server.SetReady(std::move(context), loaded->scheduler.get(),
                    static_cast<int64_t>(std::time(nullptr)));
    Note(absl::StrCat("model '", ModelName(flags), "', max length ", loaded->model->max_length(),
                      " tokens, ", loaded->model->max_sessions(),
                      " requests at once (--max-sequences), queue ", flags.max_queue));
    Note(absl::StrCat("listening on ", url));
    do {
      sigwait(&signals, &received);
    } while (received == SIGUSR1);
    Note(absl::StrCat("signal ", received, ": ending the running request, refusing new ones"));
    loaded->scheduler->Shutdown();
    // The running request ends at once; its stream gets its final chunks before the server
    // closes the connections.
    if (!server.WaitForRequests(std::chrono::seconds(30))) {
      Note("requests still in flight after 30 s; closing their connections");
    }
  }
  server.Stop();
  listener.join();
  if (loaded) loaded->scheduler.reset();  // after the HTTP threads that read its jobs
  if (status.ok()) Note("stopped");
  return status;
}

}  // namespace
}  // namespace spark

int main(int argc, char** argv) {
  spark::Flags flags;
  CLI::App app{
      "spark-serve: an OpenAI-compatible HTTP server (POST /v1/chat/completions, /v1/completions, "
      "/tokenize, /detokenize; GET /v1/models, /health, /metrics) over a model compiled by "
      "spark-compile. docs/serving.md has the details.\n\n"
      "usage: spark-serve MODEL.cubin --weights CHECKPOINT [--tokenizer DIR] [--host 127.0.0.1] "
      "[--port 8080] [options]",
      "spark-serve"};
  app.add_option("model", flags.model,
                 "MODEL.cubin (or .ptx): the compiled model; or a checkpoint directory "
                 "(config.json + safetensors), imported and compiled for the device on first use "
                 "and cached in $SPARK_CACHE_DIR/artifacts (default ~/.cache/spark)")
      ->required()->type_name("MODEL");
  app.add_option("--weights", flags.weights,
                 "checkpoint directory or .safetensors file (default: MODEL when it is a checkpoint "
                 "directory)")
      ->type_name("PATH");
  app.add_option("--tokenizer", flags.tokenizer,
                 "directory with tokenizer.json, chat_template.jinja, generation_config.json "
                 "(default: the --weights directory)")->type_name("PATH");
  app.add_option("--host", flags.host, "address to listen on")->capture_default_str();
  app.add_option("--port", flags.port, "port to listen on (0: any free port, printed)")
      ->capture_default_str();
  app.add_option("--model-name", flags.model_name,
                 "the model's name in the API (default: the artifact's stem)");
  app.add_option("--api-key", flags.api_key,
                 "require 'Authorization: Bearer KEY' on every route but /health and /metrics");
  app.add_option("--max-length", flags.max_length,
                 "tokens per request, prompt + completion (0: min(4096, the model's "
                 "max_position_embeddings))")->capture_default_str();
  app.add_option("--max-queue", flags.max_queue,
                 "requests that may wait; more get 503")
      ->capture_default_str();
  app.add_option("--image-tokens", flags.image_tokens,
                 "soft tokens per image of a request's image_url parts (the processor's budget: "
                 "70, 140, 280, 560 or 1120; at most the model's spark-compile --max-image-tokens)")
      ->capture_default_str()->type_name("N");
  app.add_option("--max-sequences", flags.max_sequences,
                 "requests that generate at once, their steps batched (0: 32; with "
                 "--kv-pool-sequences all, the most, up to 32, whose KV caches the memory "
                 "estimate fits)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{256}));
  app.add_option("--kv-pool-sequences", flags.kv_pool_sequences,
                 "requests whose KV caches the pool holds at full length: all (every one of "
                 "--max-sequences; refused when they do not fit), fit (the most the memory "
                 "estimate fits; with --max-sequences 0, 32 requests share them) or N. Fewer than "
                 "--max-sequences overcommits the pool: a request that finds no free block takes "
                 "an idle session's, or waits and is recomputed; none fails for it")
      ->capture_default_str()->type_name("all|fit|N");
  app.add_flag("--no-prefix-sharing", flags.no_prefix_sharing,
               "requests do not share the KV blocks of a prompt prefix an idle session holds (a "
               "system prompt of other conversations); by default a request whose prompt starts "
               "with at least 16 tokens more than its own session holds reads them instead of "
               "prefilling them");
  app.add_option("--device", flags.device, "auto, cuda or host")->capture_default_str();
  app.add_option("--device-memory-utilization", flags.device_memory_utilization,
                 "fraction of the memory pool the model may use")->capture_default_str();
  app.add_option("--module-path", flags.module_path,
                 "directory searched first for the image (repeatable, or a comma list)")
      ->allow_extra_args(false)->type_name("DIR");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 1;
  }
  flags.given_image_tokens = app.get_option("--image-tokens")->count() > 0;
  const absl::Status status = spark::Serve(flags);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

#include "http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <thread>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "json_document.h"

namespace spark {
namespace serve {
namespace {

constexpr char kJson[] = "application/json";

void SendJson(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(rt::SerializeJson(body), kJson);
}

void SendError(httplib::Response& res, const ApiError& error) {
  SendJson(res, error.status, ErrorJson(error));
}

ApiError Error(int status, std::string message, const char* type, const char* code = nullptr) {
  ApiError error;
  error.status = status;
  error.message = std::move(message);
  error.type = type;
  if (code != nullptr) error.code = code;
  return error;
}

// Constant-time comparison of the presented key with the configured one.
bool SameKey(const std::string& given, const std::string& expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % (expected.empty() ? 1 : expected.size())]);
  }
  return diff == 0 && !expected.empty();
}

// The outcome of a job, for the response objects.
GenerationOutput OutputOf(const Job& job) {
  const Job::Outcome& outcome = job.outcome();
  GenerationOutput output;
  output.text = outcome.text;
  output.reasoning = outcome.reasoning;
  output.prompt_tokens = static_cast<int64_t>(job.request().prompt.size());
  output.completion_tokens = static_cast<int64_t>(outcome.result.tokens.size());
  output.finish_reason = FinishReason(outcome.result);
  if (job.request().endpoint == Endpoint::kChat) {
    AddToolCalls(outcome.tool_calls, &output);
  } else {
    for (const std::string& call : outcome.tool_calls) {
      output.text += absl::StrCat("<|tool_call>", call, "<tool_call|>");
    }
  }
  return output;
}

ApiError FailureOf(const absl::Status& status) {
  if (absl::IsUnavailable(status)) {
    return Error(503, std::string(status.message()), "server_error", "unavailable");
  }
  if (absl::IsInvalidArgument(status)) {
    return Error(400, std::string(status.message()), "invalid_request_error");
  }
  return Error(500, absl::StrCat("generation failed: ", status.ToString()), "server_error");
}

}  // namespace

HttpServer::HttpServer(HttpOptions options)
    : options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {
  Routes();
}

HttpServer::~HttpServer() = default;

absl::StatusOr<int> HttpServer::Bind() {
  const int port = options_.port == 0 ? server_->bind_to_any_port(options_.host)
                                      : (server_->bind_to_port(options_.host, options_.port)
                                             ? options_.port
                                             : -1);
  if (port < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.host, ":",
                                               options_.port,
                                               " (in use, or not an address of this machine)"));
  }
  return port;
}

void HttpServer::Listen() {
  listen_entered_ = true;
  if (!stop_requested_) server_->listen_after_bind();
  listen_returned_ = true;
}

void HttpServer::Stop() {
  stop_requested_ = true;
  // A Listen entered before stop_requested_ was set serves (or is about to): wait until httplib
  // runs it, so that stop() takes effect. One entered later sees stop_requested_ and returns.
  while (listen_entered_ && !listen_returned_ && !server_->is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  server_->stop();
}

bool HttpServer::WaitForRequests(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(requests_mutex_);
  return requests_done_.wait_for(lock, timeout, [&] { return requests_in_flight_ == 0; });
}

void HttpServer::SetReady(ServeContext context, Scheduler* scheduler, int64_t created) {
  context_ = std::move(context);
  scheduler_ = scheduler;
  created_ = created;
  ready_.store(true);
}

std::string HttpServer::NextId(const char* prefix) {
  return absl::StrFormat("%s-%016x", prefix, next_id_.fetch_add(1) * 0x9E3779B97F4A7C15ull);
}

std::string HttpServer::FormatMetrics() const {
  std::string out =
      "# HELP spark_http_responses_total HTTP responses by status code.\n"
      "# TYPE spark_http_responses_total counter\n";
  {
    std::lock_guard<std::mutex> lock(status_mutex_);
    for (const auto& [status, count] : responses_by_status_) {
      absl::StrAppend(&out, "spark_http_responses_total{status=\"", status, "\"} ", count, "\n");
    }
  }
  absl::StrAppend(&out, "# HELP spark_ready Whether the model is loaded.\n# TYPE spark_ready gauge\n",
                  "spark_ready ", ready_.load() ? 1 : 0, "\n");
  if (scheduler_ != nullptr) out += scheduler_->FormatMetrics();
  return out;
}

void HttpServer::Routes() {
  httplib::Server& s = *server_;
  const int threads = options_.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_payload_max_length(options_.max_body_bytes);
  // SO_REUSEADDR only (a restart may bind while old connections linger), not httplib's default
  // SO_REUSEPORT, which would let a second server share the port without a word.
  s.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const char*>(&yes), sizeof(yes));
  });
  s.set_logger([this](const httplib::Request&, const httplib::Response& res) {
    std::lock_guard<std::mutex> lock(status_mutex_);
    ++responses_by_status_[res.status];
  });
  // Failures the routes did not answer themselves (unknown route, body too large) get OpenAI's
  // error object too.
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      SendError(res, Error(404, absl::StrCat("no route ", req.method, " ", req.path,
                                             " (see GET /v1/models, POST /v1/chat/completions)"),
                           "invalid_request_error", "not_found"));
    } else if (res.status == 413) {
      SendError(res, Error(413, absl::StrCat("the request body is larger than ",
                                             options_.max_body_bytes, " bytes"),
                           "invalid_request_error", "payload_too_large"));
    } else {
      SendError(res, Error(res.status, absl::StrCat("HTTP ", res.status), "invalid_request_error"));
    }
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    SendError(res, Error(500, "internal error while handling the request", "server_error"));
  });
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const bool open = req.path == "/health" || req.path == "/metrics";
    if (options_.api_key.empty() || open) return httplib::Server::HandlerResponse::Unhandled;
    std::string given = req.get_header_value("Authorization");
    if (absl::StartsWith(given, "Bearer ")) given = given.substr(7);
    if (SameKey(given, options_.api_key)) return httplib::Server::HandlerResponse::Unhandled;
    SendError(res, Error(401, "a valid API key is required: 'Authorization: Bearer KEY' "
                              "(spark-serve --api-key)",
                         "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    Json body = Json::object();
    body["status"] = ready_.load() ? "ok" : "loading";
    SendJson(res, ready_.load() ? 200 : 503, body);
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(FormatMetrics(), "text/plain; version=0.0.4");
  });

  // Every other route needs the model.
  const auto when_ready = [this](auto handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      if (!ready_.load()) {
        SendError(res, Error(503, "the model is loading; retry when GET /health answers 200",
                             "server_error", "loading"));
        return;
      }
      handler(req, res);
    };
  };
  s.Get("/v1/models", when_ready([this](const httplib::Request&, httplib::Response& res) {
          Json model = Json::object();
          model["id"] = context_.model_name;
          model["object"] = "model";
          model["created"] = created_;
          model["owned_by"] = "spark";
          model["max_model_len"] = context_.max_length;
          Json body = Json::object();
          body["object"] = "list";
          body["data"] = Json::array({std::move(model)});
          SendJson(res, 200, body);
        }));
  const auto json_route = [this, &s, when_ready](const std::string& path, auto handler) {
    s.Post(path, when_ready([this, handler](const httplib::Request& req, httplib::Response& res) {
             Expected<Json> body = ParseBody(req.body);
             if (std::holds_alternative<ApiError>(body)) {
               SendError(res, std::get<ApiError>(body));
               return;
             }
             handler(std::get<Json>(body), res);
           }));
    const auto not_allowed = [path](const httplib::Request& req, httplib::Response& res) {
      SendError(res, Error(405, absl::StrCat(req.method, " is not allowed on ", path, ": use POST"),
                           "invalid_request_error", "method_not_allowed"));
    };
    s.Get(path, not_allowed);
    s.Put(path, not_allowed);
    s.Delete(path, not_allowed);
  };
  json_route("/tokenize", [this](const Json& body, httplib::Response& res) {
    Expected<Json> out = Tokenize(body, context_);
    if (std::holds_alternative<ApiError>(out)) return SendError(res, std::get<ApiError>(out));
    SendJson(res, 200, std::get<Json>(out));
  });
  json_route("/detokenize", [this](const Json& body, httplib::Response& res) {
    Expected<Json> out = Detokenize(body, context_);
    if (std::holds_alternative<ApiError>(out)) return SendError(res, std::get<ApiError>(out));
    SendJson(res, 200, std::get<Json>(out));
  });
  const auto generate = [this](Expected<GenerationRequest> parsed, httplib::Response& res) {
    if (std::holds_alternative<ApiError>(parsed)) return SendError(res, std::get<ApiError>(parsed));
    GenerationRequest request = std::get<GenerationRequest>(std::move(parsed));
    const Endpoint endpoint = request.endpoint;
    const bool stream = request.stream;
    absl::StatusOr<std::shared_ptr<Job>> submitted = scheduler_->Submit(std::move(request));
    if (!submitted.ok()) return SendError(res, FailureOf(submitted.status()));
    std::shared_ptr<Job> job = *std::move(submitted);
    // In flight until answered in full: a non-streamed answer when this handler returns, a stream
    // when httplib releases its provider.
    {
      std::lock_guard<std::mutex> lock(requests_mutex_);
      ++requests_in_flight_;
    }
    auto answered = std::shared_ptr<void>(nullptr, [this](void*) {
      {
        std::lock_guard<std::mutex> lock(requests_mutex_);
        --requests_in_flight_;
      }
      requests_done_.notify_all();
    });
    const std::string id = NextId(endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl");
    const int64_t created = static_cast<int64_t>(std::time(nullptr));
    const std::string& model = job->request().model;
    if (!stream) {
      std::vector<Job::Piece> ignored;
      while (!job->Wait(&ignored, std::chrono::milliseconds(1000))) ignored.clear();
      if (!job->outcome().status.ok()) return SendError(res, FailureOf(job->outcome().status));
      const GenerationOutput output = OutputOf(*job);
      SendJson(res, 200,
               endpoint == Endpoint::kChat ? ChatResponseJson(id, created, model, output)
                                           : CompletionResponseJson(id, created, model, output));
      return;
    }
    // A stream: the role first (chat), then a chunk per piece as the worker pushes them, the
    // finish, the usage when asked, [DONE]. A client that goes away cancels the job.
    auto started = std::make_shared<bool>(false);
    auto calls = std::make_shared<size_t>(0);  // tool calls sent so far
    res.set_chunked_content_provider(
        "text/event-stream",
        [job, id, created, model, endpoint, started, calls](size_t, httplib::DataSink& sink) {
          const auto send = [&](const std::string& event) {
            if (!sink.write(event.data(), event.size())) {
              job->Cancel();
              return false;
            }
            return true;
          };
          if (!*started) {
            *started = true;
            if (endpoint == Endpoint::kChat &&
                !send(ServerSentEvent(ChatChunkJson(id, created, model, "role", "assistant", "")))) {
              return false;
            }
          }
          std::vector<Job::Piece> pieces;
          const bool done = job->Wait(&pieces, std::chrono::milliseconds(200));
          for (const Job::Piece& piece : pieces) {
            if (piece.channel == rt::TextChannel::kToolCall) {
              absl::StatusOr<rt::ToolCall> call = rt::ParseToolCall(piece.text);
              const std::string text = absl::StrCat("<|tool_call>", piece.text, "<tool_call|>");
              const Json chunk =
                  endpoint != Endpoint::kChat
                      ? CompletionChunkJson(id, created, model, text, "")
                      : call.ok() ? ChatToolCallChunkJson(id, created, model, *call, (*calls)++)
                                  : ChatChunkJson(id, created, model, "content", text, "");
              if (!send(ServerSentEvent(chunk))) return false;
              continue;
            }
            const Json chunk =
                endpoint == Endpoint::kChat
                    ? ChatChunkJson(id, created, model,
                                    piece.channel == rt::TextChannel::kThinking
                                        ? "reasoning_content"
                                        : "content",
                                    piece.text, "")
                    : CompletionChunkJson(id, created, model, piece.text, "");
            if (!send(ServerSentEvent(chunk))) return false;
          }
          if (!done) {
            if (sink.is_writable && !sink.is_writable()) {
              job->Cancel();
              return false;
            }
            return true;
          }
          const Job::Outcome& outcome = job->outcome();
          if (!outcome.status.ok()) {
            if (!send(ServerSentEvent(ErrorJson(FailureOf(outcome.status))))) return false;
          } else {
            const GenerationOutput output = OutputOf(*job);
            const Json last = endpoint == Endpoint::kChat
                                  ? ChatChunkJson(id, created, model, "", "", output.finish_reason)
                                  : CompletionChunkJson(id, created, model, "", output.finish_reason);
            if (!send(ServerSentEvent(last))) return false;
            if (job->request().include_usage &&
                !send(ServerSentEvent(UsageChunkJson(endpoint, id, created, model,
                                                     output.prompt_tokens,
                                                     output.completion_tokens)))) {
              return false;
            }
          }
          if (!send("data: [DONE]\n\n")) return false;
          sink.done();
          return true;
        },
        [job, answered](bool success) {
          if (!success) job->Cancel();  // the connection broke: stop generating for it
        });
  };
  json_route("/v1/chat/completions", [this, generate](const Json& body, httplib::Response& res) {
    generate(ParseChatRequest(body, context_), res);
  });
  json_route("/v1/completions", [this, generate](const Json& body, httplib::Response& res) {
    generate(ParseCompletionRequest(body, context_), res);
  });
}

}  // namespace serve
}  // namespace spark

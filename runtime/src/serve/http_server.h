// spark-serve's HTTP layer (cpp-httplib, Debian libcpp-httplib-dev): routes, the API key, body
// limits, OpenAI error objects for every failure, server-sent events for streams. It knows
// requests and streams, not kernels: it parses with openai_api.h and runs through the Scheduler.
#ifndef SPARK_RUNTIME_SRC_SERVE_HTTP_SERVER_H_
#define SPARK_RUNTIME_SRC_SERVE_HTTP_SERVER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "openai_api.h"
#include "scheduler.h"

namespace httplib {
class Server;
}

namespace spark {
namespace serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (Bind returns it)
  std::string api_key;           // empty: no authentication
  size_t max_body_bytes = 8 << 20;
  int threads = 16;              // connections served at once
};

class HttpServer {
 public:
  explicit HttpServer(HttpOptions options);
  ~HttpServer();

  // Binds the listening socket; returns the port. UNAVAILABLE when it cannot.
  absl::StatusOr<int> Bind();
  // Serves until Stop (blocks). Before SetReady, /health and the API answer 503 (loading).
  void Listen();
  // The model is loaded: `context` and `scheduler` (which must outlive the server) serve requests.
  void SetReady(ServeContext context, Scheduler* scheduler, int64_t created);
  // Waits up to `timeout` until no generation request is in flight (after the scheduler's
  // Shutdown, each ends at once: its stream gets its last chunks and [DONE]). True when none is.
  bool WaitForRequests(std::chrono::milliseconds timeout);
  // Stops accepting connections and closes them; a stream still being written is cut off, so
  // call WaitForRequests first. Safe at any time from another thread than Listen's: before Listen
  // has started serving (Listen then returns at once) as well as after.
  void Stop();

 private:
  void Routes();
  std::string NextId(const char* prefix);
  std::string FormatMetrics() const;

  HttpOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::atomic<bool> ready_{false};
  // Listen / Stop handshake: httplib's stop() does nothing until listen has started, so Stop
  // waits for a Listen that was entered to be running (or over), and a Listen entered after Stop
  // does not serve.
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> listen_entered_{false};
  std::atomic<bool> listen_returned_{false};
  ServeContext context_;
  Scheduler* scheduler_ = nullptr;
  int64_t created_ = 0;
  std::atomic<uint64_t> next_id_{1};
  std::mutex requests_mutex_;
  std::condition_variable requests_done_;
  int64_t requests_in_flight_ = 0;  // generation requests not yet answered in full
  mutable std::mutex status_mutex_;
  std::map<int, uint64_t> responses_by_status_;
};

}  // namespace serve
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_SERVE_HTTP_SERVER_H_

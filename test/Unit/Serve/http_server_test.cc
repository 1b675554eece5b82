// spark-serve's HTTP layer before the model is ready: it listens at once, /health answers 503
// {"status": "loading"} and the API 503 with OpenAI's error object; /metrics says spark_ready 0;
// the API key applies to the API, not to /health; Stop ends the listener whenever it comes.
#include "http_server.h"

#include <httplib.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "json_document.h"

namespace spark {
namespace serve {
namespace {

TEST(HttpServerTest, AnswersWhileLoading) {
  HttpOptions options;
  options.port = 0;
  options.api_key = "k";
  HttpServer server(options);
  absl::StatusOr<int> port = server.Bind();
  ASSERT_TRUE(port.ok()) << port.status();
  std::thread listener([&] { server.Listen(); });
  httplib::Client client("127.0.0.1", *port);
  httplib::Result health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(rt::ParseJson(health->body)->at("status"), "loading");
  httplib::Headers auth = {{"Authorization", "Bearer k"}};
  httplib::Result chat = client.Post("/v1/chat/completions", auth, "{}", "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 503);
  EXPECT_EQ(rt::ParseJson(chat->body)->at("error").at("code"), "loading");
  httplib::Result no_key = client.Get("/v1/models");
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 401);
  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("spark_ready 0"), std::string::npos);
  server.Stop();
  listener.join();
}

// Runs server.Listen() on a thread and returns a function that waits for it to return: a listener
// still running after 10 s fails the test and ends the process (a hang would stop the suite).
std::function<void()> StartListener(HttpServer& server) {
  auto done = std::make_shared<std::promise<void>>();
  std::shared_future<void> returned = done->get_future().share();
  std::thread([&server, done] {
    server.Listen();
    done->set_value();
  }).detach();
  return [returned] {
    if (returned.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "Listen() did not return after Stop()";
      std::fflush(stdout);
      std::_Exit(1);
    }
  };
}

// Stop right after starting the listener (a model that fails to load at once): httplib's own
// stop() does nothing before its listen loop runs, which used to leave spark-serve hanging. Both
// orders must end: Stop while the listener thread starts, and Stop before it starts.
TEST(HttpServerTest, StopEndsAListenerThatHasNotStartedYet) {
  for (int i = 0; i < 50; ++i) {
    HttpOptions options;
    options.port = 0;
    HttpServer server(options);
    ASSERT_TRUE(server.Bind().ok());
    std::function<void()> join = StartListener(server);
    server.Stop();
    join();
  }
  HttpOptions options;
  options.port = 0;
  HttpServer server(options);
  ASSERT_TRUE(server.Bind().ok());
  server.Stop();
  StartListener(server)();  // after Stop: returns without serving
}

TEST(HttpServerTest, APortInUseIsAClearError) {
  HttpOptions options;
  options.port = 0;
  HttpServer first(options);
  absl::StatusOr<int> port = first.Bind();
  ASSERT_TRUE(port.ok());
  options.port = *port;
  HttpServer second(options);
  absl::StatusOr<int> again = second.Bind();
  ASSERT_FALSE(again.ok());
  EXPECT_NE(std::string(again.status().message()).find("cannot listen on 127.0.0.1:"),
            std::string::npos);
}

}  // namespace
}  // namespace serve
}  // namespace spark

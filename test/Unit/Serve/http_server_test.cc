// spark-serve's HTTP layer before the model is ready: it listens at once, /health answers 503
// {"status": "loading"} and the API 503 with OpenAI's error object; /metrics says spark_ready 0;
// the API key applies to the API, not to /health.
#include "http_server.h"

#include <httplib.h>

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

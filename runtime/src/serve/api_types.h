// spark-serve's view of a request, independent of HTTP: what to generate (GenerationRequest, made
// by the OpenAI layer, openai_api.h, from a request body) and what failed (ApiError, which the
// OpenAI layer turns into OpenAI's error object and the HTTP layer into a status code).
#ifndef SPARK_RUNTIME_SRC_SERVE_API_TYPES_H_
#define SPARK_RUNTIME_SRC_SERVE_API_TYPES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "spark/runtime/generator.h"
#include "spark/runtime/image.h"

namespace spark {
namespace serve {

// An error as the client sees it: an HTTP status and OpenAI's error fields.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;  // the request field at fault
  std::optional<std::string> code;
};

enum class Endpoint { kChat, kCompletion };

// One generation to run: the prompt's ids, how to sample and when to stop, and how to answer.
struct GenerationRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::vector<int32_t> prompt;
  rt::GenerateOptions generate;        // sampler, max_new_tokens, stop ids
  std::vector<std::string> stop_strings;
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  std::string model;                   // the name answered with
  // The request's images (image_url parts, in the order the template renders them), preprocessed;
  // `prompt` has each one's placeholder expanded already, its soft tokens starting at
  // image_positions[i] (the scheduler encodes them: image_prompt.h EncodeImagesAt).
  std::vector<rt::ImagePatches> images;
  std::vector<int64_t> image_positions;
};

}  // namespace serve
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_SERVE_API_TYPES_H_

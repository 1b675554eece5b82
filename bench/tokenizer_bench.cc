// spark-tokenize-bench: load time of a tokenizer.json and single-thread encode/decode throughput
// of Spark's tokenizer on a corpus (one JSON string per line), the figures compared with HF
// tokenizers (tools/reference/bench_hf_tokenizer.py, same corpus and repeat count).
//   spark-tokenize-bench TOKENIZER CORPUS.jsonl [REPEAT=20]
// Prints one JSON object: load_s (best of 3), encode_MBps, encode_tokens_per_s, decode_MBps.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "spark/runtime/tokenizer.h"

namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: spark-tokenize-bench TOKENIZER CORPUS.jsonl [REPEAT]\n");
    return 2;
  }
  int repeat = argc > 3 ? std::atoi(argv[3]) : 20;
  double best_load = 1e9;
  std::unique_ptr<spark::rt::Tokenizer> tokenizer;
  for (int i = 0; i < 3; ++i) {
    double t0 = Now();
    auto loaded = spark::rt::Tokenizer::Load(argv[1]);
    double dt = Now() - t0;
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      return 1;
    }
    best_load = std::min(best_load, dt);
    tokenizer = std::move(*loaded);
  }
  std::ifstream corpus(argv[2]);
  std::vector<std::string> texts;
  std::string line;
  while (std::getline(corpus, line)) {
    if (line.empty()) continue;
    nlohmann::json doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_string()) {
      std::fprintf(stderr, "%s: a line is not a JSON string\n", argv[2]);
      return 1;
    }
    texts.push_back(doc.get<std::string>());
  }
  size_t bytes = 0;
  for (const std::string& text : texts) bytes += text.size();
  bytes *= repeat;
  double best_encode = 1e9, best_decode = 1e9;
  size_t tokens = 0;
  std::vector<std::vector<int32_t>> encoded(texts.size());
  for (int round = 0; round < 3; ++round) {
    tokens = 0;
    double t0 = Now();
    for (int r = 0; r < repeat; ++r) {
      for (size_t i = 0; i < texts.size(); ++i) {
        auto ids = tokenizer->Encode(texts[i], /*add_special_tokens=*/false);
        if (!ids.ok()) {
          std::fprintf(stderr, "%s\n", ids.status().ToString().c_str());
          return 1;
        }
        tokens += ids->size();
        encoded[i] = std::move(*ids);
      }
    }
    best_encode = std::min(best_encode, Now() - t0);
    t0 = Now();
    for (int r = 0; r < repeat; ++r) {
      for (const auto& ids : encoded) {
        auto text = tokenizer->Decode(ids, false);
        if (!text.ok()) return 1;
      }
    }
    best_decode = std::min(best_decode, Now() - t0);
  }
  std::printf(
      "{\"load_s\": %.4f, \"bytes\": %zu, \"tokens\": %zu, \"encode_MBps\": %.3f, "
      "\"encode_tokens_per_s\": %.0f, \"decode_MBps\": %.3f}\n",
      best_load, bytes, tokens, bytes / best_encode / 1e6, tokens / best_encode,
      bytes / best_decode / 1e6);
  return 0;
}

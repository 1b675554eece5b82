// Fuzzes the tokenizer (spark_text): the tokenizer.json reader, Encode, Decode and the streaming
// detokeniser.
//
// Input: one mode byte, then the payload.
//   mode % 3 == 0: the payload is a tokenizer.json. Loading must fail cleanly or give a tokenizer
//                  on which the checks of mode 1 hold for a fixed sample text.
//   mode % 3 == 1: the payload is text for the tiny models' tokenizer (test/data/models/tokenizers/
//                  tiny, read once). Invalid UTF-8 must be refused; valid text encodes to ids in the
//                  vocabulary that decode back to the text (the tokenizer has byte fallback; "▁"
//                  decodes as a space, so texts holding it are not compared).
//   mode % 3 == 2: the payload is little-endian int32 ids for the tiny tokenizer. Decode must
//                  refuse an unknown id or give valid UTF-8; the streamed pieces are valid UTF-8
//                  and concatenate to the decode (skip_special_tokens false and true).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "spark/runtime/tokenizer.h"

namespace {

using spark::rt::InvalidUtf8Offset;
using spark::rt::StreamingDetokenizer;
using spark::rt::Tokenizer;

const Tokenizer& Tiny() {
  static const Tokenizer* tiny = [] {
    auto loaded = Tokenizer::Load(SPARK_TINY_TOKENIZER);
    SPARK_FUZZ_CHECK(loaded.ok());
    return loaded->release();
  }();
  return *tiny;
}

void CheckDecode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  for (bool skip : {false, true}) {
    auto text = tokenizer.Decode(ids, skip);
    bool known = true;
    for (int32_t id : ids) known = known && tokenizer.IdToToken(id).has_value();
    SPARK_FUZZ_CHECK(text.ok() == known);
    StreamingDetokenizer stream(tokenizer, skip);
    std::string joined;
    bool stream_ok = true;
    for (int32_t id : ids) {
      auto piece = stream.Push(id);
      if (!piece.ok()) {
        stream_ok = false;
        break;
      }
      SPARK_FUZZ_CHECK(!InvalidUtf8Offset(*piece).has_value());
      joined += *piece;
    }
    std::string rest = stream.Finish();
    SPARK_FUZZ_CHECK(!InvalidUtf8Offset(rest).has_value());
    SPARK_FUZZ_CHECK(stream_ok == known);
    if (!known) continue;
    joined += rest;
    SPARK_FUZZ_CHECK(!InvalidUtf8Offset(*text).has_value());
    SPARK_FUZZ_CHECK(joined == *text);
  }
}

void CheckText(const Tokenizer& tokenizer, absl::string_view text, bool round_trip) {
  for (bool special : {false, true}) {
    auto ids = tokenizer.Encode(text, special);
    SPARK_FUZZ_CHECK(ids.ok() == !InvalidUtf8Offset(text).has_value());
    if (!ids.ok()) return;
    for (int32_t id : *ids) SPARK_FUZZ_CHECK(tokenizer.IdToToken(id).has_value());
    CheckDecode(tokenizer, *ids);
    if (round_trip && !special && !absl::StrContains(text, "\xe2\x96\x81")) {
      auto decoded = tokenizer.Decode(*ids, false);
      SPARK_FUZZ_CHECK(decoded.ok() && *decoded == text);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto tokenizer = Tokenizer::FromJson(payload, "fuzz.json");
      if (tokenizer.ok()) {
        CheckText(**tokenizer, "Hello  world\n<bos> \xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80 <x>", false);
        CheckDecode(**tokenizer, {0, 1, 2, 3, 4, 5, 100, -1});
      }
      break;
    }
    case 1:
      CheckText(Tiny(), payload, true);
      break;
    case 2: {
      std::vector<int32_t> ids(payload.size() / 4);
      if (!ids.empty()) std::memcpy(ids.data(), payload.data(), ids.size() * 4);
      // Mostly ids in the vocabulary (the low bits), some outside it.
      for (int32_t& id : ids) {
        if ((id & 0x40000000) == 0) id = static_cast<int32_t>(static_cast<uint32_t>(id) % 520u);
      }
      CheckDecode(Tiny(), ids);
      break;
    }
  }
  return 0;
}

// StreamingDetokenizer: Decode, one id at a time, with the same total text.
//
// The decoder chains of real checkpoints (Gemma: Replace, ByteFallback, Fuse; Llama/Mistral: the
// same plus Strip after Fuse) are made of per-token steps, at most one ByteFallback (which groups
// a run of <0xAB> tokens), Fuse (which joins), and at most one Strip of the joined text. Such a
// chain streams: each token goes through the per-token steps as it arrives, a byte run is held
// until a token that ends it (HF decodes the whole run at once: valid UTF-8, or one U+FFFD per
// byte), and the final Strip is applied by dropping leading characters and holding trailing ones.
// Any other chain is decoded whole at Finish.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/tokenizer.h"
#include "tokenizer_internal.h"

namespace spark {
namespace rt {

using tokenizer_internal::DecoderStep;

struct StreamingDetokenizer::State {
  const Tokenizer::Impl* impl = nullptr;
  const Tokenizer* tokenizer = nullptr;
  bool skip_special = false;
  enum class Mode { kNoDecoder, kStreaming, kWhole } mode = Mode::kWhole;
  // kStreaming: decoders[0, byte_fallback) per token; byte_fallback (or npos); then
  // (byte_fallback, fuse) per group; an optional final Strip.
  size_t byte_fallback = std::string::npos;
  size_t fuse = 0;
  const DecoderStep* final_strip = nullptr;

  // Per-stream state.
  bool first = true;             // kNoDecoder: no token yet
  std::string bytes;             // held byte-fallback run
  bool has_bytes = false;
  uint64_t leading_stripped = 0; // final Strip: leading characters dropped so far
  bool prefix_done = false;
  std::string tail;              // final Strip: trailing strip characters held
  std::vector<int32_t> ids;      // kWhole

  void Reset() {
    first = true;
    bytes.clear();
    has_bytes = false;
    leading_stripped = 0;
    prefix_done = false;
    tail.clear();
    ids.clear();
  }

  // Per-group steps, joined: the fused text of `tokens`.
  std::string Fuse(std::vector<std::string> tokens) const {
    size_t begin = byte_fallback == std::string::npos ? fuse : byte_fallback + 1;
    if (byte_fallback != std::string::npos) {
      tokens = tokenizer_internal::RunDecoderSteps(impl->decoders, begin, fuse, std::move(tokens));
    }
    return absl::StrJoin(tokens, "");
  }

  // The byte run decoded as HF's ByteFallback does.
  std::vector<std::string> FlushBytes() {
    std::vector<std::string> out;
    if (!has_bytes) return out;
    if (tokenizer_internal::FirstInvalidUtf8(bytes) == absl::string_view::npos) {
      out.push_back(bytes);
    } else {
      for (size_t i = 0; i < bytes.size(); ++i) out.push_back("\xEF\xBF\xBD");
    }
    bytes.clear();
    has_bytes = false;
    return out;
  }

  // The final Strip over the stream: what of `text` can be emitted now.
  std::string Strip(absl::string_view text) {
    if (final_strip == nullptr) return std::string(text);
    std::string out;
    for (size_t i = 0; i < text.size();) {
      size_t length = tokenizer_internal::Utf8Length(static_cast<uint8_t>(text[i]));
      absl::string_view ch = text.substr(i, length);
      bool is_strip = tokenizer_internal::DecodeUtf8At(text, i) == final_strip->strip_char;
      i += length;
      if (!prefix_done) {
        if (is_strip && leading_stripped < final_strip->strip_start) {
          ++leading_stripped;
          continue;
        }
        prefix_done = true;
      }
      if (final_strip->strip_stop == 0) {
        out.append(ch.data(), ch.size());
      } else if (is_strip) {
        tail.append(ch.data(), ch.size());
      } else {
        out.append(tail);
        tail.clear();
        out.append(ch.data(), ch.size());
      }
    }
    return out;
  }

  std::string FinishStrip() {
    if (final_strip == nullptr || tail.empty()) return std::string();
    // Drop up to `stop` characters (all the same one-character code point) from the end.
    std::vector<size_t> starts;
    for (size_t i = 0; i < tail.size(); i += tokenizer_internal::Utf8Length(static_cast<uint8_t>(tail[i]))) {
      starts.push_back(i);
    }
    uint64_t drop = std::min<uint64_t>(final_strip->strip_stop, starts.size());
    size_t keep_chars = starts.size() - drop;
    return keep_chars == 0 ? std::string() : tail.substr(0, starts[keep_chars]);
  }
};

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.impl = tokenizer.impl_.get();
  s.tokenizer = &tokenizer;
  s.skip_special = skip_special_tokens;
  if (!s.impl->has_decoder) {
    s.mode = State::Mode::kNoDecoder;
    return;
  }
  const std::vector<DecoderStep>& steps = s.impl->decoders;
  size_t fuse = steps.size();
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == DecoderStep::Kind::kFuse) {
      fuse = i;
      break;
    }
  }
  bool ok = true;
  for (size_t i = 0; i < fuse; ++i) {
    if (steps[i].kind == DecoderStep::Kind::kByteFallback) {
      if (s.byte_fallback != std::string::npos) ok = false;
      s.byte_fallback = i;
    }
  }
  if (fuse < steps.size()) {
    size_t after = steps.size() - fuse - 1;
    if (after > 1) ok = false;
    if (after == 1) {
      if (steps[fuse + 1].kind != DecoderStep::Kind::kStrip) ok = false;
      s.final_strip = &steps[fuse + 1];
    }
  }
  s.fuse = fuse;
  s.mode = ok ? State::Mode::kStreaming : State::Mode::kWhole;
}

StreamingDetokenizer::~StreamingDetokenizer() = default;

absl::StatusOr<std::string> StreamingDetokenizer::Push(int32_t id) {
  State& s = *state_;
  const std::string* text = s.impl->TokenText(id);
  if (text == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot decode id ", id,
                                                   ": not in the vocabulary of ",
                                                   PrintableText(s.impl->source), " (",
                                                   s.tokenizer->vocab_size(), " ids)"));
  }
  if (s.skip_special && s.impl->id_kind[id] == Tokenizer::Impl::kSpecial) return std::string();
  switch (s.mode) {
    case State::Mode::kWhole:
      s.ids.push_back(id);
      return std::string();
    case State::Mode::kNoDecoder: {
      std::string out = s.first ? *text : absl::StrCat(" ", *text);
      s.first = false;
      return out;
    }
    case State::Mode::kStreaming:
      break;
  }
  size_t pre_end = s.byte_fallback == std::string::npos ? s.fuse : s.byte_fallback;
  std::vector<std::string> token = tokenizer_internal::RunDecoderSteps(s.impl->decoders, 0, pre_end,
                                                                       {*text});
  if (s.byte_fallback != std::string::npos) {
    int byte = tokenizer_internal::ByteFallbackValue(token[0]);
    if (byte >= 0) {
      s.bytes.push_back(static_cast<char>(byte));
      s.has_bytes = true;
      return std::string();
    }
  }
  std::vector<std::string> group = s.FlushBytes();
  group.push_back(std::move(token[0]));
  return s.Strip(s.Fuse(std::move(group)));
}

std::string StreamingDetokenizer::Finish() {
  State& s = *state_;
  std::string out;
  if (s.mode == State::Mode::kWhole) {
    auto decoded = s.tokenizer->Decode(s.ids, s.skip_special);
    out = decoded.ok() ? *decoded : std::string();  // Push checked every id
  } else if (s.mode == State::Mode::kStreaming) {
    std::vector<std::string> group = s.FlushBytes();
    if (!group.empty()) out = s.Strip(s.Fuse(std::move(group)));
    out += s.FinishStrip();
  }
  s.Reset();
  return out;
}

}  // namespace rt
}  // namespace spark

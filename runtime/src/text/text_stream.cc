#include "spark/runtime/text_stream.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"

namespace spark {
namespace rt {
namespace {

// What Gemma 4 writes after <|channel> before its thinking (gemma4-ecosystem.md: "drop
// thought\n").
constexpr absl::string_view kThoughtLabel = "thought\n";

}  // namespace

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings,
                       std::vector<int32_t> stop_ids, Sink sink)
    : detokenizer_(tokenizer, /*skip_special_tokens=*/true),
      raw_detokenizer_(tokenizer, /*skip_special_tokens=*/false),
      stop_strings_(std::move(stop_strings)),
      stop_ids_(std::move(stop_ids)),
      sink_(std::move(sink)),
      channel_open_(tokenizer.TokenToId("<|channel>")),
      channel_close_(tokenizer.TokenToId("<channel|>")),
      call_open_(tokenizer.TokenToId("<|tool_call>")),
      call_close_(tokenizer.TokenToId("<tool_call|>")) {
  for (const std::string& stop : stop_strings_) hold_ = std::max(hold_, stop.size() - 1);
}

bool TextStream::OnToken(int32_t id) {
  if (std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) return true;
  if (stopped_) return false;
  if (in_call_) {
    if (call_close_ && id == *call_close_) {
      call_ += raw_detokenizer_.Finish();
      tool_calls_.push_back(call_);
      if (sink_) sink_(call_, TextChannel::kToolCall);
      call_.clear();
      in_call_ = false;
      return true;
    }
    absl::StatusOr<std::string> piece = raw_detokenizer_.Push(id);
    if (!piece.ok()) {
      error_ = piece.status();
      return false;
    }
    call_ += *piece;
    return true;
  }
  if (call_open_ && id == *call_open_) {
    // A call ends the thinking too (gemma4-ecosystem.md section 4).
    SwitchChannel(TextChannel::kAnswer);
    Add(detokenizer_.Finish());
    if (!stopped_) Emit(pending_.size());
    in_call_ = true;
    return true;
  }
  if (channel_open_ && id == *channel_open_) {
    SwitchChannel(TextChannel::kThinking);
    return true;
  }
  if (channel_close_ && id == *channel_close_) {
    SwitchChannel(TextChannel::kAnswer);
    return true;
  }
  absl::StatusOr<std::string> piece = detokenizer_.Push(id);
  if (!piece.ok()) {
    error_ = piece.status();
    return false;
  }
  return Add(*piece);
}

void TextStream::SwitchChannel(TextChannel channel) {
  if (channel == channel_) return;
  // A stop string never spans the channels: what is held back goes out first.
  Add(detokenizer_.Finish());
  if (!stopped_) Emit(pending_.size());
  channel_ = channel;
  at_channel_start_ = channel == TextChannel::kThinking;
}

void TextStream::Finish() {
  if (in_call_) {
    // The generation ended inside a call: what there is stays text of the answer.
    call_ += raw_detokenizer_.Finish();
    in_call_ = false;
    if (!stopped_) Add("<|tool_call>" + call_);
    call_.clear();
  }
  if (!stopped_) Add(detokenizer_.Finish());
  if (!stopped_) {
    if (at_channel_start_ && absl::StartsWith(kThoughtLabel, pending_)) pending_.clear();
    at_channel_start_ = false;
    Emit(pending_.size());
  }
}

bool TextStream::Add(const std::string& piece) {
  if (stopped_) return false;
  pending_ += piece;
  if (at_channel_start_) {
    // Drop the label once it is certain: all of it, or text that cannot begin it.
    if (absl::StartsWith(pending_, kThoughtLabel)) {
      pending_.erase(0, kThoughtLabel.size());
      at_channel_start_ = false;
    } else if (!absl::StartsWith(kThoughtLabel, pending_)) {
      at_channel_start_ = false;
    } else {
      return true;  // a prefix of the label: wait
    }
  }
  for (const std::string& stop : stop_strings_) {
    const size_t at = pending_.find(stop);
    if (at != std::string::npos) {
      Emit(at);
      stopped_ = true;
      return false;
    }
  }
  // Keep the last hold_ bytes (a stop string may still end there), and never split a UTF-8
  // character between what is emitted and what is kept.
  size_t ready = pending_.size() > hold_ ? pending_.size() - hold_ : 0;
  while (ready > 0 && ready < pending_.size() &&
         (static_cast<unsigned char>(pending_[ready]) & 0xC0) == 0x80) {
    --ready;
  }
  Emit(ready);
  return true;
}

void TextStream::Emit(size_t bytes) {
  if (bytes == 0) return;
  const std::string out = pending_.substr(0, bytes);
  pending_.erase(0, bytes);
  (channel_ == TextChannel::kThinking ? thinking_ : text_) += out;
  if (sink_) sink_(out, channel_);
}

}  // namespace rt
}  // namespace spark

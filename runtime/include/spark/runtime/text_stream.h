// Generated ids -> text as they arrive, for a client that shows or sends it (spark-run, and next
// spark-serve): each id's text as soon as it is complete UTF-8, holding back what could still
// become a stop string; the stopping ids and the stop string are not emitted. Gemma 4's thinking
// (`<|channel>thought\n ... <channel|>`) is emitted on its own channel, without the markers and
// the `thought` label, so that a client can show it dimmed, hide it, or send it as
// reasoning_content, and keep it out of the conversation's history. A tool call
// (`<|tool_call>call:NAME{...}<tool_call|>`) is emitted whole, once closed, on the tool-call
// channel: the text between the markers with its special tokens (`<|"|>`) kept, for
// ParseToolCall (tool_call.h).
#ifndef SPARK_RUNTIME_TEXT_STREAM_H_
#define SPARK_RUNTIME_TEXT_STREAM_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "spark/runtime/tokenizer.h"

namespace spark {
namespace rt {

enum class TextChannel { kAnswer, kThinking, kToolCall };

class TextStream {
 public:
  using Sink = std::function<void(absl::string_view text, TextChannel channel)>;

  // `sink` (may be null) receives every piece as it is ready. The tokenizer's `<|channel>` and
  // `<channel|>` tokens, when it has them, open and close the thinking channel.
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings,
             std::vector<int32_t> stop_ids, Sink sink);

  // GenerateOptions::on_token: false once a stop string has appeared.
  bool OnToken(int32_t id);
  // Ends the stream (after the generation): emits what was held back.
  void Finish();

  const std::string& text() const { return text_; }        // the answer, as emitted
  const std::string& thinking() const { return thinking_; }  // the thinking, as emitted
  const std::vector<std::string>& tool_calls() const { return tool_calls_; }  // each call's text
  bool stopped_at_stop_string() const { return stopped_; }
  const absl::Status& error() const { return error_; }

 private:
  bool Add(const std::string& piece);
  void Emit(size_t bytes);
  void SwitchChannel(TextChannel channel);

  StreamingDetokenizer detokenizer_;
  StreamingDetokenizer raw_detokenizer_;  // inside a tool call: special tokens kept
  std::vector<std::string> stop_strings_;
  std::vector<int32_t> stop_ids_;
  Sink sink_;
  std::optional<int32_t> channel_open_, channel_close_, call_open_, call_close_;
  bool in_call_ = false;
  std::string call_;  // the tool call being read
  TextChannel channel_ = TextChannel::kAnswer;
  bool at_channel_start_ = false;  // the `thought` label may still be ahead
  size_t hold_ = 0;
  std::string pending_;
  std::string text_;
  std::string thinking_;
  std::vector<std::string> tool_calls_;
  bool stopped_ = false;
  absl::Status error_;
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_TEXT_STREAM_H_

// TextStream (text_stream.h) over the tiny Gemma-4-style tokenizer: pieces as they complete, the
// thinking channel without its markers and label, stop strings and stop ids not emitted.
#include "spark/runtime/text_stream.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "spark/runtime/tokenizer.h"

namespace spark {
namespace rt {
namespace {

class TextStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Tokenizer>> loaded =
        Tokenizer::Load(SPARK_TEST_SOURCE_DIR "/data/models/tokenizers/tiny");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = *std::move(loaded);
  }

  std::vector<int32_t> Ids(const std::string& text) const {
    return *tokenizer_->Encode(text, /*add_special_tokens=*/false);
  }
  int32_t Id(const std::string& token) const { return *tokenizer_->TokenToId(token); }

  // Feeds `ids` to a stream; returns the pieces the sink got, tagged "A:" or "T:".
  std::vector<std::string> Feed(TextStream& stream, const std::vector<int32_t>& ids) {
    for (int32_t id : ids) {
      if (!stream.OnToken(id)) break;
    }
    stream.Finish();
    return pieces_;
  }

  TextStream::Sink Sink() {
    return [this](absl::string_view text, TextChannel channel) {
      pieces_.push_back((channel == TextChannel::kThinking   ? "T:"
                         : channel == TextChannel::kToolCall ? "C:"
                                                             : "A:") +
                        std::string(text));
    };
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<std::string> pieces_;
};

TEST_F(TextStreamTest, ThinkingGoesToItsOwnChannelWithoutMarkersOrLabel) {
  std::vector<int32_t> ids = {Id("<|channel>")};
  for (int32_t id : Ids("thought\nthe tiny one")) ids.push_back(id);
  ids.push_back(Id("<channel|>"));
  for (int32_t id : Ids("Hello there")) ids.push_back(id);
  TextStream stream(*tokenizer_, {}, {}, Sink());
  const std::vector<std::string> pieces = Feed(stream, ids);
  EXPECT_EQ(stream.thinking(), "the tiny one");
  EXPECT_EQ(stream.text(), "Hello there");
  ASSERT_FALSE(pieces.empty());
  EXPECT_EQ(pieces.front().substr(0, 2), "T:");
  EXPECT_EQ(pieces.back().substr(0, 2), "A:");
  std::string thinking, answer;
  for (const std::string& p : pieces) (p[0] == 'T' ? thinking : answer) += p.substr(2);
  EXPECT_EQ(thinking, "the tiny one");
  EXPECT_EQ(answer, "Hello there");
}

TEST_F(TextStreamTest, AChannelWithoutTheLabelKeepsItsText) {
  std::vector<int32_t> ids = {Id("<|channel>")};
  for (int32_t id : Ids("though")) ids.push_back(id);  // a prefix of the label, then the end
  TextStream stream(*tokenizer_, {}, {}, Sink());
  Feed(stream, ids);
  EXPECT_EQ(stream.thinking(), "");  // "though" could only be the label's start: dropped at the end
  TextStream other(*tokenizer_, {}, {}, nullptr);
  std::vector<int32_t> more = {Id("<|channel>")};
  for (int32_t id : Ids("plain thinking")) more.push_back(id);
  more.push_back(Id("<channel|>"));
  for (int32_t id : more) other.OnToken(id);
  other.Finish();
  EXPECT_EQ(other.thinking(), "plain thinking");
  EXPECT_EQ(other.text(), "");
}

TEST_F(TextStreamTest, StopStringAndStopIdsAreNotEmitted) {
  TextStream stream(*tokenizer_, {" tiny"}, {Id("<turn|>")}, Sink());
  std::vector<int32_t> ids = Ids("hello world");
  ids.push_back(Id("<turn|>"));
  for (int32_t id : Ids(" and a tiny rest")) ids.push_back(id);
  bool stopped = false;
  for (int32_t id : ids) {
    if (!stream.OnToken(id)) {
      stopped = true;
      break;
    }
  }
  stream.Finish();
  EXPECT_TRUE(stopped);
  EXPECT_TRUE(stream.stopped_at_stop_string());
  EXPECT_EQ(stream.text(), "hello world and a");
}

TEST_F(TextStreamTest, AToolCallComesWholeWithItsQuoteTokens) {
  std::vector<int32_t> ids = Ids("Let me check");
  ids.push_back(Id("<|tool_call>"));
  for (int32_t id : Ids("call:f{city:")) ids.push_back(id);
  ids.push_back(Id("<|\"|>"));
  for (int32_t id : Ids("Paris")) ids.push_back(id);
  ids.push_back(Id("<|\"|>"));
  for (int32_t id : Ids("}")) ids.push_back(id);
  ids.push_back(Id("<tool_call|>"));
  TextStream stream(*tokenizer_, {}, {}, Sink());
  const std::vector<std::string> pieces = Feed(stream, ids);
  ASSERT_EQ(stream.tool_calls().size(), 1u);
  EXPECT_EQ(stream.tool_calls()[0], "call:f{city:<|\"|>Paris<|\"|>}");
  EXPECT_EQ(stream.text(), "Let me check");
  // The answer's text first, then the call, whole, on its channel.
  ASSERT_FALSE(pieces.empty());
  EXPECT_EQ(pieces.back(), "C:" + stream.tool_calls()[0]);
  EXPECT_EQ(pieces.front().substr(0, 2), "A:");
}

TEST_F(TextStreamTest, AnUnclosedToolCallStaysText) {
  std::vector<int32_t> ids = {Id("<|tool_call>")};
  for (int32_t id : Ids("call:f{")) ids.push_back(id);
  TextStream stream(*tokenizer_, {}, {}, nullptr);
  Feed(stream, ids);
  EXPECT_TRUE(stream.tool_calls().empty());
  EXPECT_EQ(stream.text(), "<|tool_call>call:f{");
}

TEST_F(TextStreamTest, UnknownIdIsAnError) {
  TextStream stream(*tokenizer_, {}, {}, nullptr);
  EXPECT_FALSE(stream.OnToken(tokenizer_->vocab_size() + 5));
  EXPECT_FALSE(stream.error().ok());
}

}  // namespace
}  // namespace rt
}  // namespace spark

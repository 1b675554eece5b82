// ParseToolCall (tool_call.h): Gemma 4's call syntax into OpenAI's name + JSON arguments.
#include "spark/runtime/tool_call.h"

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace spark {
namespace rt {
namespace {

TEST(ToolCallTest, ReadsGemmasSyntax) {
  absl::StatusOr<ToolCall> call = ParseToolCall(
      R"(call:get_weather{city:<|"|>Paris, France<|"|>,days:3,metric:true,note:null,)"
      R"(opts:{units:[<|"|>C<|"|>,<|"|>km/h<|"|>],level:-1.5e2},empty:{},none:[]})");
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->name, "get_weather");
  EXPECT_EQ(call->arguments,
            R"({"city":"Paris, France","days":3,"metric":true,"note":null,)"
            R"("opts":{"units":["C","km/h"],"level":-150.0},"empty":{},"none":[]})");
}

TEST(ToolCallTest, BareWordsNoneNilAndSpaces) {
  absl::StatusOr<ToolCall> call = ParseToolCall(" call:f.x-1{ a : None , b:NIL, c: word here }\n");
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->name, "f.x-1");
  EXPECT_EQ(call->arguments, R"({"a":null,"b":null,"c":"word here"})");
  absl::StatusOr<ToolCall> empty = ParseToolCall("call:now{}");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->arguments, "{}");
  // A string keeps what it holds, braces and commas included.
  absl::StatusOr<ToolCall> tricky = ParseToolCall(R"(call:q{s:<|"|>a,b}{c]<|"|>})");
  ASSERT_TRUE(tricky.ok()) << tricky.status();
  EXPECT_EQ(tricky->arguments, R"({"s":"a,b}{c]"})");
}

TEST(ToolCallTest, RefusesWhatIsNotACall) {
  for (const char* text : {"", "f{}", "call:{}", "call:f", "call:f{a:1", "call:f{a:<|\"|>x}",
                           "call:f{a:1}}", "call:f g{a:1}", "call:f{:1}", "call:f{a 1}",
                           "call:f{a:[1,2}"}) {
    absl::StatusOr<ToolCall> call = ParseToolCall(text);
    EXPECT_FALSE(call.ok()) << text;
    if (!call.ok()) EXPECT_TRUE(absl::StrContains(call.status().message(), "tool call")) << text;
  }
  std::string deep = "call:f{a:";
  for (int i = 0; i < 100; ++i) deep += "[";
  EXPECT_FALSE(ParseToolCall(deep).ok());
}

}  // namespace
}  // namespace rt
}  // namespace spark

#include "spark/runtime/printable_text.h"

#include <string>

#include "gtest/gtest.h"

namespace spark {
namespace rt {
namespace {

TEST(PrintableTextTest, PrintableAsciiAndUtf8PassUnchanged) {
  EXPECT_EQ(PrintableText("model.layers.0.self_attn.q_proj.weight"),
            "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(PrintableText("mod\xc3\xa8le/\xe2\x9c\x93/\xf0\x9f\x98\x80"),
            "mod\xc3\xa8le/\xe2\x9c\x93/\xf0\x9f\x98\x80");  // è, a check mark, an emoji
  EXPECT_EQ(PrintableText(""), "");
}

TEST(PrintableTextTest, EscapesControlCharacters) {
  // An ANSI colour, an OSC window title (ESC ] ... BEL), a newline and a tab.
  EXPECT_EQ(PrintableText("\x1b[31mred\x1b]0;pwned\x07\n\t"),
            "\\x1b[31mred\\x1b]0;pwned\\x07\\x0a\\x09");
  EXPECT_EQ(PrintableText(std::string("before\0after", 12)), "before\\x00after");
  EXPECT_EQ(PrintableText("\x7f"), "\\x7f");
  EXPECT_EQ(PrintableText("\xc2\x9b"
                          "2J"),
            "\\xc2\\x9b2J");  // U+009B, the C1 CSI
}

TEST(PrintableTextTest, EscapesInvalidUtf8) {
  EXPECT_EQ(PrintableText("\x9b"), "\\x9b");                             // a lone continuation byte
  EXPECT_EQ(PrintableText("\xc3"), "\\xc3");                             // a truncated sequence
  EXPECT_EQ(PrintableText("\xc0\xaf"), "\\xc0\\xaf");                    // an overlong '/'
  EXPECT_EQ(PrintableText("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(PrintableText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
}

TEST(PrintableTextTest, IsIdempotent) {
  const std::string once = PrintableText("\x1b[2J\\x1b");
  EXPECT_EQ(once, "\\x1b[2J\\x1b");
  EXPECT_EQ(PrintableText(once), once);
}

}  // namespace
}  // namespace rt
}  // namespace spark

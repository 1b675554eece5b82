#include "spark/runtime/printable_text.h"

#include <cstdint>


namespace spark {
namespace rt {
namespace {

// The length of the valid UTF-8 sequence of a printable code point (not a C1 control) at the
// start of `text`, or 0.
size_t PrintableUtf8Length(absl::string_view text) {
  const uint8_t lead = static_cast<uint8_t>(text[0]);
  size_t length = 0;
  uint32_t code_point = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code_point = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code_point = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code_point = lead & 0x07;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    const uint8_t c = static_cast<uint8_t>(text[i]);
    if ((c & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (c & 0x3F);
  }
  const uint32_t smallest = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
  if (code_point < smallest || code_point > 0x10FFFF) return 0;  // overlong or too large
  if (code_point >= 0xD800 && code_point <= 0xDFFF) return 0;    // a surrogate
  if (code_point <= 0x9F) return 0;                              // a C1 control
  return length;
}

}  // namespace

std::string PrintableText(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t c = static_cast<uint8_t>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    const size_t length = c >= 0x80 ? PrintableUtf8Length(text.substr(i)) : 0;
    if (length > 0) {
      out.append(text.data() + i, length);
      i += length;
      continue;
    }
    static const char kHex[] = "0123456789abcdef";
    out += "\\x";
    out.push_back(kHex[(c >> 4) & 0xf]);
    out.push_back(kHex[c & 0xf]);
    ++i;
  }
  return out;
}

}  // namespace rt
}  // namespace spark

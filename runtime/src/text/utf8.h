// UTF-8 encoding of one code point, shared by the tokenizer and the chat-template interpreter.
// Internal to spark_text.
#ifndef SPARK_RUNTIME_SRC_TEXT_UTF8_H_
#define SPARK_RUNTIME_SRC_TEXT_UTF8_H_

#include <cstdint>
#include <string>

namespace spark {
namespace rt {

// Appends the UTF-8 bytes of `code_point` (the caller passes a valid scalar value).
inline void AppendUtf8(uint32_t code_point, std::string* out) {
  const uint32_t c = code_point;
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_TEXT_UTF8_H_

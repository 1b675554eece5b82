// Shared by the chat-template tests.
#ifndef SPARK_TEST_UNIT_TEXT_CHAT_TEMPLATE_TEST_UTIL_H_
#define SPARK_TEST_UNIT_TEXT_CHAT_TEMPLATE_TEST_UTIL_H_

#include <ctime>

namespace spark::rt::testing_util {

// tools/reference/render_chat_template.py's FIXED_NOW (2026-07-15 12:34:56, a Wednesday): what
// strftime_now formats in every test, so that goldens do not depend on the day they run.
inline std::tm FixedNow() {
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 6;
  t.tm_mday = 15;
  t.tm_hour = 12;
  t.tm_min = 34;
  t.tm_sec = 56;
  t.tm_wday = 3;
  t.tm_yday = 195;
  return t;
}

}  // namespace spark::rt::testing_util

#endif  // SPARK_TEST_UNIT_TEXT_CHAT_TEMPLATE_TEST_UTIL_H_

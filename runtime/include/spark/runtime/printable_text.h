// Text from input files (plan and tensor names, JSON keys, file names from directory listings and
// index files, config.json keys) made safe to put in an error message. Shared by the runtime and
// the compiler tools.
#ifndef SPARK_RUNTIME_PRINTABLE_TEXT_H_
#define SPARK_RUNTIME_PRINTABLE_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace spark {
namespace rt {

// `text` with every byte a terminal could act on or a C string would end at written as \xNN: the
// C0 controls (NUL, ESC, BEL, newline, ...), DEL, the C1 controls (U+0080..U+009F) and bytes that
// are not valid UTF-8. Printable ASCII and other valid UTF-8 pass unchanged; so does '\', so the
// function is idempotent (a name that already reads "\x1b" prints as it is).
std::string PrintableText(absl::string_view text);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_PRINTABLE_TEXT_H_

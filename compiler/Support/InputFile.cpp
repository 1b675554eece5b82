//===- InputFile.cpp - reading the compiler tools' input files safely -----===//
#include "compiler/Support/InputFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

using namespace llvm;

namespace spark {
namespace {

Error inputError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), "%s", message.str().c_str());
}

/// "a FIFO", "a directory", ... for a file that is not a regular one.
const char *describeFileType(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

Expected<std::unique_ptr<MemoryBuffer>> readStandardInput(const InputKind &kind) {
  SmallString<0> data;
  char chunk[1 << 16];
  while (true) {
    ssize_t n = ::read(STDIN_FILENO, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return inputError(Twine("cannot read the ") + kind.what + " from standard input: " +
                        std::strerror(errno));
    if (n == 0)
      break;
    if (data.size() + n > kind.maxBytes)
      return inputError(formatv("the {0} on standard input is larger than {1} bytes, the limit "
                                "for a {0}",
                                kind.what, kind.maxBytes));
    data.append(chunk, chunk + n);
  }
  return MemoryBuffer::getMemBufferCopy(data, "<stdin>");
}

} // namespace

Expected<std::unique_ptr<MemoryBuffer>> readInputFile(StringRef path, const InputKind &kind) {
  if (path == "-")
    return readStandardInput(kind);
  struct stat st;
  SmallString<256> p(path);
  if (::stat(p.c_str(), &st) != 0)
    return inputError(formatv("cannot read {0} {1}: {2}", kind.what, path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return inputError(formatv("cannot read {0} {1}: it is {2}, not a regular file", kind.what,
                              path, describeFileType(st.st_mode)));
  if (static_cast<uint64_t>(st.st_size) > kind.maxBytes)
    return inputError(formatv("{0} {1} has {2} bytes, more than the {3} bytes a {0} may have "
                              "(the file is damaged or not a {0})",
                              kind.what, path, static_cast<uint64_t>(st.st_size), kind.maxBytes));
  // The file is regular: opening it cannot block. (It may still be replaced in between; the
  // reader then sees another regular file, or fails.)
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/true);
  if (!buffer)
    return inputError(formatv("cannot read {0} {1}: {2}", kind.what, path,
                              buffer.getError().message()));
  if ((*buffer)->getBufferSize() > kind.maxBytes)
    return inputError(formatv("{0} {1} is larger than {2} bytes", kind.what, path, kind.maxBytes));
  return std::move(*buffer);
}

Error checkMlirNesting(StringRef text, StringRef origin, unsigned maxDepth) {
  unsigned depth = 0, line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    switch (c) {
    case '\n':
      ++line;
      break;
    case '"': // a string literal: skip to its closing quote (escapes included)
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\')
          ++i;
        else if (text[i] == '\n')
          ++line;
      }
      break;
    case '/':
      if (i + 1 < text.size() && text[i + 1] == '/')
        while (i < text.size() && text[i] != '\n')
          ++i;
      if (i < text.size() && text[i] == '\n')
        ++line;
      break;
    case '(':
    case '[':
    case '{':
    case '<':
      if (++depth > maxDepth)
        return inputError(formatv("{0}:{1}: brackets nest more than {2} levels deep; no Spark "
                                  "module comes near that (the input is damaged or hostile)",
                                  origin, line, maxDepth));
      break;
    case '>':
      if (i > 0 && text[i - 1] == '-')
        break; // "->"
      [[fallthrough]];
    case ')':
    case ']':
    case '}':
      if (depth > 0)
        --depth;
      break;
    default:
      break;
    }
  }
  return Error::success();
}

} // namespace spark

//===- InputFile.h - reading the compiler tools' input files safely -------===//
//
// The tools read files that may come from anyone (config.json, model.mlir). Before anything is
// parsed: the path must name a regular file (a FIFO would block forever, /dev/zero never ends),
// the file must be below a size limit for its kind, and (for text that a recursive parser reads)
// its bracket nesting must be below a depth limit, so that a hostile input is an error with the
// reason instead of a hang, an out-of-memory abort or a stack overflow.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_COMPILER_SUPPORT_INPUTFILE_H
#define SPARK_COMPILER_SUPPORT_INPUTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>

namespace spark {

/// What an input is called in messages and the most bytes it may have.
struct InputKind {
  const char *what;
  uint64_t maxBytes;
};

/// A Gemma 4 config.json is a few KiB; 4 MiB is far above any real one.
inline constexpr InputKind kConfigJsonInput{"config.json", 4ull << 20};
/// spark-import writes about 2 MiB for 31B; 1 GiB leaves room for any hand-written module.
inline constexpr InputKind kMlirModuleInput{"MLIR module", 1ull << 30};

/// Reads `path` whole ("-" reads standard input, up to the same limit). Errors name the path
/// and say what it is when it is not a regular file (a directory, a FIFO, a device, a socket)
/// or is larger than `kind.maxBytes`.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readInputFile(llvm::StringRef path,
                                                                   const InputKind &kind);

/// The most nested brackets ('(', '[', '{', '<') a module may have (real Spark modules stay
/// below 10); MLIR's parser recurses per level.
inline constexpr unsigned kMaxMlirNesting = 256;

/// Checks that MLIR text nests brackets at most `maxDepth` deep, counting outside string
/// literals and `//` comments (the '>' of "->" closes nothing). The error names `origin` and the
/// line where the limit is passed.
llvm::Error checkMlirNesting(llvm::StringRef text, llvm::StringRef origin,
                             unsigned maxDepth = kMaxMlirNesting);

} // namespace spark

#endif // SPARK_COMPILER_SUPPORT_INPUTFILE_H

// Small file helpers shared by the loaders (paths and directories through std::filesystem,
// opening and mapping through POSIX). Internal to the runtime; every function returns
// a status (kNotFound for a missing path, kPermissionDenied for EACCES, kInvalidArgument for a
// directory, FIFO, device or socket where a file is expected, kInternal otherwise) whose message
// names the path (printable: PrintableText).
#ifndef SPARK_RUNTIME_SRC_FILE_UTIL_H_
#define SPARK_RUNTIME_SRC_FILE_UTIL_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spark {
namespace rt {

// A status for a failed system call on `path` (`what` says which operation, e.g. "open").
absl::Status PathErrnoStatus(int error_number, absl::string_view what, absl::string_view path);

// What a file of type `mode` (stat's st_mode) is, for messages: "a directory", "a FIFO (named
// pipe)", "a character device", "a block device", "a socket", "a symbolic link", "a regular file".
std::string FileTypeName(mode_t mode);

// The type and permission bits of `path` (stat(2), following symbolic links).
absl::StatusOr<mode_t> FileMode(const std::string& path);

// OK when `path` is a regular file (or a symbolic link to one); kInvalidArgument "<path> is a
// FIFO (named pipe), not a regular file; name a file" (or a directory, a device, ...) otherwise.
// Nothing is opened.
absl::Status CheckRegularFile(const std::string& path);

// The whole file. Like MappedFile::Open, refuses anything but a regular file before reading (a
// FIFO or a device never blocks the reader or is read without end).
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Creates or truncates `path` and writes `data`.
absl::Status WriteStringToFile(const std::string& path, absl::string_view data);

// Creates `path`, which must not exist (O_CREAT | O_EXCL | O_NOFOLLOW: an existing file or a
// symbolic link, even one to nowhere, is kAlreadyExists), and writes `data`. For files written
// into a directory someone else may have prepared (spark-run --dump).
absl::Status WriteNewFile(const std::string& path, absl::string_view data);

// A file written in pieces, created as WriteNewFile creates it. A writer destroyed before Close()
// removes its file: an interrupted write leaves nothing half-written behind.
class NewFileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<NewFileWriter>> Create(const std::string& path);
  ~NewFileWriter();
  NewFileWriter(const NewFileWriter&) = delete;
  NewFileWriter& operator=(const NewFileWriter&) = delete;
  absl::Status Append(absl::string_view data);
  absl::Status Close();

 private:
  NewFileWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

bool IsDirectory(const std::string& path);
bool IsRegularFile(const std::string& path);

// The names (not paths) of the entries of `dir`, without "." and "..", sorted.
absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir);

// "a/b" + "c" -> "a/b/c"; an empty dir gives `name` unchanged.
std::string JoinPath(absl::string_view dir, absl::string_view name);
// "a/b/c.cubin" -> "a/b"; "c.cubin" -> "" ; "/c" -> "/".
std::string Dirname(absl::string_view path);
// "a/b/c.cubin" -> "c.cubin".
std::string Basename(absl::string_view path);

// A read-only, private memory mapping of a whole file. The mapping stays valid while the object
// lives; an empty file maps to (nullptr, 0).
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  absl::string_view view() const {
    return absl::string_view(reinterpret_cast<const char*>(data_), size_);
  }

 private:
  MappedFile(std::string path, const uint8_t* data, uint64_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;
  uint64_t size_;
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_FILE_UTIL_H_

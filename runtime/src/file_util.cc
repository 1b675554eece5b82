#include "file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "host_allocation.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

// Closes a file descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

absl::Status NotRegularFileError(const std::string& path, mode_t mode) {
  return absl::InvalidArgumentError(absl::StrCat(PrintableText(path), " is ", FileTypeName(mode),
                                                 ", not a regular file; name a file"));
}

// Opens `path` for reading and checks that it is a regular file; returns the fd and its size.
// The type is checked before the open and again on the open descriptor (the path may change in
// between): open() of a FIFO blocks until a writer comes, of a device may act on it. The open is
// non-blocking (O_NONBLOCK, cleared once the file is known to be regular) and takes no
// controlling terminal (O_NOCTTY).
absl::Status OpenRegularFile(const std::string& path, int* fd, uint64_t* size) {
  SPARK_RETURN_IF_ERROR(CheckRegularFile(path));
  *fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (*fd < 0) return PathErrnoStatus(errno, "open", path);
  struct stat st;
  absl::Status status;
  if (::fstat(*fd, &st) != 0) {
    status = PathErrnoStatus(errno, "stat", path);
  } else if (!S_ISREG(st.st_mode)) {
    status = NotRegularFileError(path, st.st_mode);
  } else {
    const int flags = ::fcntl(*fd, F_GETFL);
    if (flags < 0 || ::fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
      status = PathErrnoStatus(errno, "clear O_NONBLOCK of", path);
    }
  }
  if (!status.ok()) {
    ::close(*fd);
    *fd = -1;
    return status;
  }
  *size = static_cast<uint64_t>(st.st_size);
  return absl::OkStatus();
}

}  // namespace

std::string FileTypeName(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a special file";
}

absl::StatusOr<mode_t> FileMode(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return PathErrnoStatus(errno, "open", path);
  return st.st_mode;
}

absl::Status CheckRegularFile(const std::string& path) {
  SPARK_ASSIGN_OR_RETURN(const mode_t mode, FileMode(path));
  if (!S_ISREG(mode)) return NotRegularFileError(path, mode);
  return absl::OkStatus();
}

absl::Status PathErrnoStatus(int error_number, absl::string_view what, absl::string_view path) {
  const std::string message =
      absl::StrCat("cannot ", what, " ", PrintableText(path), ": ", std::strerror(error_number));
  switch (error_number) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EISDIR:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  int fd = -1;
  uint64_t size = 0;
  absl::Status status = OpenRegularFile(path, &fd, &size);
  if (!status.ok()) return status;
  FdCloser closer(fd);
  std::string contents;
  SPARK_RETURN_IF_ERROR(
      WithHostAllocation(absl::StrCat("the contents of ", PrintableText(path)), size, [&] {
        contents.reserve(size);
        char buffer[1 << 16];
        while (true) {
          const ssize_t n = ::read(fd, buffer, sizeof(buffer));
          if (n < 0) {
            if (errno == EINTR) continue;
            return PathErrnoStatus(errno, "read", path);
          }
          if (n == 0) break;
          contents.append(buffer, static_cast<size_t>(n));
        }
        return absl::OkStatus();
      }));
  return contents;
}

namespace {

// Writes `data` to the open `fd` of `path`.
absl::Status WriteAll(int fd, const std::string& path, absl::string_view data) {
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return PathErrnoStatus(errno, "write", path);
    }
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteStringToFile(const std::string& path, absl::string_view data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return PathErrnoStatus(errno, "create", path);
  FdCloser closer(fd);
  return WriteAll(fd, path, data);
}

// O_EXCL fails on any existing name, a symbolic link included (dangling or not); O_NOFOLLOW
// says the same to a reader of this line.
absl::StatusOr<int> CreateNewFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) {
    return absl::AlreadyExistsError(absl::StrCat(
        "cannot create ", PrintableText(path),
        ": it already exists (a file, or a symbolic link, which is never followed); this file is "
        "written only where nothing is: remove it or write elsewhere"));
  }
  if (fd < 0) return PathErrnoStatus(errno, "create", path);
  return fd;
}

absl::Status WriteNewFile(const std::string& path, absl::string_view data) {
  SPARK_ASSIGN_OR_RETURN(const int fd, CreateNewFile(path));
  FdCloser closer(fd);
  return WriteAll(fd, path, data);
}

absl::StatusOr<std::unique_ptr<NewFileWriter>> NewFileWriter::Create(const std::string& path) {
  SPARK_ASSIGN_OR_RETURN(const int fd, CreateNewFile(path));
  return std::unique_ptr<NewFileWriter>(new NewFileWriter(path, fd));
}

NewFileWriter::~NewFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());  // not closed by Close(): an incomplete file is not left behind
  }
}

absl::Status NewFileWriter::Append(absl::string_view data) { return WriteAll(fd_, path_, data); }

absl::Status NewFileWriter::Close() {
  if (fd_ < 0) return absl::OkStatus();  // closed already
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(path_.c_str());
    return PathErrnoStatus(error, "close", path_);
  }
  return absl::OkStatus();
}

// Paths and directories through std::filesystem; opening, mapping and exclusive creation above
// and below stay POSIX (O_EXCL | O_NOFOLLOW, mmap and fstat of the opened descriptor have no
// std::filesystem counterpart).

bool IsDirectory(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_directory(path, error);
}

bool IsRegularFile(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);
}

absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir) {
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  if (error) return PathErrnoStatus(error.value(), "list the directory", dir);
  std::vector<std::string> names;
  for (const std::filesystem::directory_iterator end; it != end; it.increment(error)) {
    names.push_back(it->path().filename().string());
  }
  if (error) return PathErrnoStatus(error.value(), "list the directory", dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  return (std::filesystem::path(std::string(dir)) / std::string(name)).string();
}

std::string Dirname(absl::string_view path) {
  return std::filesystem::path(std::string(path)).parent_path().string();
}

std::string Basename(absl::string_view path) {
  return std::filesystem::path(std::string(path)).filename().string();
}

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = -1;
  uint64_t size = 0;
  absl::Status status = OpenRegularFile(path, &fd, &size);
  if (!status.ok()) return status;
  FdCloser closer(fd);
  if (size == 0) return std::unique_ptr<MappedFile>(new MappedFile(path, nullptr, 0));
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) return PathErrnoStatus(errno, "map", path);
  return std::unique_ptr<MappedFile>(
      new MappedFile(path, static_cast<const uint8_t*>(data), size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace rt
}  // namespace spark

#include "cuda/weight_upload.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {

std::vector<HostToDeviceCopy> SplitIntoChunks(absl::Span<const HostToDeviceCopy> copies,
                                              uint64_t chunk_bytes) {
  std::vector<HostToDeviceCopy> chunks;
  for (const HostToDeviceCopy& copy : copies) {
    for (uint64_t done = 0; done < copy.bytes; done += chunk_bytes) {
      chunks.push_back({copy.source + done, std::min(chunk_bytes, copy.bytes - done),
                        copy.destination + done});
    }
  }
  return chunks;
}

FileRange FindInFiles(absl::Span<const Checkpoint::File> files, const uint8_t* source,
                      uint64_t bytes) {
  const auto address = reinterpret_cast<uintptr_t>(source);
  for (size_t f = 0; f < files.size(); ++f) {
    const auto begin = reinterpret_cast<uintptr_t>(files[f].data);
    if (files[f].data == nullptr || address < begin) continue;
    const uint64_t offset = address - begin;
    if (offset <= files[f].size && bytes <= files[f].size - offset) {
      return {static_cast<int>(f), offset};
    }
  }
  return {};
}

namespace {

// The positive integer in environment variable `name` into `value`; unset leaves it.
absl::Status ReadPositiveEnv(const char* name, int64_t limit, int64_t* value) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return absl::OkStatus();
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || parsed < 1 || parsed > limit) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", text,
                                                   "' is not an integer from 1 to ", limit));
  }
  *value = parsed;
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadUploadTuning(StagedUploadOptions* options) {
  int64_t threads = options->threads;
  int64_t chunk_mib = static_cast<int64_t>(options->chunk_bytes >> 20);
  SPARK_RETURN_IF_ERROR(ReadPositiveEnv("SPARK_UPLOAD_THREADS", 64, &threads));
  SPARK_RETURN_IF_ERROR(ReadPositiveEnv("SPARK_UPLOAD_CHUNK_MIB", 1024, &chunk_mib));
  options->threads = static_cast<int>(threads);
  options->chunk_bytes = static_cast<uint64_t>(chunk_mib) << 20;
  return absl::OkStatus();
}

namespace {

// Reads `bytes` bytes at `offset` of `fd` into `out`; false on an error or a short file.
bool ReadFully(int fd, uint64_t offset, uint8_t* out, uint64_t bytes) {
  while (bytes > 0) {
    const ssize_t got = ::pread(fd, out, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    out += got;
    offset += static_cast<uint64_t>(got);
    bytes -= static_cast<uint64_t>(got);
  }
  return true;
}

// The state the threads share.
struct Upload {
  const DriverApi& api;
  CUcontext context;
  const std::vector<HostToDeviceCopy>& chunks;
  absl::Span<const Checkpoint::File> files;
  const std::vector<int>& fds;
  uint64_t buffer_bytes;
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::condition_variable finished_changed;
  int finished = 0;            // guarded by mutex
  absl::Status first_error;    // guarded by mutex

  void Fail(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mutex);
    if (first_error.ok()) first_error = status;
    failed = true;
  }
  // A chunk's bytes into `buffer`: from its file when it lies in one that could be opened and
  // read, else from memory.
  void Stage(const HostToDeviceCopy& chunk, uint8_t* buffer) const {
    const FileRange range = FindInFiles(files, chunk.source, chunk.bytes);
    if (range.file >= 0 && fds[range.file] >= 0 &&
        ReadFully(fds[range.file], range.offset, buffer, chunk.bytes)) {
      return;
    }
    std::memcpy(buffer, chunk.source, chunk.bytes);
  }
};

// One thread's part: a stream and two staging buffers; chunk i + 1 is read while chunk i copies.
class Worker {
 public:
  explicit Worker(Upload& upload) : u_(upload), api_(upload.api) {}
  ~Worker() {
    if (stream_ != nullptr) api_.cuStreamSynchronize(stream_);
    for (int b = 0; b < 2; ++b) {
      if (events_[b] != nullptr) api_.cuEventDestroy(events_[b]);
      if (pinned_[b]) api_.cuMemHostUnregister(buffers_[b]);
      std::free(buffers_[b]);
    }
    if (stream_ != nullptr) api_.cuStreamDestroy(stream_);
  }

  absl::Status Run() {
    SPARK_CU_RETURN_IF_ERROR(&api_, api_.cuCtxSetCurrent(u_.context));
    SPARK_CU_RETURN_IF_ERROR(&api_, api_.cuStreamCreate(&stream_, cu::kStreamNonBlocking));
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t size = (u_.buffer_bytes + page - 1) / page * page;
    for (int b = 0; b < 2; ++b) {
      buffers_[b] = static_cast<uint8_t*>(std::aligned_alloc(page, size));
      if (buffers_[b] == nullptr) {
        return absl::ResourceExhaustedError("cannot allocate a weight staging buffer");
      }
      // Not pinned (a limit on locked memory): the copies are synchronous, still correct.
      pinned_[b] = api_.cuMemHostRegister(buffers_[b], size, 0) == cu::kSuccess;
      SPARK_CU_RETURN_IF_ERROR(&api_, api_.cuEventCreate(&events_[b], cu::kEventDisableTiming));
    }
    bool used[2] = {false, false};
    for (int b = 0; !u_.failed; b ^= 1) {
      const size_t i = u_.next.fetch_add(1);
      if (i >= u_.chunks.size()) break;
      const HostToDeviceCopy& chunk = u_.chunks[i];
      if (used[b]) SPARK_CU_RETURN_IF_ERROR(&api_, api_.cuEventSynchronize(events_[b]));
      u_.Stage(chunk, buffers_[b]);
      if (pinned_[b]) {
        SPARK_CU_RETURN_IF_ERROR(&api_, api_.cuMemcpyHtoDAsync(chunk.destination, buffers_[b],
                                                               chunk.bytes, stream_));
        SPARK_CU_RETURN_IF_ERROR(&api_, api_.cuEventRecord(events_[b], stream_));
        used[b] = true;
      } else {
        SPARK_CU_RETURN_IF_ERROR(&api_,
                                 api_.cuMemcpyHtoD(chunk.destination, buffers_[b], chunk.bytes));
      }
      u_.done += chunk.bytes;
    }
    SPARK_CU_RETURN_IF_ERROR(&api_, api_.cuStreamSynchronize(stream_));
    return absl::OkStatus();
  }

 private:
  Upload& u_;
  const DriverApi& api_;
  CUstream stream_ = nullptr;
  uint8_t* buffers_[2] = {nullptr, nullptr};
  bool pinned_[2] = {false, false};
  CUevent events_[2] = {nullptr, nullptr};
};

}  // namespace

absl::Status UploadStaged(const DriverApi& api, CUcontext context,
                          absl::Span<const HostToDeviceCopy> copies,
                          absl::Span<const Checkpoint::File> files,
                          const StagedUploadOptions& options) {
  const uint64_t chunk_bytes = std::max<uint64_t>(1, options.chunk_bytes);
  const std::vector<HostToDeviceCopy> chunks = SplitIntoChunks(copies, chunk_bytes);
  uint64_t total = 0, largest = 0;
  for (const HostToDeviceCopy& chunk : chunks) {
    total += chunk.bytes;
    largest = std::max(largest, chunk.bytes);
  }
  if (chunks.empty()) return absl::OkStatus();
  std::vector<int> fds;
  for (const Checkpoint::File& file : files) fds.push_back(::open(file.path.c_str(), O_RDONLY));
  Upload upload{api, context, chunks, files, fds, largest};
  const int wanted =
      options.threads > 0
          ? options.threads
          : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
  const int threads =
      static_cast<int>(std::min<size_t>(static_cast<size_t>(wanted), (chunks.size() + 1) / 2));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&upload] {
      absl::Status status;
      {
        Worker worker(upload);
        status = worker.Run();
      }  // (its stream drained and its buffers released before it counts as finished)
      if (!status.ok()) upload.Fail(status);
      std::lock_guard<std::mutex> lock(upload.mutex);
      ++upload.finished;
      upload.finished_changed.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(upload.mutex);
    while (upload.finished < threads) {
      upload.finished_changed.wait_for(lock, std::chrono::milliseconds(100));
      if (options.on_progress && upload.finished < threads) {
        lock.unlock();
        options.on_progress(upload.done.load(), total);
        lock.lock();
      }
    }
  }
  for (std::thread& thread : pool) thread.join();
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  if (!upload.first_error.ok()) return upload.first_error;
  if (options.on_progress) options.on_progress(total, total);
  return absl::OkStatus();
}

}  // namespace rt
}  // namespace spark

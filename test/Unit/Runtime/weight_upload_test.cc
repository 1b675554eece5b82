// The host-side rules of the staged weight upload (runtime/src/cuda/weight_upload.h): how copies
// are cut into staging-buffer chunks, how a source is found in the checkpoint's files and how the
// SPARK_UPLOAD_* environment variables are read. The
// copies themselves run on a GPU (test/gpu/run_e2e.sh: the models' logits depend on every byte).
#include "cuda/weight_upload.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace spark {
namespace rt {
namespace {

TEST(SplitIntoChunks, CutsEveryCopyAtTheChunkSizeAndKeepsOrder) {
  std::vector<uint8_t> host(100);
  const std::vector<HostToDeviceCopy> copies = {
      {host.data(), 25, 1000}, {host.data() + 25, 0, 2000}, {host.data() + 30, 10, 3000}};
  const std::vector<HostToDeviceCopy> chunks = SplitIntoChunks(copies, 10);
  ASSERT_EQ(chunks.size(), 4u);  // 10 + 10 + 5, the empty copy dropped, then 10
  EXPECT_EQ(chunks[0].source, host.data());
  EXPECT_EQ(chunks[0].bytes, 10u);
  EXPECT_EQ(chunks[0].destination, 1000u);
  EXPECT_EQ(chunks[1].source, host.data() + 10);
  EXPECT_EQ(chunks[1].destination, 1010u);
  EXPECT_EQ(chunks[2].source, host.data() + 20);
  EXPECT_EQ(chunks[2].bytes, 5u);
  EXPECT_EQ(chunks[2].destination, 1020u);
  EXPECT_EQ(chunks[3].source, host.data() + 30);
  EXPECT_EQ(chunks[3].bytes, 10u);
  EXPECT_EQ(chunks[3].destination, 3000u);
}

TEST(SplitIntoChunks, SumsToTheCopiedBytes) {
  std::vector<uint8_t> host(1 << 12);
  const std::vector<HostToDeviceCopy> copies = {{host.data(), 4095, 0}, {host.data(), 1, 4095}};
  uint64_t total = 0;
  for (const HostToDeviceCopy& c : SplitIntoChunks(copies, 1000)) {
    EXPECT_LE(c.bytes, 1000u);
    EXPECT_GT(c.bytes, 0u);
    total += c.bytes;
  }
  EXPECT_EQ(total, 4096u);
}

TEST(FindInFiles, GivesTheFileAndOffsetOfARangeWhollyInside) {
  std::vector<uint8_t> a(64), b(32);
  std::vector<Checkpoint::File> files(2);
  files[0].data = a.data();
  files[0].size = a.size();
  files[1].data = b.data();
  files[1].size = b.size();
  FileRange r = FindInFiles(files, b.data() + 8, 24);
  EXPECT_EQ(r.file, 1);
  EXPECT_EQ(r.offset, 8u);
  r = FindInFiles(files, a.data(), 64);
  EXPECT_EQ(r.file, 0);
  EXPECT_EQ(r.offset, 0u);
  // Past the end of its file, or not in any: copied from memory instead.
  EXPECT_EQ(FindInFiles(files, b.data() + 8, 25).file, -1);
  std::vector<uint8_t> elsewhere(8);
  EXPECT_EQ(FindInFiles(files, elsewhere.data(), 8).file, -1);
}

// Sets (or with nullptr unsets) the two tuning variables for one test.
void SetTuning(const char* threads, const char* chunk_mib) {
  for (auto [name, value] : {std::pair{"SPARK_UPLOAD_THREADS", threads},
                             std::pair{"SPARK_UPLOAD_CHUNK_MIB", chunk_mib}}) {
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
}

TEST(ReadUploadTuning, UnsetKeepsTheDefaults) {
  SetTuning(nullptr, nullptr);
  StagedUploadOptions options;
  ASSERT_TRUE(ReadUploadTuning(&options).ok());
  EXPECT_EQ(options.threads, 0);  // one per core
  EXPECT_EQ(options.chunk_bytes, 4ull << 20);
}

TEST(ReadUploadTuning, PositiveIntegersReplaceThem) {
  SetTuning("12", "16");
  StagedUploadOptions options;
  ASSERT_TRUE(ReadUploadTuning(&options).ok());
  EXPECT_EQ(options.threads, 12);
  EXPECT_EQ(options.chunk_bytes, 16ull << 20);
  SetTuning(nullptr, nullptr);
}

TEST(ReadUploadTuning, AnythingElseIsAnErrorNamingTheVariable) {
  for (const char* bad : {"0", "-3", "8x", "x", "65", "99999999999999999999"}) {
    SetTuning(bad, nullptr);
    StagedUploadOptions options;
    const absl::Status status = ReadUploadTuning(&options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find("SPARK_UPLOAD_THREADS='"), std::string::npos) << status;
    EXPECT_EQ(options.threads, 0) << "left unchanged";
  }
  SetTuning(nullptr, "2048");
  StagedUploadOptions options;
  const absl::Status status = ReadUploadTuning(&options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("SPARK_UPLOAD_CHUNK_MIB='2048' is not an integer from 1 to 1024"),
            std::string::npos)
      << status;
  SetTuning(nullptr, nullptr);
}

}  // namespace
}  // namespace rt
}  // namespace spark

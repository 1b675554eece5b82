#include "spark/runtime/safetensors.h"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader_test_util.h"
#include "spark/runtime/executor.h"

namespace spark {
namespace rt {
namespace {

using test::StatusIs;
using test::TempDir;
using test::TestPlan;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
constexpr absl::StatusCode kNotFound = absl::StatusCode::kNotFound;

OwnedTensor Tensor(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                   char fill = 'x') {
  uint64_t elements = 1;
  for (const int64_t dim : shape) elements *= dim;
  return {name, dtype, std::move(shape),
          std::string(elements * SafetensorsDTypeSize(dtype), fill)};
}

// A safetensors file with exactly this header text and data area.
std::string RawFile(absl::string_view header, absl::string_view data = "") {
  std::string file;
  AppendLittleEndian<uint64_t>(header.size(), &file);
  return absl::StrCat(file, header, data);
}

absl::Status OpenError(const TempDir& dir, absl::string_view header, absl::string_view data = "") {
  return Checkpoint::Open(dir.Write("bad.safetensors", RawFile(header, data))).status();
}

// The plan weights of TestPlan(), as a checkpoint would hold them (with `prefix` for "model.").
std::vector<OwnedTensor> PlanTensors(const std::string& prefix = "model.") {
  return {Tensor(prefix + "embed_tokens.weight", "BF16", {16, 4}),
          Tensor(prefix + "norm.weight", "BF16", {4})};
}

TEST(SafetensorsTest, WriteThenReadRoundTrips) {
  TempDir dir;
  const std::string path = dir.Path("t.safetensors");
  const std::vector<OwnedTensor> tensors = {Tensor("a", "F32", {2, 3}, 'a'),
                                            Tensor("b", "BF16", {5}, 'b'),
                                            Tensor("empty", "I64", {0, 4})};
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  const absl::StatusOr<std::vector<OwnedTensor>> read = ReadSafetensorsFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 3u);
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ((*read)[i].name, tensors[i].name);
    EXPECT_EQ((*read)[i].dtype, tensors[i].dtype);
    EXPECT_EQ((*read)[i].shape, tensors[i].shape);
    EXPECT_EQ((*read)[i].bytes, tensors[i].bytes);
  }
  const std::string file = *ReadFileToString(path);
  EXPECT_EQ(LoadLittleEndian<uint64_t>(file.data()) % 8, 0u);  // header padded to 8
}

TEST(SafetensorsTest, OpensSingleFile) {
  TempDir dir;
  const std::string path = dir.Path("model.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {Tensor("x", "F32", {2}, 'p'), Tensor("y", "I32", {3})}).ok());
  const absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint = Checkpoint::Open(path);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const Checkpoint& ckpt = **checkpoint;
  EXPECT_EQ(ckpt.path(), path);
  ASSERT_EQ(ckpt.tensors().size(), 2u);
  EXPECT_EQ(ckpt.total_bytes(), 20u);
  ASSERT_EQ(ckpt.files().size(), 1u);
  EXPECT_EQ(ckpt.files()[0].path, path);
  const TensorView* x = ckpt.Find("x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->dtype, "F32");
  EXPECT_EQ(x->shape, std::vector<int64_t>({2}));
  EXPECT_EQ(x->num_bytes, 8u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(x->data), 8), std::string(8, 'p'));
  EXPECT_EQ(ckpt.Find("z"), nullptr);
}

TEST(SafetensorsTest, AcceptsStringMetadata) {
  TempDir dir;
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  const absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir.Write("m.safetensors", RawFile(header, "ab")));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ((*checkpoint)->tensors().size(), 1u);
}

TEST(SafetensorsTest, DirectoryWithoutIndexUsesEverySafetensorsFile) {
  TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir.Path("b.safetensors"), {Tensor("from_b", "F32", {1})}).ok());
  ASSERT_TRUE(WriteSafetensors(dir.Path("a.safetensors"), {Tensor("from_a", "F32", {1})}).ok());
  dir.Write("config.json", "{}");
  const absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ASSERT_EQ((*checkpoint)->tensors().size(), 2u);
  EXPECT_EQ((*checkpoint)->tensors()[0].name, "from_a");  // files sorted by name
  EXPECT_EQ((*checkpoint)->files().size(), 2u);
}

TEST(SafetensorsTest, ShardedIndex) {
  TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir.Path("model-00001-of-00002.safetensors"),
                               {Tensor("a", "BF16", {2}), Tensor("b", "BF16", {2})})
                  .ok());
  ASSERT_TRUE(
      WriteSafetensors(dir.Path("model-00002-of-00002.safetensors"), {Tensor("c", "F32", {3})})
          .ok());
  ASSERT_TRUE(WriteSafetensors(dir.Path("stray.safetensors"), {Tensor("z", "F32", {3})}).ok());
  dir.Write(kSafetensorsIndexName,
            R"({"metadata":{"total_size":20},"weight_map":{"a":"model-00001-of-00002.safetensors",
            "c":"model-00002-of-00002.safetensors","b":"model-00001-of-00002.safetensors"}})");
  const absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ((*checkpoint)->files().size(), 2u);  // only the files the index names
  EXPECT_NE((*checkpoint)->Find("c"), nullptr);
  EXPECT_EQ((*checkpoint)->Find("z"), nullptr);
  EXPECT_EQ((*checkpoint)->total_bytes(), 20u);
}

TEST(SafetensorsTest, RejectsIndexNamingFileWithoutTheTensor) {
  TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir.Path("s1.safetensors"), {Tensor("a", "F32", {1})}).ok());
  ASSERT_TRUE(WriteSafetensors(dir.Path("s2.safetensors"), {Tensor("b", "F32", {1})}).ok());
  const std::string index = dir.Write(
      kSafetensorsIndexName, R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors",
                                 "x":"s2.safetensors"}})");
  EXPECT_TRUE(StatusIs(Checkpoint::Open(dir.path()).status(), kInvalid,
                       absl::StrCat(index, ": weight_map maps b to ", dir.Path("s1.safetensors"),
                                    ", but that file has no tensor b; the index does not match "
                                    "the shards")));
}

TEST(SafetensorsTest, RejectsIndexNamingMissingFile) {
  TempDir dir;
  dir.Write(kSafetensorsIndexName, R"({"weight_map":{"a":"gone.safetensors"}})");
  EXPECT_TRUE(StatusIs(Checkpoint::Open(dir.path()).status(), kNotFound,
                       "gone.safetensors: No such file or directory"));
}

TEST(SafetensorsTest, RejectsMalformedIndex) {
  TempDir dir;
  const std::string index = dir.Write(kSafetensorsIndexName, R"({"weights":{}})");
  EXPECT_TRUE(StatusIs(Checkpoint::Open(dir.path()).status(), kInvalid,
                       absl::StrCat(index, ": expected an object with a \"weight_map\" object")));
  dir.Write(kSafetensorsIndexName, R"({"weight_map":{"a":"../x.safetensors"}})");
  EXPECT_TRUE(StatusIs(Checkpoint::Open(dir.path()).status(), kInvalid,
                       "weight_map[\"a\"] must be a file name in the same directory, found "
                       "\"../x.safetensors\""));
  dir.Write(kSafetensorsIndexName, R"({"weight_map":)");
  EXPECT_TRUE(StatusIs(Checkpoint::Open(dir.path()).status(), kInvalid,
                       absl::StrCat(index, ": not valid JSON: JSON error at byte 14")));
}

TEST(SafetensorsTest, RejectsDuplicateNamesAcrossShards) {
  TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir.Path("a.safetensors"), {Tensor("w", "F32", {1})}).ok());
  ASSERT_TRUE(WriteSafetensors(dir.Path("b.safetensors"), {Tensor("w", "F32", {1})}).ok());
  EXPECT_TRUE(StatusIs(Checkpoint::Open(dir.path()).status(), kInvalid,
                       absl::StrCat("tensor w appears twice: in ", dir.Path("a.safetensors"),
                                    " and in ", dir.Path("b.safetensors"),
                                    "; the checkpoint is inconsistent")));
}

TEST(SafetensorsTest, RejectsDuplicateNamesWithinFile) {
  TempDir dir;
  EXPECT_TRUE(StatusIs(OpenError(dir, R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},
                                           "w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                 "ab"),
                       kInvalid, "the safetensors header is not valid JSON: JSON error at byte "));
  EXPECT_TRUE(StatusIs(OpenError(dir, R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},
                                           "w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                 "ab"),
                       kInvalid, "duplicate key \"w\" in object"));
}

TEST(SafetensorsTest, RejectsTruncatedFile) {
  TempDir dir;
  const std::string path = dir.Write("t.safetensors", std::string("\x10\0\0", 3));
  EXPECT_TRUE(StatusIs(Checkpoint::Open(path).status(), kInvalid,
                       absl::StrCat(path, ": truncated safetensors file: 3 bytes, the header "
                                          "length alone needs 8")));
}

TEST(SafetensorsTest, RejectsHeaderLengthLargerThanFile) {
  TempDir dir;
  std::string file = RawFile("{}");
  file[0] = 100;
  const std::string path = dir.Write("t.safetensors", file);
  EXPECT_TRUE(StatusIs(Checkpoint::Open(path).status(), kInvalid,
                       absl::StrCat(path, ": safetensors header length 100 exceeds the rest of "
                                          "the file (2 bytes); the file is truncated or not "
                                          "safetensors")));
}

TEST(SafetensorsTest, RejectsAbsurdHeaderLength) {
  TempDir dir;
  std::string length;
  AppendLittleEndian<uint64_t>(kMaxSafetensorsHeaderBytes + 1, &length);
  const std::string path = dir.Write("huge.safetensors", length);
  std::filesystem::resize_file(path, kMaxSafetensorsHeaderBytes + 64);  // sparse
  EXPECT_TRUE(StatusIs(Checkpoint::Open(path).status(), kInvalid,
                       absl::StrCat(path,
                                    ": safetensors header length 16777217 is above the "
                                    "limit of 16777216 bytes (16 MiB; real headers are "
                                    "about 100 KiB); the file is damaged")));
}

TEST(SafetensorsTest, RejectsNonObjectHeader) {
  TempDir dir;
  EXPECT_TRUE(StatusIs(OpenError(dir, "[1, 2]"), kInvalid,
                       "bad.safetensors: the safetensors header must be a JSON object, found an "
                       "array"));
  EXPECT_TRUE(StatusIs(OpenError(dir, "{"), kInvalid,
                       "bad.safetensors: the safetensors header is not valid JSON"));
}

TEST(SafetensorsTest, RejectsMalformedEntries) {
  TempDir dir;
  EXPECT_TRUE(StatusIs(OpenError(dir, R"({"w": 3})"), kInvalid,
                       "bad.safetensors: tensor w: expected an object, found an integer"));
  EXPECT_TRUE(StatusIs(OpenError(dir, R"({"w":{"shape":[1],"data_offsets":[0,1]}})", "a"),
                       kInvalid, "tensor w: missing \"dtype\" string"));
  EXPECT_TRUE(StatusIs(OpenError(dir, R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})",
                                 "a"),
                       kInvalid, "tensor w: \"shape\" must be an array of integers >= 0"));
  EXPECT_TRUE(StatusIs(OpenError(dir, R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})",
                                 "a"),
                       kInvalid, "tensor w: \"data_offsets\" must be [begin, end], integers >= 0"));
  EXPECT_TRUE(StatusIs(OpenError(dir, R"({"__metadata__":{"n":1}})"), kInvalid,
                       "bad.safetensors: __metadata__ must be an object of string values"));
}

// Names from the file reach the message escaped (PrintableText), so that a tensor name cannot
// colour the terminal or set its title.
TEST(SafetensorsTest, EscapesControlCharactersOfTensorNames) {
  TempDir dir;
  EXPECT_TRUE(StatusIs(OpenError(dir, R"({"\u001b]0;pwned\u0007w": 3})"), kInvalid,
                       "bad.safetensors: tensor \\x1b]0;pwned\\x07w: expected an object, found "
                       "an integer"));
  EXPECT_TRUE(StatusIs(OpenError(dir,
                                 R"({"w":{"dtype":"\u001b[2J","shape":[1],)"
                                 R"("data_offsets":[0,1]}})",
                                 "a"),
                       kInvalid, "tensor w: unknown dtype \"\\x1b[2J\""));
  ASSERT_TRUE(WriteSafetensors(dir.Path("model.safetensors"), PlanTensors()).ok());
  const auto checkpoint = Checkpoint::Open(dir.Path("model.safetensors"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  Plan plan = TestPlan();
  constexpr char kName[] = "model.\x1b[8m\0hidden";  // ESC [8m (invisible text), then a NUL
  plan.weights[0].name = std::string(kName, sizeof(kName) - 1);
  const absl::Status missing = CheckPlanWeights(plan, **checkpoint);
  EXPECT_TRUE(
      StatusIs(missing, kNotFound, "weight model.\\x1b[8m\\x00hidden is not in the checkpoint"));
}

TEST(SafetensorsTest, RejectsUnknownDType) {
  TempDir dir;
  EXPECT_TRUE(StatusIs(OpenError(dir, R"({"w":{"dtype":"Q4_K","shape":[1],"data_offsets":[0,1]}})",
                                 "a"),
                       kInvalid,
                       "bad.safetensors: tensor w: unknown dtype \"Q4_K\" (known: BOOL, U8, I8, "
                       "F8_E4M3, F8_E5M2, F8_E8M0, U16, I16, F16, BF16, U32, I32, F32, U64, I64, "
                       "F64)"));
}

TEST(SafetensorsTest, RejectsOffsetsPastEnd) {
  TempDir dir;
  EXPECT_TRUE(StatusIs(OpenError(dir, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                                 "1234"),
                       kInvalid,
                       "bad.safetensors: tensor w: data_offsets [0, 8] are not a range inside "
                       "the data area (4 bytes); the file is truncated or damaged"));
  EXPECT_TRUE(StatusIs(OpenError(dir, R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[3,2]}})",
                                 "1234"),
                       kInvalid, "tensor w: data_offsets [3, 2] are not a range"));
}

TEST(SafetensorsTest, RejectsSizeShapeMismatch) {
  TempDir dir;
  EXPECT_TRUE(StatusIs(OpenError(dir,
                                 R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,8]}})",
                                 "12345678"),
                       kInvalid,
                       "bad.safetensors: tensor w: data_offsets span 8 bytes, but BF16 [2, 3] "
                       "needs 12"));
  EXPECT_TRUE(StatusIs(
      OpenError(dir,
                R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                "12345678"),
      kInvalid, "tensor w: data_offsets span 8 bytes, but F64 [4294967296, 4294967296] needs "
                "more than 2^64"));
}

TEST(SafetensorsTest, RejectsOverlap) {
  TempDir dir;
  EXPECT_TRUE(StatusIs(OpenError(dir, R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},
                                           "b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}})",
                                 "12345"),
                       kInvalid,
                       "bad.safetensors: tensors a and b overlap in the data area; the file is "
                       "damaged"));
  // Empty tensors overlap nothing.
  const std::string header = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},
                                 "e":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}})";
  EXPECT_TRUE(Checkpoint::Open(dir.Write("ok.safetensors", RawFile(header, "1234"))).ok());
}

TEST(SafetensorsTest, MissingPathsAreNotFound) {
  TempDir dir;
  EXPECT_TRUE(StatusIs(Checkpoint::Open(dir.Path("nope")).status(), kNotFound,
                       absl::StrCat("checkpoint ", dir.Path("nope"),
                                    " does not exist; name the model's directory or a "
                                    ".safetensors file")));
  EXPECT_TRUE(StatusIs(Checkpoint::Open(dir.path()).status(), kNotFound,
                       absl::StrCat(dir.path(), " has no *.safetensors file and no "
                                                "model.safetensors.index.json")));
}

TEST(SafetensorsTest, WriteRejectsBadTensors) {
  TempDir dir;
  const std::string path = dir.Path("w.safetensors");
  EXPECT_TRUE(StatusIs(WriteSafetensors(path, {Tensor("a", "F32", {1}), Tensor("a", "F32", {1})}),
                       kInvalid, "tensor a is given twice"));
  EXPECT_TRUE(StatusIs(WriteSafetensors(path, {{"a", "F12", {1}, "x"}}), kInvalid,
                       "tensor a: unknown dtype \"F12\""));
  EXPECT_TRUE(StatusIs(WriteSafetensors(path, {{"a", "F32", {2}, "xyz"}}), kInvalid,
                       "tensor a: 3 bytes given, but F32 [2] needs 8"));
  EXPECT_TRUE(StatusIs(WriteSafetensors(path, {Tensor("__metadata__", "F32", {1})}), kInvalid,
                       "cannot write a tensor named \"__metadata__\""));
  EXPECT_TRUE(StatusIs(WriteSafetensors(dir.Path("no/such/dir.safetensors"), {}), kNotFound,
                       "cannot create"));
}

TEST(CheckPlanWeightsTest, AcceptsMatchingCheckpoint) {
  TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir.Path("model.safetensors"), PlanTensors()).ok());
  const auto checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_TRUE(CheckPlanWeights(TestPlan(), **checkpoint).ok());
}

TEST(CheckPlanWeightsTest, MissingWeightSuggestsPrefixMismatch) {
  TempDir dir;
  ASSERT_TRUE(
      WriteSafetensors(dir.Path("model.safetensors"), PlanTensors("model.language_model.")).ok());
  const auto checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_TRUE(StatusIs(CheckPlanWeights(TestPlan(), **checkpoint), kNotFound,
                       absl::StrCat("weight model.embed_tokens.weight is not in the checkpoint ",
                                    dir.path(),
                                    " (2 of the plan's 2 weights are missing); the checkpoint "
                                    "has model.language_model.embed_tokens.weight: the "
                                    "importer's weight prefix \"model.\" may not match this "
                                    "checkpoint, re-import the model with the prefix its tensors "
                                    "use")));
}

TEST(CheckPlanWeightsTest, MissingWeightWithoutLookalike) {
  TempDir dir;
  std::vector<OwnedTensor> tensors = PlanTensors();
  tensors.pop_back();
  ASSERT_TRUE(WriteSafetensors(dir.Path("model.safetensors"), tensors).ok());
  const auto checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_TRUE(StatusIs(CheckPlanWeights(TestPlan(), **checkpoint), kNotFound,
                       "weight model.norm.weight is not in the checkpoint"));
  EXPECT_TRUE(StatusIs(CheckPlanWeights(TestPlan(), **checkpoint), kNotFound,
                       "(1 of the plan's 2 weights are missing); is this the checkpoint the "
                       "model was imported from? (the importer's weight prefix is \"model.\")"));
}

TEST(CheckPlanWeightsTest, ShapeMismatch) {
  TempDir dir;
  std::vector<OwnedTensor> tensors = PlanTensors();
  tensors[0] = Tensor("model.embed_tokens.weight", "BF16", {8, 4});
  ASSERT_TRUE(WriteSafetensors(dir.Path("model.safetensors"), tensors).ok());
  const auto checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_TRUE(StatusIs(CheckPlanWeights(TestPlan(), **checkpoint), kInvalid,
                       "weight model.embed_tokens.weight: expected shape [16, 4], found [8, 4]; "
                       "the checkpoint is not the model variant the plan describes"));
}

TEST(CheckPlanWeightsTest, DTypeMismatch) {
  TempDir dir;
  std::vector<OwnedTensor> tensors = PlanTensors();
  tensors[1] = Tensor("model.norm.weight", "F32", {4});
  ASSERT_TRUE(WriteSafetensors(dir.Path("model.safetensors"), tensors).ok());
  const auto checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_TRUE(StatusIs(CheckPlanWeights(TestPlan(), **checkpoint), kInvalid,
                       "weight model.norm.weight: expected dtype BF16, found F32; the plan "
                       "expects bf16 here"));
}

// A weight assembled from parts (MoE experts stored one matrix per expert): each part is checked
// like a weight (present, dtype, shape), BindWeights lists the parts in order and
// CopyWeightBytes puts them one after the other.
TEST(CheckPlanWeightsTest, WeightsOfPartsCheckAndBindEveryPart) {
  TempDir dir;
  std::vector<OwnedTensor> tensors = PlanTensors();
  tensors.push_back({"e.0.weight", "BF16", {2}, std::string("\x01\x02\x03\x04", 4)});
  tensors.push_back({"e.1.weight", "BF16", {2}, std::string("\x05\x06\x07\x08", 4)});
  ASSERT_TRUE(WriteSafetensors(dir.Path("model.safetensors"), tensors).ok());
  const auto checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok());
  Plan plan = TestPlan();
  WeightInfo stacked{"e.{0..1}.weight", DType::kBF16, {2, 2}, {"e.0.weight", "e.1.weight"}, {2}};
  plan.weights.push_back(stacked);
  ASSERT_TRUE(CheckPlanWeights(plan, **checkpoint).ok());
  const absl::StatusOr<std::vector<WeightData>> bound = BindWeights(plan, **checkpoint);
  ASSERT_TRUE(bound.ok()) << bound.status();
  const WeightData& w = bound->back();
  EXPECT_TRUE(w.assembled());
  EXPECT_EQ(w.data, nullptr);
  EXPECT_EQ(w.num_bytes, 8u);
  ASSERT_EQ(w.parts.size(), 2u);
  std::string bytes(8, '\0');
  CopyWeightBytes(w, reinterpret_cast<uint8_t*>(&bytes[0]));
  EXPECT_EQ(bytes, std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  // An assembled weight is never read in place on an integrated GPU.
  EXPECT_TRUE(PlaceIntegratedWeights(plan, *bound).copied.back());

  Plan missing = plan;
  missing.weights.back().parts[1] = "e.2.weight";
  EXPECT_TRUE(StatusIs(CheckPlanWeights(missing, **checkpoint), kNotFound,
                       "weight e.2.weight, a part of e.{0..1}.weight, is not in the checkpoint"));
  EXPECT_TRUE(StatusIs(CheckPlanWeights(missing, **checkpoint), kNotFound,
                       "(1 of the plan's 4 checkpoint tensors are missing)"));
  Plan shape = plan;
  shape.weights.back().part_shape = {1, 2};
  shape.weights.back().shape = {2, 1, 2};
  EXPECT_TRUE(StatusIs(CheckPlanWeights(shape, **checkpoint), kInvalid,
                       "weight e.0.weight: expected shape [1, 2], found [2]"));
}

// A weight the plan inverts (WeightInfo::transform, compressed-tensors' NVFP4 global scales):
// BindWeights computes 1 / x of every f32 element into memory of its own, after assembling its
// parts; such a weight is copied on an integrated GPU (it is not in the checkpoint's mapping).
TEST(CheckPlanWeightsTest, ReciprocalWeightsAreComputedWhenBound) {
  TempDir dir;
  std::vector<OwnedTensor> tensors = PlanTensors();
  const auto f32_bytes = [](std::vector<float> values) {
    std::string bytes(values.size() * 4, '\0');
    std::memcpy(&bytes[0], values.data(), bytes.size());
    return bytes;
  };
  tensors.push_back({"g", "F32", {1}, f32_bytes({0.25f})});
  tensors.push_back({"e.0.g", "F32", {1}, f32_bytes({4.0f})});
  tensors.push_back({"e.1.g", "F32", {1}, f32_bytes({-0.5f})});
  ASSERT_TRUE(WriteSafetensors(dir.Path("model.safetensors"), tensors).ok());
  const auto checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok());
  Plan plan = TestPlan();
  WeightInfo single{"g", DType::kF32, {1}};
  single.transform = WeightTransform::kReciprocal;
  WeightInfo stacked{"e.{0..1}.g", DType::kF32, {2}, {"e.0.g", "e.1.g"}, {1}};
  stacked.transform = WeightTransform::kReciprocal;
  plan.weights.push_back(single);
  plan.weights.push_back(stacked);
  const absl::StatusOr<std::vector<WeightData>> bound = BindWeights(plan, **checkpoint);
  ASSERT_TRUE(bound.ok()) << bound.status();
  for (size_t w : {plan.weights.size() - 2, plan.weights.size() - 1}) {
    const WeightData& weight = (*bound)[w];
    EXPECT_FALSE(weight.assembled());
    ASSERT_NE(weight.computed, nullptr);
    EXPECT_EQ(weight.data, weight.computed->data());
  }
  std::vector<float> got(3);
  std::memcpy(&got[0], (*bound)[plan.weights.size() - 2].data, 4);
  std::memcpy(&got[1], (*bound)[plan.weights.size() - 1].data, 8);
  EXPECT_EQ(got, (std::vector<float>{4.0f, 0.25f, -2.0f}));
  const WeightPlacement placement = PlaceIntegratedWeights(plan, *bound);
  EXPECT_TRUE(placement.copied[plan.weights.size() - 2]);
  EXPECT_TRUE(placement.copied[plan.weights.size() - 1]);
}

TEST(SafetensorsDTypeTest, SizesAndPlanNames) {
  EXPECT_EQ(SafetensorsDTypeSize("BF16"), 2);
  EXPECT_EQ(SafetensorsDTypeSize("F8_E4M3"), 1);
  EXPECT_EQ(SafetensorsDTypeSize("I64"), 8);
  EXPECT_EQ(SafetensorsDTypeSize("bf16"), 0);
  EXPECT_EQ(SafetensorsDTypeName(DType::kBF16), "BF16");
  EXPECT_EQ(SafetensorsDTypeName(DType::kF32), "F32");
  EXPECT_EQ(SafetensorsDTypeName(DType::kI32), "I32");
}

}  // namespace
}  // namespace rt
}  // namespace spark

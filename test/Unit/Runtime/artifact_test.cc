#include "spark/runtime/artifact.h"

#include <string>

#include "gtest/gtest.h"
#include "loader_test_util.h"

namespace spark {
namespace rt {
namespace {

using test::MakeCubin;
using test::MakeElf64;
using test::StatusIs;
using test::TempDir;
using test::TestPlan;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

TEST(ArtifactTest, LoadsCubin) {
  TempDir dir;
  const std::string bytes = MakeCubin(TestPlan("sm_121a"));
  const std::string path = dir.Write("model.cubin", bytes);
  const absl::StatusOr<Artifact> artifact = LoadArtifact(path);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_EQ(artifact->path, path);
  EXPECT_EQ(artifact->image, bytes);
  EXPECT_FALSE(artifact->is_ptx);
  EXPECT_EQ(artifact->target, "sm_121a");
  EXPECT_EQ(artifact->plan.steps.size(), TestPlan().steps.size());
}

TEST(ArtifactTest, LoadsPtxWithSiblingPlan) {
  TempDir dir;
  const std::string ptx = ".version 8.8\n.target sm_90\n";
  const std::string path = dir.Write("model.compute_90.ptx", ptx);
  dir.Write("model.compute_90.plan", SerializePlanSection(TestPlan("compute_90")));
  const absl::StatusOr<Artifact> artifact = LoadArtifact(path);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_TRUE(artifact->is_ptx);
  EXPECT_EQ(artifact->target, "compute_90");
  EXPECT_EQ(artifact->image, ptx + std::string(1, '\0'));  // NUL-terminated for the driver
}

TEST(ArtifactTest, PtxPlanPath) {
  EXPECT_EQ(PtxPlanPath("dir/model.compute_90.ptx"), "dir/model.compute_90.plan");
  EXPECT_EQ(PtxPlanPath("model.ptx"), "model.plan");
}

TEST(ArtifactTest, MissingFileIsNotFound) {
  TempDir dir;
  EXPECT_TRUE(StatusIs(LoadArtifact(dir.Path("none.cubin")).status(),
                       absl::StatusCode::kNotFound, "none.cubin: No such file or directory"));
}

TEST(ArtifactTest, DirectoryIsNotAnArtifact) {
  TempDir dir;
  const std::string path = dir.MakeDir("model.cubin");
  EXPECT_TRUE(StatusIs(LoadArtifact(path).status(), kInvalid,
                       absl::StrCat(path, " is a directory, not a regular file; name a file")));
}

// A device is refused by what it is before it is opened (test/tools/spark-run/model-file.test
// does the same for a FIFO, under a timeout).
TEST(ArtifactTest, DeviceIsNotAnArtifact) {
  EXPECT_TRUE(StatusIs(LoadArtifact("/dev/null").status(), kInvalid,
                       "/dev/null is a character device, not a regular file; name a file"));
  EXPECT_TRUE(StatusIs(ReadFileToString("/dev/zero").status(), kInvalid,
                       "/dev/zero is a character device, not a regular file; name a file"));
}

TEST(ArtifactTest, RejectsNonElfCubin) {
  TempDir dir;
  const std::string path = dir.Write("model.cubin", "// PTX text by mistake\n");
  EXPECT_TRUE(StatusIs(LoadArtifact(path).status(), kInvalid,
                       absl::StrCat(path, " is not an ELF file (expected the bytes 7f 45 4c 46, "
                                          "found 2f 2f 20 50)")));
}

TEST(ArtifactTest, RejectsCubinWithoutPlanSection) {
  TempDir dir;
  const std::string path = dir.Write("plain.cubin", MakeElf64({{".text.kernel", "code"}}));
  EXPECT_TRUE(StatusIs(LoadArtifact(path).status(), kInvalid,
                       absl::StrCat(path, " has no .spark.plan section: it is not a Spark "
                                          "artifact; compile it with spark-compile")));
}

// Two plans in one file: refused, not the first silently taken.
TEST(ArtifactTest, RejectsCubinWithTwoPlanSections) {
  TempDir dir;
  const std::string plan = SerializePlanSection(TestPlan());
  const std::string path = dir.Write(
      "model.cubin",
      MakeElf64({{".spark.plan", plan}, {".text.spark_linear__0", "code"}, {".spark.plan", plan}}));
  EXPECT_TRUE(StatusIs(LoadArtifact(path).status(), kInvalid,
                       absl::StrCat(path,
                                    " has 2 .spark.plan sections (sections 1, 3); "
                                    "spark-compile writes one: the file was modified, "
                                    "recompile it with spark-compile")));
}

TEST(ArtifactTest, InvalidPlanNamesTheFile) {
  TempDir dir;
  std::string section = SerializePlanSection(TestPlan());
  section[8] = static_cast<char>(plan_format::kPlanVersion + 1);
  const std::string path = dir.Write("model.cubin", MakeElf64({{".spark.plan", section}}));
  EXPECT_TRUE(StatusIs(LoadArtifact(path).status(), kInvalid,
                       absl::StrCat(path, ": plan version ", plan_format::kPlanVersion + 1,
                                    " is not supported")));
}

TEST(ArtifactTest, RejectsCubinWhosePlanNamesPtx) {
  TempDir dir;
  const std::string path = dir.Write("model.cubin", MakeCubin(TestPlan("compute_90")));
  EXPECT_TRUE(StatusIs(LoadArtifact(path).status(), kInvalid,
                       absl::StrCat(path, " is a cubin but its plan names the PTX target "
                                          "compute_90; the files do not belong together, "
                                          "recompile them with spark-compile")));
}

TEST(ArtifactTest, RejectsPtxWhosePlanNamesCubinTarget) {
  TempDir dir;
  const std::string path = dir.Write("model.compute_90.ptx", ".version 8.8\n");
  dir.Write("model.compute_90.plan", SerializePlanSection(TestPlan("sm_90a")));
  EXPECT_TRUE(StatusIs(LoadArtifact(path).status(), kInvalid,
                       absl::StrCat(path, " is PTX but its plan names the cubin target sm_90a")));
}

TEST(ArtifactTest, PtxWithoutPlanIsNotFound) {
  TempDir dir;
  const std::string path = dir.Write("model.compute_90.ptx", ".version 8.8\n");
  EXPECT_TRUE(StatusIs(LoadArtifact(path).status(), absl::StatusCode::kNotFound,
                       absl::StrCat(path, " needs its plan file ",
                                    dir.Path("model.compute_90.plan"),
                                    ", which does not exist; spark-compile --target compute_XX "
                                    "writes both files: keep them in the same directory")));
}

TEST(ArtifactTest, PlanErrorsOfPtxNameThePlanFile) {
  TempDir dir;
  const std::string path = dir.Write("model.compute_90.ptx", ".version 8.8\n");
  const std::string plan = dir.Write("model.compute_90.plan", "garbage");
  EXPECT_TRUE(StatusIs(LoadArtifact(path).status(), kInvalid,
                       absl::StrCat(plan, ": the .spark.plan section is truncated")));
}

TEST(ArtifactTest, RejectsElfNamedPtx) {
  TempDir dir;
  const std::string path = dir.Write("model.compute_90.ptx", MakeCubin(TestPlan()));
  EXPECT_TRUE(StatusIs(LoadArtifact(path).status(), kInvalid,
                       absl::StrCat(path, " is an ELF file, not PTX text; name cubins with the "
                                          ".cubin extension")));
}

}  // namespace
}  // namespace rt
}  // namespace spark

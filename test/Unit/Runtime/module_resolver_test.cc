#include "spark/runtime/module_resolver.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "loader_test_util.h"
#include "spark/runtime/artifact_cache.h"
#include "spark/runtime/target.h"

namespace spark {
namespace rt {
namespace {

using test::MakeCubin;
using test::StatusIs;
using test::TempDir;
using test::TestPlan;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

// Writes <dir>/<name>: a cubin whose plan says `target`, or for a .ptx name, PTX text and its
// sibling .plan.
std::string WriteImage(const TempDir& temp, const std::string& name, const std::string& target) {
  if (absl::EndsWith(name, ".ptx")) {
    temp.Write(PtxPlanPath(name), SerializePlanSection(TestPlan(target)));
    return temp.Write(name, ".version 8.8\n");
  }
  return temp.Write(name, MakeCubin(TestPlan(target)));
}

ResolveRequest Request(const std::string& artifact, int major, int minor) {
  ResolveRequest request;
  request.artifact_path = artifact;
  request.cc_major = major;
  request.cc_minor = minor;
  return request;
}

const Candidate* FindCandidate(const Resolution& resolution, const std::string& path) {
  for (const Candidate& candidate : resolution.considered) {
    if (candidate.path == path) return &candidate;
  }
  return nullptr;
}

// The rejection reason of `path` among the candidates when resolving `artifact` for major.minor.
std::string ReasonFor(const std::string& artifact, int major, int minor, const std::string& path) {
  const absl::StatusOr<Resolution> resolution = ResolveModule(Request(artifact, major, minor));
  if (!resolution.ok()) return std::string(resolution.status().message());
  const Candidate* candidate = FindCandidate(*resolution, path);
  return candidate == nullptr ? "(not considered)" : candidate->reason;
}

TEST(TargetTest, ParsesEveryKind) {
  const struct {
    const char* name;
    TargetKind kind;
    int major, minor;
  } cases[] = {{"sm_121a", TargetKind::kArch, 12, 1},   {"sm_120f", TargetKind::kFamily, 12, 0},
               {"sm_90", TargetKind::kGeneric, 9, 0},   {"sm_100a", TargetKind::kArch, 10, 0},
               {"compute_90", TargetKind::kPtx, 9, 0},  {"compute_120", TargetKind::kPtx, 12, 0},
               {"sm_89", TargetKind::kGeneric, 8, 9}};
  for (const auto& c : cases) {
    const absl::StatusOr<Target> target = ParseTarget(c.name);
    ASSERT_TRUE(target.ok()) << c.name << ": " << target.status();
    EXPECT_EQ(target->kind, c.kind) << c.name;
    EXPECT_EQ(target->major, c.major) << c.name;
    EXPECT_EQ(target->minor, c.minor) << c.name;
    EXPECT_EQ(target->ToString(), c.name);
    EXPECT_EQ(target->is_cubin(), c.kind != TargetKind::kPtx);
  }
}

TEST(TargetTest, RejectsJunk) {
  for (const char* junk : {"", "sm_", "sm_9", "sm_090", "sm_1234", "sm_90x", "compute_90a",
                           "gfx90a", "SM_90", "sm_9a0", "compute_", "sm_-90"}) {
    EXPECT_TRUE(StatusIs(ParseTarget(junk).status(), kInvalid,
                         absl::StrCat("invalid target \"", junk,
                                      "\": expected sm_<major><minor>[a|f] (e.g. sm_121a, "
                                      "sm_120f, sm_90) or compute_<major><minor> (e.g. "
                                      "compute_90)")))
        << junk;
  }
}

TEST(TargetTest, NativeTargetForDevice) {
  EXPECT_EQ(NativeTargetFor(9, 0).ToString(), "sm_90a");
  EXPECT_EQ(NativeTargetFor(12, 1).ToString(), "sm_121a");
  EXPECT_EQ(NativeTargetFor(8, 9).ToString(), "sm_89");
}

// What spark-serve and spark-quantize compile a checkpoint directory for (artifact_cache.h).
TEST(TargetTest, ArtifactTargetForDevice) {
  EXPECT_EQ(ArtifactTargetFor(nullptr), "compute_90");  // the host executor: PTX and its plan
  DeviceInfo a100, gb10;
  a100.cc_major = 8;
  a100.cc_minor = 0;
  gb10.cc_major = 12;
  gb10.cc_minor = 1;
  EXPECT_EQ(ArtifactTargetFor(&a100), "sm_80");  // no arch-specific target below 9.0
  EXPECT_EQ(ArtifactTargetFor(&gb10), "sm_121a");
}

TEST(TargetTest, ParsesComputeCapability) {
  EXPECT_EQ(*ParseComputeCapability("9.0"), std::make_pair(9, 0));
  EXPECT_EQ(*ParseComputeCapability("12.1"), std::make_pair(12, 1));
  for (const char* junk : {"9", "9.", ".0", "09.0", "9.10", "a.b", "123.0", ""}) {
    EXPECT_TRUE(StatusIs(ParseComputeCapability(junk).status(), kInvalid,
                         absl::StrCat("invalid compute capability \"", junk,
                                      "\": expected <major>.<minor>, e.g. 9.0 or 12.1")))
        << junk;
  }
}

TEST(ModuleStemTest, StripsExtensionAndTarget) {
  EXPECT_EQ(ModuleStem("dir/model.sm_90a.cubin"), "model");
  EXPECT_EQ(ModuleStem("model.cubin"), "model");
  EXPECT_EQ(ModuleStem("/a/b/model.compute_90.ptx"), "model");
  EXPECT_EQ(ModuleStem("model.v2.cubin"), "model.v2");
  EXPECT_EQ(ModuleStem("gemma.sm_121a.cubin"), "gemma");
  EXPECT_EQ(ModuleStem("plain"), "plain");
}

TEST(ModuleResolverTest, Rule1ExactImageWins) {
  TempDir temp;
  const std::string exact = WriteImage(temp, "model.sm_90a.cubin", "sm_90a");
  const std::string generic = WriteImage(temp, "model.sm_90.cubin", "sm_90");
  const std::string ptx = WriteImage(temp, "model.compute_90.ptx", "compute_90");
  const absl::StatusOr<Resolution> resolution =
      ResolveModule(Request(temp.Path("model.cubin"), 9, 0));
  ASSERT_TRUE(resolution.ok()) << resolution.status();
  EXPECT_EQ(resolution->artifact.path, exact);
  EXPECT_EQ(resolution->kind, ImageKind::kExact);
  EXPECT_EQ(resolution->artifact.target, "sm_90a");
  EXPECT_EQ(resolution->stem, "model");
  ASSERT_EQ(resolution->considered.size(), 3u);
  EXPECT_EQ(FindCandidate(*resolution, exact)->reason, "exact arch-specific image sm_90a for 9.0");
  const Candidate* lower = FindCandidate(*resolution, generic);
  EXPECT_TRUE(lower->accepted);
  EXPECT_EQ(lower->reason, absl::StrCat("a generic image sm_90: runs on 9.x from 9.0; usable "
                                        "(generic image), but ", exact, " ranks higher"));
  EXPECT_TRUE(FindCandidate(*resolution, ptx)->accepted);
  EXPECT_EQ(FallbackNote(*resolution), "");
}

TEST(ModuleResolverTest, Rule2FamilyImageHighestMinorFirst) {
  TempDir temp;
  WriteImage(temp, "model.sm_120f.cubin", "sm_120f");
  const std::string family121 = WriteImage(temp, "model.sm_121f.cubin", "sm_121f");
  WriteImage(temp, "model.sm_121.cubin", "sm_121");
  const absl::StatusOr<Resolution> resolution =
      ResolveModule(Request(temp.Path("model.cubin"), 12, 1));
  ASSERT_TRUE(resolution.ok()) << resolution.status();
  EXPECT_EQ(resolution->artifact.path, family121);
  EXPECT_EQ(resolution->kind, ImageKind::kFamily);
  EXPECT_EQ(FallbackNote(*resolution),
            absl::StrCat("note: no exact image of 'model' for compute capability 12.1; using the "
                         "family image sm_121f from ", family121));
}

TEST(ModuleResolverTest, Rule2FamilyImageNewerThanDeviceIsRejected) {
  TempDir temp;
  const std::string path = WriteImage(temp, "model.sm_121f.cubin", "sm_121f");
  WriteImage(temp, "model.compute_80.ptx", "compute_80");
  EXPECT_EQ(ReasonFor(temp.Path("model.cubin"), 12, 0, path),
            "sm_121f needs compute capability 12.1 or later within 12.x, device is 12.0");
  EXPECT_EQ(ReasonFor(temp.Path("model.cubin"), 10, 0, path),
            "sm_121f is a family image for compute capability 12.x from 12.1: device 10.0 has a "
            "different major");
}

TEST(ModuleResolverTest, Rule3GenericImageHighestMinorFirst) {
  TempDir temp;
  WriteImage(temp, "model.sm_120.cubin", "sm_120");
  const std::string generic121 = WriteImage(temp, "model.sm_121.cubin", "sm_121");
  WriteImage(temp, "model.compute_120.ptx", "compute_120");
  const absl::StatusOr<Resolution> resolution =
      ResolveModule(Request(temp.Path("model.cubin"), 12, 1));
  ASSERT_TRUE(resolution.ok()) << resolution.status();
  EXPECT_EQ(resolution->artifact.path, generic121);
  EXPECT_EQ(resolution->kind, ImageKind::kGeneric);
}

TEST(ModuleResolverTest, Rule3GenericImageRejections) {
  TempDir temp;
  const std::string sm80 = WriteImage(temp, "model.sm_80.cubin", "sm_80");
  const std::string sm121 = WriteImage(temp, "model.sm_121.cubin", "sm_121");
  WriteImage(temp, "model.compute_80.ptx", "compute_80");
  EXPECT_EQ(ReasonFor(temp.Path("model.cubin"), 9, 0, sm80),
            "sm_80 is a generic image for compute capability 8.x from 8.0: device 9.0 has a "
            "different major");
  EXPECT_EQ(ReasonFor(temp.Path("model.cubin"), 12, 0, sm121),
            "sm_121 needs compute capability 12.1 or later within 12.x, device is 12.0");
}

TEST(ModuleResolverTest, ArchSpecificImageOfAnotherDeviceIsRejected) {
  TempDir temp;
  const std::string sm121a = WriteImage(temp, "model.sm_121a.cubin", "sm_121a");
  const std::string sm100a = WriteImage(temp, "model.sm_100a.cubin", "sm_100a");
  WriteImage(temp, "model.compute_80.ptx", "compute_80");
  EXPECT_EQ(ReasonFor(temp.Path("model.cubin"), 9, 0, sm121a),
            "sm_121a is arch-specific: runs only on compute capability 12.1, device is 9.0");
  EXPECT_EQ(ReasonFor(temp.Path("model.cubin"), 9, 0, sm100a),
            "sm_100a is arch-specific: runs only on compute capability 10.0, device is 9.0");
  EXPECT_EQ(ReasonFor(temp.Path("model.cubin"), 12, 0, sm121a),
            "sm_121a is arch-specific: runs only on compute capability 12.1, device is 12.0");
}

TEST(ModuleResolverTest, Rule4PtxFallbackHighestFirst) {
  TempDir temp;
  WriteImage(temp, "model.compute_80.ptx", "compute_80");
  const std::string ptx90 = WriteImage(temp, "model.compute_90.ptx", "compute_90");
  const std::string ptx120 = WriteImage(temp, "model.compute_120.ptx", "compute_120");
  WriteImage(temp, "model.sm_121a.cubin", "sm_121a");
  const absl::StatusOr<Resolution> resolution =
      ResolveModule(Request(temp.Path("model.cubin"), 9, 0));
  ASSERT_TRUE(resolution.ok()) << resolution.status();
  EXPECT_EQ(resolution->artifact.path, ptx90);
  EXPECT_EQ(resolution->kind, ImageKind::kPtxJit);
  EXPECT_TRUE(resolution->artifact.is_ptx);
  EXPECT_EQ(FindCandidate(*resolution, ptx120)->reason,
            "PTX compute_120 is newer than the device (9.0)");
  EXPECT_EQ(FallbackNote(*resolution),
            absl::StrCat("note: no compiled image of 'model' for compute capability 9.0; the "
                         "driver JIT-compiles PTX compute_90 from ", ptx90,
                         " (the first load is slower; the driver caches the result)"));
}

TEST(ModuleResolverTest, CubinBeatsPtxEvenWhenPtxIsNewer) {
  TempDir temp;
  const std::string generic = WriteImage(temp, "model.sm_120.cubin", "sm_120");
  WriteImage(temp, "model.compute_121.ptx", "compute_121");
  const absl::StatusOr<Resolution> resolution =
      ResolveModule(Request(temp.Path("model.cubin"), 12, 1));
  ASSERT_TRUE(resolution.ok()) << resolution.status();
  EXPECT_EQ(resolution->artifact.path, generic);
}

TEST(ModuleResolverTest, TargetComesFromThePlanNotTheFileName) {
  TempDir temp;
  const std::string liar = WriteImage(temp, "model.sm_90a.cubin", "sm_121a");
  const std::string honest = WriteImage(temp, "model.compute_90.ptx", "compute_90");
  const absl::StatusOr<Resolution> resolution =
      ResolveModule(Request(temp.Path("model.cubin"), 9, 0));
  ASSERT_TRUE(resolution.ok()) << resolution.status();
  EXPECT_EQ(resolution->artifact.path, honest);
  EXPECT_EQ(FindCandidate(*resolution, liar)->target, "sm_121a");
  EXPECT_FALSE(FindCandidate(*resolution, liar)->accepted);
}

TEST(ModuleResolverTest, UnreadableCandidateIsRejectedWithTheReason) {
  TempDir temp;
  const std::string broken = temp.Write("model.sm_90a.cubin", "not a cubin");
  const std::string good = WriteImage(temp, "model.sm_90.cubin", "sm_90");
  const absl::StatusOr<Resolution> resolution =
      ResolveModule(Request(temp.Path("model.cubin"), 9, 0));
  ASSERT_TRUE(resolution.ok()) << resolution.status();
  EXPECT_EQ(resolution->artifact.path, good);
  const Candidate* candidate = FindCandidate(*resolution, broken);
  EXPECT_EQ(candidate->target, "?");
  EXPECT_FALSE(candidate->accepted);
  EXPECT_EQ(candidate->reason,
            absl::StrCat("cannot be read: ", broken,
                         " is not an ELF file (expected the bytes 7f 45 4c 46, found 6e 6f 74 "
                         "20); expected a cubin written by spark-compile"));
}

// A candidate that is not a regular file is rejected without being opened (a FIFO would block the
// open: test/tools/spark-run/explain-resolution.test checks one under a timeout).
TEST(ModuleResolverTest, NonRegularCandidateIsRejectedUnopened) {
  TempDir temp;
  const std::string dir = temp.MakeDir("model.sm_90a.cubin");
  const std::string good = WriteImage(temp, "model.sm_90.cubin", "sm_90");
  const absl::StatusOr<Resolution> resolution =
      ResolveModule(Request(temp.Path("model.cubin"), 9, 0));
  ASSERT_TRUE(resolution.ok()) << resolution.status();
  EXPECT_EQ(resolution->artifact.path, good);
  const Candidate* candidate = FindCandidate(*resolution, dir);
  ASSERT_NE(candidate, nullptr);
  EXPECT_EQ(candidate->target, "?");
  EXPECT_FALSE(candidate->accepted);
  EXPECT_EQ(candidate->reason, "not opened: it is a directory, not a regular file");
}

TEST(ModuleResolverTest, IgnoresFilesOfOtherStemsOrPatterns) {
  TempDir temp;
  WriteImage(temp, "other.sm_90a.cubin", "sm_90a");
  WriteImage(temp, "model.v2.cubin", "sm_90a");      // stem model.v2, not model
  temp.Write("model.sm_90a.plan", "x");              // not an image
  temp.Write("model.notatarget.cubin", "x");         // not a target
  const absl::StatusOr<Resolution> resolution =
      ResolveModule(Request(temp.Path("model.cubin"), 9, 0));
  EXPECT_TRUE(StatusIs(resolution.status(), absl::StatusCode::kNotFound,
                       "candidates:\n  none (looked for model.cubin, model.<target>.cubin and "
                       "model.<target>.ptx)\n"));
}

TEST(ModuleResolverTest, NamedFileIsAlwaysACandidate) {
  TempDir temp;
  const std::string ptx = temp.Write("custom.ptx", ".version 8.8\n");
  temp.Write("custom.plan", SerializePlanSection(TestPlan("compute_80")));
  const absl::StatusOr<Resolution> resolution = ResolveModule(Request(ptx, 9, 0));
  ASSERT_TRUE(resolution.ok()) << resolution.status();
  EXPECT_EQ(resolution->artifact.path, ptx);
  EXPECT_EQ(resolution->kind, ImageKind::kPtxJit);
}

TEST(ModuleResolverTest, SearchPathOrderAndEnvSplitting) {
  TempDir temp;
  ResolveRequest request = Request(temp.Path("art/model.cubin"), 9, 0);
  request.module_path = {temp.Path("flag1"), temp.Path("flag2/")};
  request.env_module_path = absl::StrCat(temp.Path("env1"), "::", temp.Path("flag1"), ":",
                                         temp.Path("env2"), ":");
  request.install_prefix = temp.Path("prefix");
  temp.MakeDir("flag1");
  temp.MakeDir("env2");
  temp.MakeDir("art");
  temp.MakeDir("prefix/lib/spark");
  const std::vector<SearchDir> dirs = ModuleSearchPath(request);
  std::vector<std::string> described;
  for (const SearchDir& dir : dirs) {
    described.push_back(absl::StrCat(dir.path, " ", dir.origin, dir.exists ? "" : " (missing)"));
  }
  EXPECT_EQ(absl::StrJoin(described, "\n"),
            absl::StrJoin({absl::StrCat(temp.Path("flag1"), " --module-path"),
                           absl::StrCat(temp.Path("flag2"), " --module-path (missing)"),
                           absl::StrCat(temp.Path("env1"), " SPARK_MODULE_PATH (missing)"),
                           absl::StrCat(temp.Path("env2"), " SPARK_MODULE_PATH"),
                           absl::StrCat(temp.Path("art"), " directory of model.cubin"),
                           absl::StrCat(temp.Path("prefix/lib/spark"), " install prefix")},
                          "\n"));
}

TEST(ModuleResolverTest, EarlierDirectoryWinsAmongEqualCandidates) {
  TempDir temp;
  const std::string in_prefix = WriteImage(temp, "prefix/lib/spark/model.sm_90a.cubin", "sm_90a");
  const std::string in_art = WriteImage(temp, "art/model.sm_90a.cubin", "sm_90a");
  const std::string in_env = WriteImage(temp, "env/model.cubin", "sm_90a");
  const std::string in_flag = WriteImage(temp, "flag/model.sm_90a.cubin", "sm_90a");
  ResolveRequest request = Request(temp.Path("art/model.cubin"), 9, 0);
  request.install_prefix = temp.Path("prefix");
  EXPECT_EQ(ResolveModule(request)->artifact.path, in_art);
  request.env_module_path = temp.Path("env");
  EXPECT_EQ(ResolveModule(request)->artifact.path, in_env);
  request.module_path = {temp.Path("flag")};
  const absl::StatusOr<Resolution> resolution = ResolveModule(request);
  ASSERT_TRUE(resolution.ok()) << resolution.status();
  EXPECT_EQ(resolution->artifact.path, in_flag);
  EXPECT_EQ(resolution->considered.size(), 4u);
  EXPECT_EQ(FindCandidate(*resolution, in_prefix)->reason,
            absl::StrCat("exact arch-specific image sm_90a for 9.0; usable (exact arch-specific "
                         "image), but ", in_flag, " ranks higher"));
}

TEST(ModuleResolverTest, ABetterKindInALaterDirectoryWins) {
  TempDir temp;
  WriteImage(temp, "flag/model.compute_90.ptx", "compute_90");
  const std::string exact = WriteImage(temp, "art/model.sm_90a.cubin", "sm_90a");
  ResolveRequest request = Request(temp.Path("art/model.cubin"), 9, 0);
  request.module_path = {temp.Path("flag")};
  EXPECT_EQ(ResolveModule(request)->artifact.path, exact);
}

TEST(ModuleResolverTest, NotFoundErrorListsEverything) {
  TempDir temp;
  const std::string art = temp.MakeDir("art");
  temp.MakeDir("env");
  const std::string sm121a = WriteImage(temp, "art/model.sm_121a.cubin", "sm_121a");
  const std::string ptx120 = WriteImage(temp, "art/model.compute_120.ptx", "compute_120");
  const std::string broken = temp.Write("env/model.cubin", "");
  ResolveRequest request = Request(temp.Path("art/model.cubin"), 9, 0);
  request.module_path = {temp.Path("missing")};
  request.env_module_path = temp.Path("env");
  request.install_prefix = temp.Path("prefix");
  const absl::StatusOr<Resolution> resolution = ResolveModule(request);
  ASSERT_EQ(resolution.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(
      resolution.status().message(),
      absl::StrCat(
          "no image of module 'model' can run on this device (compute capability 9.0)\n"
          "searched, in order:\n",
          "  1. ", temp.Path("missing"), " (--module-path): missing\n",
          "  2. ", temp.Path("env"), " (SPARK_MODULE_PATH): 1 candidate\n",
          "  3. ", art, " (directory of model.cubin): 2 candidates\n",
          "  4. ", temp.Path("prefix/lib/spark"), " (install prefix): missing\n",
          "candidates:\n",
          "  ", broken, ": ?: rejected: cannot be read: ", broken,
          " is not an ELF file (expected the bytes 7f 45 4c 46, found none: the file is empty); "
          "expected a cubin written by spark-compile\n",
          "  ", ptx120, ": compute_120: rejected: PTX compute_120 is newer than the device (9.0)\n",
          "  ", sm121a, ": sm_121a: rejected: sm_121a is arch-specific: runs only on compute "
          "capability 12.1, device is 9.0\n",
          "fix: compile an image for this device: spark-compile model.mlir --target sm_90a -o ",
          art, "/model.sm_90a.cubin"));
}

TEST(ModuleResolverTest, FixUsesPlainTargetBelowHopper) {
  TempDir temp;
  const absl::StatusOr<Resolution> resolution =
      ResolveModule(Request(temp.Path("model.sm_90a.cubin"), 8, 9));
  EXPECT_TRUE(StatusIs(resolution.status(), absl::StatusCode::kNotFound,
                       absl::StrCat("fix: compile an image for this device: spark-compile "
                                    "model.mlir --target sm_89 -o ", temp.path(),
                                    "/model.sm_89.cubin")));
}

// An empty --module-path entry would be the current directory, searched before the directory of
// the file named on the command line: refused (SPARK_MODULE_PATH skips empty entries instead).
TEST(ModuleResolverTest, RejectsEmptyModulePathEntries) {
  ResolveRequest request = Request("art/model.cubin", 9, 0);
  request.module_path = {"lib", ""};
  EXPECT_TRUE(StatusIs(ResolveModule(request).status(), kInvalid,
                       "--module-path entry 2 is empty (a trailing or doubled comma?); name a "
                       "directory, or '.' for the current directory"));
  EXPECT_TRUE(StatusIs(CheckModulePath({""}), kInvalid, "--module-path entry 1 is empty"));
  EXPECT_TRUE(CheckModulePath({".", "lib"}).ok());
}

TEST(ModuleResolverTest, RelativeArtifactSearchesTheCurrentDirectory) {
  const std::vector<SearchDir> dirs = ModuleSearchPath(Request("model.cubin", 9, 0));
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_EQ(dirs[0].path, ".");
  EXPECT_EQ(dirs[0].origin, "directory of model.cubin");
}

TEST(ModuleResolverTest, RejectsBadRequests) {
  EXPECT_TRUE(StatusIs(ResolveModule(Request("m.cubin", 0, 0)).status(), kInvalid,
                       "cannot resolve a module for compute capability 0.0: expected a device's "
                       "capability such as 9.0 or 12.1 (run on a GPU or pass --device-cc)"));
  EXPECT_TRUE(StatusIs(ResolveModule(Request("", 9, 0)).status(), kInvalid,
                       "no module to resolve: the artifact path is empty"));
}

TEST(ModuleResolverTest, ExplainsASuccessfulResolution) {
  TempDir temp;
  const std::string exact = WriteImage(temp, "model.sm_90a.cubin", "sm_90a");
  const std::string other = WriteImage(temp, "model.sm_121a.cubin", "sm_121a");
  const ResolveRequest request = Request(temp.Path("model.cubin"), 9, 0);
  const std::string expected = absl::StrCat(
      "resolving module 'model' for compute capability 9.0\n", "searched, in order:\n", "  1. ",
      temp.path(), " (directory of model.cubin): 2 candidates\n", "candidates:\n", "  ", other,
      ": sm_121a: rejected: sm_121a is arch-specific: runs only on compute capability 12.1, "
      "device is 9.0\n",
      "  ", exact, ": sm_90a: chosen: exact arch-specific image sm_90a for 9.0\n", "result: ",
      exact, " (exact arch-specific image sm_90a)");
  EXPECT_EQ(ExplainResolution(*ResolveModule(request)), expected);
  EXPECT_EQ(ExplainResolution(request), expected);
}

TEST(ModuleResolverTest, ExplainsAFailedResolution) {
  TempDir temp;
  const std::string text = ExplainResolution(Request(temp.Path("model.cubin"), 9, 0));
  EXPECT_TRUE(absl::StartsWith(text, "NOT_FOUND: no image of module 'model' can run on this "
                                     "device (compute capability 9.0)"))
      << text;
}

TEST(ModuleResolverTest, ImageKindNames) {
  EXPECT_EQ(ImageKindName(ImageKind::kExact), "exact arch-specific image");
  EXPECT_EQ(ImageKindName(ImageKind::kFamily), "family image");
  EXPECT_EQ(ImageKindName(ImageKind::kGeneric), "generic image");
  EXPECT_EQ(ImageKindName(ImageKind::kPtxJit), "PTX, JIT-compiled by the driver");
}

}  // namespace
}  // namespace rt
}  // namespace spark

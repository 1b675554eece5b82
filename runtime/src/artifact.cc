#include "spark/runtime/artifact.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "file_util.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/elf_section.h"
#include "spark/runtime/plan_format.h"
#include "spark/runtime/target.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

constexpr absl::string_view kPtxExtension = ".ptx";

// The plan's target must be a cubin target for a cubin and a PTX target for PTX.
absl::Status CheckTargetKind(const Artifact& artifact) {
  SPARK_ASSIGN_OR_RETURN(const Target target, ParseTarget(artifact.plan.target));
  if (target.is_cubin() != artifact.is_ptx) return absl::OkStatus();
  return absl::InvalidArgumentError(PrintableText(absl::StrCat(
      artifact.path, " is ", artifact.is_ptx ? "PTX" : "a cubin", " but its plan names the ",
      artifact.is_ptx ? "cubin" : "PTX", " target ", artifact.plan.target,
      "; the files do not belong together, recompile them with spark-compile")));
}

absl::Status LoadCubin(Artifact* artifact) {
  SPARK_ASSIGN_OR_RETURN(artifact->image, ReadFileToString(artifact->path));
  SPARK_ASSIGN_OR_RETURN(artifact->plan, ReadCubinPlan(artifact->image, artifact->path));
  return absl::OkStatus();
}

absl::Status LoadPtx(Artifact* artifact) {
  SPARK_ASSIGN_OR_RETURN(artifact->image, ReadFileToString(artifact->path));
  if (HasElfMagic(artifact->image)) {
    return absl::InvalidArgumentError(PrintableText(absl::StrCat(
        artifact->path, " is an ELF file, not PTX text; name cubins with the .cubin extension")));
  }
  if (artifact->image.empty() || artifact->image.back() != '\0') artifact->image.push_back('\0');
  const std::string plan_path = PtxPlanPath(artifact->path);
  absl::StatusOr<std::string> section = ReadFileToString(plan_path);
  if (absl::IsNotFound(section.status())) {
    return absl::NotFoundError(PrintableText(absl::StrCat(
        artifact->path, " needs its plan file ", plan_path,
        ", which does not exist; spark-compile --target compute_XX writes both files: keep them "
        "in the same directory")));
  }
  if (!section.ok()) return section.status();
  SPARK_ASSIGN_OR_RETURN(artifact->plan, ParsePlanSection(*section, plan_path));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Plan> ReadCubinPlan(absl::string_view image, absl::string_view origin) {
  SPARK_ASSIGN_OR_RETURN(const ElfFile elf, ElfFile::Parse(image, origin));
  const std::vector<size_t> plans = elf.SectionIndices(plan_format::kSectionName);
  if (plans.size() > 1) {
    return absl::InvalidArgumentError(PrintableText(absl::StrCat(
        origin, " has ", plans.size(), " ", plan_format::kSectionName, " sections (sections ",
        absl::StrJoin(plans, ", "),
        "); spark-compile writes one: the file was modified, recompile it with spark-compile")));
  }
  const ElfSection* section = elf.FindSection(plan_format::kSectionName);
  if (section == nullptr) {
    return absl::InvalidArgumentError(PrintableText(
        absl::StrCat(origin, " has no ", plan_format::kSectionName,
                     " section: it is not a Spark artifact; compile it with spark-compile")));
  }
  return ParsePlanSection(elf.SectionData(*section), origin);
}

std::string PtxPlanPath(absl::string_view ptx_path) {
  absl::string_view stem = ptx_path;
  absl::ConsumeSuffix(&stem, kPtxExtension);
  return absl::StrCat(stem, ".plan");
}

absl::StatusOr<Artifact> LoadArtifact(const std::string& path) {
  Artifact artifact;
  artifact.path = path;
  artifact.is_ptx = absl::EndsWith(path, kPtxExtension);
  SPARK_RETURN_IF_ERROR(artifact.is_ptx ? LoadPtx(&artifact) : LoadCubin(&artifact));
  SPARK_RETURN_IF_ERROR(CheckTargetKind(artifact));
  artifact.target = artifact.plan.target;
  return artifact;
}

}  // namespace rt
}  // namespace spark

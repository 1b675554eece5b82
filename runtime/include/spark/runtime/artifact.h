// A compiled Spark module as spark-compile writes it:
//   - `<name>.cubin`: an ELF cubin carrying the plan in its `.spark.plan` section
//     (docs/plan-format.md); the whole file is what cuModuleLoadData takes;
//   - `<name>.ptx` (for --target compute_XX): PTX text; the plan is the sibling file with the
//     same stem and the extension `.plan` (model.compute_90.ptx -> model.compute_90.plan), which
//     holds the raw section bytes.
#ifndef SPARK_RUNTIME_ARTIFACT_H_
#define SPARK_RUNTIME_ARTIFACT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

struct Artifact {
  std::string path;
  // The bytes to hand to cuModuleLoadData: the whole cubin, or the PTX text NUL-terminated.
  std::string image;
  bool is_ptx = false;
  std::string target;  // plan.target: the target the image was compiled for
  Plan plan;
};

// Loads and validates an artifact: a `.ptx` path is PTX + sibling plan, anything else must be a
// cubin with a `.spark.plan` section. Errors: kNotFound for a missing file (the PTX's plan too),
// kInvalidArgument for a file that is not an ELF cubin, has no plan section, or whose plan is
// invalid or names a target of the wrong kind for the file (PTX vs cubin).
absl::StatusOr<Artifact> LoadArtifact(const std::string& path);

// The plan inside a cubin image: its ELF section headers are read and checked, then its
// `.spark.plan` section is parsed and validated. kInvalidArgument when `image` is not an ELF file,
// has no plan section or its plan is invalid. `origin` names the file in errors.
absl::StatusOr<Plan> ReadCubinPlan(absl::string_view image, absl::string_view origin);

// The plan file that goes with a PTX artifact: "dir/model.compute_90.ptx" ->
// "dir/model.compute_90.plan".
std::string PtxPlanPath(absl::string_view ptx_path);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_ARTIFACT_H_

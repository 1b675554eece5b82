// Explicit module resolution (design.md "Explicit module resolution"; docs/module-resolution.md).
//
// Given the artifact named on the command line and the device's compute capability M.m, the
// resolver looks in each directory of the search path, highest priority first:
//   1. every --module-path flag, in order (an empty entry is an error: CheckModulePath);
//   2. every entry of SPARK_MODULE_PATH (colon-separated; empty entries are skipped);
//   3. the directory of the artifact named on the command line;
//   4. <install prefix>/lib/spark;
// for files named <stem>.cubin, <stem>.<target>.cubin and <stem>.<target>.ptx, where <stem> is the
// artifact's file name without `.cubin`/`.ptx` and without a trailing `.<target>` (the named file
// itself is always a candidate too). Each candidate's real target is read from its plan, never
// from its file name; unreadable candidates are rejected with the reason. The best candidate is:
//   1. an arch-specific image sm_<M><m>a for exactly M.m;
//   2. a family image sm_<M><x>f with x <= m, highest x first;
//   3. a generic image sm_<M><x> with x <= m, highest x first;
//   4. PTX compute_<X><Y> with X.Y <= M.m, highest first (the driver JIT-compiles it);
// ties go to the earlier directory. If nothing fits, kNotFound lists the stem, the device, every
// directory searched (and which are missing), every candidate with its target and why it was
// rejected, and the spark-compile command that produces a fitting image.
#ifndef SPARK_RUNTIME_MODULE_RESOLVER_H_
#define SPARK_RUNTIME_MODULE_RESOLVER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spark/runtime/artifact.h"
#include "spark/runtime/target.h"

namespace spark {
namespace rt {

struct ResolveRequest {
  std::string artifact_path;         // the file named on the command line
  int cc_major = 0, cc_minor = 0;    // the device's compute capability
  std::vector<std::string> module_path;  // --module-path flags, in order
  std::string env_module_path;       // SPARK_MODULE_PATH, colon-separated
  std::string install_prefix;        // searched as <install_prefix>/lib/spark; empty: not searched
};

enum class ImageKind { kExact, kFamily, kGeneric, kPtxJit };

// "exact arch-specific image", "family image", "generic image", "PTX (JIT-compiled by the driver)".
absl::string_view ImageKindName(ImageKind kind);

// A directory of the search path.
struct SearchDir {
  std::string path;
  std::string origin;  // "--module-path", "SPARK_MODULE_PATH", "directory of model.cubin", ...
  bool exists = false;
};

// A file the resolver looked at.
struct Candidate {
  std::string path;
  std::string target;  // from its plan; "?" when it could not be read
  bool accepted = false;  // it can run on the device (the chosen one, or a lower-ranked fit)
  std::string reason;     // why it was chosen, ranked lower, or rejected
};

struct Resolution {
  Artifact artifact;  // the chosen image, loaded and validated
  ImageKind kind = ImageKind::kExact;
  std::string stem;
  int cc_major = 0, cc_minor = 0;
  std::vector<Candidate> considered;       // in search order (directory, then file name)
  std::vector<SearchDir> searched_dirs;    // the search path, duplicates removed
};

// kInvalidArgument when an entry of the --module-path list is empty ("a,,b", a trailing comma):
// it would put the current directory first, before the directory of the named file, without a
// word. (SPARK_MODULE_PATH, a colon list in the environment, skips empty entries instead.)
absl::Status CheckModulePath(const std::vector<std::string>& module_path);

// Resolves the image to load. kInvalidArgument for a bad request (no compute capability or
// artifact path, an empty --module-path entry: CheckModulePath); kNotFound, with the full
// decision chain, when no candidate fits.
absl::StatusOr<Resolution> ResolveModule(const ResolveRequest& request);

// The decision chain of a successful resolution, one decision per line (for -v).
std::string ExplainResolution(const Resolution& resolution);

// Runs the resolution and explains it whatever the outcome (spark-run --explain-resolution): the
// decision chain on success, the error text otherwise.
std::string ExplainResolution(const ResolveRequest& request);

// One line to print when the chosen image is not an exact one ("note: ..."), or "" for an exact
// image: the design requires the runtime to say when it falls back, once.
std::string FallbackNote(const Resolution& resolution);

// The directories of the search path in order, duplicates removed (for tools and tests).
std::vector<SearchDir> ModuleSearchPath(const ResolveRequest& request);

// The install prefix of the running tool: <prefix> of <prefix>/bin/<tool> (/proc/self/exe);
// empty when it cannot be read.
std::string RunningInstallPrefix();

// The stem of an artifact file name: "dir/model.sm_90a.cubin" -> "model".
std::string ModuleStem(absl::string_view artifact_path);

// True when the file name `name` is one of the images of `stem`: <stem>.cubin,
// <stem>.<target>.cubin or <stem>.<target>.ptx with a target ParseTarget accepts.
bool IsModuleCandidateName(absl::string_view name, absl::string_view stem);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_MODULE_RESOLVER_H_

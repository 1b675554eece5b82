// A checkpoint directory (config.json + safetensors) with no compiled artifact, for the tools that
// take one (spark-serve MODEL, spark-quantize --calibration-prompt-ids): it is imported and
// compiled by spark-import and spark-compile, run as child processes (the runtime links no MLIR),
// into a cache directory keyed by the checkpoint and the options, and the cached artifact is used
// the next time.
#ifndef SPARK_RUNTIME_ARTIFACT_CACHE_H_
#define SPARK_RUNTIME_ARTIFACT_CACHE_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spark/runtime/device.h"

namespace spark {
namespace rt {

struct CompileRequest {
  std::string checkpoint;  // directory with config.json
  std::string target;      // e.g. sm_90a, or compute_90 (PTX: no ptxas needed)
  std::string tools_dir;   // where spark-import and spark-compile are (else PATH)
  std::string cache_dir;   // the cache's root
};

// The request for `checkpoint` and `target` with the defaults the tools use: spark-import and
// spark-compile from the running installation's bin/ (else PATH), the cache under
// $SPARK_CACHE_DIR (default ~/.cache/spark)/artifacts.
CompileRequest DefaultCompileRequest(const std::string& checkpoint, const std::string& target);

// The target to compile a checkpoint for: `device`'s native target (target.h NativeTargetFor), or
// for the host reference executor (`device` null), which reads only the plan, compute_90 (PTX and
// its plan: no ptxas needed).
std::string ArtifactTargetFor(const DeviceInfo* device);

// True when `path` is a directory holding a config.json.
bool IsCheckpointDirectory(const std::string& path);

// The artifact for `request`: CACHE/<key>/model.<target>.{cubin,ptx} where the key hashes the
// checkpoint's real path, its config.json and the target; compiled first when absent (each step
// reported through `note`). A failed import or compile is INTERNAL with the tool's output.
absl::StatusOr<std::string> CompiledArtifact(const CompileRequest& request,
                                             const std::function<void(absl::string_view)>& note);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_ARTIFACT_CACHE_H_

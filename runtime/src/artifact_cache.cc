#include "spark/runtime/artifact_cache.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spark/runtime/module_resolver.h"
#include "spark/runtime/plan_format.h"
#include "spark/runtime/target.h"

namespace spark {
namespace rt {
namespace {

namespace fs = std::filesystem;

// Runs `argv` with stdout and stderr into `log`; the exit status, or -1 when it could not start.
int RunTool(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::FILE* out = std::fopen(log.c_str(), "w");
    if (out != nullptr) {
      dup2(fileno(out), STDOUT_FILENO);
      dup2(fileno(out), STDERR_FILENO);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s\n", args[0]);
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadTail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
}

// The tool in request.tools_dir (the running installation's bin/) when it is there, else the one
// on PATH.
std::string Tool(const CompileRequest& request, const char* name) {
  std::error_code error;
  const fs::path beside = fs::path(request.tools_dir) / name;
  return !request.tools_dir.empty() && fs::exists(beside, error) ? beside.string() : name;
}

}  // namespace

CompileRequest DefaultCompileRequest(const std::string& checkpoint, const std::string& target) {
  CompileRequest request;
  request.checkpoint = checkpoint;
  request.target = target;
  const std::string prefix = RunningInstallPrefix();
  request.tools_dir = prefix.empty() ? "" : prefix + "/bin";
  const char* cache = std::getenv("SPARK_CACHE_DIR");
  const char* home = std::getenv("HOME");
  request.cache_dir = absl::StrCat(cache != nullptr ? cache
                                   : home != nullptr ? absl::StrCat(home, "/.cache/spark")
                                                     : std::string("/tmp/spark-cache"),
                                   "/artifacts");
  return request;
}

std::string ArtifactTargetFor(const DeviceInfo* device) {
  return device == nullptr ? "compute_90"
                           : NativeTargetFor(device->cc_major, device->cc_minor).ToString();
}

bool IsCheckpointDirectory(const std::string& path) {
  std::error_code error;
  return fs::is_directory(path, error) && fs::is_regular_file(fs::path(path) / "config.json", error);
}

absl::StatusOr<std::string> CompiledArtifact(const CompileRequest& request,
                                             const std::function<void(absl::string_view)>& note) {
  std::error_code error;
  const fs::path checkpoint = fs::canonical(request.checkpoint, error);
  if (error) {
    return absl::NotFoundError(absl::StrCat("cannot open the checkpoint directory ",
                                            request.checkpoint, ": ", error.message()));
  }
  std::ifstream config_file(checkpoint / "config.json", std::ios::binary);
  std::stringstream config;
  config << config_file.rdbuf();
  const std::string key_text =
      absl::StrCat(checkpoint.string(), "\n", config.str(), "\n", request.target);
  const std::string key = absl::StrFormat(
      "%s-%016x", checkpoint.filename().string(),
      plan_format::Fnv1a64(key_text.data(), key_text.size()));
  const fs::path dir = fs::path(request.cache_dir) / key;
  const bool ptx = request.target.rfind("compute_", 0) == 0;
  const fs::path artifact = dir / absl::StrCat("model.", request.target, ptx ? ".ptx" : ".cubin");
  if (fs::exists(artifact, error)) {
    note(absl::StrCat("using the compiled model cached in ", artifact.string()));
    return artifact.string();
  }
  fs::create_directories(dir, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create the cache directory ",
                                                    dir.string(), ": ", error.message(),
                                                    " (set SPARK_CACHE_DIR)"));
  }
  const std::string mlir = (dir / "model.mlir").string();
  const std::string log = (dir / "compile.log").string();
  note(absl::StrCat("no compiled model given: importing ", checkpoint.string(), " (spark-import)"));
  int status = RunTool({Tool(request, "spark-import"), checkpoint.string(), "-o", mlir}, log);
  if (status != 0) {
    return absl::InternalError(absl::StrCat("spark-import ", checkpoint.string(), " failed (exit ",
                                            status, "):\n", ReadTail(log)));
  }
  note(absl::StrCat("compiling it for ", request.target, " (spark-compile; once, cached in ",
                    dir.string(), ")"));
  // Written under a temporary name and renamed, so that an interrupted compile leaves no
  // artifact that looks complete.
  const std::string partial =
      (dir / absl::StrCat("partial.", request.target, ptx ? ".ptx" : ".cubin")).string();
  status = RunTool(
      {Tool(request, "spark-compile"), mlir, "--target", request.target, "-o", partial}, log);
  if (status != 0) {
    return absl::InternalError(absl::StrCat("spark-compile --target ", request.target,
                                            " failed (exit ", status, "):\n", ReadTail(log)));
  }
  if (ptx) {  // its plan first: the PTX is what marks the entry complete
    fs::rename(dir / absl::StrCat("partial.", request.target, ".plan"),
               dir / absl::StrCat("model.", request.target, ".plan"), error);
  }
  if (!error) fs::rename(partial, artifact, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot move the compiled model to ", artifact.string(),
                                            ": ", error.message()));
  }
  fs::remove(mlir, error);
  return artifact.string();
}

}  // namespace rt
}  // namespace spark

#include "spark/runtime/module_resolver.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/types/optional.h"
#include "file_util.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

constexpr absl::string_view kCubinExtension = ".cubin";
constexpr absl::string_view kPtxExtension = ".ptx";
constexpr absl::string_view kUnreadableTarget = "?";

std::string CcText(int major, int minor) { return absl::StrCat(major, ".", minor); }

// "dir/" -> "dir", "" -> "."; "/" stays.
std::string NormalizeDir(absl::string_view dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  return dir.empty() ? std::string(".") : std::string(dir);
}

std::string ArtifactDir(const ResolveRequest& request) {
  return NormalizeDir(Dirname(request.artifact_path));
}

}  // namespace

bool IsModuleCandidateName(absl::string_view name, absl::string_view stem) {
  if (name == absl::StrCat(stem, kCubinExtension)) return true;
  absl::string_view target = name;
  if (!absl::ConsumePrefix(&target, stem) || !absl::ConsumePrefix(&target, ".")) return false;
  if (!absl::ConsumeSuffix(&target, kCubinExtension) &&
      !absl::ConsumeSuffix(&target, kPtxExtension)) {
    return false;
  }
  return ParseTarget(target).ok();
}

namespace {

// Candidate files in search order: each existing directory's matching names (sorted), and the
// artifact named on the command line, each path once.
std::vector<std::string> CandidatePaths(const ResolveRequest& request,
                                        const std::vector<SearchDir>& dirs,
                                        absl::string_view stem) {
  std::vector<std::string> paths;
  const auto add = [&paths](std::string path) {
    if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
  };
  const std::string artifact_dir = ArtifactDir(request);
  for (const SearchDir& dir : dirs) {
    if (!dir.exists) continue;
    const absl::StatusOr<std::vector<std::string>> names = ListDirectory(dir.path);
    if (names.ok()) {
      for (const std::string& name : *names) {
        if (IsModuleCandidateName(name, stem)) add(JoinPath(dir.path, name));
      }
    }
    if (dir.path == artifact_dir && IsRegularFile(request.artifact_path)) {
      add(JoinPath(artifact_dir, Basename(request.artifact_path)));
    }
  }
  return paths;
}

// Whether an image compiled for `target` runs on compute capability major.minor, and why.
struct Evaluation {
  bool accepted = false;
  ImageKind kind = ImageKind::kExact;
  std::string reason;
};

Evaluation EvaluateCubin(const Target& target, int major, int minor, ImageKind kind,
                         absl::string_view what) {
  const std::string name = target.ToString();
  const std::string device = CcText(major, minor);
  if (target.major != major) {
    return {false, kind,
            absl::StrCat(name, " is ", what, " for compute capability ", target.major, ".x from ",
                         CcText(target.major, target.minor), ": device ", device,
                         " has a different major")};
  }
  if (target.minor > minor) {
    return {false, kind,
            absl::StrCat(name, " needs compute capability ", CcText(target.major, target.minor),
                         " or later within ", target.major, ".x, device is ", device)};
  }
  return {true, kind,
          absl::StrCat(what, " ", name, ": runs on ", target.major, ".x from ",
                       CcText(target.major, target.minor))};
}

Evaluation Evaluate(const Target& target, int major, int minor) {
  const std::string name = target.ToString();
  const std::string device = CcText(major, minor);
  switch (target.kind) {
    case TargetKind::kArch:
      if (target.major == major && target.minor == minor) {
        return {true, ImageKind::kExact,
                absl::StrCat("exact arch-specific image ", name, " for ", device)};
      }
      return {false, ImageKind::kExact,
              absl::StrCat(name, " is arch-specific: runs only on compute capability ",
                           CcText(target.major, target.minor), ", device is ", device)};
    case TargetKind::kFamily:
      return EvaluateCubin(target, major, minor, ImageKind::kFamily, "a family image");
    case TargetKind::kGeneric:
      return EvaluateCubin(target, major, minor, ImageKind::kGeneric, "a generic image");
    case TargetKind::kPtx:
      if (std::make_pair(target.major, target.minor) <= std::make_pair(major, minor)) {
        return {true, ImageKind::kPtxJit,
                absl::StrCat("PTX ", name, ", JIT-compiled by the driver for ", device)};
      }
      return {false, ImageKind::kPtxJit,
              absl::StrCat("PTX ", name, " is newer than the device (", device, ")")};
  }
  return {};
}

// Lower is better: kind first, then the newest version, then search order.
using Rank = std::tuple<int, int, int, size_t>;
Rank RankOf(ImageKind kind, const Target& target, size_t order) {
  return Rank(static_cast<int>(kind), -target.major, -target.minor, order);
}

// The whole decision; resolution.artifact is set only when `chosen` is.
struct Decision {
  Resolution resolution;
  absl::optional<size_t> chosen;  // index into resolution.considered
};

absl::Status CheckRequest(const ResolveRequest& request) {
  if (request.artifact_path.empty()) {
    return absl::InvalidArgumentError("no module to resolve: the artifact path is empty");
  }
  SPARK_RETURN_IF_ERROR(CheckModulePath(request.module_path));
  if (request.cc_major <= 0 || request.cc_minor < 0 || request.cc_minor > 9) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot resolve a module for compute capability ",
        CcText(request.cc_major, request.cc_minor),
        ": expected a device's capability such as 9.0 or 12.1 (run on a GPU or pass "
        "--device-cc)"));
  }
  return absl::OkStatus();
}

// Records why lower-ranked usable candidates were not chosen.
void ExplainRanking(const std::vector<ImageKind>& kinds, Decision* decision) {
  std::vector<Candidate>& considered = decision->resolution.considered;
  for (size_t i = 0; i < considered.size(); ++i) {
    if (!considered[i].accepted || i == *decision->chosen) continue;
    considered[i].reason = absl::StrCat(considered[i].reason, "; usable (",
                                        ImageKindName(kinds[i]), "), but ",
                                        considered[*decision->chosen].path, " ranks higher");
  }
}

absl::StatusOr<Decision> Decide(const ResolveRequest& request) {
  SPARK_RETURN_IF_ERROR(CheckRequest(request));
  Decision decision;
  Resolution& resolution = decision.resolution;
  resolution.stem = ModuleStem(request.artifact_path);
  resolution.cc_major = request.cc_major;
  resolution.cc_minor = request.cc_minor;
  resolution.searched_dirs = ModuleSearchPath(request);
  absl::optional<Rank> best;
  std::vector<ImageKind> kinds;
  for (const std::string& path :
       CandidatePaths(request, resolution.searched_dirs, resolution.stem)) {
    Candidate candidate;
    candidate.path = path;
    // A FIFO would block the open, a device could be read without end: skipped unopened.
    const absl::StatusOr<mode_t> mode = FileMode(path);
    if (mode.ok() && !S_ISREG(*mode)) {
      candidate.target = std::string(kUnreadableTarget);
      candidate.reason =
          absl::StrCat("not opened: it is ", FileTypeName(*mode), ", not a regular file");
      kinds.push_back(ImageKind::kExact);
      resolution.considered.push_back(std::move(candidate));
      continue;
    }
    absl::StatusOr<Artifact> artifact = LoadArtifact(path);
    if (!artifact.ok()) {
      candidate.target = std::string(kUnreadableTarget);
      candidate.reason = absl::StrCat("cannot be read: ", artifact.status().message());
      kinds.push_back(ImageKind::kExact);
      resolution.considered.push_back(std::move(candidate));
      continue;
    }
    candidate.target = artifact->target;
    const Target target = *ParseTarget(artifact->target);  // validated with the plan
    Evaluation evaluation = Evaluate(target, request.cc_major, request.cc_minor);
    candidate.accepted = evaluation.accepted;
    candidate.reason = std::move(evaluation.reason);
    const Rank rank = RankOf(evaluation.kind, target, resolution.considered.size());
    if (evaluation.accepted && (!best || rank < *best)) {
      best = rank;
      decision.chosen = resolution.considered.size();
      resolution.kind = evaluation.kind;
      resolution.artifact = *std::move(artifact);
    }
    kinds.push_back(evaluation.kind);
    resolution.considered.push_back(std::move(candidate));
  }
  if (decision.chosen) ExplainRanking(kinds, &decision);
  return decision;
}

std::string FormatSearchPath(const Resolution& resolution) {
  std::string out;
  for (size_t i = 0; i < resolution.searched_dirs.size(); ++i) {
    const SearchDir& dir = resolution.searched_dirs[i];
    size_t count = 0;
    for (const Candidate& candidate : resolution.considered) {
      if (NormalizeDir(Dirname(candidate.path)) == dir.path) ++count;
    }
    const std::string found =
        !dir.exists ? "missing"
        : count == 0 ? "no candidates"
                     : absl::StrCat(count, count == 1 ? " candidate" : " candidates");
    absl::StrAppend(&out, "  ", i + 1, ". ", dir.path, " (", dir.origin, "): ", found, "\n");
  }
  return out;
}

std::string FormatCandidates(const Resolution& resolution, absl::optional<size_t> chosen) {
  if (resolution.considered.empty()) {
    return absl::StrCat("  none (looked for ", resolution.stem, ".cubin, ", resolution.stem,
                        ".<target>.cubin and ", resolution.stem, ".<target>.ptx)\n");
  }
  std::string out;
  for (size_t i = 0; i < resolution.considered.size(); ++i) {
    const Candidate& candidate = resolution.considered[i];
    const absl::string_view verdict = chosen && i == *chosen ? "chosen"
                                      : candidate.accepted   ? "usable"
                                                             : "rejected";
    // File names come from directory listings, reasons from the files: both made printable.
    absl::StrAppend(&out, "  ",
                    PrintableText(absl::StrCat(candidate.path, ": ", candidate.target, ": ",
                                               verdict, ": ", candidate.reason)),
                    "\n");
  }
  return out;
}

absl::Status NotFound(const ResolveRequest& request, const Resolution& resolution) {
  const std::string target = NativeTargetFor(request.cc_major, request.cc_minor).ToString();
  const std::string output =
      JoinPath(ArtifactDir(request), absl::StrCat(resolution.stem, ".", target, ".cubin"));
  return absl::NotFoundError(absl::StrCat(
      "no image of module '", resolution.stem, "' can run on this device (compute capability ",
      CcText(request.cc_major, request.cc_minor), ")\nsearched, in order:\n",
      FormatSearchPath(resolution), "candidates:\n", FormatCandidates(resolution, absl::nullopt),
      "fix: compile an image for this device: spark-compile ", resolution.stem,
      ".mlir --target ", target, " -o ", output));
}

}  // namespace

absl::string_view ImageKindName(ImageKind kind) {
  switch (kind) {
    case ImageKind::kExact: return "exact arch-specific image";
    case ImageKind::kFamily: return "family image";
    case ImageKind::kGeneric: return "generic image";
    case ImageKind::kPtxJit: return "PTX, JIT-compiled by the driver";
  }
  return "";
}

std::string ModuleStem(absl::string_view artifact_path) {
  absl::string_view name = artifact_path.substr(artifact_path.rfind('/') + 1);
  if (!absl::ConsumeSuffix(&name, kCubinExtension)) absl::ConsumeSuffix(&name, kPtxExtension);
  const size_t dot = name.rfind('.');
  if (dot != absl::string_view::npos && dot > 0 && ParseTarget(name.substr(dot + 1)).ok()) {
    name = name.substr(0, dot);
  }
  return std::string(name);
}

absl::Status CheckModulePath(const std::vector<std::string>& module_path) {
  for (size_t i = 0; i < module_path.size(); ++i) {
    if (!module_path[i].empty()) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("--module-path entry ", i + 1,
                     " is empty (a trailing or doubled comma?); name a directory, or '.' for the "
                     "current directory"));
  }
  return absl::OkStatus();
}

std::vector<SearchDir> ModuleSearchPath(const ResolveRequest& request) {
  std::vector<SearchDir> dirs;
  const auto add = [&dirs](absl::string_view path, std::string origin) {
    const std::string dir = NormalizeDir(path);
    for (const SearchDir& existing : dirs) {
      if (existing.path == dir) return;
    }
    dirs.push_back({dir, std::move(origin), IsDirectory(dir)});
  };
  for (const std::string& dir : request.module_path) add(dir, "--module-path");
  for (const absl::string_view dir :
       absl::StrSplit(request.env_module_path, ':', absl::SkipEmpty())) {
    add(dir, "SPARK_MODULE_PATH");
  }
  add(Dirname(request.artifact_path),
      absl::StrCat("directory of ", Basename(request.artifact_path)));
  if (!request.install_prefix.empty()) {
    add(JoinPath(request.install_prefix, "lib/spark"), "install prefix");
  }
  return dirs;
}

absl::StatusOr<Resolution> ResolveModule(const ResolveRequest& request) {
  SPARK_ASSIGN_OR_RETURN(Decision decision, Decide(request));
  if (!decision.chosen) return NotFound(request, decision.resolution);
  return std::move(decision.resolution);
}

std::string ExplainResolution(const Resolution& resolution) {
  size_t chosen = 0;
  while (chosen < resolution.considered.size() &&
         resolution.considered[chosen].path != resolution.artifact.path) {
    ++chosen;
  }
  return absl::StrCat("resolving module '", resolution.stem, "' for compute capability ",
                      CcText(resolution.cc_major, resolution.cc_minor),
                      "\nsearched, in order:\n", FormatSearchPath(resolution), "candidates:\n",
                      FormatCandidates(resolution, chosen), "result: ",
                      resolution.artifact.path, " (", ImageKindName(resolution.kind), " ",
                      resolution.artifact.target, ")");
}

std::string ExplainResolution(const ResolveRequest& request) {
  const absl::StatusOr<Resolution> resolution = ResolveModule(request);
  if (!resolution.ok()) return resolution.status().ToString();
  return ExplainResolution(*resolution);
}

std::string FallbackNote(const Resolution& resolution) {
  const std::string device = CcText(resolution.cc_major, resolution.cc_minor);
  const Artifact& artifact = resolution.artifact;
  switch (resolution.kind) {
    case ImageKind::kExact:
      return "";
    case ImageKind::kFamily:
    case ImageKind::kGeneric:
      return absl::StrCat("note: no exact image of '", resolution.stem, "' for compute capability ",
                          device, "; using the ", ImageKindName(resolution.kind), " ",
                          artifact.target, " from ", artifact.path);
    case ImageKind::kPtxJit:
      return absl::StrCat("note: no compiled image of '", resolution.stem,
                          "' for compute capability ", device, "; the driver JIT-compiles PTX ",
                          artifact.target, " from ", artifact.path,
                          " (the first load is slower; the driver caches the result)");
  }
  return "";
}

std::string RunningInstallPrefix() {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error || !exe.has_parent_path()) return "";
  const std::filesystem::path bin = exe.parent_path();
  if (!bin.has_parent_path()) return "";
  const std::string prefix = bin.parent_path().string();
  return prefix.empty() ? "/" : prefix;
}

}  // namespace rt
}  // namespace spark

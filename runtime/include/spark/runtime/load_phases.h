// What opening a model took, phase by phase (cold start: Model::load_phases, spark-run -v and
// --json print them).
#ifndef SPARK_RUNTIME_LOAD_PHASES_H_
#define SPARK_RUNTIME_LOAD_PHASES_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace spark {
namespace rt {

struct LoadPhase {
  std::string name;   // "artifact", "weights", ...
  double seconds = 0.0;
  uint64_t bytes = 0;  // the bytes it handled (the artifact, the weights); else 0
  bool copied = false;  // the phase copied `bytes`: bytes / seconds is a transfer rate
};

// Where a phase is reported; may be empty.
using LoadPhaseSink = std::function<void(const LoadPhase& phase)>;

// Times consecutive phases: each Lap reports the time since the previous one (or construction).
class LoadClock {
 public:
  explicit LoadClock(LoadPhaseSink sink) : sink_(std::move(sink)) {}
  void Lap(std::string name, uint64_t bytes = 0, bool copied = false) {
    const auto now = std::chrono::steady_clock::now();
    if (sink_) {
      sink_({std::move(name), std::chrono::duration<double>(now - last_).count(), bytes, copied});
    }
    last_ = now;
  }
  // Starts the next phase now (the time since the last lap was reported by someone else).
  void Restart() { last_ = std::chrono::steady_clock::now(); }

 private:
  LoadPhaseSink sink_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_LOAD_PHASES_H_

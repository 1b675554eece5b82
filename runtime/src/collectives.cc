#include "spark/runtime/collectives.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

// What the ranks of one in-process group share: each rank's buffer of the collective in flight,
// a scratch result, and a barrier (a generation count) the ranks pass three times per call:
// every buffer posted; every rank's share of the result computed; every rank's copy taken (so the
// next call cannot overwrite what a slow rank still reads).
class Group {
 public:
  explicit Group(int ranks) : ranks_(ranks), inputs_(ranks, nullptr), counts_(ranks, 0) {}

  int ranks() const { return ranks_; }

  absl::Status AllReduce(int rank, float* x, int64_t count) {
    SPARK_RETURN_IF_ERROR(Post(rank, x, count, count, "all_reduce"));
    // Rank r sums its share of the elements, every rank's values in rank order.
    const int64_t begin = count * rank / ranks_, end = count * (rank + 1) / ranks_;
    for (int64_t i = begin; i < end; ++i) {
      float sum = inputs_[0][i];
      for (int r = 1; r < ranks_; ++r) sum += inputs_[r][i];
      result_[i] = sum;
    }
    SPARK_RETURN_IF_ERROR(Arrive());
    std::memcpy(x, result_.data(), count * sizeof(float));
    return Arrive();
  }

  absl::Status AllGather(int rank, const float* x, float* out, int64_t count) {
    SPARK_RETURN_IF_ERROR(
        Post(rank, const_cast<float*>(x), count, count * ranks_, "all_gather"));
    std::memcpy(result_.data() + rank * count, x, count * sizeof(float));
    SPARK_RETURN_IF_ERROR(Arrive());
    std::memcpy(out, result_.data(), count * ranks_ * sizeof(float));
    return Arrive();
  }

  void Abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    changed_.notify_all();
  }

  void Reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = false;
    arrived_ = 0;
  }

 private:
  // Records rank's buffer and count, and waits for every rank; the last to arrive (inside the
  // barrier, under the lock, once every rank's count is written) checks that the counts agree
  // and sizes the result.
  absl::Status Post(int rank, float* x, int64_t count, int64_t result_size, const char* what) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      inputs_[rank] = x;
      counts_[rank] = count;
    }
    SPARK_RETURN_IF_ERROR(Arrive([&] {
      mismatch_ = !std::all_of(counts_.begin(), counts_.end(),
                               [&](int64_t c) { return c == counts_[0]; });
      if (!mismatch_) result_.resize(result_size);
    }));
    if (mismatch_) {
      return absl::InternalError(absl::StrCat(
          what, ": the ranks passed different element counts (rank ", rank, ": ", count,
          ", rank 0: ", counts_[0], "); the ranks ran different programs"));
    }
    return absl::OkStatus();
  }

  // The barrier: returns when every rank has arrived at it (or the group was aborted). The last
  // rank to arrive runs `last` (if any) under the lock before it releases the others.
  absl::Status Arrive(const std::function<void()>& last = nullptr) {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++arrived_ == ranks_) {
      if (last) last();
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return generation_ != generation || aborted_; });
    }
    if (generation_ == generation && aborted_) {
      return absl::AbortedError("a collective was abandoned: another rank failed");
    }
    return absl::OkStatus();
  }

  const int ranks_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  bool mismatch_ = false;
  std::vector<float*> inputs_;
  std::vector<int64_t> counts_;
  std::vector<float> result_;
};

class InProcessCommunicator : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int ranks() const override { return group_->ranks(); }
  absl::Status AllReduce(float* x, int64_t count) override {
    return group_->AllReduce(rank_, x, count);
  }
  absl::Status AllGather(const float* x, float* out, int64_t count) override {
    return group_->AllGather(rank_, x, out, count);
  }
  void Abort() override { group_->Abort(); }
  void Reset() override { group_->Reset(); }

 private:
  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> MakeInProcessCommunicators(int ranks) {
  auto group = std::make_shared<Group>(ranks);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < ranks; ++r) out.push_back(std::make_unique<InProcessCommunicator>(group, r));
  return out;
}

}  // namespace rt
}  // namespace spark

#include "step_args.h"

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/host_kernels.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {
absl::Status CheckBoundWeights(const Plan& plan, absl::Span<const WeightData> weights) {
  if (weights.size() != plan.weights.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the plan reads ", plan.weights.size(),
                                                   " weights, ", weights.size(), " were bound"));
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    const WeightInfo& info = plan.weights[i];
    uint64_t part_bytes = 0;
    for (const WeightPart& part : weights[i].parts) part_bytes += part.num_bytes;
    const bool has_data = weights[i].assembled() ? part_bytes == weights[i].num_bytes
                                                 : weights[i].data != nullptr;
    if (weights[i].num_bytes != info.num_bytes() || (!has_data && info.num_bytes() > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("weight ", PrintableText(info.name), " needs ",
                                                     info.num_bytes(), " bytes, bound ",
                                                     weights[i].num_bytes));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStepInputs(const Plan& plan, int64_t max_length, const StepCall& call) {
  const absl::Span<const int32_t> ids = call.ids, positions = call.positions;
  const SoftTokenChunk* soft = call.soft;
  const abi::SamplingParams& sampling = call.sampling;
  if (!(sampling.temperature >= 0.0f && sampling.temperature <= FLT_MAX) || sampling.top_k < 0 ||
      !(sampling.top_p > 0.0f && sampling.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sampling parameters out of range: temperature ", sampling.temperature, " (finite, >= 0), "
        "top_k ", sampling.top_k, " (>= 0), top_p ", sampling.top_p, " (in (0, 1])"));
  }
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n == 0 || n > plan.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("a step takes 1 to ", plan.max_tokens,
                                                   " tokens (the plan's max_tokens), got ", n));
  }
  if (positions.size() != ids.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", n, " token ids but ", positions.size(), " positions"));
  }
  for (int64_t t = 0; t < n; ++t) {
    if (ids[t] < 0 || ids[t] >= plan.model.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", ids[t], " at step row ", t,
                                                     " is outside the vocabulary [0, ",
                                                     plan.model.vocab_size, ")"));
    }
    if (positions[t] < 0 || positions[t] >= max_length) {
      return absl::InvalidArgumentError(absl::StrCat("position ", positions[t], " at step row ", t,
                                                     " is outside [0, max_length = ", max_length,
                                                     ")"));
    }
  }
  if (soft == nullptr) return absl::OkStatus();
  if (!soft->last_visible.empty()) {
    if (plan.input_last_visible < 0) {
      return absl::InvalidArgumentError(
          "image blocks (last_visible) were given, but the model's attention is causal (it was "
          "compiled without a last_visible input)");
    }
    if (static_cast<int64_t>(soft->last_visible.size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat("got ", n, " tokens but ",
                                                     soft->last_visible.size(),
                                                     " last_visible values"));
    }
    int32_t step_last = positions[0];
    for (int64_t t = 1; t < n; ++t) step_last = std::max(step_last, positions[t]);
    for (int64_t t = 0; t < n; ++t) {
      if (soft->last_visible[t] < positions[t] || soft->last_visible[t] > step_last) {
        return absl::InvalidArgumentError(absl::StrCat(
            "last_visible ", soft->last_visible[t], " at step row ", t, " is outside [position ",
            positions[t], ", the step's last position ", step_last,
            "]: an image block must lie within one step"));
      }
    }
  }
  if (soft->indices.empty()) return absl::OkStatus();
  if (plan.soft_embeddings < 0) {
    return absl::InvalidArgumentError(
        "soft tokens were given, but the model was compiled without a soft-token merge");
  }
  const int64_t rows = static_cast<int64_t>(soft->indices.size());
  if (rows > plan.max_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("a step takes at most ", plan.max_tokens, " soft-token rows, got ", rows));
  }
  if (static_cast<int64_t>(soft->embeddings.size()) != rows * plan.model.hidden_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(rows, " soft-token rows of width ", plan.model.hidden_size, " need ",
                     rows * plan.model.hidden_size, " floats, got ", soft->embeddings.size()));
  }
  return absl::OkStatus();
}

void GatherLogitRows(const BatchLayout& layout, absl::Span<const SequenceStep> parts,
                     absl::Span<const float> logits, int64_t vocab,
                     std::vector<StepResult>* results) {
  const size_t width = static_cast<size_t>(vocab);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].call.rows != LogitRows::kAll) continue;
    std::vector<float>& out = (*results)[i].logits;
    out.clear();
    for (int32_t row : layout.rows_of[i]) {
      const auto first = logits.begin() + static_cast<size_t>(row) * width;
      out.insert(out.end(), first, first + width);
    }
  }
}

absl::Status CheckProgramCall(const Plan& plan, int64_t num_tokens, int64_t num_soft_tokens) {
  if (num_tokens < 1 || num_tokens > plan.max_tokens || num_soft_tokens < 0 ||
      num_soft_tokens > plan.max_tokens ||
      ProgramOf(plan, num_tokens, num_soft_tokens > 0) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan has no program for a call of ", num_tokens, " tokens and ", num_soft_tokens,
        " soft rows (1 to ", plan.max_tokens, " tokens; soft rows need a soft-token merge)"));
  }
  return absl::OkStatus();
}

absl::Status CheckMemoryRegion(const Plan& plan, absl::Span<const int64_t> capacities,
                               const MemoryRegion& region, uint64_t size) {
  uint64_t limit = plan.arena_bytes;
  std::string what = "the arena";
  if (region.kind != MemoryRegion::Kind::kArena) {
    if (region.cache < 0 || region.cache >= static_cast<int64_t>(plan.kv_caches.size())) {
      return absl::InvalidArgumentError(absl::StrCat("KV cache ", region.cache,
                                                     " is out of range (the plan has ",
                                                     plan.kv_caches.size(), ")"));
    }
    limit = plan.kv_caches[region.cache].part_bytes(capacities[region.cache]);
    what = absl::StrCat("KV cache ", region.cache,
                        region.kind == MemoryRegion::Kind::kKCache ? " (K)" : " (V)");
  }
  if (region.offset > limit || size > limit - region.offset) {
    return absl::InvalidArgumentError(absl::StrCat(size, " bytes at offset ", region.offset,
                                                   " leave ", what, " of ", limit, " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<BatchLayout> LayOutBatch(const Plan& plan, absl::Span<const SequenceStep> parts) {
  if (parts.empty()) return absl::InvalidArgumentError("a batched step needs at least one call");
  int64_t tokens = 0, soft_rows = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const SequenceStep& part = parts[i];
    if (part.sequence == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("call ", i, " of the step has no sequence"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (parts[j].sequence == part.sequence) {
        return absl::InvalidArgumentError(absl::StrCat(
            "calls ", j, " and ", i, " of the step are of the same sequence"));
      }
    }
    absl::Status status = CheckStepInputs(plan, part.sequence->max_length(), part.call);
    if (!status.ok()) {
      return absl::Status(status.code(), parts.size() == 1
                                             ? std::string(status.message())
                                             : absl::StrCat("call ", i, " of the step: ",
                                                            status.message()));
    }
    tokens += static_cast<int64_t>(part.call.ids.size());
    if (part.call.soft != nullptr) {
      soft_rows += static_cast<int64_t>(part.call.soft->indices.size());
    }
  }
  if (tokens > plan.max_tokens || soft_rows > plan.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a step takes 1 to ", plan.max_tokens, " tokens and at most as many soft rows (the plan's "
        "max_tokens), the calls have ", tokens, " and ", soft_rows));
  }
  BatchLayout out;
  out.token_row.assign(parts.size(), -1);
  // The row each part's token t goes to: the rows that need logits last (see step_args.h).
  std::vector<std::vector<int32_t>>& row_of = out.rows_of;
  row_of.resize(parts.size());
  int32_t next = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int32_t n = static_cast<int32_t>(parts[i].call.ids.size());
    const bool sampled = parts[i].call.rows != LogitRows::kNone;
    for (int32_t t = 0; t < n - (sampled ? 1 : 0); ++t) row_of[i].push_back(next++);
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].call.rows == LogitRows::kNone) continue;
    out.token_row[i] = next;
    row_of[i].push_back(next++);
    ++out.tail_rows;
  }
  const size_t T = static_cast<size_t>(tokens);
  out.ids.resize(T);
  out.positions.resize(T);
  out.sequences.resize(T);
  out.sampling.resize(T);
  // (CheckStepInputs refuses last_visible values for a plan without that input.)
  if (plan.input_last_visible >= 0) out.last_visible.resize(T);
  for (size_t i = 0; i < parts.size(); ++i) {
    const StepCall& call = parts[i].call;
    const SoftTokenChunk* soft = call.soft;
    for (size_t t = 0; t < call.ids.size(); ++t) {
      const size_t row = static_cast<size_t>(row_of[i][t]);
      out.ids[row] = call.ids[t];
      out.positions[row] = call.positions[t];
      out.sequences[row] = static_cast<int32_t>(i);
      out.sampling[row] = call.sampling;
      if (!out.last_visible.empty()) {
        out.last_visible[row] =
            soft != nullptr && !soft->last_visible.empty() ? soft->last_visible[t] : call.positions[t];
      }
    }
    if (soft == nullptr) continue;
    const size_t hidden = static_cast<size_t>(plan.model.hidden_size);
    for (size_t r = 0; r < soft->indices.size(); ++r) {
      const int32_t index = soft->indices[r];
      // Rows outside the call are skipped by the merge: they stay outside the step.
      const bool inside = index >= 0 && static_cast<size_t>(index) < call.ids.size();
      out.soft_indices.push_back(inside ? row_of[i][static_cast<size_t>(index)] : -1);
      out.soft_embeddings.insert(out.soft_embeddings.end(), soft->embeddings.begin() + r * hidden,
                                 soft->embeddings.begin() + (r + 1) * hidden);
    }
  }
  for (const SequenceStep& part : parts) out.all_rows |= part.call.rows == LogitRows::kAll;
  if (out.all_rows) out.tail_rows = next;
  return out;
}

std::vector<ResolvedArg> ResolveStepArgs(const Plan& plan, const Step& step,
                                         const ArgBindings& bindings, int32_t num_tokens,
                                         int32_t num_soft_tokens, int32_t first_row) {
  std::vector<ResolvedArg> out;
  out.reserve(step.args.size());
  for (const StepArg& arg : step.args) {
    ResolvedArg r;
    switch (arg.kind) {
      case ArgRefKind::kBuffer:
        r.address = bindings.arena + plan.buffers[arg.index].offset +
                    static_cast<uint64_t>(first_row) * plan.buffers[arg.index].row_bytes();
        break;
      case ArgRefKind::kWeight:
        r.address = bindings.weights[arg.index];
        break;
      case ArgRefKind::kKCache:
        r.address = bindings.k_caches[arg.index];
        break;
      case ArgRefKind::kVCache:
        r.address = bindings.v_caches[arg.index];
        break;
      case ArgRefKind::kNull:
        break;
      case ArgRefKind::kKvBlockTable:
        r.address = bindings.block_tables[arg.index];
        break;
      case ArgRefKind::kKvCapacity:
        r.kind = abi::ArgKind::kI32;
        r.i32 = static_cast<int32_t>(bindings.kv_capacities[arg.index]);
        break;
      case ArgRefKind::kNumTokens:
        r.kind = abi::ArgKind::kI32;
        r.i32 = num_tokens;
        break;
      case ArgRefKind::kNumSoftTokens:
        r.kind = abi::ArgKind::kI32;
        r.i32 = num_soft_tokens;
        break;
      case ArgRefKind::kI32:
        r.kind = abi::ArgKind::kI32;
        r.i32 = arg.i32;
        break;
      case ArgRefKind::kF32:
        r.kind = abi::ArgKind::kF32;
        r.f32 = arg.f32;
        break;
    }
    out.push_back(r);
  }
  return out;
}

std::vector<OutputBuffer> StepOutputBuffers(int step_index, const Step& step) {
  std::vector<OutputBuffer> outputs;
  const abi::OpSpec& spec = SpecOf(step);
  std::vector<const char*> arg_names;
  for (size_t i = 0; i < step.args.size() && static_cast<int>(i) < spec.num_args; ++i) {
    if (step.args[i].kind == ArgRefKind::kBuffer && spec.args[i].output()) {
      outputs.push_back({absl::StrCat(step_index, ".", step.source), step.args[i].index});
      arg_names.push_back(spec.args[i].name);
    }
  }
  if (outputs.size() > 1) {
    for (size_t i = 0; i < outputs.size(); ++i)
      absl::StrAppend(&outputs[i].name, ".", arg_names[i]);
  }
  return outputs;
}

StepOutput MakeStepOutput(const Plan& plan, int step_index, const OutputBuffer& output,
                          int32_t num_tokens, const void* data) {
  const BufferInfo& buffer = plan.buffers[output.buffer];
  StepOutput out;
  out.step_index = step_index;
  out.step = &plan.steps[step_index];
  out.name = output.name;
  out.buffer = output.buffer;
  out.dtype = buffer.dtype;
  out.shape.push_back(num_tokens);
  out.shape.insert(out.shape.end(), buffer.row_shape.begin(), buffer.row_shape.end());
  out.data = data;
  out.num_bytes = static_cast<uint64_t>(num_tokens) * buffer.row_bytes();
  return out;
}

void ActivationsToF32(const void* data, DType dtype, absl::Span<float> out) {
  if (dtype == DType::kF32) {
    std::memcpy(out.data(), data, out.size() * sizeof(float));
    return;
  }
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, bytes + 2 * i, sizeof(bits));
    out[i] = Bf16ToF32(bits);
  }
}

void ActivationsFromF32(absl::Span<const float> values, DType dtype, void* data) {
  if (dtype == DType::kF32) {
    std::memcpy(data, values.data(), values.size() * sizeof(float));
    return;
  }
  uint8_t* bytes = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = F32ToBf16(values[i]);
    std::memcpy(bytes + 2 * i, &bits, sizeof(bits));
  }
}

std::string DescribeStep(int step_index, const Step& step) {
  return PrintableText(absl::StrCat("step ", step_index, " (", step.source, ", op ", OpName(step),
                                    ", kernel ", step.kernel, ")"));
}

std::vector<ProgramLaunch> ProgramFor(const Plan& plan, int64_t num_tokens,
                                      int64_t num_soft_tokens, int64_t tail_rows) {
  const int32_t tokens = static_cast<int32_t>(num_tokens);
  std::vector<ProgramLaunch> launches;
  const Program* program = ProgramOf(plan, num_tokens, num_soft_tokens > 0);
  if (program == nullptr || tail_rows < 0 || tail_rows > num_tokens) return launches;
  launches.reserve(program->steps.size());
  for (const int64_t i : program->steps) {
    const Step& step = plan.steps[i];
    if (step.logits_tail && tail_rows < num_tokens) continue;
    launches.push_back(
        {static_cast<int>(i), abi::LaunchBlocks(step.grid, num_tokens), tokens, 0});
  }
  if (tail_rows == num_tokens || tail_rows == 0) return launches;
  // The last tail_rows rows only: the tail steps of a call of that many tokens, on those rows.
  const Program* tail = ProgramOf(plan, tail_rows, false);
  if (tail == nullptr) return launches;
  const int32_t rows = static_cast<int32_t>(tail_rows);
  for (const int64_t i : tail->steps) {
    const Step& step = plan.steps[i];
    if (!step.logits_tail) continue;
    launches.push_back({static_cast<int>(i), abi::LaunchBlocks(step.grid, tail_rows), rows,
                        tokens - rows});
  }
  return launches;
}

}  // namespace rt
}  // namespace spark

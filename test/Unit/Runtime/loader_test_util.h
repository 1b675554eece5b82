// Test-only helpers for the loader tests (plans, ELF files, temporary directories).
#ifndef SPARK_TEST_UNIT_RUNTIME_LOADER_TEST_UTIL_H_
#define SPARK_TEST_UNIT_RUNTIME_LOADER_TEST_UTIL_H_

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "file_util.h"
#include "gtest/gtest.h"
#include "little_endian.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/plan_format.h"

namespace spark {
namespace rt {
namespace test {

// Passes when `status` has `code` and its message contains `needle`.
inline ::testing::AssertionResult StatusIs(const absl::Status& status, absl::StatusCode code,
                                           absl::string_view needle) {
  if (status.code() == code && absl::StrContains(status.message(), needle)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "expected " << absl::StatusCodeToString(code) << " containing \"" << needle
         << "\", got " << status;
}

// A fresh directory under $TEST_TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string pattern = absl::StrCat(base != nullptr ? base : "/tmp", "/spark_test_XXXXXX");
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
    EXPECT_FALSE(path_.empty()) << "mkdtemp failed";
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Path(absl::string_view name) const { return JoinPath(path_, name); }

  // Writes `bytes` to `name` (creating parent directories) and returns its path.
  std::string Write(absl::string_view name, absl::string_view bytes) const {
    const std::string path = Path(name);
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
    EXPECT_TRUE(WriteStringToFile(path, bytes).ok()) << path;
    return path;
  }
  std::string MakeDir(absl::string_view name) const {
    const std::string path = Path(name);
    std::error_code ignored;
    std::filesystem::create_directories(path, ignored);
    return path;
  }

 private:
  std::string path_;
};

// A minimal ELF64 little-endian relocatable file (machine EM_CUDA) with the given
// (name, contents) PROGBITS sections, plus the null section and .shstrtab.
inline std::string MakeElf64(const std::vector<std::pair<std::string, std::string>>& sections) {
  struct Placed {
    uint32_t name;
    uint32_t type;
    uint64_t offset;
    uint64_t size;
  };
  std::string names(1, '\0');
  std::string body;  // everything after the 64-byte ELF header, before the section headers
  std::vector<Placed> placed = {{0, 0, 0, 0}};
  const auto place = [&](const std::string& name, const std::string& contents, uint32_t type) {
    const uint32_t name_offset = static_cast<uint32_t>(names.size());
    names += name;
    names.push_back('\0');
    placed.push_back({name_offset, type, 64 + body.size(), contents.size()});
    body += contents;
    body.resize((body.size() + 7) / 8 * 8, '\0');
  };
  for (const auto& section : sections) place(section.first, section.second, /*PROGBITS=*/1);
  const std::string shstrtab_name = ".shstrtab";
  // The name table holds its own name: add it before placing the table.
  const uint32_t shstrtab_name_offset = static_cast<uint32_t>(names.size());
  names += shstrtab_name;
  names.push_back('\0');
  placed.push_back({shstrtab_name_offset, /*STRTAB=*/3, 64 + body.size(), names.size()});
  body += names;
  body.resize((body.size() + 7) / 8 * 8, '\0');

  std::string elf("\x7f" "ELF", 4);
  elf += std::string{2, 1, 1, 0x33, 7};  // ELFCLASS64, LSB, version 1, ABI CUDA, ABI version
  elf.resize(16, '\0');
  AppendLittleEndian<uint16_t>(1, &elf);    // e_type ET_REL
  AppendLittleEndian<uint16_t>(190, &elf);  // e_machine EM_CUDA
  AppendLittleEndian<uint32_t>(1, &elf);    // e_version
  AppendLittleEndian<uint64_t>(0, &elf);    // e_entry
  AppendLittleEndian<uint64_t>(0, &elf);    // e_phoff
  AppendLittleEndian<uint64_t>(64 + body.size(), &elf);  // e_shoff
  AppendLittleEndian<uint32_t>(0, &elf);                 // e_flags
  AppendLittleEndian<uint16_t>(64, &elf);                // e_ehsize
  AppendLittleEndian<uint16_t>(0, &elf);                 // e_phentsize
  AppendLittleEndian<uint16_t>(0, &elf);                 // e_phnum
  AppendLittleEndian<uint16_t>(64, &elf);                // e_shentsize
  AppendLittleEndian<uint16_t>(static_cast<uint16_t>(placed.size()), &elf);      // e_shnum
  AppendLittleEndian<uint16_t>(static_cast<uint16_t>(placed.size() - 1), &elf);  // e_shstrndx
  elf += body;
  for (const Placed& section : placed) {
    AppendLittleEndian<uint32_t>(section.name, &elf);
    AppendLittleEndian<uint32_t>(section.type, &elf);
    AppendLittleEndian<uint64_t>(0, &elf);  // sh_flags
    AppendLittleEndian<uint64_t>(0, &elf);  // sh_addr
    AppendLittleEndian<uint64_t>(section.offset, &elf);
    AppendLittleEndian<uint64_t>(section.size, &elf);
    AppendLittleEndian<uint32_t>(0, &elf);  // sh_link
    AppendLittleEndian<uint32_t>(0, &elf);  // sh_info
    AppendLittleEndian<uint64_t>(1, &elf);  // sh_addralign
    AppendLittleEndian<uint64_t>(0, &elf);  // sh_entsize
  }
  return elf;
}

inline StepArg BufferArg(int64_t id) { return {ArgRefKind::kBuffer, id, 0, 0.0f}; }
inline StepArg WeightArg(int64_t id) { return {ArgRefKind::kWeight, id, 0, 0.0f}; }
inline StepArg KindArg(ArgRefKind kind, int64_t id = 0) { return {kind, id, 0, 0.0f}; }
inline StepArg I32Arg(int32_t value) { return {ArgRefKind::kI32, 0, value, 0.0f}; }
inline StepArg F32Arg(float value) { return {ArgRefKind::kF32, 0, 0, value}; }

inline Step MakeStep(const std::string& op, int block, std::vector<StepArg> args) {
  Step step;
  step.op = abi::FindOp(op.c_str())->id;
  step.source = absl::StrCat("test.", op);
  step.grid = {0, 4, 1};  // 4 blocks for any call
  step.block[0] = block;
  step.args = std::move(args);
  step.kernel = EntryPointOf(step);  // the entry spark-compile would name
  return step;
}

// A small valid plan that uses every argument kind: vocab 16, hidden 4, max_tokens 8, one sliding
// and one full KV cache, soft-token inputs. Steps: embedding, scatter_rows, rms_norm, kv_write
// (full cache), linear (the logits), attention (sliding cache), sample (the next tokens).
inline Plan TestPlan(const std::string& target = "sm_90a") {
  Plan plan;
  plan.version = plan_format::kPlanVersion;
  plan.target = target;
  plan.max_tokens = 8;
  plan.model.variant = "test-tiny";
  plan.model.architecture = "Gemma4ForCausalLM";
  plan.model.vocab_size = 16;
  plan.model.hidden_size = 4;
  plan.model.num_layers = 1;
  plan.model.max_position_embeddings = 128;
  plan.model.eos_token_ids = {1, 15};
  plan.model.soft_token_ids = {12, 13};
  plan.model.weight_prefix = "model.";
  uint64_t offset = 0;
  const auto add_buffer = [&](const std::string& name, DType dtype, std::vector<int64_t> row) {
    BufferInfo buffer{name, dtype, std::move(row), offset};
    offset += buffer.row_bytes() * plan.max_tokens;
    plan.buffers.push_back(buffer);
    return static_cast<int64_t>(plan.buffers.size() - 1);
  };
  plan.input_ids = add_buffer("%ids", DType::kI32, {});
  plan.input_positions = add_buffer("%positions", DType::kI32, {});
  const int64_t hidden = add_buffer("%hidden", DType::kF32, {4});
  plan.output_logits = add_buffer("%logits", DType::kF32, {16});
  const int64_t k = add_buffer("%k", DType::kF32, {1, 4});
  const int64_t v = add_buffer("%v", DType::kF32, {1, 4});
  plan.soft_embeddings = add_buffer("%soft", DType::kF32, {4});
  plan.soft_indices = add_buffer("%soft_indices", DType::kI32, {});
  plan.input_sampling = add_buffer("%sampling", DType::kI32, {abi::kSamplingParamWords});
  plan.output_tokens = add_buffer("tokens", DType::kI32, {});
  plan.input_sequences = add_buffer("%sequences", DType::kI32, {});
  plan.arena_bytes = offset;
  plan.weights.push_back({"model.embed_tokens.weight", DType::kBF16, {16, 4}});
  plan.weights.push_back({"model.norm.weight", DType::kBF16, {4}});
  plan.kv_caches.push_back({"kv.layers.0", KvKind::kSliding, 512, 1, 4});
  plan.kv_caches.push_back({"kv.layers.1", KvKind::kFull, 0, 1, 4});
  const StepArg num_tokens = KindArg(ArgRefKind::kNumTokens);
  plan.steps.push_back(MakeStep("embedding", 256,
                                {BufferArg(plan.input_ids), WeightArg(0), BufferArg(hidden),
                                 num_tokens, I32Arg(16), I32Arg(4), F32Arg(2.0f)}));
  plan.steps.push_back(MakeStep("scatter_rows", 256,
                                {BufferArg(hidden), BufferArg(plan.soft_indices),
                                 BufferArg(plan.soft_embeddings), num_tokens,
                                 KindArg(ArgRefKind::kNumSoftTokens), I32Arg(4)}));
  plan.steps.push_back(MakeStep("rms_norm", 256,
                                {BufferArg(hidden), KindArg(ArgRefKind::kNull), BufferArg(k),
                                 num_tokens, I32Arg(1), I32Arg(4), F32Arg(1e-6f)}));
  plan.steps.push_back(MakeStep("kv_write", 256,
                                {BufferArg(k), BufferArg(v), BufferArg(plan.input_positions),
                                 BufferArg(plan.input_sequences),
                                 KindArg(ArgRefKind::kKvBlockTable, 1),
                                 KindArg(ArgRefKind::kKCache, 1), KindArg(ArgRefKind::kVCache, 1),
                                 num_tokens, I32Arg(1), I32Arg(4),
                                 KindArg(ArgRefKind::kKvCapacity, 1), I32Arg(::spark::abi::kCacheF32)}));
  plan.steps.push_back(MakeStep("linear", 256,
                                {BufferArg(hidden), WeightArg(0), BufferArg(plan.output_logits),
                                 num_tokens, I32Arg(16), I32Arg(4)}));
  plan.steps.back().shared_bytes = 1024;
  // Attention over the sliding cache (every cache is used by a step: ValidatePlan).
  plan.steps.push_back(
      MakeStep("attention", 128,
               {BufferArg(k), BufferArg(plan.input_positions), BufferArg(plan.input_sequences),
                KindArg(ArgRefKind::kKvBlockTable, 0), KindArg(ArgRefKind::kKCache, 0),
                KindArg(ArgRefKind::kVCache, 0), BufferArg(v), KindArg(ArgRefKind::kNull),
                num_tokens, I32Arg(1), I32Arg(1), I32Arg(4), KindArg(ArgRefKind::kKvCapacity, 0),
                I32Arg(512), F32Arg(0.5f), I32Arg(1), I32Arg(0), I32Arg(::spark::abi::kCacheF32),
                KindArg(ArgRefKind::kNull)}));
  plan.steps.push_back(MakeStep("sample", 1024,
                                {BufferArg(plan.output_logits), BufferArg(plan.input_sampling),
                                 BufferArg(plan.output_tokens), num_tokens, I32Arg(16)}));
  BuildPrograms(&plan);
  return plan;
}

// Adds `step` to a TestPlan before its last step, the sample step (which comes after every step
// that writes the logits: ValidatePlan), and returns it.
inline Step& AddStep(Plan* plan, Step step) {
  return *plan->steps.insert(plan->steps.end() - 1, std::move(step));
}
// The step AddStep added last.
inline Step& LastAdded(Plan& plan) { return plan.steps[plan.steps.size() - 2]; }

// A cubin-like ELF file carrying `plan` in its .spark.plan section.
inline std::string MakeCubin(const Plan& plan) {
  return MakeElf64({{".text.spark_linear__0", std::string(16, '\x01')},
                    {".spark.plan", SerializePlanSection(plan)}});
}

// `plan` with bf16 activation storage, as spark-compile --activation-precision bf16 writes it:
// every buffer a step takes as an activation (the registry's kAct arguments), the logits and the
// soft-token embeddings become bf16; workspaces and i32 buffers stay. Offsets are kept (a bf16
// buffer fits where its f32 one was).
inline Plan WithBf16Activations(Plan plan) {
  plan.activation_precision = DType::kBF16;
  for (const Step& step : plan.steps) {
    const abi::OpSpec& spec = SpecOf(step);
    for (int a = 0; a < spec.num_args && a < static_cast<int>(step.args.size()); ++a) {
      if (spec.args[a].element == abi::ElementType::kAct &&
          step.args[a].kind == ArgRefKind::kBuffer) {
        plan.buffers[step.args[a].index].dtype = DType::kBF16;
      }
    }
  }
  for (int64_t id : {plan.output_logits, plan.soft_embeddings}) {
    if (id >= 0) plan.buffers[id].dtype = DType::kBF16;
  }
  return plan;
}

}  // namespace test
}  // namespace rt
}  // namespace spark

#endif  // SPARK_TEST_UNIT_RUNTIME_LOADER_TEST_UTIL_H_

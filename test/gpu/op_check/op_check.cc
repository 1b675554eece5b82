// spark-op-check (op_check.h): emits the kernel-level modules of the cases (op_cases.cc), and runs
// the images spark-compile made of them on the CUDA executor against the host reference.
//
// A module holds the cases of one group, each case one step (two for a split attention and its
// merge, or a grouped moe_down and its combine) over buffers, weights and KV caches of its own,
// placed at offsets this tool chooses (so that no two outputs share bytes, and a case's buffers
// can sit off their 16-byte alignment), plus what every plan has: the ids, positions and sampling
// inputs, a 16-wide logits buffer and the sample step that reads it. Every argument's binding
// comes from the op registry: its role (input, output, workspace, weight, cache, the plan's
// positions / last_visible / sampling input, a runtime value or a literal), its element type and
// its extent over the case's sizes.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "op_check.h"
#include "test/gpu/op_check/emulated_kernels.h"
#include "spark/runtime/artifact.h"
#include "spark/runtime/cuda_executor.h"
#include "spark/runtime/device.h"
#include "spark/runtime/element_type.h"
#include "spark/runtime/entry_point.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/host_executor.h"
#include "spark/runtime/host_kernels.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/quantize.h"
#include "spark/runtime/safetensors.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace op_check {
namespace {

using abi::ArgSpec;
using abi::ElementType;
using abi::Role;
using rt::DType;
using rt::DTypeBytes;
using rt::DTypeName;
using rt::DTypeSize;

constexpr int64_t kLogitsWidth = 16;  // the plan's own logits, which its sample step reads
constexpr uint64_t kAlignment = 256;

// ---- Random values (splitmix64: the same on every machine) ----
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Unit() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
  float Uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(Unit()); }
  float Normal(float sigma) {
    const double u1 = std::max(Unit(), 1e-300), u2 = Unit();
    return sigma * static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                                      std::cos(6.283185307179586 * u2));
  }
  int64_t Below(int64_t n) { return static_cast<int64_t>(Next() % static_cast<uint64_t>(n)); }
};
uint64_t Hash(const std::string& text, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// ---- The module of a group ----
struct Binding {
  enum Kind { kBuffer, kWeight, kKCache, kVCache, kKvCapacity, kKvBlockTable, kNull, kNumTokens,
              kNumSoftTokens, kI32, kF32 };
  Kind kind = kNull;
  int64_t index = 0;
  int64_t i32 = 0;
  float f32 = 0.0f;
};
struct BufferSpec {
  std::string name;
  DType dtype = DType::kF32;
  int64_t row_elements = 0;  // of each of the module's `tokens` rows
  uint64_t offset = 0;
};
struct WeightSpec {
  std::string name;
  DType dtype = DType::kBF16;
  int64_t elements = 0;
  int case_index = 0;
  std::string op, arg;
};
struct CacheSpec {
  std::string name;
  int32_t window = 0;
  int64_t kv_heads = 0, head_dim = 0;
  bool bf16 = false;
};
struct StepSpec {
  const abi::OpSpec* spec = nullptr;
  std::vector<Binding> args;
  abi::GridRule grid;
  std::string source;
  int case_index = -1;  // the case it checks (-1: the plan's own sample step)
};
struct Module {
  std::string name;
  const OpCase* first = nullptr;  // the group's call: tokens, precision, positions, soft rows
  std::vector<int> cases;         // indices into AllCases
  std::vector<BufferSpec> buffers;
  std::vector<WeightSpec> weights;
  std::vector<CacheSpec> caches;
  std::vector<StepSpec> steps;
  int64_t ids = -1, positions = -1, sequences = -1, sampling = -1, last_visible = -1, soft_embeddings = -1,
          soft_indices = -1, logits = -1, tokens = -1;
  uint64_t arena_bytes = 0;
  int64_t hidden = kLogitsWidth;  // the model's hidden size (the soft rows' width)
};

DType ActDType(const Module& m) { return m.first->bf16 ? DType::kBF16 : DType::kF32; }

int64_t AddBuffer(Module* m, const std::string& name, DType dtype, int64_t row_elements,
                  bool misaligned = false) {
  BufferSpec b;
  b.name = name;
  b.dtype = dtype;
  b.row_elements = std::max<int64_t>(row_elements, 1);
  b.offset = m->arena_bytes + (misaligned ? DTypeSize(dtype) : 0);
  const uint64_t bytes = static_cast<uint64_t>(b.row_elements) * DTypeSize(dtype) * m->first->tokens;
  m->arena_bytes = (b.offset + bytes + kAlignment - 1) / kAlignment * kAlignment;
  m->buffers.push_back(b);
  return static_cast<int64_t>(m->buffers.size() - 1);
}

// The value of the case's size argument `name` (an i32 literal, or the call's token count).
int64_t SizeOf(const OpCase& c, const abi::OpSpec& spec, int arg) {
  const ArgSpec& a = spec.args[arg];
  if (a.role == Role::kNumTokens) return c.tokens;
  if (a.role == Role::kNumSoftTokens) return c.soft_rows;
  auto it = c.ints.find(a.name);
  return it == c.ints.end() ? 0 : it->second;
}

// Elements an extent holds, over the case's sizes.
int64_t ExtentElements(const OpCase& c, const abi::OpSpec& spec, const abi::Extent& e) {
  if (e.kind == abi::Extent::kRecords) {
    return SizeOf(c, spec, e.factors[0]) * SizeOf(c, spec, e.factors[1]) *
           abi::AttentionRecordFloats(static_cast<int>(SizeOf(c, spec, e.factors[2])));
  }
  int64_t n = e.multiplier;
  for (int f = 0; f < e.num_factors; ++f) n *= SizeOf(c, spec, e.factors[f]);
  return (n + e.divisor - 1) / e.divisor;
}

DType WeightDType(ElementType element) {
  switch (element) {
    case ElementType::kF32: return DType::kF32;
    case ElementType::kF8E4M3: return DType::kF8E4M3FN;
    case ElementType::kF4E2M1: return DType::kF4E2M1FN;
    default: return DType::kBF16;
  }
}

// The bindings of one step of `op` for case `c` (index `ci`). `shared` holds the buffers of
// arguments another step of the case already made (a chained step reads the first's outputs).
StepSpec BindStep(Module* m, int ci, const OpCase& c, const std::string& op,
                  std::map<std::string, int64_t>* shared) {
  const abi::OpSpec& spec = *abi::FindOp(op.c_str());
  StepSpec step;
  step.spec = &spec;
  step.case_index = ci;
  step.grid = c.grid;
  step.source = absl::StrCat("c", ci, ".", op);
  const std::string prefix = absl::StrCat("c", ci, ".");
  int64_t cache = -1;
  for (int i = 0; i < spec.num_args; ++i) {
    const ArgSpec& a = spec.args[i];
    Binding b;
    const std::string name = a.name;
    if (a.kind != abi::ArgKind::kPtr) {
      switch (a.role) {
        case Role::kNumTokens: b.kind = Binding::kNumTokens; break;
        case Role::kNumSoftTokens: b.kind = Binding::kNumSoftTokens; break;
        case Role::kKvCapacity: b.kind = Binding::kKvCapacity; b.index = cache; break;
        case Role::kParam: b.kind = Binding::kF32; b.f32 = c.floats.at(name); break;
        default: b.kind = Binding::kI32; b.i32 = SizeOf(c, spec, i); break;
      }
      step.args.push_back(b);
      continue;
    }
    if (c.nulls.count(name)) {
      step.args.push_back(b);  // kNull
      continue;
    }
    switch (a.role) {
      case Role::kPositions: b = {Binding::kBuffer, m->positions}; break;
      case Role::kSequences: b = {Binding::kBuffer, m->sequences}; break;
      case Role::kKvBlockTable: b = {Binding::kKvBlockTable, -1}; break;  // its cache: below
      case Role::kLastVisible: b = {Binding::kBuffer, m->last_visible}; break;
      case Role::kSampling: b = {Binding::kBuffer, m->sampling}; break;
      case Role::kWeight:
      case Role::kWeightScale: {
        WeightSpec w;
        w.name = prefix + name;
        w.dtype = WeightDType(a.element);
        w.elements = ExtentElements(c, spec, a.extent);
        w.case_index = ci;
        w.op = op;
        w.arg = name;
        m->weights.push_back(w);
        b = {Binding::kWeight, static_cast<int64_t>(m->weights.size() - 1)};
        break;
      }
      case Role::kKCacheRead:
      case Role::kKCacheWrite:
      case Role::kVCacheRead:
      case Role::kVCacheWrite: {
        if (cache < 0) {
          CacheSpec cs;
          cs.name = absl::StrCat("kv.c", ci);
          cs.window = c.window;
          cs.kv_heads = c.ints.at("kv_heads");
          cs.head_dim = c.ints.at("head_dim");
          cs.bf16 = c.cache_bf16;
          m->caches.push_back(cs);
          cache = static_cast<int64_t>(m->caches.size() - 1);
        }
        const bool k = a.role == Role::kKCacheRead || a.role == Role::kKCacheWrite;
        b = {k ? Binding::kKCache : Binding::kVCache, cache};
        break;
      }
      default: {  // an activation buffer, an i32 buffer or a workspace
        auto found = shared->find(name);
        auto alias = c.aliases.find(name);
        if (found != shared->end()) {
          b = {Binding::kBuffer, found->second};
        } else if (alias != c.aliases.end() && shared->count(alias->second)) {
          b = {Binding::kBuffer, shared->at(alias->second)};
        } else if (op == "scatter_rows" && name == "indices") {
          b = {Binding::kBuffer, m->soft_indices};
        } else if (op == "scatter_rows" && name == "updates") {
          b = {Binding::kBuffer, m->soft_embeddings};
        } else {
          const DType dtype = a.element == ElementType::kI32   ? DType::kI32
                              : a.element == ElementType::kAct ? ActDType(*m)
                                                               : DType::kF32;
          const int64_t elements = ExtentElements(c, spec, a.extent);
          const int64_t row = a.extent.kind == abi::Extent::kPerToken
                                  ? elements
                                  : (elements + c.tokens - 1) / c.tokens;
          b = {Binding::kBuffer,
               AddBuffer(m, prefix + name, dtype, row, c.misaligned.count(name) > 0)};
        }
        (*shared)[name] = b.index;
        break;
      }
    }
    step.args.push_back(b);
  }
  for (Binding& b : step.args) {
    if (b.kind == Binding::kKvBlockTable) b.index = cache;
  }
  return step;
}

Module BuildModule(const std::string& name, const std::vector<OpCase>& all,
                   const std::vector<int>& indices) {
  Module m;
  m.name = name;
  m.cases = indices;
  m.first = &all[indices.front()];
  const OpCase& call = *m.first;
  m.ids = AddBuffer(&m, "%ids", DType::kI32, 1);
  m.positions = AddBuffer(&m, "%positions", DType::kI32, 1);
  m.sequences = AddBuffer(&m, "%sequences", DType::kI32, 1);
  m.sampling = AddBuffer(&m, "%sampling", DType::kI32, abi::kSamplingParamWords);
  if (call.block_begin >= 0) m.last_visible = AddBuffer(&m, "%last_visible", DType::kI32, 1);
  if (call.soft_rows > 0) {
    m.hidden = call.ints.at("cols");
    m.soft_embeddings = AddBuffer(&m, "%soft_embeddings", ActDType(m), m.hidden);
    m.soft_indices = AddBuffer(&m, "%soft_indices", DType::kI32, 1);
  }
  m.logits = AddBuffer(&m, "logits", ActDType(m), kLogitsWidth);
  m.tokens = AddBuffer(&m, "tokens", DType::kI32, 1);
  for (int ci : indices) {
    const OpCase& c = all[ci];
    std::map<std::string, int64_t> shared;
    m.steps.push_back(BindStep(&m, ci, c, c.op, &shared));
    if (!c.then.empty()) {
      // The chained step reads the first's workspace and writes its output.
      std::map<std::string, int64_t> chain = {{"partials", shared.at("partials")}};
      chain["y"] = shared.at("y");
      m.steps.push_back(BindStep(&m, ci, c, c.then, &chain));
    }
  }
  StepSpec sample;
  sample.spec = &abi::Spec(abi::OpId::kSample);
  sample.args = {{Binding::kBuffer, m.logits}, {Binding::kBuffer, m.sampling},
                 {Binding::kBuffer, m.tokens}, {Binding::kNumTokens},
                 {Binding::kI32, 0, kLogitsWidth}};
  sample.grid = {1, 0, 1};
  sample.source = "sample";
  m.steps.push_back(sample);
  return m;
}

// ---- MLIR ----
std::string FloatText(float v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.9e", static_cast<double>(v));
  return text;
}

// A launch argument as spark.launch spells it (#spark.arg without its wrapper).
std::string ArgText(const Binding& b) {
  switch (b.kind) {
    case Binding::kBuffer: return absl::StrCat("buffer ", b.index);
    case Binding::kWeight: return absl::StrCat("weight ", b.index);
    case Binding::kKCache: return absl::StrCat("k_cache ", b.index);
    case Binding::kVCache: return absl::StrCat("v_cache ", b.index);
    case Binding::kKvCapacity: return absl::StrCat("kv_capacity ", b.index);
    case Binding::kKvBlockTable: return absl::StrCat("kv_block_table ", b.index);
    case Binding::kNull: return "null";
    case Binding::kNumTokens: return "num_tokens";
    case Binding::kNumSoftTokens: return "num_soft_tokens";
    case Binding::kI32: return absl::StrCat("i32 ", b.i32);
    case Binding::kF32: return absl::StrCat("f32 ", FloatText(b.f32));
  }
  return "";
}

// The entry spark-compile names for a launch (entry_point.h).
std::string EntryName(const StepSpec& s) {
  std::string name = EntryPointPrefix(s.spec->symbol);
  for (const Binding& b : s.args) {
    if (b.kind == Binding::kI32) AppendEntryLiteral(&name, static_cast<int32_t>(b.i32));
    if (b.kind == Binding::kF32) AppendEntryLiteral(&name, b.f32);
  }
  return name;
}

std::string ModuleText(const Module& m) {
  const OpCase& call = *m.first;
  const std::string model = absl::StrCat(
      "#spark.model<variant = \"op-check\", architecture = \"Gemma4ForCausalLM\", vocab_size = ",
      kLogitsWidth, ", hidden_size = ", m.hidden, ", num_layers = 1, max_position_embeddings = ",
      std::max<int64_t>(call.max_length, 1), ", eos_token_ids = [15], bos_token_id = 2, "
      "pad_token_id = 0, soft_token_ids = [], weight_prefix = \"\">");
  std::ostringstream out;
  out << "// spark-op-check group " << m.name << ": " << m.cases.size()
      << " cases (test/gpu/op_check); generated, do not edit.\n";
  out << "module attributes {spark.model = " << model << "} {\n";
  for (const CacheSpec& c : m.caches) {
    out << "  spark.kv_cache @" << c.name << (c.window > 0 ? " sliding" : " full")
        << " {window = " << c.window << " : i64, kv_heads = " << c.kv_heads
        << " : i64, head_dim = " << c.head_dim << " : i64"
        << (c.bf16 ? ", element_type = bf16" : "") << "}\n";
  }
  std::vector<std::string> buffers, weights, inputs;
  for (const BufferSpec& b : m.buffers) {
    buffers.push_back(absl::StrCat("#spark.buffer<name = \"", b.name, "\", dtype = ",
                                   DTypeName(b.dtype), ", row_shape = [",
                                   b.row_elements == 1 ? "" : absl::StrCat(b.row_elements),
                                   "], offset = ", b.offset, ">"));
  }
  for (const WeightSpec& w : m.weights) {
    weights.push_back(absl::StrCat("#spark.weight<name = \"", w.name, "\", dtype = ",
                                   DTypeName(w.dtype), ", shape = [", w.elements, "]>"));
  }
  const auto input = [&](const char* key, int64_t id) {
    if (id >= 0) inputs.push_back(absl::StrCat(key, " = ", id));
  };
  input("ids", m.ids);
  input("positions", m.positions);
  input("soft_embeddings", m.soft_embeddings);
  input("soft_indices", m.soft_indices);
  input("last_visible", m.last_visible);
  input("sampling", m.sampling);
  input("sequences", m.sequences);
  out << "  spark.program @forward attributes {"
      << (call.bf16 ? "activation_precision = bf16, " : "") << "arena_bytes = " << m.arena_bytes
      << " : i64, buffers = [" << absl::StrJoin(buffers, ", ") << "], inputs = #spark.inputs<"
      << absl::StrJoin(inputs, ", ") << ">, max_tokens = " << call.tokens
      << " : i64, model = " << model << ", outputs = #spark.outputs<logits = " << m.logits
      << ", tokens = " << m.tokens << ">, weights = [" << absl::StrJoin(weights, ", ")
      << "]} {\n";
  for (const StepSpec& s : m.steps) {
    std::vector<std::string> args;
    for (const Binding& b : s.args) args.push_back(ArgText(b));
    if (!s.spec->kernel()) {
      out << "    spark.transfer \"" << s.spec->op << "\" args [" << absl::StrJoin(args, ", ")
          << "] {source = \"" << s.source << "\"}\n";
      continue;
    }
    out << "    spark.launch \"" << s.spec->op << "\" @kernels::@" << EntryName(s)
        << " grid(per_token = " << s.grid.per_token << ", fixed = " << s.grid.fixed
        << ", divisor = " << s.grid.divisor << ") block [" << s.spec->block_size
        << ", 1, 1] args [" << absl::StrJoin(args, ", ") << "] {source = \"" << s.source
        << "\"}\n";
  }
  out << "  }\n}\n";
  return out.str();
}

// ---- Groups ----
struct Options {
  bool quick = false;
  std::set<std::string> only;
  uint64_t seed = 1;
  std::string device = "cuda";
  std::string target = "sm_90a";
  std::string group;  // run this group only
};

std::vector<Module> Groups(const std::vector<OpCase>& all, const Options& options) {
  std::map<std::string, std::vector<int>> by_key;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!options.only.empty() && !options.only.count(all[i].op)) continue;
    by_key[GroupKey(all[i])].push_back(static_cast<int>(i));
  }
  std::vector<Module> modules;
  for (const auto& [key, indices] : by_key) {
    char number[16];
    std::snprintf(number, sizeof(number), "g%02zu_", modules.size());
    modules.push_back(BuildModule(number + key, all, indices));
  }
  return modules;
}

// ---- Values ----
void PutF32(std::vector<uint8_t>* bytes, size_t i, float v) {
  std::memcpy(bytes->data() + 4 * i, &v, 4);
}

// Activation values: f32, or bf16 bits.
std::vector<uint8_t> Activations(DType dtype, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * DTypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kBF16) {
      const uint16_t bits = rt::F32ToBf16(values[i]);
      std::memcpy(bytes.data() + 2 * i, &bits, 2);
    } else {
      PutF32(&bytes, i, values[i]);
    }
  }
  return bytes;
}

// The spread of an op's activation inputs: what keeps its math in its working range.
float InputSigma(const std::string& op) {
  if (op == "softcap") return 40.0f;
  if (op == "moe_topk" || op == "sample") return 3.0f;
  return 1.0f;
}

// The sampling parameters of row t: greedy, a temperature alone, with top-k, with top-p, both.
abi::SamplingParams SamplingRow(int64_t t) {
  abi::SamplingParams p;
  p.seed = 1234 + t;
  p.counter = 7 * t;
  switch (t % 5) {
    case 0: break;  // greedy
    case 1: p.temperature = 1.0f; break;
    case 2: p.temperature = 0.7f; p.top_k = 40; break;
    case 3: p.temperature = 1.3f; p.top_p = 0.9f; break;
    case 4: p.temperature = 0.9f; p.top_k = 100; p.top_p = 0.8f; break;
  }
  return p;
}

// The i32 values an input of op `op`, argument `arg`, takes.
std::vector<int32_t> IntInput(const OpCase& c, const std::string& arg, int64_t count, Rng& rng) {
  std::vector<int32_t> v(count);
  if (c.op == "embedding") {
    for (auto& x : v) x = static_cast<int32_t>(rng.Below(c.ints.at("vocab")));
  } else if (c.op == "mask_tokens") {
    const int64_t ids[] = {c.ints.at("token_a"), c.ints.at("token_b"), c.ints.at("token_c")};
    for (auto& x : v) {
      const int64_t pick = rng.Below(6);
      x = static_cast<int32_t>(pick < 3 && ids[pick] >= 0 ? ids[pick] : rng.Below(300000));
    }
  } else if (arg == "indices") {  // MoE: top_k distinct experts per token
    const int64_t k = c.ints.at("top_k"), experts = c.ints.at("num_experts");
    for (int64_t t = 0; t < count / k; ++t) {
      std::vector<int32_t> all(experts);
      for (int64_t e = 0; e < experts; ++e) all[e] = static_cast<int32_t>(e);
      for (int64_t j = 0; j < k; ++j) {
        std::swap(all[j], all[j + rng.Below(experts - j)]);
        v[t * k + j] = all[j];
      }
    }
  } else {
    for (auto& x : v) x = static_cast<int32_t>(rng.Below(64));
  }
  return v;
}

// The bytes of weight `w` of its case.
std::vector<uint8_t> WeightBytes(const WeightSpec& w, bool nan_codes, uint64_t seed) {
  Rng rng{Hash(w.name, seed)};
  const uint64_t bytes = *DTypeBytes(w.dtype, static_cast<uint64_t>(w.elements));
  std::vector<uint8_t> out(bytes);
  const abi::OpSpec& spec = *abi::FindOp(w.op.c_str());
  const ArgSpec& a = spec.args[abi::FindArg(spec, w.arg.c_str())];
  switch (w.dtype) {
    case DType::kF4E2M1FN:
      for (auto& b : out) b = static_cast<uint8_t>(rng.Next());
      break;
    case DType::kF8E4M3FN:
      for (auto& b : out) {
        // Elements: any finite code; block scales: positive, about 0.5 to 2.
        b = a.role == Role::kWeightScale ? static_cast<uint8_t>(0x30 + rng.Below(16))
                                         : static_cast<uint8_t>(rng.Next());
        if ((b & 0x7f) == 0x7f) b = 0x7e;
        // About one element in 4096 a NaN code when the case asks: a third of 2816-wide rows.
        if (nan_codes && a.role != Role::kWeightScale && rng.Below(4096) == 0) b |= 0x7f;
      }
      break;
    case DType::kF32: {  // scales: the dequantised weights about +-0.05
      const bool fp8 = w.op.find("fp8") != std::string::npos;
      for (size_t i = 0; i < out.size() / 4; ++i) {
        PutF32(&out, i, fp8 ? rng.Uniform(5e-5f, 2e-4f) : rng.Uniform(2e-3f, 1e-2f));
      }
      break;
    }
    default: {  // bf16: norm weights and scalars about 1, matrices about +-0.05
      const bool around_one = w.arg == "weight" || w.arg == "s" || w.arg == "per_expert_scale";
      const bool table = w.op == "embedding";
      for (size_t i = 0; i < out.size() / 2; ++i) {
        const float v = around_one ? rng.Uniform(0.5f, 1.5f)
                        : table    ? rng.Uniform(-1.0f, 1.0f)
                                   : rng.Uniform(-0.05f, 0.05f);
        const uint16_t bits = rt::F32ToBf16(v);
        std::memcpy(out.data() + 2 * i, &bits, 2);
      }
      break;
    }
  }
  return out;
}

// ---- Running a group ----
struct Run {
  std::unique_ptr<rt::Executor> executor;
  std::unique_ptr<rt::SequenceState> sequence;
};

absl::Status Write(Run& run, const rt::MemoryRegion& region, const std::vector<uint8_t>& bytes) {
  return run.executor->CopyToMemory(*run.sequence, region, bytes);
}

// What every run of the group starts from: each buffer's and cache part's bytes.
struct Memory {
  std::vector<std::vector<uint8_t>> buffers;        // by buffer id
  std::vector<std::vector<uint8_t>> k_caches, v_caches;
};

uint64_t BufferBytes(const Module& m, const BufferSpec& b) {
  return static_cast<uint64_t>(b.row_elements) * DTypeSize(b.dtype) * m.first->tokens;
}

Memory InitialMemory(const Module& m, const std::vector<OpCase>& all, const rt::Plan& plan,
                     const std::vector<int64_t>& capacities, uint64_t seed) {
  const OpCase& call = *m.first;
  const int64_t T = call.tokens;
  Memory mem;
  for (const BufferSpec& b : m.buffers) {
    mem.buffers.emplace_back(BufferBytes(m, b), 0xff);  // outputs start poisoned (NaN, -1)
  }
  std::vector<uint8_t>& positions = mem.buffers[m.positions];
  std::vector<uint8_t>& ids = mem.buffers[m.ids];
  for (int64_t t = 0; t < T; ++t) {
    const int32_t p = call.first_position + static_cast<int32_t>(t), id = static_cast<int32_t>(t % 15);
    std::memcpy(positions.data() + 4 * t, &p, 4);
    std::memcpy(ids.data() + 4 * t, &id, 4);
    const abi::SamplingParams params = SamplingRow(t);
    std::memcpy(mem.buffers[m.sampling].data() + sizeof(params) * t, &params, sizeof(params));
    if (m.last_visible >= 0) {
      const bool in_block = t >= call.block_begin && t < call.block_end;
      const int32_t last = call.first_position + (in_block ? call.block_end - 1 : static_cast<int32_t>(t));
      std::memcpy(mem.buffers[m.last_visible].data() + 4 * t, &last, 4);
    }
  }
  Rng shared{Hash(m.name, seed)};
  {
    std::vector<float> v(BufferBytes(m, m.buffers[m.logits]) / DTypeSize(m.buffers[m.logits].dtype));
    for (float& x : v) x = shared.Normal(2.0f);
    mem.buffers[m.logits] = Activations(m.buffers[m.logits].dtype, v);
  }
  if (m.soft_embeddings >= 0) {
    const BufferSpec& e = m.buffers[m.soft_embeddings];
    std::vector<float> v(BufferBytes(m, e) / DTypeSize(e.dtype));
    for (float& x : v) x = shared.Normal(1.0f);
    mem.buffers[m.soft_embeddings] = Activations(e.dtype, v);
    // Distinct rows of the call, then two outside it (skipped).
    std::vector<int32_t> rows(T);
    for (int64_t t = 0; t < T; ++t) rows[t] = static_cast<int32_t>(t);
    for (int64_t j = 0; j < T; ++j) std::swap(rows[j], rows[j + shared.Below(T - j)]);
    std::vector<uint8_t>& idx = mem.buffers[m.soft_indices];
    for (int64_t n = 0; n < T; ++n) {
      const int32_t row = n == 1 ? -1 : n == 3 ? static_cast<int32_t>(T) + 2 : rows[n];
      std::memcpy(idx.data() + 4 * n, &row, 4);
    }
  }
  // Each case's inputs (an argument read before any step of the case writes it).
  std::set<int64_t> filled = {m.ids, m.positions, m.sequences, m.sampling, m.last_visible, m.soft_embeddings,
                              m.soft_indices, m.logits};
  for (const StepSpec& s : m.steps) {
    if (s.case_index < 0) continue;
    const OpCase& c = all[s.case_index];
    for (int i = 0; i < s.spec->num_args; ++i) {
      const ArgSpec& a = s.spec->args[i];
      const Binding& b = s.args[i];
      if (b.kind != Binding::kBuffer || filled.count(b.index)) continue;
      filled.insert(b.index);
      if (a.role != Role::kInput && a.role != Role::kInOut) continue;  // outputs stay poisoned
      const BufferSpec& buffer = m.buffers[b.index];
      Rng rng{Hash(buffer.name, seed)};
      const int64_t count = static_cast<int64_t>(BufferBytes(m, buffer) / DTypeSize(buffer.dtype));
      if (c.op == "linear_nvfp4_a4" && std::string(a.name) == "xq") {
        // Packed NVFP4 rows as quantize_nvfp4_rows writes them: random activations quantized by
        // the host's rules, every third row 40 times larger (row global scales differ).
        const int64_t cols = c.ints.at("in_features"), words = c.ints.at("row_words");
        std::vector<float> x(static_cast<size_t>(cols));
        for (int64_t r = 0; r < count / words; ++r) {
          for (float& v : x) v = rng.Normal(r % 3 == 0 ? 40.0f : 1.0f);
          quant::QuantizeNvfp4Row(x.data(), cols, mem.buffers[b.index].data() + 4 * r * words);
        }
      } else if (buffer.dtype == DType::kI32) {
        const std::vector<int32_t> v = IntInput(c, a.name, count, rng);
        std::memcpy(mem.buffers[b.index].data(), v.data(), 4 * v.size());
      } else {
        std::vector<float> v(count);
        for (float& x : v) x = rng.Normal(InputSigma(c.op));
        if (c.op == "moe_down" || c.op == "moe_down_nvfp4" || c.op == "moe_down_fp8") {
          if (std::string(a.name) == "weights") {
            for (float& x : v) x = std::fabs(x) * 0.2f;
          }
        }
        mem.buffers[b.index] = Activations(buffer.dtype, v);
      }
    }
  }
  for (size_t i = 0; i < plan.kv_caches.size(); ++i) {
    const rt::KvCacheInfo& info = plan.kv_caches[i];
    const uint64_t part = info.part_bytes(capacities[i]);
    for (auto* caches : {&mem.k_caches, &mem.v_caches}) {
      Rng rng{Hash(absl::StrCat(info.name, caches == &mem.k_caches ? ".k" : ".v"), seed)};
      std::vector<float> v(part / DTypeSize(info.dtype));
      for (float& x : v) x = rng.Normal(1.0f);
      caches->push_back(Activations(info.dtype, v));
    }
  }
  return mem;
}

// Max |got - ref| / max |ref| over the f32 values of two byte images of `dtype`; NaN where the
// other is not (an element one side wrote and the other did not) counts as infinite.
struct Error {
  double worst = 0.0, ref_max = 0.0;
  int64_t ref_nans = 0;  // NaN elements of the reference (equal on both sides when no mismatch)
  bool nan_mismatch = false;
  double Relative() const {
    if (nan_mismatch) return INFINITY;
    return ref_max > 0.0 ? worst / ref_max : worst;
  }
};
float ValueAt(const std::vector<uint8_t>& bytes, DType dtype, size_t i) {
  if (dtype == DType::kBF16) {
    uint16_t bits;
    std::memcpy(&bits, bytes.data() + 2 * i, 2);
    return rt::Bf16ToF32(bits);
  }
  float v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}
Error Compare(const std::vector<uint8_t>& got, const std::vector<uint8_t>& ref, DType dtype) {
  Error e;
  if (dtype == DType::kI32) {
    e.nan_mismatch = got != ref;
    return e;
  }
  const size_t n = ref.size() / DTypeSize(dtype);
  for (size_t i = 0; i < n; ++i) {
    const float g = ValueAt(got, dtype, i), r = ValueAt(ref, dtype, i);
    if (std::isnan(g) || std::isnan(r)) {
      if (std::isnan(g) != std::isnan(r)) e.nan_mismatch = true;
      e.ref_nans += std::isnan(r) ? 1 : 0;
      continue;
    }
    e.worst = std::max(e.worst, std::fabs(static_cast<double>(g) - r));
    e.ref_max = std::max(e.ref_max, std::fabs(static_cast<double>(r)));
  }
  return e;
}

// The rows of moe_topk whose expert choice differs only between near-tied experts (within 1e-5
// of the selection's boundary, relative): not a kernel error, and their weights are not compared.
std::set<int64_t> NearTieRows(const std::vector<uint8_t>& logits, DType dtype,
                              const std::vector<uint8_t>& got, const std::vector<uint8_t>& ref,
                              int64_t experts, int64_t k, float logit_scale, int64_t tokens) {
  std::set<int64_t> rows;
  for (int64_t t = 0; t < tokens; ++t) {
    if (std::memcmp(got.data() + 4 * t * k, ref.data() + 4 * t * k, 4 * k) == 0) continue;
    std::vector<double> p(experts);
    for (int64_t e = 0; e < experts; ++e) {
      p[e] = static_cast<double>(ValueAt(logits, dtype, t * experts + e)) * logit_scale;
    }
    std::vector<double> sorted = p;
    std::sort(sorted.rbegin(), sorted.rend());
    const double boundary = sorted[k - 1], next = k < experts ? sorted[k] : -INFINITY;
    if (std::fabs(boundary - next) <= 1e-5 * std::max(1.0, std::fabs(boundary))) rows.insert(t);
  }
  return rows;
}

// The host executor's kernel runner of the CPU emulation (emulated_kernels.h).
rt::HostKernelRunner EmulatedRunner(int activation_precision) {
  return [activation_precision](abi::OpId op, absl::Span<const rt::HostArg> args, int blocks,
                                int shared_bytes) -> absl::Status {
    if (!RunEmulatedKernel(op, args.data(), blocks, shared_bytes, activation_precision)) {
      return absl::InternalError(absl::StrCat("no emulated kernel for op ", abi::Spec(op).op));
    }
    return absl::OkStatus();
  };
}

struct CaseResult {
  double error = 0.0;
  std::string note;
};

int RunGroup(const std::string& dir, const Module& m, const std::vector<OpCase>& all,
             const Options& options, int* cases_run) {
  const OpCase& call = *m.first;
  // The CUDA run needs the target's cubin; the others read only the plan, from that cubin
  // when it was built, else from the PTX build's plan (build_op_check.sh --target compute_90).
  std::string image = absl::StrCat(dir, "/", m.name, ".", options.target, ".cubin");
  if (options.device != "cuda" && !std::filesystem::exists(image)) {
    image = absl::StrCat(dir, "/", m.name, ".compute_90.ptx");
  }
  absl::StatusOr<rt::Artifact> artifact = rt::LoadArtifact(image);
  if (!artifact.ok()) {
    std::printf("%-24s LOAD FAILED: %s\n", m.name.c_str(), artifact.status().ToString().c_str());
    return static_cast<int>(m.cases.size());
  }
  const rt::Plan& plan = artifact->plan;
  // The checkpoint of the group's weights.
  std::vector<rt::OwnedTensor> tensors;
  for (const WeightSpec& w : m.weights) {
    rt::OwnedTensor t;
    t.name = w.name;
    t.dtype = w.dtype == DType::kF4E2M1FN ? "U8" : std::string(rt::SafetensorsDTypeName(w.dtype));
    t.shape = {w.dtype == DType::kF4E2M1FN ? w.elements / 2 : w.elements};
    const std::vector<uint8_t> bytes = WeightBytes(w, all[w.case_index].nan_codes, options.seed);
    t.bytes.assign(bytes.begin(), bytes.end());
    tensors.push_back(std::move(t));
  }
  char temp[] = "/tmp/spark-op-check-XXXXXX";
  if (mkdtemp(temp) == nullptr) {
    std::printf("%-24s cannot make a temporary directory\n", m.name.c_str());
    return static_cast<int>(m.cases.size());
  }
  const std::string checkpoint_path = absl::StrCat(temp, "/model.safetensors");
  absl::Status status = rt::WriteSafetensors(checkpoint_path, tensors);
  absl::StatusOr<std::unique_ptr<rt::Checkpoint>> checkpoint =
      status.ok() ? rt::Checkpoint::Open(checkpoint_path)
                  : absl::StatusOr<std::unique_ptr<rt::Checkpoint>>(status);
  std::vector<Run> runs(options.device == "host" ? 1 : 2);
  if (checkpoint.ok()) {
    absl::StatusOr<std::vector<rt::WeightData>> weights = rt::BindWeights(plan, **checkpoint);
    absl::StatusOr<std::unique_ptr<rt::Executor>> host =
        weights.ok() ? rt::CreateHostExecutor(plan, std::move(*weights))
                     : absl::StatusOr<std::unique_ptr<rt::Executor>>(weights.status());
    status = host.status();
    if (host.ok()) runs[0].executor = std::move(*host);
    if (status.ok() && options.device == "emulated") {
      absl::StatusOr<std::vector<rt::WeightData>> again = rt::BindWeights(plan, **checkpoint);
      // The CUDA executor uploads each weight to an allocation of its own; the emulated run reads
      // copies likewise (malloc's 16-byte alignment) instead of the checkpoint's packed bytes, so
      // that the kernels take the vector and tensor-core paths they take on the GPU.
      if (again.ok()) {
        for (rt::WeightData& w : *again) {
          auto copy = std::make_shared<std::vector<uint8_t>>(w.num_bytes);
          rt::CopyWeightBytes(w, copy->data());
          w.data = copy->data();
          w.parts.clear();
          w.computed = std::move(copy);
        }
      }
      const int precision = plan.activation_precision == DType::kBF16 ? abi::kActivationBF16
                                                                      : abi::kActivationF32;
      absl::StatusOr<std::unique_ptr<rt::Executor>> emulated =
          again.ok() ? rt::CreateHostExecutor(plan, std::move(*again), EmulatedRunner(precision))
                     : absl::StatusOr<std::unique_ptr<rt::Executor>>(again.status());
      status = emulated.status();
      if (emulated.ok()) runs[1].executor = std::move(*emulated);
    } else if (status.ok() && runs.size() == 2) {
      absl::StatusOr<std::vector<rt::DeviceInfo>> devices = rt::ListDevices();
      rt::CudaExecutorOptions cuda;
      if (devices.ok()) cuda.device = devices->front();
      cuda.use_graphs = false;
      absl::StatusOr<std::unique_ptr<rt::Executor>> gpu =
          devices.ok() ? rt::CreateCudaExecutor(*artifact, **checkpoint, cuda)
                       : absl::StatusOr<std::unique_ptr<rt::Executor>>(devices.status());
      status = gpu.status();
      if (gpu.ok()) runs[1].executor = std::move(*gpu);
    }
  } else {
    status = checkpoint.status();
  }
  std::vector<int64_t> capacities;
  for (const rt::KvCacheInfo& cache : plan.kv_caches) {
    capacities.push_back(rt::KvCapacity(cache, call.max_length, plan.max_tokens));
  }
  Memory mem;
  if (status.ok()) mem = InitialMemory(m, all, plan, capacities, options.seed);
  for (Run& run : runs) {
    if (!status.ok()) break;
    absl::StatusOr<std::unique_ptr<rt::SequenceState>> sequence =
        run.executor->NewSequence(call.max_length);
    status = sequence.status();
    if (!status.ok()) break;
    run.sequence = std::move(*sequence);
    for (size_t b = 0; b < m.buffers.size() && status.ok(); ++b) {
      status = Write(run, {rt::MemoryRegion::Kind::kArena, 0, plan.buffers[b].offset},
                     mem.buffers[b]);
    }
    for (size_t c = 0; c < plan.kv_caches.size() && status.ok(); ++c) {
      status = Write(run, {rt::MemoryRegion::Kind::kKCache, static_cast<int64_t>(c), 0},
                     mem.k_caches[c]);
      if (status.ok()) {
        status = Write(run, {rt::MemoryRegion::Kind::kVCache, static_cast<int64_t>(c), 0},
                       mem.v_caches[c]);
      }
    }
    if (status.ok()) status = run.executor->RunProgram(*run.sequence, call.tokens, call.soft_rows);
  }
  std::remove(checkpoint_path.c_str());
  rmdir(temp);
  if (!status.ok()) {
    std::printf("%-24s RUN FAILED (%zu cases): %s\n", m.name.c_str(), m.cases.size(),
                status.ToString().c_str());
    return static_cast<int>(m.cases.size());
  }
  // What the runs wrote.
  const auto read = [&](Run& run, const rt::MemoryRegion& region, uint64_t bytes) {
    std::vector<uint8_t> out(bytes);
    const absl::Status s = run.executor->CopyFromMemory(*run.sequence, region, absl::MakeSpan(out));
    if (!s.ok()) std::printf("  read failed: %s\n", s.ToString().c_str());
    return out;
  };
  int failures = 0;
  std::map<int, CaseResult> results;
  std::map<int, std::vector<std::string>> notes;
  for (const StepSpec& s : m.steps) {
    const int ci = s.case_index;
    CaseResult& result = results[ci];
    for (int i = 0; i < s.spec->num_args; ++i) {
      const ArgSpec& a = s.spec->args[i];
      const Binding& b = s.args[i];
      if (!abi::IsWrittenRole(a.role)) continue;
      std::vector<uint8_t> got, ref;
      DType dtype = DType::kF32;
      if (b.kind == Binding::kBuffer) {
        const BufferSpec& buffer = m.buffers[b.index];
        const rt::MemoryRegion region{rt::MemoryRegion::Kind::kArena, 0, plan.buffers[b.index].offset};
        ref = read(runs[0], region, BufferBytes(m, buffer));
        got = runs.size() == 2 ? read(runs[1], region, ref.size()) : ref;
        dtype = buffer.dtype;
      } else if (b.kind == Binding::kKCache || b.kind == Binding::kVCache) {
        const rt::MemoryRegion region{b.kind == Binding::kKCache ? rt::MemoryRegion::Kind::kKCache
                                                                 : rt::MemoryRegion::Kind::kVCache,
                                      b.index, 0};
        const rt::KvCacheInfo& info = plan.kv_caches[b.index];
        ref = read(runs[0], region, info.part_bytes(capacities[b.index]));
        got = runs.size() == 2 ? read(runs[1], region, ref.size()) : ref;
        dtype = info.dtype;
      } else {
        continue;
      }
      if (ci < 0) {  // the plan's own sample step: its tokens, exactly
        if (got != ref) notes[ci].push_back("tokens differ");
        result.error = got == ref ? 0.0 : INFINITY;
        continue;
      }
      const OpCase& c = all[ci];
      if (c.op == "moe_topk" && std::string(a.name) == "indices") {
        const BufferSpec& in = m.buffers[s.args[abi::ops::moe_topk::logits].index];
        const std::vector<uint8_t> logits = mem.buffers[s.args[abi::ops::moe_topk::logits].index];
        const std::set<int64_t> ties =
            NearTieRows(logits, in.dtype, got, ref, c.ints.at("num_experts"), c.ints.at("top_k"),
                        c.floats.at("logit_scale"), c.tokens);
        const int64_t k = c.ints.at("top_k");
        for (int64_t t = 0; t < c.tokens; ++t) {
          if (!ties.count(t) && std::memcmp(got.data() + 4 * t * k, ref.data() + 4 * t * k, 4 * k)) {
            result.error = INFINITY;
            notes[ci].push_back(absl::StrCat("experts differ at token ", t));
            break;
          }
        }
        if (!ties.empty()) notes[ci].push_back(absl::StrCat(ties.size(), " near-tie rows"));
        continue;
      }
      if (c.op == "quantize_nvfp4_rows") {  // packed codes and scales: byte for byte
        const auto diff = std::mismatch(got.begin(), got.end(), ref.begin());
        if (diff.first != got.end()) {
          result.error = INFINITY;
          notes[ci].push_back(absl::StrCat("packed rows differ at byte ", diff.first - got.begin()));
        }
        continue;
      }
      const Error e = Compare(got, ref, dtype);
      if (e.nan_mismatch) notes[ci].push_back(absl::StrCat(a.name, ": NaN on one side only"));
      result.error = std::max(result.error, e.Relative());
      if (c.nan_codes) {  // a case of NaN codes that produced no NaN would check nothing
        notes[ci].push_back(absl::StrCat(e.ref_nans, " NaN outputs"));
        if (e.ref_nans == 0) result.error = INFINITY;
      }
    }
  }
  std::vector<std::pair<int, CaseResult>> ordered(results.begin(), results.end());
  std::rotate(ordered.begin(), ordered.begin() + (ordered.front().first < 0 ? 1 : 0),
              ordered.end());  // the plan's own sample step last
  for (const auto& [ci, result] : ordered) {
    const bool own = ci < 0;
    const std::string op = own ? "sample" : all[ci].op;
    const std::string label = own ? absl::StrCat("the plan's own (T=", call.tokens, ")") : all[ci].label;
    const double tolerance = own ? 0.0 : all[ci].tolerance;
    const bool pass = result.error <= tolerance;
    failures += pass ? 0 : 1;
    ++*cases_run;
    std::printf("%-24s %-62s %10.3e %8.0e  %s%s%s\n", op.c_str(), label.c_str(), result.error,
                tolerance, pass ? "PASS" : "FAIL", notes[ci].empty() ? "" : "  ",
                absl::StrJoin(notes[ci], "; ").c_str());
  }
  return failures;
}

int Emit(const std::string& dir, const Options& options) {
  mkdir(dir.c_str(), 0755);  // (an existing one is fine)
  const std::vector<OpCase> all = AllCases(options.quick);
  const std::vector<Module> modules = Groups(all, options);
  std::ofstream list(dir + "/groups.txt");
  size_t cases = 0;
  for (const Module& m : modules) {
    std::ofstream out(absl::StrCat(dir, "/", m.name, ".mlir"));
    out << ModuleText(m);
    if (!out) {
      std::fprintf(stderr, "spark-op-check: cannot write %s/%s.mlir\n", dir.c_str(), m.name.c_str());
      return 1;
    }
    list << m.name << "\n";
    cases += m.cases.size();
  }
  std::printf("spark-op-check: %zu cases in %zu modules written to %s\n", cases, modules.size(),
              dir.c_str());
  return 0;
}

int RunAll(const std::string& dir, const Options& options) {
  const std::vector<OpCase> all = AllCases(options.quick);
  const std::vector<Module> modules = Groups(all, options);
  const std::string images =
      options.device == "cuda"       ? absl::StrCat(" (", options.target, " images)")
      : options.device == "emulated" ? " (the kernels' sources on the CPU emulation)"
                                     : "";
  std::printf("spark-op-check: %s executor%s against the host reference, seed %" PRIu64 "\n",
              options.device.c_str(), images.c_str(), options.seed);
  std::printf("%-24s %-62s %10s %8s  %s\n", "op", "case", "error", "tol", "result");
  int failures = 0, cases_run = 0;
  for (const Module& m : modules) {
    if (options.group.empty() || m.name == options.group) {
      failures += RunGroup(dir, m, all, options, &cases_run);
    }
  }
  std::printf("spark-op-check: %d cases, %d failed\n", cases_run, failures);
  return failures == 0 ? 0 : 1;
}

// The usage on stderr (exit 2), or on stdout for --help (exit 0).
int Usage(bool help = false) {
  std::fprintf(help ? stdout : stderr,
               "usage: spark-op-check emit DIR [--quick] [--only op,...]\n"
               "       spark-op-check run DIR [--device cuda|emulated|host] [--target sm_90a] [--quick] "
               "[--only op,...] [--seed N] [--group NAME]\n");
  return help ? 0 : 2;
}

}  // namespace
}  // namespace op_check
}  // namespace spark

int main(int argc, char** argv) {
  using namespace spark::op_check;
  // Line-buffered, so that a run stopped by a time limit leaves the lines of its finished cases.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return Usage(true);
  }
  if (argc < 3) return Usage();
  const std::string mode = argv[1], dir = argv[2];
  if (dir.empty() || dir[0] == '-') return Usage();  // an option where DIR belongs
  Options options;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--quick") {
      options.quick = true;
    } else if (a == "--only") {
      for (absl::string_view op : absl::StrSplit(value(), ',')) {
        if (spark::abi::FindOp(std::string(op).c_str()) == nullptr) {
          std::fprintf(stderr, "spark-op-check: --only: unknown op '%s'\n", std::string(op).c_str());
          return 2;
        }
        options.only.insert(std::string(op));
      }
    } else if (a == "--seed") {
      options.seed = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--device") {
      options.device = value();
      if (options.device != "cuda" && options.device != "host" && options.device != "emulated") {
        return Usage();
      }
    } else if (a == "--target") {
      options.target = value();
    } else if (a == "--group") {
      options.group = value();
    } else {
      return Usage();
    }
  }
  if (mode == "emit") return Emit(dir, options);
  if (mode == "run") return RunAll(dir, options);
  return Usage();
}

// GPU check of the kernel library against the host reference kernels
// (runtime/src/host_kernels.cc, the oracle of design.md "Host reference executor").
//
// For every op of kernel_abi.h: random inputs (fresh seed per run, printed; --seed=N repeats a
// run), outputs poisoned with NaN (0xff bytes) before each launch, the launch repeated with the
// natural grid and with small grids (grid-stride correctness), and the result compared with the
// host reference. Prints one row per case: op, shape, max abs error, max rel error
// (max|gpu - ref| / max|ref|), threshold, PASS/FAIL; exits 1 if any case fails.
//
//   kernel_check [--seed=N] [--quick] [--only=op,op,...]
// --quick shrinks the largest weights (for compute-sanitizer runs); --only runs just the named
// ops (kernel_abi.h op names). Built by run_kernel_checks.sh (GPU) or, with
// -DSPARK_KERNEL_EMULATION, by run_emulated_checks.sh (CPU emulation of the kernels' logic).
//
// Thresholds (relative, as defined above):
//   0      copies and integer ops (embedding, select_group, scatter_rows, kv_write,
//          mask_tokens, add, mul, scale, scalar_mul): bit-exact;
//   1e-5   gelu, gelu_mul, softcap, rms_norm, residual_rms_norm, rope, rms_norm_rope (f32 math,
//          ~1e-7 expected), attention_merge against the host merge of the same partial records;
//   1e-4   linear, linear_nvfp4, linear_fp8 (against the exact dequantisation), attention (its output, or its partial records when split over the KV length),
//          attention_merge against unsplit attention, moe_topk weights, moe_gate_up, moe_down
//          (and their _nvfp4 / _fp8 forms, against the exact dequantisation)
//          (f32 accumulation over up to a few thousand bf16 x f32 products vs the reference's
//          double accumulation; linear with T >= 16 runs the tensor-core path with split-bf16
//          activations, ~1e-5).
//   8e-3   [act=bf16] cases: the module's activations are bf16 values (common.cuh act()); the
//          reference is the host output rounded to bf16 and every output must be a bf16 value.
//   moe_topk indices must match exactly, except that a token whose selection differs only
//   between experts whose probabilities are within 1e-5 (relative) of each other is reported as
//   a near-tie and not counted as a failure (its weights are then not compared).
#if !defined(SPARK_KERNEL_EMULATION)  // emulation/cuda_emu.h is force-included instead
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "spark/runtime/host_kernels.h"
#include "spark/runtime/kernel_abi.h"
#include "test/gpu/kernel_wrappers.cuh"

namespace {

namespace host = spark::rt::host;
using bf16 = uint16_t;

#define CK(call)                                                                   \
  do {                                                                             \
    cudaError_t err_ = (call);                                                     \
    if (err_ != cudaSuccess) {                                                     \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,    \
                   cudaGetErrorString(err_));                                      \
      std::exit(2);                                                                \
    }                                                                              \
  } while (0)

// ---- random data ----
struct Rng {
  uint64_t s;
  uint64_t Next() {  // splitmix64
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
  float Uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(Uniform()); }
  float Normal(float sigma = 1.0f) {
    const double u1 = std::max(Uniform(), 1e-300), u2 = Uniform();
    return sigma * static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  int Int(int lo, int hi) { return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1)); }
};
Rng g_rng{0};

std::vector<float> Normals(size_t n, float sigma = 1.0f) {
  std::vector<float> v(n);
  for (float& f : v) f = g_rng.Normal(sigma);
  return v;
}
std::vector<float> Uniforms(size_t n, float lo, float hi) {
  std::vector<float> v(n);
  for (float& f : v) f = g_rng.Uniform(lo, hi);
  return v;
}
std::vector<bf16> Bf16Uniform(size_t n, float lo, float hi) {
  std::vector<bf16> v(n);
  for (bf16& b : v) b = spark::rt::F32ToBf16(g_rng.Uniform(lo, hi));
  return v;
}

// ---- KV cache elements: f32, or bf16 bits (kernel_abi.h KvCacheDType) ----
template <typename C>
constexpr int CacheDType() {
  return sizeof(C) == 2 ? spark::abi::kCacheBF16 : spark::abi::kCacheF32;
}
template <typename C>
const char* CacheName() {
  return sizeof(C) == 2 ? " cache=bf16" : "";
}
template <typename C>
std::vector<C> CacheOf(const std::vector<float>& v) {
  if constexpr (sizeof(C) == 2) {
    std::vector<C> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = spark::rt::F32ToBf16(v[i]);
    return out;
  } else {
    return v;
  }
}
std::vector<float> AsFloats(const std::vector<float>& v) { return v; }
std::vector<float> AsFloats(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = spark::rt::Bf16ToF32(v[i]);
  return out;
}

// ---- device buffers ----
// Allocates n elements plus slack so that a case can pass a deliberately misaligned pointer
// (`offset` elements past the allocation start).
template <typename T>
struct Dev {
  T* base = nullptr;
  T* p = nullptr;
  size_t n = 0;
  Dev() = default;
  explicit Dev(size_t count, size_t offset = 0) : n(count) {
    CK(cudaMalloc(&base, (count + 8) * sizeof(T)));
    p = base + offset;
  }
  Dev(const std::vector<T>& h, size_t offset = 0) : Dev(h.size(), offset) { Upload(h); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() {
    if (base) cudaFree(base);
  }
  void Upload(const std::vector<T>& h) {
    CK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  void Poison() { CK(cudaMemset(p, 0xff, n * sizeof(T))); }  // f32 NaN, i32 -1
  std::vector<T> Download() const {
    std::vector<T> h(n);
    CK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

int BlockSize(const char* op) {
  const spark::abi::OpSpec* spec = spark::abi::FindOp(op);
  if (spec == nullptr) {
    std::fprintf(stderr, "op %s is not in kernel_abi.h\n", op);
    std::exit(2);
  }
  return spec->block_size;
}

template <typename... P, typename... A>
void Launch(const char* op, void (*kernel)(P...), int grid, A... args) {
#if defined(SPARK_KERNEL_EMULATION)
  spk_emu::Launch(kernel, std::min(grid, 16), BlockSize(op), args...);
#else
  kernel<<<grid, BlockSize(op)>>>(static_cast<P>(args)...);
#endif
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
}

// Natural grid plus small grids (1 block, an odd count) for grid-stride coverage.
std::vector<int> Grids(int64_t natural, bool small_too = true) {
  const int nat = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(natural, 1 << 20)));
  std::vector<int> g = {nat};
  if (small_too) {
    if (nat != 1) g.push_back(1);
    if (nat > 5) g.push_back(5);
  }
  return g;
}
int64_t Ceil(int64_t a, int64_t b) { return (a + b - 1) / b; }
// The MoE path spark-compile gives a call of T tokens (kernel_abi.h MoePathFor).
int MoePath(int T) { return spark::abi::MoePathFor(T); }
constexpr int kMaxGrid = spark::abi::kMaxLaunchBlocks;  // spark-compile's cap on launch grids

// ---- comparison and the result table ----
struct Err {
  double abs = 0.0, ref_max = 0.0;
  double Rel() const { return ref_max > 0.0 ? abs / ref_max : abs; }
  void Merge(const Err& o) {
    abs = std::max(abs, o.abs);
    ref_max = std::max(ref_max, o.ref_max);
  }
};

template <typename T>
Err Compare(const std::vector<T>& got, const std::vector<T>& ref) {
  Err e;
  if (got.size() != ref.size()) {
    e.abs = INFINITY;
    return e;
  }
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = static_cast<double>(got[i]), r = static_cast<double>(ref[i]);
    const double d = std::isnan(g) != std::isnan(r) ? INFINITY : (std::isnan(g) ? 0.0 : std::fabs(g - r));
    e.abs = std::max(e.abs, d);
    if (!std::isnan(r)) e.ref_max = std::max(e.ref_max, std::fabs(r));
  }
  return e;
}

struct Row {
  std::string op, shape;
  Err err;
  double threshold;
  std::string note;
  bool Pass() const { return std::isfinite(err.abs) && err.Rel() <= threshold; }
};
std::vector<Row> g_rows;

void Report(const char* op, const std::string& shape, const Err& e, double threshold,
            const std::string& note = "") {
  g_rows.push_back({op, shape, e, threshold, note});
  const Row& r = g_rows.back();
  std::printf("%-17s %-62s %10.3e %10.3e %8.0e  %s%s%s\n", op, shape.c_str(), e.abs, e.Rel(),
              threshold, r.Pass() ? "PASS" : "FAIL", note.empty() ? "" : "  ", note.c_str());
  std::fflush(stdout);
}

std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

bool g_quick = false;
std::vector<std::string> g_only;  // --only=op,op: run just these ops

bool Enabled(const char* op) {
  return g_only.empty() || std::find(g_only.begin(), g_only.end(), op) != g_only.end();
}

// ================================================================================================
// Cases
// ================================================================================================

void CheckEmbedding(int T, int vocab, int dim, bool misaligned) {
  if (!Enabled("embedding")) return;
  std::vector<int> ids(T);
  for (int t = 0; t < T; ++t) ids[t] = g_rng.Int(0, vocab - 1);
  if (T > 3) {  // out-of-range ids give zero rows
    ids[1] = -1;
    ids[2] = vocab;
    ids[3] = vocab - 1;
  }
  const float scale = 39.25f;
  const auto table = Bf16Uniform(static_cast<size_t>(vocab) * dim, -0.1f, 0.1f);
  std::vector<float> ref(static_cast<size_t>(T) * dim);
  host::Embedding(ids.data(), table.data(), ref.data(), T, vocab, dim, scale);
  Dev<int> d_ids(ids);
  Dev<bf16> d_table(table, misaligned ? 1 : 0);
  Dev<float> d_y(ref.size(), misaligned ? 1 : 0);
  Err e;
  for (int g : Grids(Ceil(static_cast<int64_t>(T) * dim / 8, 256))) {
    d_y.Poison();
    Launch("embedding", check_embedding, g, d_ids.p, d_table.p, d_y.p, T, vocab, dim, scale);
    e.Merge(Compare(d_y.Download(), ref));
  }
  Report("embedding", Fmt("T=%d vocab=%d dim=%d%s", T, vocab, dim, misaligned ? " misaligned" : ""),
         e, 0.0);
}

void CheckRmsNorm(int T, int groups, int cols, bool weight, bool in_place, bool misaligned) {
  if (!Enabled("rms_norm")) return;
  const size_t n = static_cast<size_t>(T) * groups * cols;
  const auto x = Normals(n, 2.0f);
  const auto w = Bf16Uniform(cols, 0.5f, 1.5f);
  const float eps = 1e-6f;
  std::vector<float> ref(n);
  host::RmsNorm(x.data(), weight ? w.data() : nullptr, ref.data(), T, groups, cols, eps);
  Dev<float> d_x(x, misaligned ? 1 : 0);
  Dev<bf16> d_w(w);
  Dev<float> d_y(n);
  Err e;
  for (int g : Grids(static_cast<int64_t>(T) * groups)) {
    float* y = d_y.p;
    if (in_place) {
      d_x.Upload(x);
      y = d_x.p;
    } else {
      d_y.Poison();
    }
    Launch("rms_norm", check_rms_norm, g, d_x.p, weight ? d_w.p : nullptr, y, T, groups, cols, eps);
    e.Merge(Compare(in_place ? d_x.Download() : d_y.Download(), ref));
  }
  Report("rms_norm",
         Fmt("T=%d groups=%d cols=%d%s%s%s", T, groups, cols, weight ? "" : " no-weight",
             in_place ? " in-place" : "", misaligned ? " misaligned" : ""),
         e, 1e-5);
}

// What y of a fused norm case is: its own buffer, or the x / residual input (in place).
enum class Alias { kNone, kX, kResidual };
// Deliberate misalignment of a case's buffers (bit mask).
constexpr int kMisActivations = 1;  // f32 inputs and output one element past 16-byte alignment
constexpr int kMisWeight = 2;       // bf16 weight one element past 8-byte alignment

void CheckResidualRmsNorm(int T, int cols, bool weight, Alias alias, int misalign) {
  if (!Enabled("residual_rms_norm")) return;
  const size_t n = static_cast<size_t>(T) * cols;
  const auto x = Normals(n, 2.0f);
  const auto res = Normals(n, 8.0f);
  const auto w = Bf16Uniform(cols, 0.5f, 1.5f);
  const float eps = 1e-6f;
  std::vector<float> ref(n);
  host::ResidualRmsNorm(x.data(), weight ? w.data() : nullptr, res.data(), ref.data(), T, cols,
                        eps);
  const size_t off = (misalign & kMisActivations) ? 1 : 0;
  Dev<float> d_x(x, off), d_r(res, off), d_y(n, off);
  Dev<bf16> d_w(w, (misalign & kMisWeight) ? 1 : 0);
  Err e;
  for (int g : Grids(T)) {
    float* y = d_y.p;
    if (alias == Alias::kX) {
      d_x.Upload(x);
      y = d_x.p;
    } else if (alias == Alias::kResidual) {
      d_r.Upload(res);
      y = d_r.p;
    } else {
      d_y.Poison();
    }
    Launch("residual_rms_norm", check_residual_rms_norm, g, d_x.p, weight ? d_w.p : nullptr, d_r.p,
           y, T, cols, eps);
    const Dev<float>& out = alias == Alias::kX ? d_x : (alias == Alias::kResidual ? d_r : d_y);
    e.Merge(Compare(out.Download(), ref));
  }
  Report("residual_rms_norm",
         Fmt("T=%d cols=%d%s%s%s%s", T, cols, weight ? "" : " no-weight",
             alias == Alias::kX ? " y=x" : (alias == Alias::kResidual ? " y=residual" : ""),
             (misalign & kMisActivations) ? " misaligned" : "",
             (misalign & kMisWeight) ? " misaligned-weight" : ""),
         e, 1e-5);
}

// ---- bf16 activations (kernel_abi.h ActivationPrecision) ----
// The kernels' activation precision is bf16 while one of these lives (launches made in its scope
// read and write their activations as bf16; workspaces stay f32), f32 again after.
class Bf16Activations {
 public:
  Bf16Activations() { Set(spark::abi::kActivationBF16); }
  ~Bf16Activations() { Set(spark::abi::kActivationF32); }
  Bf16Activations(const Bf16Activations&) = delete;
  Bf16Activations& operator=(const Bf16Activations&) = delete;

 private:
  static void Set(int precision) {
#if defined(SPARK_KERNEL_EMULATION)
    spark_activation_precision = precision;
#else
    CK(cudaMemcpyToSymbol(spark_activation_precision, &precision, sizeof(precision)));
#endif
  }
};
std::vector<float> RoundedToBf16(std::vector<float> v) {
  for (float& f : v) f = spark::rt::Bf16ToF32(spark::rt::F32ToBf16(f));
  return v;
}
std::vector<bf16> Bf16Bits(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = spark::rt::F32ToBf16(v[i]);
  return out;
}
std::vector<float> Widened(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = spark::rt::Bf16ToF32(v[i]);
  return out;
}
// A bf16-activation case: the kernel's inputs are bf16 (stored as such: Dev<bf16>) and its
// reference is the host kernel's output, on the same values widened to f32, rounded to bf16.
// Outputs near a rounding boundary may land one bf16 step apart (2^-8 of the element, <= 3.9e-3
// of max|ref|): threshold 8e-3.
void ReportBf16(const char* op, const std::string& shape, const std::vector<bf16>& got,
                const std::vector<float>& ref) {
  Report(op, shape + " [act=bf16]", Compare(Widened(got), RoundedToBf16(ref)), 8e-3);
}

void CheckLinearBf16Act(int T, int out, int in) {
  if (!Enabled("linear")) return;
  const auto x = Bf16Bits(Normals(static_cast<size_t>(T) * in));
  const auto w = Bf16Uniform(static_cast<size_t>(out) * in, -0.05f, 0.05f);
  std::vector<float> ref(static_cast<size_t>(T) * out);
  host::Linear(Widened(x).data(), w.data(), ref.data(), T, out, in);
  Dev<bf16> d_x(x);
  Dev<bf16> d_w(w);
  Dev<bf16> d_y(ref.size());
  const bool mma = T >= 16 && in % 8 == 0;
  d_y.Poison();
  {
    const Bf16Activations bf16_activations;
    const int grid = static_cast<int>(mma ? Ceil(T, 64) * Ceil(out, 128) : Ceil(out, 8));
    Launch("linear", check_linear, grid, d_x.p, d_w.p, d_y.p, T, out, in);
  }
  ReportBf16("linear", Fmt("T=%d out=%d in=%d [%s]", T, out, in, mma ? "mma" : "gemv"),
             d_y.Download(), ref);
}

void CheckResidualRmsNormBf16Act(int T, int cols) {
  if (!Enabled("residual_rms_norm")) return;
  const auto x = Bf16Bits(Normals(static_cast<size_t>(T) * cols));
  const auto res = Bf16Bits(Normals(static_cast<size_t>(T) * cols));
  const auto w = Bf16Uniform(cols, 0.5f, 1.5f);
  std::vector<float> ref(x.size());
  host::ResidualRmsNorm(Widened(x).data(), w.data(), Widened(res).data(), ref.data(), T, cols,
                        1e-6f);
  Dev<bf16> d_x(x), d_res(res), d_y(ref.size());
  Dev<bf16> d_w(w);
  d_y.Poison();
  {
    const Bf16Activations bf16_activations;
    Launch("residual_rms_norm", check_residual_rms_norm, T, d_x.p, d_w.p, d_res.p, d_y.p, T, cols,
           1e-6f);
  }
  ReportBf16("residual_rms_norm", Fmt("T=%d cols=%d", T, cols), d_y.Download(), ref);
}

void CheckGeluMulBf16Act(int T, int cols) {
  if (!Enabled("gelu_mul")) return;
  const auto a = Bf16Bits(Normals(static_cast<size_t>(T) * cols));
  const auto b = Bf16Bits(Normals(static_cast<size_t>(T) * cols));
  std::vector<float> ref(a.size());
  host::GeluMul(Widened(a).data(), Widened(b).data(), ref.data(), T, cols);
  Dev<bf16> d_a(a), d_b(b), d_y(ref.size());
  d_y.Poison();
  {
    const Bf16Activations bf16_activations;
    const int grid = static_cast<int>(Ceil(static_cast<int64_t>(T) * cols, 1024));
    Launch("gelu_mul", check_gelu_mul, grid, d_a.p, d_b.p, d_y.p, T, cols);
  }
  ReportBf16("gelu_mul", Fmt("T=%d cols=%d", T, cols), d_y.Download(), ref);
}

void CheckEmbeddingBf16Act(int T, int vocab, int dim) {
  if (!Enabled("embedding")) return;
  const auto table = Bf16Uniform(static_cast<size_t>(vocab) * dim, -1.0f, 1.0f);
  std::vector<int> ids(T);
  for (int t = 0; t < T; ++t) ids[t] = g_rng.Int(0, vocab - 1);
  std::vector<float> ref(static_cast<size_t>(T) * dim);
  host::Embedding(ids.data(), table.data(), ref.data(), T, vocab, dim, 3.0f);
  Dev<int> d_ids(ids);
  Dev<bf16> d_table(table), d_y(ref.size());
  d_y.Poison();
  {
    const Bf16Activations bf16_activations;
    Launch("embedding", check_embedding, T, d_ids.p, d_table.p, d_y.p, T, vocab, dim, 3.0f);
  }
  ReportBf16("embedding", Fmt("T=%d vocab=%d dim=%d", T, vocab, dim), d_y.Download(), ref);
}

void CheckRmsNormRopeBf16Act(int T, int heads, int head_dim, int rotated, float theta) {
  if (!Enabled("rms_norm_rope")) return;
  const size_t n = static_cast<size_t>(T) * heads * head_dim;
  const auto x = Bf16Bits(Normals(n, 2.0f));
  const auto w = Bf16Uniform(head_dim, 0.5f, 1.5f);
  std::vector<int> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = 100 + 7 * t;
  std::vector<float> ref(n);
  host::RmsNormRope(Widened(x).data(), w.data(), pos.data(), ref.data(), T, heads, head_dim,
                    rotated, theta, 1.0f, 1e-6f);
  Dev<bf16> d_x(x), d_w(w), d_y(n);
  Dev<int> d_pos(pos);
  d_y.Poison();
  {
    const Bf16Activations bf16_activations;
    Launch("rms_norm_rope", check_rms_norm_rope, T, d_x.p, d_w.p, d_pos.p, d_y.p, T, heads,
           head_dim, rotated, theta, 1.0f, 1e-6f);
  }
  ReportBf16("rms_norm_rope", Fmt("T=%d heads=%d hd=%d rot=%d", T, heads, head_dim, rotated),
             d_y.Download(), ref);
}

// q and y bf16 (f32 cache); with max_splits > 1 the partials (a workspace) stay f32 and the merge
// writes bf16.
void CheckAttentionBf16Act(int T, int q_heads, int kv_heads, int head_dim, int capacity,
                           int window, int pos0, int max_splits, int split_rows) {
  if (!Enabled("attention")) return;
  const size_t kv_n = static_cast<size_t>(capacity) * kv_heads * head_dim;
  const size_t q_n = static_cast<size_t>(T) * q_heads * head_dim;
  const auto q = Bf16Bits(Normals(q_n, 0.1f));
  const auto kc = Normals(kv_n), vc = Normals(kv_n);
  std::vector<int> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = pos0 + t;
  std::vector<float> ref(q_n);
  host::Attention(Widened(q).data(), pos.data(), kc.data(), vc.data(), ref.data(), nullptr, T,
                  q_heads, kv_heads, head_dim, capacity, window, 1.0f, 1, 0,
                  spark::abi::kCacheF32, nullptr);
  const int splits = spark::abi::AttentionSplits(T, max_splits, split_rows);
  const size_t rec = spark::abi::AttentionRecordFloats(head_dim);
  Dev<bf16> d_q(q), d_y(q_n);
  Dev<float> d_kc(kc), d_vc(vc), d_parts(std::max<size_t>(split_rows * q_heads * rec, 1));
  Dev<int> d_pos(pos);
  d_y.Poison();
  {
    const Bf16Activations bf16_activations;
    Launch("attention", check_attention, static_cast<int>(T * q_heads * splits), d_q.p, d_pos.p,
           d_kc.p, d_vc.p, d_y.p, max_splits > 1 ? d_parts.p : static_cast<float*>(nullptr), T,
           q_heads, kv_heads, head_dim, capacity, window, 1.0f, max_splits, split_rows,
           static_cast<int>(spark::abi::kCacheF32), static_cast<const int*>(nullptr));
    if (splits > 1) {
      Launch("attention_merge", check_attention_merge, T * q_heads, d_parts.p, d_y.p, T, q_heads,
             head_dim, max_splits, split_rows);
    }
  }
  ReportBf16("attention",
             Fmt("T=%d q/kv=%d/%d hd=%d cap=%d win=%d pos=%d.. split=%d", T, q_heads, kv_heads,
                 head_dim, capacity, window, pos0, splits),
             d_y.Download(), ref);
}

void CheckMoeTopKBf16Act(int T, int E, int K) {
  if (!Enabled("moe_topk")) return;
  const float logit_scale = 1.0f / std::sqrt(2816.0f);
  const auto logits = Bf16Bits(Normals(static_cast<size_t>(T) * E, 1.5f / logit_scale));
  const auto pes = Bf16Uniform(E, 0.5f, 1.5f);
  std::vector<float> wref(static_cast<size_t>(T) * K);
  std::vector<int> iref(static_cast<size_t>(T) * K);
  host::MoeTopK(Widened(logits).data(), pes.data(), wref.data(), iref.data(), T, E, K,
                logit_scale);
  Dev<bf16> d_logits(logits), d_pes(pes), d_w(wref.size());
  Dev<int> d_i(iref.size());
  d_w.Poison();
  {
    const Bf16Activations bf16_activations;
    Launch("moe_topk", check_moe_topk, T, d_logits.p, d_pes.p, d_w.p, d_i.p, T, E, K,
           logit_scale);
  }
  // bf16 logits make exact ties likely: compare the weights only where the selection is equal.
  const auto idx = d_i.Download();
  const auto w = Widened(d_w.Download());
  std::vector<float> got, want;
  int differing = 0;
  for (int t = 0; t < T; ++t) {
    if (!std::equal(idx.begin() + t * K, idx.begin() + (t + 1) * K, iref.begin() + t * K)) {
      ++differing;
      continue;
    }
    got.insert(got.end(), w.begin() + t * K, w.begin() + (t + 1) * K);
    want.insert(want.end(), wref.begin() + t * K, wref.begin() + (t + 1) * K);
  }
  Err e = Compare(got, RoundedToBf16(want));
  if (differing > T / 8) e.abs = INFINITY;  // more than rare ties
  Report("moe_topk", Fmt("T=%d experts=%d top_k=%d [act=bf16]", T, E, K), e, 8e-3,
         differing > 0 ? Fmt("%d token(s) with another selection", differing) : "");
}

void CheckLinear(int T, int out, int in, bool misaligned, bool small_grids = true) {
  if (!Enabled("linear")) return;
  const auto x = Normals(static_cast<size_t>(T) * in);
  const auto w = Bf16Uniform(static_cast<size_t>(out) * in, -0.05f, 0.05f);
  std::vector<float> ref(static_cast<size_t>(T) * out);
  host::Linear(x.data(), w.data(), ref.data(), T, out, in);
  Dev<float> d_x(x, misaligned ? 1 : 0);
  Dev<bf16> d_w(w);
  Dev<float> d_y(ref.size());
  const bool mma = T >= 16 && in % 8 == 0 && !misaligned;
  const int64_t natural = mma ? Ceil(T, 64) * Ceil(out, 128) : Ceil(out, 8);
  Err e;
  for (int g : Grids(natural, small_grids)) {
    d_y.Poison();
    Launch("linear", check_linear, g, d_x.p, d_w.p, d_y.p, T, out, in);
    e.Merge(Compare(d_y.Download(), ref));
  }
  const char* path = mma ? "mma" : (in % 8 == 0 && !misaligned ? "gemv" : "gemv-scalar");
  Report("linear", Fmt("T=%d out=%d in=%d [%s]%s", T, out, in, path, misaligned ? " misaligned" : ""),
         e, 1e-4);
}

// ---- quantized linears: random codes and scales, against the host's exact dequantisation ----
std::vector<uint8_t> RandomBytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(g_rng.Next());
  return v;
}
// e4m3 block scales between 2^-4 and 2 (exponent fields 3 .. 8), positive and finite.
std::vector<uint8_t> RandomE4M3Scales(size_t n) {
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>((g_rng.Int(3, 8) << 3) | g_rng.Int(0, 7));
  return v;
}
// e4m3 elements of any finite value (NaN codes 0x7f / 0xff replaced).
std::vector<uint8_t> RandomE4M3Elements(size_t n) {
  std::vector<uint8_t> v = RandomBytes(n);
  for (uint8_t& b : v) {
    if ((b & 0x7f) == 0x7f) b = static_cast<uint8_t>(b & 0xbf);
  }
  return v;
}
const char* LinearPath(int T, bool vec) { return !vec ? "gemv-scalar" : T >= 16 ? "mma" : "gemv"; }

// What a quantized linear case varies: the token count, the shape, bf16 activations, and a
// block-scale pointer one byte off (NVFP4: the scalar path).
void CheckLinearNvfp4(int T, int out, int in, bool bf16_act, bool odd_scale = false) {
  if (!Enabled("linear_nvfp4")) return;
  const auto w = RandomBytes(static_cast<size_t>(out) * in / 2);
  const auto bs = RandomE4M3Scales(static_cast<size_t>(out) * in / 16);
  const std::vector<float> ts = {g_rng.Uniform(0.002f, 0.02f)};
  auto xf = Normals(static_cast<size_t>(T) * in);
  if (bf16_act) xf = RoundedToBf16(xf);
  std::vector<float> ref(static_cast<size_t>(T) * out);
  host::LinearNvfp4(xf.data(), w.data(), bs.data(), ts.data(), ref.data(), T, out, in);
  Dev<uint8_t> d_w(w), d_bs(bs, odd_scale ? 1 : 0);
  Dev<float> d_ts(ts);
  const bool vec = in % 32 == 0 && !odd_scale;
  const int64_t natural = vec && T >= 16 ? Ceil(T, 64) * Ceil(out, 128) : Ceil(out, 8);
  const std::string shape = Fmt("T=%d out=%d in=%d [%s]%s", T, out, in, LinearPath(T, vec),
                                odd_scale ? " odd-scale" : "");
  if (bf16_act) {
    Dev<bf16> d_x(Bf16Bits(xf)), d_y(ref.size());
    d_y.Poison();
    const Bf16Activations bf16_activations;
    Launch("linear_nvfp4", check_linear_nvfp4, static_cast<int>(natural), d_x.p, d_w.p, d_bs.p,
           d_ts.p, d_y.p, T, out, in);
    ReportBf16("linear_nvfp4", shape, d_y.Download(), ref);
    return;
  }
  Dev<float> d_x(xf), d_y(ref.size());
  Err e;
  for (int g : Grids(natural)) {
    d_y.Poison();
    Launch("linear_nvfp4", check_linear_nvfp4, g, d_x.p, d_w.p, d_bs.p, d_ts.p, d_y.p, T, out,
           in);
    e.Merge(Compare(d_y.Download(), ref));
  }
  Report("linear_nvfp4", shape, e, 1e-4);
}

// nan_codes: a few elements are NaN codes (0x7f, 0xff), whose rows must come out NaN (the GEMV's
// fast decode would make them finite: it must see them and take the exact one).
void CheckLinearFp8(int T, int out, int in, bool per_row, bool bf16_act, bool nan_codes = false) {
  if (!Enabled("linear_fp8")) return;
  auto w = RandomE4M3Elements(static_cast<size_t>(out) * in);
  if (nan_codes)
    for (int i = 0; i < 3; ++i)
      w[static_cast<size_t>(g_rng.Int(0, out - 1)) * in + g_rng.Int(0, in - 1)] = i % 2 ? 0xff : 0x7f;
  const int scale_count = per_row ? out : 1;
  const auto scale = Uniforms(scale_count, 1e-4f, 1e-3f);
  auto xf = Normals(static_cast<size_t>(T) * in);
  if (bf16_act) xf = RoundedToBf16(xf);
  std::vector<float> ref(static_cast<size_t>(T) * out);
  host::LinearFp8(xf.data(), w.data(), scale.data(), ref.data(), T, out, in, scale_count);
  Dev<uint8_t> d_w(w);
  Dev<float> d_s(scale);
  const bool vec = in % 16 == 0;
  const int64_t natural = vec && T >= 16 ? Ceil(T, 64) * Ceil(out, 128) : Ceil(out, 8);
  const std::string shape = Fmt("T=%d out=%d in=%d [%s]%s%s", T, out, in, LinearPath(T, vec),
                                per_row ? " per-row scale" : "", nan_codes ? " NaN codes" : "");
  if (bf16_act) {
    Dev<bf16> d_x(Bf16Bits(xf)), d_y(ref.size());
    d_y.Poison();
    const Bf16Activations bf16_activations;
    Launch("linear_fp8", check_linear_fp8, static_cast<int>(natural), d_x.p, d_w.p, d_s.p, d_y.p,
           T, out, in, scale_count);
    ReportBf16("linear_fp8", shape, d_y.Download(), ref);
    return;
  }
  Dev<float> d_x(xf), d_y(ref.size());
  Err e;
  for (int g : Grids(natural)) {
    d_y.Poison();
    Launch("linear_fp8", check_linear_fp8, g, d_x.p, d_w.p, d_s.p, d_y.p, T, out, in,
           scale_count);
    e.Merge(Compare(d_y.Download(), ref));
  }
  Report("linear_fp8", shape, e, 1e-4);
}

enum class Ew { kAdd, kMul, kScale, kScalarMul, kGelu, kGeluMul, kSoftcap };

const char* EwName(Ew op) {
  switch (op) {
    case Ew::kAdd: return "add";
    case Ew::kMul: return "mul";
    case Ew::kScale: return "scale";
    case Ew::kScalarMul: return "scalar_mul";
    case Ew::kGelu: return "gelu";
    case Ew::kGeluMul: return "gelu_mul";
    case Ew::kSoftcap: return "softcap";
  }
  return "?";
}

void CheckElementwise(Ew op, int T, int cols, bool misaligned, bool in_place = false) {
  if (!Enabled(EwName(op))) return;
  const size_t n = static_cast<size_t>(T) * cols;
  const float sigma = op == Ew::kSoftcap ? 40.0f : 3.0f;
  const auto a = Normals(n, sigma), b = Normals(n);
  const std::vector<bf16> s = {spark::rt::F32ToBf16(0.71875f)};
  const float factor = 0.3f, cap = 30.0f;
  std::vector<float> ref(n);
  const char* name = "";
  double thr = 0.0;
  switch (op) {
    case Ew::kAdd: name = "add"; host::Add(a.data(), b.data(), ref.data(), T, cols); break;
    case Ew::kMul: name = "mul"; host::Mul(a.data(), b.data(), ref.data(), T, cols); break;
    case Ew::kScale: name = "scale"; host::Scale(a.data(), ref.data(), T, cols, factor); break;
    case Ew::kScalarMul:
      name = "scalar_mul";
      host::ScalarMul(a.data(), s.data(), ref.data(), T, cols);
      break;
    case Ew::kGelu: name = "gelu"; thr = 1e-5; host::Gelu(a.data(), ref.data(), T, cols); break;
    case Ew::kGeluMul:
      name = "gelu_mul";
      thr = 1e-5;
      host::GeluMul(a.data(), b.data(), ref.data(), T, cols);
      break;
    case Ew::kSoftcap:
      name = "softcap";
      thr = 1e-5;
      host::Softcap(a.data(), ref.data(), T, cols, cap);
      break;
  }
  const size_t off = misaligned ? 1 : 0;
  Dev<float> d_a(a, off), d_b(b, off), d_y(n, off);
  Dev<bf16> d_s(s);
  Err e;
  for (int g : Grids(Ceil(static_cast<int64_t>(n) / 4 + 1, 256))) {
    float* y = d_y.p;
    if (in_place) {
      d_a.Upload(a);
      y = d_a.p;
    } else {
      d_y.Poison();
    }
    switch (op) {
      case Ew::kAdd: Launch(name, check_add, g, d_a.p, d_b.p, y, T, cols); break;
      case Ew::kMul: Launch(name, check_mul, g, d_a.p, d_b.p, y, T, cols); break;
      case Ew::kScale: Launch(name, check_scale, g, d_a.p, y, T, cols, factor); break;
      case Ew::kScalarMul: Launch(name, check_scalar_mul, g, d_a.p, d_s.p, y, T, cols); break;
      case Ew::kGelu: Launch(name, check_gelu, g, d_a.p, y, T, cols); break;
      case Ew::kGeluMul: Launch(name, check_gelu_mul, g, d_a.p, d_b.p, y, T, cols); break;
      case Ew::kSoftcap: Launch(name, check_softcap, g, d_a.p, y, T, cols, cap); break;
    }
    e.Merge(Compare(in_place ? d_a.Download() : d_y.Download(), ref));
  }
  Report(name, Fmt("T=%d cols=%d%s%s", T, cols, misaligned ? " misaligned" : "",
                   in_place ? " in-place" : ""),
         e, thr);
}

void CheckRope(int T, int heads, int head_dim, int rotated, float theta, int pos0, bool in_place) {
  if (!Enabled("rope")) return;
  const size_t n = static_cast<size_t>(T) * heads * head_dim;
  const auto x = Normals(n);
  std::vector<int> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = pos0 + t;
  const float factor = 1.0f;
  std::vector<float> ref(n);
  host::Rope(x.data(), pos.data(), ref.data(), T, heads, head_dim, rotated, theta, factor);
  Dev<float> d_x(x), d_y(n);
  Dev<int> d_pos(pos);
  Err e;
  for (int g : Grids(T)) {
    float* y = d_y.p;
    if (in_place) {
      d_x.Upload(x);
      y = d_x.p;
    } else {
      d_y.Poison();
    }
    Launch("rope", check_rope, g, d_x.p, d_pos.p, y, T, heads, head_dim, rotated, theta, factor);
    e.Merge(Compare(in_place ? d_x.Download() : d_y.Download(), ref));
  }
  Report("rope",
         Fmt("T=%d heads=%d hd=%d rot=%d theta=%g pos=%d..%d%s", T, heads, head_dim, rotated,
             theta, pos0, pos0 + T - 1, in_place ? " in-place" : ""),
         e, 1e-5);
}

// Per-head q/k RMSNorm + RoPE. Positions are random in [0, max_pos] (the last token at max_pos).
void CheckRmsNormRope(int T, int heads, int head_dim, int rotated, float theta, float factor,
                      bool weight, bool in_place, bool misaligned, int max_pos) {
  if (!Enabled("rms_norm_rope")) return;
  const size_t n = static_cast<size_t>(T) * heads * head_dim;
  const auto x = Normals(n, 2.0f);
  const auto w = Bf16Uniform(head_dim, 0.5f, 1.5f);
  std::vector<int> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = g_rng.Int(0, max_pos);
  pos[T - 1] = max_pos;
  const float eps = 1e-6f;
  std::vector<float> ref(n);
  host::RmsNormRope(x.data(), weight ? w.data() : nullptr, pos.data(), ref.data(), T, heads,
                    head_dim, rotated, theta, factor, eps);
  const size_t off = misaligned ? 1 : 0;
  Dev<float> d_x(x, off), d_y(n, off);
  Dev<bf16> d_w(w, off);
  Dev<int> d_pos(pos);
  Err e;
  for (int g : Grids(T)) {
    float* y = d_y.p;
    if (in_place) {
      d_x.Upload(x);
      y = d_x.p;
    } else {
      d_y.Poison();
    }
    Launch("rms_norm_rope", check_rms_norm_rope, g, d_x.p, weight ? d_w.p : nullptr, d_pos.p, y, T,
           heads, head_dim, rotated, theta, factor, eps);
    e.Merge(Compare(in_place ? d_x.Download() : d_y.Download(), ref));
  }
  Report("rms_norm_rope",
         Fmt("T=%d heads=%d hd=%d rot=%d theta=%g%s pos<=%d%s%s%s", T, heads, head_dim, rotated,
             theta, factor == 1.0f ? "" : Fmt(" factor=%g", factor).c_str(), max_pos,
             weight ? "" : " no-weight", in_place ? " in-place" : "",
             misaligned ? " misaligned" : ""),
         e, 1e-5);
}

// C: the cache element (float, or bf16 bits: the kernel rounds to nearest even, exactly as the
// host reference does, so the caches must be equal bit for bit either way). cache_offset > 0
// moves both caches that many elements off their 16-byte aligned allocation (bf16: 4 = 8-byte
// aligned, the vector path; 1 = 2-byte aligned, the scalar path).
template <typename C = float>
void CheckKvWrite(int T, int kv_heads, int head_dim, int capacity, int pos0, int cache_offset = 0) {
  if (!Enabled("kv_write")) return;
  const size_t row = static_cast<size_t>(kv_heads) * head_dim;
  const auto k = Normals(T * row), v = Normals(T * row);
  const auto kc0 = CacheOf<C>(Normals(capacity * row)), vc0 = CacheOf<C>(Normals(capacity * row));
  std::vector<int> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = pos0 + t;
  if (T > 2) pos[T - 1] = -1;  // negative positions are skipped
  std::vector<C> kref = kc0, vref = vc0;
  host::KvWrite(k.data(), v.data(), pos.data(), kref.data(), vref.data(), T, kv_heads, head_dim,
                capacity, CacheDType<C>());
  Dev<float> d_k(k), d_v(v);
  Dev<C> d_kc(kc0.size(), cache_offset), d_vc(vc0.size(), cache_offset);
  Dev<int> d_pos(pos);
  Err e;
  for (int g : Grids(Ceil(static_cast<int64_t>(T) * row / 4, 256))) {
    d_kc.Upload(kc0);
    d_vc.Upload(vc0);
    Launch("kv_write", check_kv_write, g, d_k.p, d_v.p, d_pos.p, d_kc.p, d_vc.p, T, kv_heads,
           head_dim, capacity, CacheDType<C>());
    e.Merge(Compare(AsFloats(d_kc.Download()), AsFloats(kref)));
    e.Merge(Compare(AsFloats(d_vc.Download()), AsFloats(vref)));
  }
  Report("kv_write",
         Fmt("T=%d kv_heads=%d hd=%d cap=%d pos=%d..%s%s", T, kv_heads, head_dim, capacity, pos0,
             CacheName<C>(), cache_offset ? Fmt(" cache+%d", cache_offset).c_str() : ""),
         e, 0.0);
}

// max_splits > 1: the split path (flash-decoding): the partial records of attention against the
// host's, the merge of the GPU's records against the host's merge, and that merge against the
// unsplit host result (the split changes only rounding). C: the cache element (float or bf16).
// Block: step rows [begin, end) form an image block of the vision-bidirectional mask (each sees
// up to the block's last position: last_visible); begin < 0: causal (last_visible null).
struct Block {
  int begin = -1;
  int end = -1;
};
template <typename C = float>
void CheckAttention(int T, int q_heads, int kv_heads, int head_dim, int capacity, int window,
                    int pos0, float q_sigma, int max_splits = 1, int split_rows = 0,
                    int cache_offset = 0, Block block = {}) {
  if (!Enabled("attention") && !Enabled("attention_merge")) return;
  const size_t kv_n = static_cast<size_t>(capacity) * kv_heads * head_dim;
  const size_t q_n = static_cast<size_t>(T) * q_heads * head_dim;
  const auto q = Normals(q_n, q_sigma);
  const auto kc = CacheOf<C>(Normals(kv_n)), vc = CacheOf<C>(Normals(kv_n));
  const int cache_dtype = CacheDType<C>();
  std::vector<int> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = pos0 + t;
  std::vector<int> last(pos);
  for (int t = std::max(block.begin, 0); t < block.end; ++t) last[t] = pos[block.end - 1];
  const int* h_last = block.begin >= 0 ? last.data() : nullptr;
  const float scale = 1.0f;
  const int splits = spark::abi::AttentionSplits(T, max_splits, split_rows);
  const size_t rec = spark::abi::AttentionRecordFloats(head_dim);
  const size_t used = static_cast<size_t>(T) * q_heads * splits * rec;
  std::vector<float> ref(q_n), ref_parts(max_splits > 1 ? split_rows * q_heads * rec : 0, NAN);
  host::Attention(q.data(), pos.data(), kc.data(), vc.data(), ref.data(), nullptr, T, q_heads,
                  kv_heads, head_dim, capacity, window, scale, 1, 0, cache_dtype, h_last);
  const std::string shape =
      Fmt("T=%d q/kv=%d/%d hd=%d cap=%d win=%d pos=%d.. qs=%g%s%s%s", T, q_heads, kv_heads,
          head_dim, capacity, window, pos0, q_sigma, CacheName<C>(),
          cache_offset ? Fmt(" cache+%d", cache_offset).c_str() : "",
          block.begin >= 0 ? Fmt(" block=%d..%d", block.begin, block.end - 1).c_str() : "");
  Dev<float> d_q(q), d_y(q_n), d_parts(std::max<size_t>(ref_parts.size(), 1));
  Dev<C> d_kc(kc, cache_offset), d_vc(vc, cache_offset);
  Dev<int> d_pos(pos), d_last(last);
  const int* d_lastp = block.begin >= 0 ? d_last.p : nullptr;
  if (max_splits <= 1) {
    Err e;
    for (int g : Grids(static_cast<int64_t>(T) * q_heads)) {
      d_y.Poison();
      Launch("attention", check_attention, g, d_q.p, d_pos.p, d_kc.p, d_vc.p, d_y.p,
             static_cast<float*>(nullptr), T, q_heads, kv_heads, head_dim, capacity, window,
             scale, 1, 0, cache_dtype, d_lastp);
      e.Merge(Compare(d_y.Download(), ref));
    }
    Report("attention", shape, e, 1e-4);
    return;
  }
  std::vector<float> merged_ref(q_n);
  host::Attention(q.data(), pos.data(), kc.data(), vc.data(), nullptr, ref_parts.data(), T,
                  q_heads, kv_heads, head_dim, capacity, window, scale, max_splits, split_rows,
                  cache_dtype, h_last);
  const std::vector<float> ref_used(ref_parts.begin(), ref_parts.begin() + used);
  Err e_parts, e_merge, e_whole;
  for (int g : Grids(static_cast<int64_t>(T) * q_heads * splits)) {
    d_parts.Poison();
    Launch("attention", check_attention, g, d_q.p, d_pos.p, d_kc.p, d_vc.p, d_y.p, d_parts.p, T,
           q_heads, kv_heads, head_dim, capacity, window, scale, max_splits, split_rows,
           cache_dtype, d_lastp);
    std::vector<float> parts = d_parts.Download();
    e_parts.Merge(Compare(std::vector<float>(parts.begin(), parts.begin() + used), ref_used));
    host::AttentionMerge(parts.data(), merged_ref.data(), T, q_heads, head_dim, max_splits,
                         split_rows);
    for (int gm : Grids(static_cast<int64_t>(T) * q_heads)) {
      d_y.Poison();
      Launch("attention_merge", check_attention_merge, gm, d_parts.p, d_y.p, T, q_heads, head_dim,
             max_splits, split_rows);
      const std::vector<float> y = d_y.Download();
      e_merge.Merge(Compare(y, merged_ref));
      e_whole.Merge(Compare(y, ref));
    }
  }
  const std::string split_shape = Fmt("%s split=%d", shape.c_str(), splits);
  Report("attention", split_shape + " partials", e_parts, 1e-4);
  Report("attention_merge", split_shape, e_merge, 1e-5);
  Report("attention_merge", split_shape + " vs unsplit", e_whole, 1e-4);
}

// Router probabilities in double from the logits, mirroring the reference, to judge near-ties.
std::vector<double> RouterProbs(const float* logits, int E, float logit_scale) {
  std::vector<double> p(E);
  double mx = -INFINITY;
  for (int e = 0; e < E; ++e) mx = std::max(mx, p[e] = logits[e] * logit_scale);
  double sum = 0.0;
  for (double& v : p) sum += (v = std::exp(v - mx));
  for (double& v : p) v /= sum;
  return p;
}

void CheckMoeTopK(int T, int E, int K) {
  if (!Enabled("moe_topk")) return;
  const float logit_scale = 1.0f / std::sqrt(2816.0f);  // 26B-A4B's hidden^-0.5
  const auto logits = Normals(static_cast<size_t>(T) * E, 1.5f / logit_scale);
  const auto pes = Bf16Uniform(E, 0.5f, 1.5f);
  std::vector<float> wref(static_cast<size_t>(T) * K);
  std::vector<int> iref(static_cast<size_t>(T) * K);
  host::MoeTopK(logits.data(), pes.data(), wref.data(), iref.data(), T, E, K, logit_scale);
  Dev<float> d_logits(logits), d_w(wref.size());
  Dev<bf16> d_pes(pes);
  Dev<int> d_i(iref.size());
  Err e;
  int ties = 0, index_failures = 0;
  for (int g : Grids(T)) {
    d_w.Poison();
    d_i.Poison();
    Launch("moe_topk", check_moe_topk, g, d_logits.p, d_pes.p, d_w.p, d_i.p, T, E, K,
           logit_scale);
    const auto w = d_w.Download();
    const auto idx = d_i.Download();
    for (int t = 0; t < T; ++t) {
      const int* gi = idx.data() + static_cast<size_t>(t) * K;
      const int* ri = iref.data() + static_cast<size_t>(t) * K;
      if (std::equal(gi, gi + K, ri)) {
        std::vector<float> gw(w.begin() + t * K, w.begin() + (t + 1) * K);
        std::vector<float> rw(wref.begin() + t * K, wref.begin() + (t + 1) * K);
        e.Merge(Compare(gw, rw));
        continue;
      }
      // Differences allowed only between experts of (nearly) equal probability.
      const auto p = RouterProbs(logits.data() + static_cast<size_t>(t) * E, E, logit_scale);
      bool tie = true;
      for (int k = 0; k < K && tie; ++k) {
        if (gi[k] == ri[k]) continue;
        if (gi[k] < 0 || gi[k] >= E) {
          tie = false;
          break;
        }
        const double a = p[gi[k]], b = p[ri[k]];
        tie = std::fabs(a - b) <= 1e-5 * std::max(a, b);
      }
      if (tie) {
        ++ties;
      } else {
        ++index_failures;
        if (index_failures <= 3) {
          std::printf("  moe_topk token %d: gpu indices", t);
          for (int k = 0; k < K; ++k) std::printf(" %d", gi[k]);
          std::printf(" / reference");
          for (int k = 0; k < K; ++k) std::printf(" %d", ri[k]);
          std::printf("\n");
        }
      }
    }
  }
  if (index_failures > 0) e.abs = INFINITY;
  std::string note;
  if (ties > 0) note = Fmt("%d near-tie token(s) accepted", ties);
  if (index_failures > 0) note = Fmt("%d token(s) with wrong expert indices", index_failures);
  Report("moe_topk", Fmt("T=%d experts=%d top_k=%d", T, E, K), e, 1e-4, note);
}

std::vector<int> RandomIndices(int T, int E, int K, bool invalid) {
  std::vector<int> idx(static_cast<size_t>(T) * K);
  for (int t = 0; t < T; ++t) {
    std::vector<int> perm(E);
    for (int e = 0; e < E; ++e) perm[e] = e;
    for (int k = 0; k < K; ++k) {  // partial Fisher-Yates: K distinct experts
      std::swap(perm[k], perm[g_rng.Int(k, E - 1)]);
      idx[static_cast<size_t>(t) * K + k] = perm[k];
    }
  }
  if (invalid && idx.size() > 10) {
    idx[3] = -1;
    idx[10] = E;
  }
  return idx;
}

// bf16_act: the module's activations are bf16 (stored as bf16; one launch).
void CheckMoeGateUp(int T, int hidden, int inter, int E, int K, const std::vector<bf16>& gate_up,
                    bool small_grids, bool bf16_act = false) {
  if (!Enabled("moe_gate_up")) return;
  auto x = Normals(static_cast<size_t>(T) * hidden);
  if (bf16_act) x = RoundedToBf16(std::move(x));
  const auto idx = RandomIndices(T, E, K, T > 1);
  std::vector<float> ref(static_cast<size_t>(T) * K * inter);
  host::MoeGateUp(x.data(), gate_up.data(), idx.data(), ref.data(), T, hidden, inter, E, K, MoePath(T));
  Dev<float> d_x(x), d_act(ref.size());
  Dev<bf16> d_gu(gate_up);
  Dev<int> d_idx(idx);
  const bool grouped = T >= 16 && hidden % 8 == 0;  // the tensor-core path of moe.cu
  const std::string shape = Fmt("T=%d hidden=%d inter=%d experts=%d top_k=%d%s%s", T, hidden,
                                inter, E, K, T > 1 ? " +invalid idx" : "",
                                grouped ? " grouped" : "");
  if (bf16_act) {
    Dev<bf16> d_x16(Bf16Bits(x)), d_act16(ref.size());
    d_act16.Poison();
    {
      const Bf16Activations bf16_activations;
      Launch("moe_gate_up", check_moe_gate_up, kMaxGrid, d_x16.p, d_gu.p, d_idx.p, d_act16.p, T,
             hidden, inter, E, K, MoePath(T));
    }
    ReportBf16("moe_gate_up", shape, d_act16.Download(), ref);
    return;
  }
  Err e;
  for (int g : Grids(Ceil(static_cast<int64_t>(T) * K * inter, 8), small_grids)) {
    d_act.Poison();
    Launch("moe_gate_up", check_moe_gate_up, g, d_x.p, d_gu.p, d_idx.p, d_act.p, T, hidden, inter,
           E, K, MoePath(T));
    e.Merge(Compare(d_act.Download(), ref));
  }
  Report("moe_gate_up", shape, e, 1e-4);
}

// grouped: with a workspace (kernel_abi.h MoeDownGrouped, the path of T >= 16): the slot rows against the
// host's, moe_combine of the GPU's rows against the host's combine of the same rows (bit-exact:
// both add in k order), and against the ungrouped host result. bf16_act (grouped only): bf16
// activations; the partials (a workspace) are not rounded, moe_combine's output is.
void CheckMoeDown(int T, int hidden, int inter, int E, int K, const std::vector<bf16>& down,
                  bool small_grids, bool with_partials = false, bool bf16_act = false) {
  if (!Enabled("moe_down") && !Enabled("moe_combine")) return;
  auto act = Normals(static_cast<size_t>(T) * K * inter);
  if (bf16_act) act = RoundedToBf16(std::move(act));
  const auto idx = RandomIndices(T, E, K, T > 1);
  auto w = Uniforms(static_cast<size_t>(T) * K, 0.0f, 0.3f);
  if (bf16_act) w = RoundedToBf16(std::move(w));  // the router's weights are activations too
  std::vector<float> ref(static_cast<size_t>(T) * hidden);
  host::MoeDown(act.data(), down.data(), w.data(), idx.data(), ref.data(), nullptr, T, hidden,
                inter, E, K, MoePath(T));
  const bool grouped = spark::abi::MoeDownGrouped(MoePath(T), with_partials);
  const size_t slot_floats = static_cast<size_t>(T) * K * hidden;
  Dev<float> d_act(act), d_w(w), d_y(ref.size()), d_parts(with_partials ? slot_floats : 1);
  Dev<bf16> d_down(down);
  Dev<int> d_idx(idx);
  const std::string shape = Fmt("T=%d hidden=%d inter=%d experts=%d top_k=%d%s%s", T, hidden,
                                inter, E, K, T > 1 ? " +invalid idx" : "",
                                grouped ? " grouped" : "");
  float* parts = with_partials ? d_parts.p : nullptr;
  if (!grouped) {
    Err e;
    for (int g : Grids(Ceil(static_cast<int64_t>(T) * hidden, 8), small_grids)) {
      d_y.Poison();
      Launch("moe_down", check_moe_down, g, d_act.p, d_down.p, d_w.p, d_idx.p, d_y.p, parts, T,
             hidden, inter, E, K, MoePath(T));
      e.Merge(Compare(d_y.Download(), ref));
    }
    Report("moe_down", shape, e, 1e-4);
    return;
  }
  std::vector<float> ref_parts(slot_floats), combined(ref.size());
  host::MoeDown(act.data(), down.data(), w.data(), idx.data(), nullptr, ref_parts.data(), T,
                hidden, inter, E, K, MoePath(T));
  Err e_parts, e_combine, e_whole;
  if (bf16_act) {
    Dev<bf16> d_act16(Bf16Bits(act)), d_w16(Bf16Bits(w)), d_y16(ref.size());
    d_parts.Poison();
    {
      const Bf16Activations bf16_activations;
      Launch("moe_down", check_moe_down, kMaxGrid, d_act16.p, d_down.p, d_w16.p, d_idx.p,
             d_y16.p, parts, T, hidden, inter, E, K, MoePath(T));
      const std::vector<float> got = d_parts.Download();
      e_parts.Merge(Compare(got, ref_parts));
      host::MoeCombine(got.data(), combined.data(), T, hidden, K);
      d_y16.Poison();
      Launch("moe_combine", check_moe_combine, kMaxGrid, d_parts.p, d_y16.p, T, hidden, K);
    }
    Report("moe_down", shape + " partials [act=bf16]", e_parts, 1e-4);
    ReportBf16("moe_combine", shape, d_y16.Download(), combined);
    return;
  }
  for (int g : Grids(Ceil(static_cast<int64_t>(T) * hidden, 8), small_grids)) {
    d_parts.Poison();
    Launch("moe_down", check_moe_down, g, d_act.p, d_down.p, d_w.p, d_idx.p, d_y.p, parts, T,
           hidden, inter, E, K, MoePath(T));
    const std::vector<float> got = d_parts.Download();
    e_parts.Merge(Compare(got, ref_parts));
    host::MoeCombine(got.data(), combined.data(), T, hidden, K);
    for (int gc : Grids(Ceil(static_cast<int64_t>(T) * hidden, 256), small_grids)) {
      d_y.Poison();
      Launch("moe_combine", check_moe_combine, gc, d_parts.p, d_y.p, T, hidden, K);
      const std::vector<float> y = d_y.Download();
      e_combine.Merge(Compare(y, combined));
      e_whole.Merge(Compare(y, ref));
    }
  }
  Report("moe_down", shape + " partials", e_parts, 1e-4);
  Report("moe_combine", shape, e_combine, 0.0);
  Report("moe_combine", shape + " vs ungrouped", e_whole, 1e-4);
}

// Quantized MoE experts (moe_gate_up / moe_down _nvfp4 / _fp8) against the host reference
// (exact dequantisation): random codes and scales, invalid indices, every path (decode GEMV,
// grouped tiles with a workspace, scalar loads for sizes the vector paths refuse), f32 and bf16
// activations, FP8 scales per matrix and per row.
struct QuantExperts {
  bool nvfp4;
  int rows, cols, matrices, spm;  // each expert: `matrices` stacked matrices of rows / matrices
  std::vector<uint8_t> w, block_scale;
  std::vector<float> scale;  // NVFP4 tensor scales [E, matrices]; FP8 [E, matrices, spm]
  QuantExperts(bool nvfp4, int E, int rows, int cols, int matrices, bool per_row)
      : nvfp4(nvfp4), rows(rows), cols(cols), matrices(matrices),
        spm(per_row ? rows / matrices : 1) {
    const size_t n = static_cast<size_t>(E) * rows * cols;
    if (nvfp4) {
      w = RandomBytes(n / 2);
      block_scale = RandomE4M3Scales(n / 16);
      scale = Uniforms(static_cast<size_t>(E) * matrices, 0.002f, 0.02f);
    } else {
      w = RandomE4M3Elements(n);
      scale = Uniforms(static_cast<size_t>(E) * matrices * spm, 1e-3f, 4e-3f);
    }
  }
  const char* Name() const { return nvfp4 ? "nvfp4" : "fp8"; }
};

void CheckMoeGateUpQuant(int T, int H, int I, int E, int K, const QuantExperts& q,
                         bool small_grids, bool bf16_act = false) {
  const char* op = q.nvfp4 ? "moe_gate_up_nvfp4" : "moe_gate_up_fp8";
  if (!Enabled(op)) return;
  auto x = Normals(static_cast<size_t>(T) * H);
  if (bf16_act) x = RoundedToBf16(std::move(x));
  const auto idx = RandomIndices(T, E, K, T > 1);
  std::vector<float> ref(static_cast<size_t>(T) * K * I);
  if (q.nvfp4)
    host::MoeGateUpNvfp4(x.data(), q.w.data(), q.block_scale.data(), q.scale.data(), idx.data(),
                         ref.data(), T, H, I, E, K, MoePath(T));
  else
    host::MoeGateUpFp8(x.data(), q.w.data(), q.scale.data(), idx.data(), ref.data(), T, H, I, E,
                       K, q.spm, MoePath(T));
  Dev<uint8_t> d_w(q.w), d_bs(q.nvfp4 ? q.block_scale : std::vector<uint8_t>(1));
  Dev<float> d_s(q.scale);
  Dev<int> d_idx(idx);
  const bool vec = H % (q.nvfp4 ? 32 : 16) == 0;
  const std::string shape =
      Fmt("T=%d hidden=%d inter=%d experts=%d top_k=%d%s%s%s", T, H, I, E, K,
          T > 1 ? " +invalid idx" : "", !vec ? " scalar" : T >= 16 ? " grouped" : "",
          q.spm > 1 ? " per-row scale" : "");
  const auto launch = [&](int g, const void* dx, void* dact) {
    if (q.nvfp4)
      Launch(op, check_moe_gate_up_nvfp4, g, static_cast<const act_t*>(dx), d_w.p, d_bs.p, d_s.p,
             d_idx.p, static_cast<act_t*>(dact), T, H, I, E, K, MoePath(T));
    else
      Launch(op, check_moe_gate_up_fp8, g, static_cast<const act_t*>(dx), d_w.p, d_s.p, d_idx.p,
             static_cast<act_t*>(dact), T, H, I, E, K, q.spm, MoePath(T));
  };
  if (bf16_act) {
    Dev<bf16> d_x16(Bf16Bits(x)), d_act16(ref.size());
    d_act16.Poison();
    {
      const Bf16Activations bf16_activations;
      launch(kMaxGrid, d_x16.p, d_act16.p);
    }
    ReportBf16(op, shape, d_act16.Download(), ref);
    return;
  }
  Dev<float> d_x(x), d_act(ref.size());
  Err e;
  for (int g : Grids(Ceil(static_cast<int64_t>(T) * K * I, 8), small_grids)) {
    d_act.Poison();
    launch(g, d_x.p, d_act.p);
    e.Merge(Compare(d_act.Download(), ref));
  }
  Report(op, shape, e, 1e-4);
}

void CheckMoeDownQuant(int T, int H, int I, int E, int K, const QuantExperts& q, bool small_grids,
                       bool with_partials, bool bf16_act = false) {
  const char* op = q.nvfp4 ? "moe_down_nvfp4" : "moe_down_fp8";
  if (!Enabled(op)) return;
  auto act = Normals(static_cast<size_t>(T) * K * I);
  if (bf16_act) act = RoundedToBf16(std::move(act));
  const auto idx = RandomIndices(T, E, K, T > 1);
  auto w = Uniforms(static_cast<size_t>(T) * K, 0.0f, 0.3f);
  if (bf16_act) w = RoundedToBf16(std::move(w));
  const bool grouped = spark::abi::MoeDownGrouped(MoePath(T), with_partials);
  const size_t slot_floats = static_cast<size_t>(T) * K * H;
  std::vector<float> ref(grouped ? slot_floats : static_cast<size_t>(T) * H);
  float* ref_y = grouped ? nullptr : ref.data();
  float* ref_parts = grouped ? ref.data() : nullptr;
  if (q.nvfp4)
    host::MoeDownNvfp4(act.data(), q.w.data(), q.block_scale.data(), q.scale.data(), w.data(),
                       idx.data(), ref_y, ref_parts, T, H, I, E, K, MoePath(T));
  else
    host::MoeDownFp8(act.data(), q.w.data(), q.scale.data(), w.data(), idx.data(), ref_y,
                     ref_parts, T, H, I, E, K, q.spm, MoePath(T));
  Dev<uint8_t> d_w(q.w), d_bs(q.nvfp4 ? q.block_scale : std::vector<uint8_t>(1));
  Dev<float> d_s(q.scale), d_parts(with_partials ? slot_floats : 1);
  Dev<int> d_idx(idx);
  const bool vec = I % (q.nvfp4 ? 32 : 16) == 0;
  const std::string shape =
      Fmt("T=%d hidden=%d inter=%d experts=%d top_k=%d%s%s%s", T, H, I, E, K,
          T > 1 ? " +invalid idx" : "", !vec ? " scalar" : grouped ? " grouped" : "",
          q.spm > 1 ? " per-row scale" : "");
  float* parts = with_partials ? d_parts.p : nullptr;
  const auto launch = [&](int g, const void* dact, const void* dw, void* dy) {
    if (q.nvfp4)
      Launch(op, check_moe_down_nvfp4, g, static_cast<const act_t*>(dact), d_w.p, d_bs.p, d_s.p,
             static_cast<const act_t*>(dw), d_idx.p, static_cast<act_t*>(dy), parts, T, H, I, E,
             K, MoePath(T));
    else
      Launch(op, check_moe_down_fp8, g, static_cast<const act_t*>(dact), d_w.p, d_s.p,
             static_cast<const act_t*>(dw), d_idx.p, static_cast<act_t*>(dy), parts, T, H, I, E,
             K, q.spm, MoePath(T));
  };
  Err e;
  if (bf16_act) {
    Dev<bf16> d_act16(Bf16Bits(act)), d_w16(Bf16Bits(w)), d_y16(static_cast<size_t>(T) * H);
    d_y16.Poison();
    d_parts.Poison();
    {
      const Bf16Activations bf16_activations;
      launch(kMaxGrid, d_act16.p, d_w16.p, d_y16.p);
    }
    if (grouped) {
      e.Merge(Compare(d_parts.Download(), ref));  // the workspace stays f32
      Report(op, shape + " partials [act=bf16]", e, 1e-4);
    } else {
      ReportBf16(op, shape, d_y16.Download(), ref);
    }
    return;
  }
  Dev<float> d_act(act), d_wt(w), d_y(static_cast<size_t>(T) * H);
  for (int g : Grids(Ceil(static_cast<int64_t>(T) * H, 8), small_grids)) {
    d_y.Poison();
    d_parts.Poison();
    launch(g, d_act.p, d_wt.p, d_y.p);
    e.Merge(Compare(grouped ? d_parts.Download() : d_y.Download(), ref));
  }
  Report(op, shape + (grouped ? " partials" : ""), e, 1e-4);
}

void CheckScatterRows(int T, int n, int cols, bool misaligned) {
  if (!Enabled("scatter_rows")) return;
  const auto dest0 = Normals(static_cast<size_t>(T) * cols);
  const auto upd = Normals(static_cast<size_t>(n) * cols);
  std::vector<int> idx(n);
  std::vector<int> rows(T);
  for (int t = 0; t < T; ++t) rows[t] = t;
  for (int i = 0; i < n; ++i) {
    std::swap(rows[i % T], rows[g_rng.Int(i % T, T - 1)]);
    idx[i] = rows[i % T];
  }
  if (n > 3) {
    idx[1] = -1;  // skipped
    idx[3] = T;   // skipped
  }
  std::vector<float> ref = dest0;
  host::ScatterRows(ref.data(), idx.data(), upd.data(), T, n, cols);
  Dev<float> d_dest(dest0.size(), misaligned ? 1 : 0), d_upd(upd);
  Dev<int> d_idx(idx);
  Err e;
  for (int g : Grids(Ceil(static_cast<int64_t>(n) * cols / 4, 256))) {
    d_dest.Upload(dest0);
    Launch("scatter_rows", check_scatter_rows, g, d_dest.p, d_idx.p, d_upd.p, T, n, cols);
    e.Merge(Compare(d_dest.Download(), ref));
  }
  Report("scatter_rows", Fmt("T=%d updates=%d cols=%d%s", T, n, cols, misaligned ? " misaligned" : ""),
         e, 0.0);
}

void CheckMaskTokens(int T, int a, int b, int c) {
  if (!Enabled("mask_tokens")) return;
  std::vector<int> ids(T);
  const int specials[] = {258880, 258881, 258884, 0, 2};
  for (int t = 0; t < T; ++t) ids[t] = (t % 3 == 0) ? specials[g_rng.Int(0, 4)] : g_rng.Int(0, 262143);
  std::vector<int> ref(T);
  host::MaskTokens(ids.data(), ref.data(), T, a, b, c, 0);
  Dev<int> d_ids(ids), d_y(T);
  Err e;
  for (int g : Grids(Ceil(T, 256))) {
    d_y.Poison();
    Launch("mask_tokens", check_mask_tokens, g, d_ids.p, d_y.p, T, a, b, c, 0);
    e.Merge(Compare(d_y.Download(), ref));
  }
  Report("mask_tokens", Fmt("T=%d tokens=%d,%d,%d", T, a, b, c), e, 0.0);
}

void CheckSelectGroup(int T, int groups, int cols, int index, bool misaligned) {
  if (!Enabled("select_group")) return;
  const auto x = Normals(static_cast<size_t>(T) * groups * cols);
  std::vector<float> ref(static_cast<size_t>(T) * cols);
  host::SelectGroup(x.data(), ref.data(), T, groups, cols, index);
  Dev<float> d_x(x, misaligned ? 1 : 0), d_y(ref.size());
  Err e;
  for (int g : Grids(Ceil(static_cast<int64_t>(T) * cols / 4, 256))) {
    d_y.Poison();
    Launch("select_group", check_select_group, g, d_x.p, d_y.p, T, groups, cols, index);
    e.Merge(Compare(d_y.Download(), ref));
  }
  Report("select_group", Fmt("T=%d groups=%d cols=%d index=%d%s", T, groups, cols, index,
                             misaligned ? " misaligned" : ""),
         e, 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = static_cast<uint64_t>(
      std::chrono::high_resolution_clock::now().time_since_epoch().count());
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--seed=", 7) == 0) {
      seed = std::strtoull(argv[i] + 7, nullptr, 10);
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      g_quick = true;
    } else if (std::strncmp(argv[i], "--only=", 7) == 0) {
      std::string list = argv[i] + 7;
      size_t start = 0;
      while (start <= list.size()) {
        const size_t comma = std::min(list.find(',', start), list.size());
        if (comma > start) g_only.push_back(list.substr(start, comma - start));
        start = comma + 1;
      }
      for (const std::string& op : g_only) {
        if (spark::abi::FindOp(op.c_str()) == nullptr) {
          std::fprintf(stderr, "--only: unknown op '%s'\n", op.c_str());
          return 2;
        }
      }
    } else {
      std::fprintf(stderr, "usage: %s [--seed=N] [--quick] [--only=op,op,...]\n", argv[0]);
      return 2;
    }
  }
  g_rng.s = seed;
  int device = 0;
  CK(cudaGetDevice(&device));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, device));
  std::printf("kernel_check: seed=%llu (repeat with --seed=%llu)%s\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed),
              g_quick ? " quick" : "");
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  std::printf("each case runs with its natural grid and with 1 and 5 blocks unless noted; outputs "
              "are NaN-poisoned before every launch\n\n");
  std::printf("%-17s %-62s %10s %10s %8s  %s\n", "op", "shape", "max_abs", "max_rel", "thresh",
              "result");

  // ---- elementwise (E2B hidden 1536, 26B hidden 2816, odd sizes for the scalar paths) ----
  for (Ew op : {Ew::kAdd, Ew::kMul, Ew::kScale, Ew::kScalarMul, Ew::kGelu, Ew::kGeluMul,
                Ew::kSoftcap}) {
    CheckElementwise(op, 1, 1536, false);
    CheckElementwise(op, 37, 2816, false);
    CheckElementwise(op, 37, 1001, true);
  }
  CheckElementwise(Ew::kAdd, 37, 1536, false, /*in_place=*/true);
  CheckElementwise(Ew::kGeluMul, 37, 704 * 8, false, /*in_place=*/true);
  CheckElementwise(Ew::kSoftcap, 3, 65536, false);  // final logit softcap, vocab-sized rows
  CheckMaskTokens(1, 258880, 258884, 258881);
  CheckMaskTokens(37, 258880, 258884, 258881);
  CheckMaskTokens(300, 258880, -1, -1);
  CheckSelectGroup(1, 35, 256, 7, false);
  CheckSelectGroup(37, 35, 256, 34, false);
  CheckSelectGroup(37, 5, 257, 2, true);
  CheckScatterRows(37, 10, 1536, false);
  CheckScatterRows(37, 12, 2816, false);
  CheckScatterRows(37, 9, 1001, true);

  // ---- embedding ----
  const int vocab = g_quick ? 4096 : 65536;
  CheckEmbedding(1, vocab, 1536, false);
  CheckEmbedding(37, vocab, 2816, false);
  CheckEmbedding(37, 4096, 1001, false);
  CheckEmbedding(37, 4096, 1536, true);

  // ---- rms_norm: hidden norms, per-head q/k norms (groups = heads), weight-less v_norm ----
  CheckRmsNorm(1, 1, 1536, true, false, false);
  CheckRmsNorm(37, 1, 2816, true, false, false);
  CheckRmsNorm(37, 8, 256, true, false, false);
  CheckRmsNorm(1, 8, 512, true, true, false);
  CheckRmsNorm(37, 1, 256, false, false, false);
  CheckRmsNorm(37, 2, 512, false, true, false);
  CheckRmsNorm(5, 3, 1001, true, false, true);

  // ---- residual_rms_norm: hidden rows (E2B 1536, 31B 5376, 26B 2816), y = x / y = residual,
  // weight-less, scalar paths (odd cols, misaligned rows), float4 rows with an unaligned weight ----
  CheckResidualRmsNorm(1, 1536, true, Alias::kNone, 0);
  CheckResidualRmsNorm(17, 5376, true, Alias::kNone, 0);
  CheckResidualRmsNorm(37, 2816, true, Alias::kResidual, 0);
  CheckResidualRmsNorm(17, 1536, true, Alias::kX, 0);
  CheckResidualRmsNorm(1, 5376, true, Alias::kResidual, 0);
  CheckResidualRmsNorm(17, 2816, false, Alias::kNone, 0);
  CheckResidualRmsNorm(17, 1536, true, Alias::kNone, kMisWeight);
  CheckResidualRmsNorm(5, 1001, true, Alias::kNone, kMisActivations | kMisWeight);
  CheckResidualRmsNorm(3, 7, true, Alias::kResidual, kMisActivations);

  // ---- linear: decode GEMV (T < 16), tensor-core tiles (T >= 16), scalar fallback ----
  CheckLinear(1, 2048, 1536, false);
  CheckLinear(1, 1536, 2048, false);
  CheckLinear(1, 6144, 1536, false);
  CheckLinear(1, 2816, 704, false);
  CheckLinear(2, 1536, 2816, false);
  CheckLinear(5, 2816, 2112, false);
  CheckLinear(11, 1024, 1536, false);
  CheckLinear(16, 300, 1536, false);
  CheckLinear(37, 2048, 1536, false);
  CheckLinear(37, 2816, 2112, false);
  CheckLinear(37, 1536, 6144, false);
  CheckLinear(37, 4096, 2816, false);
  // E2B-like small projections: K below one 32-wide step (per-layer inputs), narrow outputs.
  CheckLinear(24, 128, 16, false);
  CheckLinear(24, 16, 128, false);
  CheckLinear(24, 96, 128, false);
  CheckLinear(24, 128, 64, false);
  // ---- quantized linears (W4A16 / W8A16): GEMV, tiles, scalar fallback, bf16 activations ----
  CheckLinearNvfp4(1, 2048, 1536, false);
  CheckLinearNvfp4(3, 704, 2816, false);
  // Row counts that are not a multiple of the GEMV's rows per warp (4 at one token, 2 at two).
  CheckLinearNvfp4(1, 1027, 1536, false);
  CheckLinearNvfp4(2, 1025, 2816, false);
  CheckLinearNvfp4(1, 1027, 1536, true);
  CheckLinearNvfp4(37, 2048, 1536, false);
  CheckLinearNvfp4(100, 520, 704, false);
  CheckLinearNvfp4(24, 128, 16, false);  // in % 32 != 0: scalar GEMV
  CheckLinearNvfp4(5, 256, 1536, false, true);
  CheckLinearNvfp4(1, 1024, 2816, true);
  CheckLinearNvfp4(37, 2048, 1536, true);
  CheckLinearFp8(1, 2048, 1536, false, false);
  CheckLinearFp8(5, 1536, 2816, true, false);
  CheckLinearFp8(37, 2048, 1536, false, false);
  CheckLinearFp8(1, 1024, 1536, false, false, true);
  CheckLinearFp8(1, 1023, 2816, true, false);  // odd rows: the GEMV takes 2 per warp
  CheckLinearFp8(40, 512, 1536, true, false, true);
  CheckLinearFp8(40, 300, 2112, true, false);
  CheckLinearFp8(24, 96, 16, false, false);  // one half K step
  CheckLinearFp8(7, 64, 24, false, false);   // in % 16 != 0: scalar GEMV
  CheckLinearFp8(37, 1024, 1536, true, true);
  // bf16 activations: every output rounded to bf16 (GEMV, tensor-core tiles, norm, gate)
  CheckLinearBf16Act(1, 2048, 1536);
  CheckLinearBf16Act(5, 1024, 2816);
  CheckLinearBf16Act(37, 2048, 1536);
  CheckLinearBf16Act(100, 520, 704);
  CheckLinearBf16Act(24, 128, 16);  // E2B per-layer inputs: K below one 32-wide step
  CheckLinearBf16Act(24, 96, 128);
  CheckResidualRmsNormBf16Act(17, 5376);
  CheckGeluMulBf16Act(17, 2112);
  CheckEmbeddingBf16Act(9, 300, 1536);
  CheckRmsNormRopeBf16Act(17, 8, 256, 128, 10000.0f);
  CheckRmsNormRopeBf16Act(5, 4, 512, 64, 1000000.0f);
  CheckAttentionBf16Act(17, 8, 2, 256, 64, 0, 20, 1, 0);
  CheckAttentionBf16Act(1, 8, 1, 512, 600, 0, 500, 8, 64);  // split over the KV length
  CheckMoeTopKBf16Act(33, 128, 8);
  CheckLinear(100, 520, 704, false);
  CheckLinear(3, 257, 1001, false);
  CheckLinear(37, 130, 1001, false);
  CheckLinear(37, 1536, 1536, true);
  if (!g_quick) CheckLinear(1, 262144, 1536, false, /*small_grids=*/false);  // tied LM head

  // ---- rope: sliding (hd 256, theta 1e4, all pairs), full (hd 512, theta 1e6, 64 pairs) ----
  CheckRope(1, 8, 256, 128, 10000.0f, 4095, false);
  CheckRope(37, 8, 256, 128, 10000.0f, 0, false);
  CheckRope(37, 1, 256, 128, 10000.0f, 700, true);
  CheckRope(1, 8, 512, 64, 1000000.0f, 100000, false);
  CheckRope(37, 16, 512, 64, 1000000.0f, 1000, false);
  CheckRope(37, 2, 512, 64, 1000000.0f, 200000, true);

  // ---- rms_norm_rope: q/k norm + RoPE; sliding (hd 256, theta 1e4, all 128 pairs), full
  // (hd 512, theta 1e6, 64 of 256 pairs: proportional); 8/16/32 q heads, k heads; weight-less,
  // in place, odd/unaligned, > 64 heads (head chunks), > 256 pairs (pair chunks), hd 1 ----
  CheckRmsNormRope(1, 8, 256, 128, 10000.0f, 1.0f, true, false, false, 8000);
  CheckRmsNormRope(17, 8, 256, 128, 10000.0f, 1.0f, true, false, false, 8000);
  CheckRmsNormRope(17, 16, 256, 128, 10000.0f, 1.0f, true, false, false, 8191);
  CheckRmsNormRope(37, 32, 256, 128, 10000.0f, 1.0f, true, true, false, 4000);
  CheckRmsNormRope(17, 1, 256, 128, 10000.0f, 1.0f, true, true, false, 8000);
  CheckRmsNormRope(1, 16, 512, 64, 1000000.0f, 1.0f, true, false, false, 8000);
  CheckRmsNormRope(17, 32, 512, 64, 1000000.0f, 1.0f, true, false, false, 8191);
  CheckRmsNormRope(17, 4, 512, 64, 1000000.0f, 1.0f, true, true, false, 8000);
  CheckRmsNormRope(17, 8, 256, 128, 10000.0f, 1.0f, false, false, false, 8000);
  CheckRmsNormRope(17, 2, 512, 64, 1000000.0f, 1.0f, false, true, false, 8000);
  CheckRmsNormRope(5, 3, 101, 20, 10000.0f, 8.0f, true, false, true, 8000);
  CheckRmsNormRope(5, 3, 101, 50, 10000.0f, 1.0f, true, true, true, 8000);
  CheckRmsNormRope(3, 70, 64, 32, 10000.0f, 1.0f, true, true, false, 8000);
  CheckRmsNormRope(3, 70, 600, 200, 1000000.0f, 1.0f, true, false, false, 8000);
  CheckRmsNormRope(3, 5, 1, 0, 10000.0f, 1.0f, true, true, false, 100);

  // ---- kv_write: sliding cache (window 512 + 37 - 1 slots, wrapping), full cache ----
  CheckKvWrite(1, 1, 256, 548, 1000);
  CheckKvWrite(37, 1, 256, 548, 530);
  CheckKvWrite(37, 8, 256, 1060, 1040);
  CheckKvWrite(37, 2, 512, 4096, 0);
  CheckKvWrite(5, 3, 126, 40, 38);
  // bf16 caches (spark-compile --kv-cache-dtype bf16): 8-byte stores, and scalar ones (row 378).
  CheckKvWrite<bf16>(1, 1, 256, 548, 1000);
  CheckKvWrite<bf16>(37, 2, 512, 4096, 0);
  CheckKvWrite<bf16>(5, 3, 126, 40, 38);
  // Caches off their 16-byte alignment: bf16 8-byte (vector) and 2-byte (scalar), f32 4-byte.
  CheckKvWrite<bf16>(37, 2, 512, 4096, 0, 4);
  CheckKvWrite<bf16>(37, 2, 512, 4096, 0, 1);
  CheckKvWrite<float>(37, 2, 512, 4096, 0, 1);

  // ---- attention: GQA 8:1 (E2B), 16:2 (26B full), window 512 / causal, hd 256 / 512 ----
  CheckAttention(1, 8, 1, 256, 548, 512, 1000, 0.1f);
  CheckAttention(1, 8, 1, 256, 548, 512, 300, 1.0f);
  CheckAttention(37, 8, 1, 256, 548, 512, 0, 0.1f);
  CheckAttention(37, 8, 1, 256, 548, 512, 700, 0.1f);
  CheckAttention(37, 16, 8, 256, 1060, 1024, 1500, 0.1f);
  CheckAttention(1, 8, 1, 512, 2048, 0, 1500, 0.05f);
  CheckAttention(37, 16, 2, 512, 2048, 0, 900, 0.05f);
  CheckAttention(37, 8, 2, 512, 64, 0, 0, 1.0f);
  CheckAttention(5, 4, 2, 128, 300, 0, 250, 0.2f);
  CheckAttention(5, 4, 2, 200, 300, 64, 250, 0.2f);
  CheckAttention(3, 2, 1, 384, 100, 0, 90, 0.1f);
  // Split over the KV length: decode of 31B (32 heads, 8 splits) and 26B-A4B full layers
  // (16 heads, 16 splits) at 1k/8k contexts, a sliding window, short contexts with empty splits,
  // several tokens (fewer splits each), scalar loads.
  const int long_ctx = g_quick ? 2048 : 8192;
  CheckAttention(1, 32, 4, 512, long_ctx, 0, 1023, 0.05f, 8, 512);
  CheckAttention(1, 32, 16, 256, 1535, 1024, 8000, 0.1f, 8, 512);
  CheckAttention(1, 16, 2, 512, long_ctx, 0, long_ctx - 1, 0.05f, 16, 512);
  CheckAttention(1, 8, 1, 256, 548, 512, 20, 0.1f, 32, 512);
  CheckAttention(1, 4, 2, 128, 300, 0, 0, 0.2f, 64, 64);
  CheckAttention(5, 4, 2, 128, 300, 0, 250, 0.2f, 64, 64);
  CheckAttention(3, 2, 1, 200, 400, 0, 390, 0.2f, 4, 16);
  CheckAttention(2, 4, 2, 384, 600, 100, 500, 0.1f, 8, 8);
  // bf16 caches: vector (hd 256 / 512) and scalar (hd 200) loads, split and unsplit.
  CheckAttention<bf16>(1, 8, 1, 256, 548, 512, 1000, 0.1f);
  CheckAttention<bf16>(37, 16, 2, 512, 2048, 0, 900, 0.05f);
  CheckAttention<bf16>(5, 4, 2, 200, 300, 64, 250, 0.2f);
  CheckAttention<bf16>(1, 32, 4, 512, long_ctx, 0, 1023, 0.05f, 8, 512);
  CheckAttention<bf16>(1, 32, 16, 256, 1535, 1024, 8000, 0.1f, 8, 512);
  CheckAttention<bf16>(3, 2, 1, 200, 400, 0, 390, 0.2f, 4, 16);
  CheckAttention<bf16>(1, 8, 1, 256, 548, 512, 1000, 0.1f, 1, 0, 4);
  CheckAttention<bf16>(1, 8, 1, 256, 548, 512, 1000, 0.1f, 1, 0, 1);
  CheckAttention<float>(1, 8, 1, 256, 548, 512, 1000, 0.1f, 1, 0, 1);
  // Vision-bidirectional blocks (last_visible): 26B/31B sliding shapes with an image block inside
  // the step and one covering it, a window shorter than the block (keys p-7 .. block end), the
  // split path, a bf16 cache with scalar loads.
  CheckAttention(37, 16, 8, 256, 548, 512, 700, 0.1f, 1, 0, 0, {5, 30});
  CheckAttention(37, 32, 16, 256, 1060, 1024, 1500, 0.1f, 1, 0, 0, {0, 37});
  CheckAttention(20, 4, 2, 128, 40, 8, 100, 0.2f, 1, 0, 0, {3, 17});
  CheckAttention(5, 4, 2, 128, 300, 64, 250, 0.2f, 64, 64, 0, {1, 4});
  CheckAttention<bf16>(20, 4, 2, 200, 40, 8, 100, 0.2f, 1, 0, 0, {3, 17});

  // ---- MoE: 26B-A4B router selection (128 experts, top-8), experts hidden 2816 x
  //      intermediate 704 ----
  CheckMoeTopK(1, 128, 8);
  CheckMoeTopK(37, 128, 8);
  CheckMoeTopK(5, 200, 3);
  CheckMoeTopK(3, 1024, 4);  // the most experts the kernel handles
  CheckMoeTopK(2, 16, 16);   // top_k == num_experts
  {
    const int E = g_quick ? 16 : 128, H = 2816, I = 704, K = 8;
    if (Enabled("moe_gate_up")) {
      const auto gate_up = Bf16Uniform(static_cast<size_t>(E) * 2 * I * H, -0.05f, 0.05f);
      CheckMoeGateUp(1, H, I, E, K, gate_up, true);
      CheckMoeGateUp(15, H, I, E, K, gate_up, false);   // the last GEMV size
      CheckMoeGateUp(37, H, I, E, K, gate_up, false);   // grouped by expert (tensor cores)
      CheckMoeGateUp(g_quick ? 64 : 128, H, I, E, K, gate_up, false);
      CheckMoeGateUp(g_quick ? 64 : 512, H, I, E, K, gate_up, false, /*bf16_act=*/true);
    }
    if (Enabled("moe_down")) {
      const auto down = Bf16Uniform(static_cast<size_t>(E) * H * I, -0.05f, 0.05f);
      CheckMoeDown(1, H, I, E, K, down, true);
      CheckMoeDown(37, H, I, E, K, down, false);         // no workspace: ungrouped
      CheckMoeDown(1, H, I, E, K, down, true, true);     // decode: ungrouped despite a workspace
      CheckMoeDown(37, H, I, E, K, down, false, true);   // grouped by expert (tensor cores)
      CheckMoeDown(g_quick ? 64 : 128, H, I, E, K, down, false, true);
      CheckMoeDown(g_quick ? 64 : 512, H, I, E, K, down, false, true, /*bf16_act=*/true);
    }
    const auto gu_small = Bf16Uniform(static_cast<size_t>(6) * 2 * 100 * 1001, -0.05f, 0.05f);
    CheckMoeGateUp(5, 1001, 100, 6, 2, gu_small, true);
    CheckMoeGateUp(40, 1001, 100, 6, 2, gu_small, true);  // hidden % 8 != 0: GEMV path
    // Grouped with ~67 slots per expert (two 64-row chunks for some), a partial column tile
    // (100 = 64 + 36) and invalid indices.
    const auto gu_grouped = Bf16Uniform(static_cast<size_t>(6) * 2 * 100 * 1008, -0.05f, 0.05f);
    CheckMoeGateUp(200, 1008, 100, 6, 2, gu_grouped, true);
    const auto down_small = Bf16Uniform(static_cast<size_t>(6) * 1001 * 100, -0.05f, 0.05f);
    CheckMoeDown(5, 1001, 100, 6, 2, down_small, true);
    CheckMoeDown(40, 1001, 100, 6, 2, down_small, true, true);  // grouped, scalar (unaligned)
    // Grouped with two 64-row chunks for some experts and a partial column tile (1001 % 128).
    const auto down_grouped = Bf16Uniform(static_cast<size_t>(6) * 1001 * 104, -0.05f, 0.05f);
    CheckMoeDown(200, 1001, 104, 6, 2, down_grouped, true, true);
  }

  // ---- Quantized MoE experts: 26B-A4B's shapes (ModelOpt NVFP4 / FP8 per expert), then small
  //      and unaligned ones ----
  for (const bool nvfp4 : {true, false}) {
    const char* gate_op = nvfp4 ? "moe_gate_up_nvfp4" : "moe_gate_up_fp8";
    const char* down_op = nvfp4 ? "moe_down_nvfp4" : "moe_down_fp8";
    if (!Enabled(gate_op) && !Enabled(down_op)) continue;
    // tiny-moe's shapes (hidden 64, intermediate 32, 8 experts, top 2): a 24-token prefill and
    // decode, bf16 activations too.
    const QuantExperts gu_t(nvfp4, 8, 64, 64, 2, false), down_t(nvfp4, 8, 64, 32, 1, false);
    for (const bool bf16_act : {false, true}) {
      CheckMoeGateUpQuant(24, 64, 32, 8, 2, gu_t, true, bf16_act);
      CheckMoeGateUpQuant(1, 64, 32, 8, 2, gu_t, true, bf16_act);
      CheckMoeDownQuant(24, 64, 32, 8, 2, down_t, true, true, bf16_act);
      CheckMoeDownQuant(1, 64, 32, 8, 2, down_t, true, false, bf16_act);
    }
    const int E = g_quick ? 16 : 128, H = 2816, I = 704, K = 8;
    const QuantExperts gu(nvfp4, E, 2 * I, H, 2, false), down(nvfp4, E, H, I, 1, false);
    CheckMoeGateUpQuant(1, H, I, E, K, gu, true);
    CheckMoeGateUpQuant(15, H, I, E, K, gu, false);
    CheckMoeGateUpQuant(37, H, I, E, K, gu, false);
    CheckMoeGateUpQuant(64, H, I, E, K, gu, false, /*bf16_act=*/true);
    CheckMoeGateUpQuant(1, H, I, E, K, gu, false, /*bf16_act=*/true);
    CheckMoeDownQuant(1, H, I, E, K, down, true, false);
    CheckMoeDownQuant(1, H, I, E, K, down, true, true);  // decode: ungrouped despite a workspace
    CheckMoeDownQuant(37, H, I, E, K, down, false, false);
    CheckMoeDownQuant(37, H, I, E, K, down, false, true);
    CheckMoeDownQuant(64, H, I, E, K, down, false, true, /*bf16_act=*/true);
    CheckMoeDownQuant(1, H, I, E, K, down, false, false, /*bf16_act=*/true);
    // Small: a partial column tile (I = 80: 64 + 16), hidden 48 / inter 80 (NVFP4: not a multiple
    // of 32, the scalar paths), FP8 per-row scales, two 64-row chunks for some experts.
    const QuantExperts gu_s(nvfp4, 6, 2 * 80, 48, 2, !nvfp4), down_s(nvfp4, 6, 48, 80, 1, !nvfp4);
    CheckMoeGateUpQuant(5, 48, 80, 6, 2, gu_s, true);
    CheckMoeGateUpQuant(200, 48, 80, 6, 2, gu_s, true);
    CheckMoeDownQuant(5, 48, 80, 6, 2, down_s, true, false);
    CheckMoeDownQuant(200, 48, 80, 6, 2, down_s, true, true);
    const QuantExperts gu_v(nvfp4, 6, 2 * 100, 1024, 2, !nvfp4), down_v(nvfp4, 6, 1000, 96, 1, !nvfp4);
    CheckMoeGateUpQuant(200, 1024, 100, 6, 2, gu_v, true);  // grouped, partial column tile
    CheckMoeDownQuant(200, 1000, 96, 6, 2, down_v, true, true);  // grouped, 1000 % 128 != 0
    CheckMoeDownQuant(3, 1000, 96, 6, 2, down_v, true, false);
  }
  if (Enabled("moe_gate_up") || Enabled("moe_down")) {  // tiny-moe's shapes in bf16
    const auto gu_t = Bf16Uniform(static_cast<size_t>(8) * 64 * 64, -0.05f, 0.05f);
    const auto down_t = Bf16Uniform(static_cast<size_t>(8) * 64 * 32, -0.05f, 0.05f);
    for (const bool bf16_act : {false, true}) {
      CheckMoeGateUp(24, 64, 32, 8, 2, gu_t, true, bf16_act);
      CheckMoeDown(24, 64, 32, 8, 2, down_t, true, true, bf16_act);
    }
  }

  int failed = 0;
  for (const Row& r : g_rows) failed += r.Pass() ? 0 : 1;
  std::printf("\n%zu cases, %d failed (seed=%llu)\n", g_rows.size(), failed,
              static_cast<unsigned long long>(seed));
  return failed == 0 ? 0 : 1;
}

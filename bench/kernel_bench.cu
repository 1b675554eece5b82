// Per-kernel timings of the kernel library on a CUDA GPU, at the shapes of the released models:
// the dense GEMM (spark_linear, tensor-core path, 31B projections at a 512-token prefill chunk),
// the decode GEMV (spark_linear at 1 token, and at 2-32 tokens: decode steps of several
// sequences), the quantized linears (spark_linear_nvfp4 /
// spark_linear_fp8, W4A16 / W8A16, the same shapes: bytes are the weights' real bytes, 0.5625 and
// 1 per weight) and the grouped MoE experts (spark_moe_gate_up /
// spark_moe_down at a 512-token chunk of 26B-A4B, random top-8 routing; then the experts in
// bf16, NVFP4 and FP8 at decode and at a 512-token chunk); with --only=moe just the grouped
// experts, at 512- and 1024-token chunks (f32, and bf16 activations); with --only=small-batch
// the linears of decode steps of 1 to 16 sequences at 31B and 26B-A4B shapes. Each figure is set
// against the ceiling of the same GPU: the device-to-device copy bandwidth this program measures,
// and a bf16 GEMM throughput given on the command line (bench/ceilings.py measures it with
// torch.matmul).
//
// The kernels are compiled here by nvcc (through bench/kernel_wrappers.cuh), not by
// spark-compile's clang/LLVM path, so the figures compare kernel variants
// with each other; end-to-end figures come from bench/run_bench.sh. To compare the working tree's
// kernels with another copy, compile twice with that copy's parent directory first on the include
// path (`bench/run_bench.sh kernels OUTDIR BASE_DIR` does it).
//
// Method: 3 warm-up launches, then 20 timed with CUDA events around each launch; the median is
// printed. Inputs are random, outputs are not checked here (spark-op-check,
// test/gpu/op_check, checks spark-compile's build of these kernels against the host reference).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/kernel_wrappers.cuh"

namespace {

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kernel_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <typename T>
T* DeviceRandom(size_t n, std::mt19937& rng, float scale) {
  std::vector<T> h(n);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (size_t i = 0; i < n; ++i) {
    const float v = u(rng);
    if constexpr (sizeof(T) == 2) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      h[i] = static_cast<T>(bits >> 16);
    } else {
      h[i] = static_cast<T>(v);
    }
  }
  T* d = nullptr;
  Check(cudaMalloc(&d, n * sizeof(T)), "cudaMalloc");
  Check(cudaMemcpy(d, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

// Median milliseconds of `launch` over 20 timed runs after 3 warm-ups.
template <typename F>
double MedianMs(const F& launch) {
  cudaEvent_t a, b;
  Check(cudaEventCreate(&a), "cudaEventCreate");
  Check(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) launch();
  Check(cudaDeviceSynchronize(), "warm-up");
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    Check(cudaEventRecord(a), "cudaEventRecord");
    launch();
    Check(cudaEventRecord(b), "cudaEventRecord");
    Check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float t = 0.0f;
    Check(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  Check(cudaGetLastError(), "launch");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return 0.5 * (ms[9] + ms[10]);
}

double CopyBandwidthGBs() {
  const size_t bytes = size_t{4} << 30;
  void *src = nullptr, *dst = nullptr;
  Check(cudaMalloc(&src, bytes), "cudaMalloc");
  Check(cudaMalloc(&dst, bytes), "cudaMalloc");
  Check(cudaMemset(src, 1, bytes), "cudaMemset");
  const double ms = MedianMs([&] { cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice); });
  cudaFree(src);
  cudaFree(dst);
  return 2.0 * bytes / (ms * 1e-3) / 1e9;  // read + write
}

// Launch grids as LowerToKernels.cpp sizes them, capped as every launch is.
int Grid(int64_t blocks) {
  return static_cast<int>(std::clamp<int64_t>(blocks, 1, spark::abi::kMaxLaunchBlocks));
}
int LinearGrid(int out) { return Grid((out + 7) / 8); }
// The dynamic shared memory the runtime gives a dense linear's launch of T tokens (plan.h
// LaunchSharedBytes: the prefill tiles' stages); main() opts the wrappers in.
int LinearShared(int T, bool bf16_act) {
  return spark::abi::CallSharedBytes(spark::abi::OpId::kLinear, T, bf16_act);
}

struct Figures {
  double copy_gbs;
  double gemm_tflops;
};

void Row(const char* kernel, const std::string& shape, double ms, double flops, double bytes,
         const Figures& f) {
  const double tflops = flops / (ms * 1e-3) / 1e12, gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("| %s | %s | %.3f | %.1f (%.1f %% of GEMM) | %.0f (%.1f %% of copy) |\n", kernel,
              shape.c_str(), ms, tflops, 100.0 * tflops / f.gemm_tflops, gbs,
              100.0 * gbs / f.copy_gbs);
  std::fflush(stdout);
}

// The kernels' activation precision (kernel_wrappers.cuh): 0 f32, 1 bf16 storage.
void SetActivationPrecision(int precision) {
  Check(cudaMemcpyToSymbol(spark_activation_precision, &precision, sizeof(int)),
        "cudaMemcpyToSymbol");
}

// spark_linear at T tokens; bf16_act: bf16 activation storage (spark-compile
// --activation-precision bf16), else f32.
void BenchLinear(int T, int out, int in, const char* what, std::mt19937& rng, const Figures& f,
                 bool bf16_act = false) {
  const size_t act = bf16_act ? 2 : 4;
  void* x = bf16_act ? static_cast<void*>(DeviceRandom<bf16_t>(static_cast<size_t>(T) * in, rng, 1.0f))
                     : static_cast<void*>(DeviceRandom<float>(static_cast<size_t>(T) * in, rng, 1.0f));
  bf16_t* w = DeviceRandom<bf16_t>(static_cast<size_t>(out) * in, rng, 0.05f);
  void* y = nullptr;
  Check(cudaMalloc(&y, static_cast<size_t>(T) * out * act), "cudaMalloc");
  if (bf16_act) SetActivationPrecision(1);
  const int grid = LinearGrid(out);
  const int shared = LinearShared(T, bf16_act);
  const double ms =
      MedianMs([&] { check_linear<<<grid, 256, shared>>>(x, w, y, T, out, in); });
  if (bf16_act) SetActivationPrecision(0);
  const double flops = 2.0 * T * out * in;
  const double bytes = 2.0 * out * in + static_cast<double>(act) * T * (in + out);
  Row("linear", std::string(what) + " T=" + std::to_string(T) + " " + std::to_string(out) + "x" +
                    std::to_string(in) + (bf16_act ? " act=bf16" : ""),
      ms, flops, bytes, f);
  cudaFree(x);
  cudaFree(w);
  cudaFree(y);
}

// Random bytes (NVFP4 codes, FP8 elements with NaN codes replaced) and e4m3 scales in [2^-4, 2).
unsigned char* DeviceBytes(size_t n, std::mt19937& rng, bool e4m3_scales, bool no_nan) {
  std::vector<unsigned char> h(n);
  std::uniform_int_distribution<int> byte(0, 255), exponent(3, 8), mantissa(0, 7);
  for (unsigned char& b : h) {
    b = static_cast<unsigned char>(e4m3_scales ? (exponent(rng) << 3) | mantissa(rng) : byte(rng));
    if (no_nan && (b & 0x7f) == 0x7f) b &= 0xbf;
  }
  unsigned char* d = nullptr;
  Check(cudaMalloc(&d, n), "cudaMalloc");
  Check(cudaMemcpy(d, h.data(), n, cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

// linear_nvfp4 and linear_fp8 at the shape of BenchLinear.
void BenchQuantizedLinear(int T, int out, int in, const char* what, std::mt19937& rng,
                          const Figures& f) {
  float* x = DeviceRandom<float>(static_cast<size_t>(T) * in, rng, 1.0f);
  unsigned char* codes = DeviceBytes(static_cast<size_t>(out) * in / 2, rng, false, false);
  unsigned char* blocks = DeviceBytes(static_cast<size_t>(out) * in / 16, rng, true, false);
  unsigned char* fp8 = DeviceBytes(static_cast<size_t>(out) * in, rng, false, true);
  float* scale = DeviceRandom<float>(out, rng, 0.01f);
  float* y = nullptr;
  Check(cudaMalloc(&y, static_cast<size_t>(T) * out * sizeof(float)), "cudaMalloc");
  const int grid = LinearGrid(out), shared = LinearShared(T, false);
  const double flops = 2.0 * T * out * in;
  const double activations = 4.0 * T * (in + out);
  const std::string shape = std::string(what) + " T=" + std::to_string(T) + " " +
                            std::to_string(out) + "x" + std::to_string(in);
  const double ms4 = MedianMs([&] {
    check_linear_nvfp4<<<grid, 256, shared>>>(x, codes, blocks, scale, y, T, out, in);
  });
  Row("linear_nvfp4", shape, ms4, flops, out * in * (0.5 + 1.0 / 16) + activations, f);
  const double ms8 = MedianMs([&] {
    check_linear_fp8<<<grid, 256, shared>>>(x, fp8, scale, y, T, out, in, out);
  });
  Row("linear_fp8", shape, ms8, flops, 1.0 * out * in + activations, f);
  for (void* p : {static_cast<void*>(x), static_cast<void*>(codes), static_cast<void*>(blocks),
                  static_cast<void*>(fp8), static_cast<void*>(scale), static_cast<void*>(y)}) {
    cudaFree(p);
  }
}

// Random top-k routing: K distinct experts per token.
int* DeviceRouting(int T, int E, int K, std::mt19937& rng) {
  std::vector<int> idx(static_cast<size_t>(T) * K);
  std::vector<int> perm(E);
  for (int t = 0; t < T; ++t) {
    for (int e = 0; e < E; ++e) perm[e] = e;
    for (int k = 0; k < K; ++k) {
      std::uniform_int_distribution<int> pick(k, E - 1);
      std::swap(perm[k], perm[pick(rng)]);
      idx[static_cast<size_t>(t) * K + k] = perm[k];
    }
  }
  int* d = nullptr;
  Check(cudaMalloc(&d, idx.size() * sizeof(int)), "cudaMalloc");
  Check(cudaMemcpy(d, idx.data(), idx.size() * sizeof(int), cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

// bf16_act: bf16 activation storage (x, act and y; the buffers are allocated at f32 size).
void BenchMoe(int T, int hidden, int inter, int E, int K, std::mt19937& rng, const Figures& f,
              bool bf16_act = false) {
  const int slots = T * K;
  void* x = bf16_act ? static_cast<void*>(DeviceRandom<bf16_t>(static_cast<size_t>(T) * hidden, rng, 1.0f))
                     : static_cast<void*>(DeviceRandom<float>(static_cast<size_t>(T) * hidden, rng, 1.0f));
  bf16_t* gu = DeviceRandom<bf16_t>(static_cast<size_t>(E) * 2 * inter * hidden, rng, 0.05f);
  bf16_t* down = DeviceRandom<bf16_t>(static_cast<size_t>(E) * hidden * inter, rng, 0.05f);
  float* w = DeviceRandom<float>(slots, rng, 1.0f);
  int* idx = DeviceRouting(T, E, K, rng);
  float *act = nullptr, *y = nullptr, *parts = nullptr;
  Check(cudaMalloc(&act, static_cast<size_t>(slots) * inter * sizeof(float)), "cudaMalloc");
  Check(cudaMalloc(&y, static_cast<size_t>(T) * hidden * sizeof(float)), "cudaMalloc");
  Check(cudaMalloc(&parts, static_cast<size_t>(slots) * hidden * sizeof(float)), "cudaMalloc");
  // Grids and path as LowerToKernels.cpp gives the grouped (prefill) entries.
  const int path = spark::abi::kMoeGrouped;
  const int grid_gu = Grid((int64_t{T} * K * inter + 7) / 8);
  const int grid_dn = Grid((int64_t{T} * hidden + 7) / 8);
  const std::string shape = "T=" + std::to_string(T) + " hidden=" + std::to_string(hidden) +
                            " inter=" + std::to_string(inter) + " E=" + std::to_string(E) +
                            " K=" + std::to_string(K) + (bf16_act ? " act=bf16" : "");
  if (bf16_act) SetActivationPrecision(1);
  const double gu_ms = MedianMs([&] {
    check_moe_gate_up<<<grid_gu, 256>>>(x, gu, idx, act, T, hidden, inter, E, K, path);
  });
  // Every expert is selected at this size, so every expert's weights are read.
  Row("moe_gate_up (grouped)", shape, gu_ms, 2.0 * slots * hidden * 2.0 * inter,
      2.0 * E * 2 * inter * hidden, f);
  const double dn_ms = MedianMs([&] {
    check_moe_down<<<grid_dn, 256>>>(act, down, w, idx, y, parts, T, hidden, inter, E, K, path);
  });
  if (bf16_act) SetActivationPrecision(0);
  Row("moe_down (grouped)", shape, dn_ms, 2.0 * slots * inter * hidden, 2.0 * E * hidden * inter,
      f);
  for (void* p : {x, static_cast<void*>(gu), static_cast<void*>(down),
                  static_cast<void*>(w), static_cast<void*>(idx), static_cast<void*>(act),
                  static_cast<void*>(y), static_cast<void*>(parts)}) {
    cudaFree(p);
  }
}

// The MoE experts in each weight format at 26B-A4B's shapes: decode (one token, the top-k
// experts' weights read: the bandwidth figure) and a grouped 512-token chunk (every expert read:
// the TFLOP/s figure). Formats: bf16 (2 bytes per weight), NVFP4 (0.5 + 1/16: codes and block
// scales) and FP8 (1), as spark-import stacks a ModelOpt checkpoint's per-expert tensors.
void BenchMoeFormats(int T, int hidden, int inter, int E, int K, std::mt19937& rng,
                     const Figures& f) {
  const int slots = T * K;
  const bool grouped = T >= spark::abi::kMoeGroupMinTokens;
  const int64_t gu_n = int64_t{E} * 2 * inter * hidden, dn_n = int64_t{E} * hidden * inter;
  float* x = DeviceRandom<float>(static_cast<size_t>(T) * hidden, rng, 1.0f);
  float* w = DeviceRandom<float>(slots, rng, 1.0f);
  int* idx = DeviceRouting(T, E, K, rng);
  bf16_t* gu16 = DeviceRandom<bf16_t>(gu_n, rng, 0.05f);
  bf16_t* dn16 = DeviceRandom<bf16_t>(dn_n, rng, 0.05f);
  unsigned char* gu4 = DeviceBytes(gu_n / 2, rng, false, false);
  unsigned char* gu4s = DeviceBytes(gu_n / 16, rng, true, false);
  unsigned char* dn4 = DeviceBytes(dn_n / 2, rng, false, false);
  unsigned char* dn4s = DeviceBytes(dn_n / 16, rng, true, false);
  unsigned char* gu8 = DeviceBytes(gu_n, rng, false, true);
  unsigned char* dn8 = DeviceBytes(dn_n, rng, false, true);
  float* ts = DeviceRandom<float>(2 * E, rng, 0.01f);
  float *act = nullptr, *y = nullptr, *parts = nullptr;
  Check(cudaMalloc(&act, static_cast<size_t>(slots) * inter * sizeof(float)), "cudaMalloc");
  Check(cudaMalloc(&y, static_cast<size_t>(T) * hidden * sizeof(float)), "cudaMalloc");
  Check(cudaMalloc(&parts, static_cast<size_t>(slots) * hidden * sizeof(float)), "cudaMalloc");
  const int path = spark::abi::MoePathFor(T);
  float* ws = grouped ? parts : nullptr;
  const int grid_gu = Grid((int64_t{T} * K * inter + 7) / 8);
  const int grid_dn = Grid((int64_t{T} * hidden + 7) / 8);
  const std::string shape = std::string(grouped ? "grouped " : "decode ") + "T=" +
                            std::to_string(T) + " hidden=" + std::to_string(hidden) + " inter=" +
                            std::to_string(inter) + " E=" + std::to_string(E) + " K=" +
                            std::to_string(K);
  // Experts read: every expert once per chunk when grouped, else the K selected per token.
  const double experts_read = grouped ? E : std::min<double>(E, static_cast<double>(T) * K);
  const double gu_w = experts_read * 2 * inter * hidden, dn_w = experts_read * hidden * inter;
  const double gu_flops = 2.0 * slots * hidden * 2.0 * inter, dn_flops = 2.0 * slots * inter * hidden;
  const double gu_act = 4.0 * (static_cast<double>(T) * hidden + static_cast<double>(slots) * inter);
  const double dn_act = 4.0 * (static_cast<double>(slots) * inter + static_cast<double>(T) * hidden);
  struct Format {
    const char* name;
    double bytes_per_weight;
  };
  for (const Format& fmt : {Format{"bf16", 2.0}, Format{"nvfp4", 0.5 + 1.0 / 16}, Format{"fp8", 1.0}}) {
    const std::string gu_kernel = std::string("moe_gate_up ") + fmt.name;
    const std::string dn_kernel = std::string("moe_down ") + fmt.name;
    double gu_ms = 0, dn_ms = 0;
    if (fmt.name[0] == 'b') {
      gu_ms = MedianMs([&] {
        check_moe_gate_up<<<grid_gu, 256>>>(x, gu16, idx, act, T, hidden, inter, E, K, path);
      });
      dn_ms = MedianMs([&] {
        check_moe_down<<<grid_dn, 256>>>(act, dn16, w, idx, y, ws, T, hidden, inter, E, K, path);
      });
    } else if (fmt.name[0] == 'n') {
      gu_ms = MedianMs([&] {
        check_moe_gate_up_nvfp4<<<grid_gu, 256>>>(x, gu4, gu4s, ts, idx, act, T, hidden, inter, E,
                                                  K, path);
      });
      dn_ms = MedianMs([&] {
        check_moe_down_nvfp4<<<grid_dn, 256>>>(act, dn4, dn4s, ts, w, idx, y, ws, T, hidden,
                                               inter, E, K, path);
      });
    } else {
      gu_ms = MedianMs([&] {
        check_moe_gate_up_fp8<<<grid_gu, 256>>>(x, gu8, ts, idx, act, T, hidden, inter, E, K, 1,
                                                path);
      });
      dn_ms = MedianMs([&] {
        check_moe_down_fp8<<<grid_dn, 256>>>(act, dn8, ts, w, idx, y, ws, T, hidden, inter, E, K,
                                             1, path);
      });
    }
    Row(gu_kernel.c_str(), shape, gu_ms, gu_flops, gu_w * fmt.bytes_per_weight + gu_act, f);
    Row(dn_kernel.c_str(), shape, dn_ms, dn_flops, dn_w * fmt.bytes_per_weight + dn_act, f);
  }
  for (void* p : {static_cast<void*>(x), static_cast<void*>(w), static_cast<void*>(idx),
                  static_cast<void*>(gu16), static_cast<void*>(dn16), static_cast<void*>(gu4),
                  static_cast<void*>(gu4s), static_cast<void*>(dn4), static_cast<void*>(dn4s),
                  static_cast<void*>(gu8), static_cast<void*>(dn8), static_cast<void*>(ts),
                  static_cast<void*>(act), static_cast<void*>(y), static_cast<void*>(parts)}) {
    cudaFree(p);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Figures f{0.0, 781.0};
  const char* label = "working tree";
  bool moe_only = false, linear_only = false, small_batch_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--only=moe") == 0) {
      moe_only = true;
    } else if (std::strcmp(argv[i], "--only=linear") == 0) {
      linear_only = true;
    } else if (std::strcmp(argv[i], "--only=small-batch") == 0) {
      small_batch_only = true;
    } else if (std::strncmp(argv[i], "--gemm-tflops=", 14) == 0) {
      f.gemm_tflops = std::atof(argv[i] + 14);
    } else if (std::strncmp(argv[i], "--label=", 8) == 0) {
      label = argv[i] + 8;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--gemm-tflops=X] [--label=TEXT] [--only=moe|linear|small-batch]\n",
                   argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop{};
  Check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const int tile_bytes = spark::abi::kLinearTileSharedBytes;
  Check(cudaFuncSetAttribute(check_linear, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             tile_bytes),
        "cudaFuncSetAttribute");
  Check(cudaFuncSetAttribute(check_linear_nvfp4, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             tile_bytes),
        "cudaFuncSetAttribute");
  Check(cudaFuncSetAttribute(check_linear_fp8, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             tile_bytes),
        "cudaFuncSetAttribute");
  f.copy_gbs = CopyBandwidthGBs();
  std::printf("kernel_bench: %s; GPU %s (sm_%d%d); copy %.0f GB/s (measured), GEMM ceiling %.0f "
              "TFLOP/s (given)\n\n",
              label, prop.name, prop.major, prop.minor, f.copy_gbs, f.gemm_tflops);
  std::printf("| kernel | shape | ms (median of 20) | TFLOP/s | weight+activation GB/s |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");
  std::mt19937 rng(1234);
  if (moe_only) {  // the grouped experts alone, at the chunk sizes prefill runs
    BenchMoe(512, 2816, 704, 128, 8, rng, f);
    BenchMoe(1024, 2816, 704, 128, 8, rng, f);
    BenchMoe(1024, 2816, 704, 128, 8, rng, f, /*bf16_act=*/true);
    return 0;
  }
  if (small_batch_only) {  // decode steps of 1 to 16 sequences: the GEMV and the small batch
    struct Shape {
      int out, in;
      const char* what;
    };
    for (const Shape& s : {Shape{21504, 5376, "31B mlp up"}, Shape{5376, 21504, "31B mlp down"},
                           Shape{8192, 5376, "31B q"}, Shape{4096, 2816, "26B-A4B q"},
                           Shape{2816, 4096, "26B-A4B o"}, Shape{2112, 2816, "26B-A4B mlp up"}}) {
      for (int T : {1, 2, 4, 8, 16}) BenchLinear(T, s.out, s.in, s.what, rng, f);
      BenchLinear(8, s.out, s.in, s.what, rng, f, /*bf16_act=*/true);
    }
    for (int T : {1, 4, 8, 16}) BenchQuantizedLinear(T, 21504, 5376, "31B mlp up", rng, f);
    for (int T : {1, 8}) BenchQuantizedLinear(T, 4096, 2816, "26B-A4B q", rng, f);
    return 0;
  }
  // 31B (hidden 5376, MLP 21504, 32 x 256 query heads): a 512-token prefill chunk and decode.
  for (int T : {512, 1}) {
    BenchLinear(T, 21504, 5376, "31B mlp up", rng, f);
    BenchLinear(T, 5376, 21504, "31B mlp down", rng, f);
    BenchLinear(T, 8192, 5376, "31B q", rng, f);
  }
  // A 1024-token chunk (spark-compile's default --max-tokens), f32 and bf16 activations.
  for (bool bf16_act : {false, true}) {
    BenchLinear(1024, 21504, 5376, "31B mlp up", rng, f, bf16_act);
    BenchLinear(1024, 5376, 21504, "31B mlp down", rng, f, bf16_act);
    BenchLinear(1024, 8192, 5376, "31B q", rng, f, bf16_act);
  }
  if (linear_only) {  // the dense linears alone: the prefill tiles, then the quantized ones
    for (int T : {512, 1}) {
      BenchQuantizedLinear(T, 21504, 5376, "31B mlp up", rng, f);
      BenchQuantizedLinear(T, 5376, 21504, "31B mlp down", rng, f);
    }
    return 0;
  }
  // Decode steps of several sequences (continuous batching): weights read once per step.
  for (int T : {2, 4, 8, 16, 32}) {
    BenchLinear(T, 21504, 5376, "31B mlp up", rng, f);
    BenchLinear(T, 5376, 21504, "31B mlp down", rng, f);
  }
  // The same projections quantized (W4A16 / W8A16), decode first: the bandwidth figure.
  for (int T : {1, 8, 512}) {
    BenchQuantizedLinear(T, 21504, 5376, "31B mlp up", rng, f);
    BenchQuantizedLinear(T, 5376, 21504, "31B mlp down", rng, f);
  }
  // 26B-A4B experts (hidden 2816, expert MLP 704, 128 experts, top 8), a 512-token chunk.
  BenchMoe(512, 2816, 704, 128, 8, rng, f);
#ifndef SPARK_KERNEL_BENCH_BF16_MOE_ONLY  // (a kernels/ copy without the quantized experts)
  BenchMoeFormats(1, 2816, 704, 128, 8, rng, f);
  BenchMoeFormats(512, 2816, 704, 128, 8, rng, f);
#endif
  return 0;
}

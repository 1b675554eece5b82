// A CPU emulation of the slice of CUDA the kernel library uses, so that spark-op-check can run the
// kernels without a GPU (`run --device emulated`, emulated_kernels.h). It checks
// kernel *logic* (indexing, grid-stride loops, block/warp reductions, barriers, the mma.sync
// fragment layout as documented in kernels/common.cuh) against the host reference; it does not
// check timing, memory-model subtleties, or the accuracy of ex2.approx (2^x is exact here). One
// exception: cp.async copies land as late as the GPU allows, when their thread waits for their
// group (or exits), so that a stage read before its wait, or refilled while another thread still
// reads it, shows up in the results.
//
// Model: blocks run one after another; the threads of a block are cooperative fibers (ucontext)
// that switch only at barriers. __syncthreads is a barrier over the block; warp shuffles and
// mma.sync exchange values through a per-warp array between two per-warp barriers (all 32 lanes
// must take part, as on the GPU; a missing lane shows up as a reported deadlock). __shared__
// variables become function-local statics, which is correct because blocks do not overlap.
// Compile as C++17 with -DSPARK_KERNEL_EMULATION -include this file.
#ifndef SPARK_TEST_GPU_OP_CHECK_EMULATION_CUDA_EMU_H_
#define SPARK_TEST_GPU_OP_CHECK_EMULATION_CUDA_EMU_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <csetjmp>
#include <functional>
#include <initializer_list>
#include <ucontext.h>
#include <vector>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __CUDACC__EMULATED 1

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
struct alignas(8) uint2 {  // as CUDA's vector types: aligned to their size
  uint32_t x, y;
};
struct alignas(16) uint4 {
  uint32_t x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline uint2 make_uint2(uint32_t x, uint32_t y) { return {x, y}; }
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace spk_emu {

// Cooperative scheduler: the threads of one block are ucontext fibers on the calling OS thread;
// a fiber runs until it reaches a barrier (or exits), then the next runnable fiber resumes.
// Barrier 0 is the block (__syncthreads), barrier 1 + w is warp w (shuffles, mma.sync).
// Fibers start through ucontext and then switch with _setjmp/_longjmp, which (unlike
// swapcontext) make no system call.
// A cp.async copy in flight: its 16 bytes read at issue, written at its thread's wait.
struct AsyncCopy {
  void* dst = nullptr;
  unsigned char bytes[16];
  int size = 16;
  int group = 0;
};
struct Fiber {
  ucontext_t ctx;
  jmp_buf jb;
  bool started = false;
  bool done = false;
  int waiting = -1;  // barrier id, or -1 when runnable
  std::vector<AsyncCopy> copies;  // cp.async in flight
  int committed = 0;              // cp.async groups committed
};
// Lands this fiber's copies of the groups older than its newest `pending` ones.
inline void LandCopies(Fiber& f, int pending) {
  std::vector<AsyncCopy> left;
  for (const AsyncCopy& c : f.copies) {
    if (c.group < f.committed - pending) {
      std::memcpy(c.dst, c.bytes, c.size);
    } else {
      left.push_back(c);
    }
  }
  f.copies.swap(left);
}
struct Block {
  int threads = 0;
  std::vector<Fiber> fibers;
  std::vector<int> arrived, alive;  // per barrier id
  std::vector<std::array<uint64_t, 32 * 10>> warp_slots;
  jmp_buf scheduler;
  int current = 0;
  std::function<void()> body;
};
inline Block* g_block = nullptr;

// The block's dynamic shared memory (extern __shared__ on the GPU): as large as any GPU gives a
// block, of which a launch gets `g_dynamic_shared_bytes` (reported by %dynamic_smem_size).
constexpr size_t kMaxDynamicShared = 227 * 1024;
alignas(16) inline unsigned char g_dynamic_shared[kMaxDynamicShared];
inline unsigned g_dynamic_shared_bytes = 0;

inline int Lane() { return static_cast<int>(threadIdx.x & 31u); }
inline int Warp() { return static_cast<int>(threadIdx.x >> 5); }
inline uint64_t* Slots() { return g_block->warp_slots[Warp()].data(); }

inline void Release(int id) {
  g_block->arrived[id] = 0;
  for (Fiber& f : g_block->fibers)
    if (f.waiting == id) f.waiting = -1;
}
inline void Arrive(int id) {
  Block& b = *g_block;
  if (++b.arrived[id] == b.alive[id]) {
    Release(id);  // the last arrival continues without a switch
    return;
  }
  Fiber& f = b.fibers[b.current];
  f.waiting = id;
  if (!_setjmp(f.jb)) _longjmp(b.scheduler, 1);
}
inline void WarpSync() { Arrive(1 + Warp()); }

inline void Trampoline() {
  Block& b = *g_block;
  b.body();
  Fiber& f = b.fibers[b.current];
  ++f.committed;  // copies never waited for land when the thread exits
  LandCopies(f, 0);
  f.done = true;
  // An exited thread no longer takes part in barriers (as on the GPU).
  for (int id : {0, 1 + b.current / 32}) {
    --b.alive[id];
    if (b.arrived[id] > 0 && b.arrived[id] == b.alive[id]) Release(id);
  }
  _longjmp(b.scheduler, 1);
}

// Fiber stacks, reused by every block.
inline std::vector<char*>& Stacks() {
  static std::vector<char*> stacks;
  return stacks;
}

// Runs kernel(args...) on grid x block threads with `shared_bytes` of dynamic shared memory.
template <typename... P, typename... A>
void Launch(void (*kernel)(P...), int grid, int block, int shared_bytes, A... args) {
  if (block % 32 != 0) {
    std::fprintf(stderr, "emulation: block size %d is not a multiple of 32\n", block);
    std::exit(2);
  }
  if (shared_bytes < 0 || static_cast<size_t>(shared_bytes) > kMaxDynamicShared) {
    std::fprintf(stderr, "emulation: %d bytes of dynamic shared memory (at most %zu)\n",
                 shared_bytes, kMaxDynamicShared);
    std::exit(2);
  }
  g_dynamic_shared_bytes = static_cast<unsigned>(shared_bytes);
  constexpr size_t kStack = 256 * 1024;
  for (int bi = 0; bi < grid; ++bi) {
    Block b;
    b.threads = block;
    b.fibers.resize(block);
    const int nbar = 1 + block / 32;
    b.arrived.assign(nbar, 0);
    b.alive.assign(nbar, 32);
    b.alive[0] = block;
    b.warp_slots.resize(block / 32);
    b.body = [&] { kernel(static_cast<P>(args)...); };
    g_block = &b;
    while (static_cast<int>(Stacks().size()) < block) Stacks().push_back(static_cast<char*>(std::malloc(kStack)));
    for (int t = 0; t < block; ++t) {
      Fiber& f = b.fibers[t];
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = Stacks()[t];
      f.ctx.uc_stack.ss_size = kStack;
      f.ctx.uc_link = nullptr;
      makecontext(&f.ctx, Trampoline, 0);
    }
    blockIdx = {static_cast<unsigned>(bi), 0, 0};
    blockDim = {static_cast<unsigned>(block), 1, 1};
    gridDim = {static_cast<unsigned>(grid), 1, 1};
    for (;;) {
      bool all_done = true, progress = false;
      for (int t = 0; t < block; ++t) {
        Fiber& f = b.fibers[t];
        if (f.done) continue;
        all_done = false;
        if (f.waiting != -1) continue;
        b.current = t;
        threadIdx = {static_cast<unsigned>(t), 0, 0};
        if (!_setjmp(b.scheduler)) {
          if (!f.started) {
            f.started = true;
            setcontext(&f.ctx);
          }
          _longjmp(f.jb, 1);
        }
        progress = true;
      }
      if (all_done) break;
      if (!progress) {
        std::fprintf(stderr, "emulation: deadlock in block %d (threads wait on barriers that "
                             "not all threads reach)\n", bi);
        std::exit(3);
      }
    }
    g_block = nullptr;
  }
}

}  // namespace spk_emu

inline void __syncthreads() { spk_emu::Arrive(0); }
// The dynamic shared memory of the block, and its size (common.cuh dynamic_shared()).
inline unsigned char* spk_emu_dynamic_shared() { return spk_emu::g_dynamic_shared; }
inline unsigned spk_emu_dynamic_shared_bytes() { return spk_emu::g_dynamic_shared_bytes; }
// %nsmid: one multiprocessor, so that small shapes take every work-unit size a kernel has.
inline int spk_emu_multiprocessor_count() { return 1; }

namespace spk_emu {
// A warp shuffle: every lane publishes v, then reads the value of lane source(lane).
template <typename T, typename Source>
inline T Shuffle(T v, Source source) {
  static_assert(sizeof(T) <= 8, "shuffle of a large type");
  uint64_t* slots = Slots();
  const int lane = Lane();
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  WarpSync();  // previous readers of the slots are done
  slots[lane] = bits;
  WarpSync();
  T r;
  const uint64_t other = slots[source(lane)];
  std::memcpy(&r, &other, sizeof(T));
  return r;
}
// Warp-collective: every lane publishes its operands (at most 10) to slots[lane * 10 + i]; returns
// the slots, which hold every lane's until the warp's next exchange.
inline const uint64_t* ShareOperands(std::initializer_list<uint64_t> operands) {
  uint64_t* slots = Slots();
  WarpSync();  // previous readers of the slots are done
  int i = 0;
  for (const uint64_t v : operands) slots[Lane() * 10 + i++] = v;
  WarpSync();
  return slots;
}
}  // namespace spk_emu

template <typename T>
inline T __shfl_xor_sync(unsigned /*mask*/, T v, int offset) {
  return spk_emu::Shuffle(v, [offset](int lane) { return lane ^ offset; });
}

template <typename T>
inline T __shfl_sync(unsigned /*mask*/, T v, int src) {
  return spk_emu::Shuffle(v, [src](int) { return src & 31; });
}

template <typename T>
inline T __shfl_up_sync(unsigned /*mask*/, T v, int delta) {
  return spk_emu::Shuffle(v, [delta](int lane) { return lane >= delta ? lane - delta : lane; });
}

// Warp vote: bit l of the result is lane l's predicate (every lane of the warp takes part, as
// the kernels call it).
inline unsigned __ballot_sync(unsigned /*mask*/, int predicate) {
  const uint64_t* slots = spk_emu::ShareOperands({predicate != 0 ? 1u : 0u});
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l) bits |= static_cast<unsigned>(slots[l * 10]) << l;
  return bits;
}

// Fibers switch only at barriers, so a plain read-modify-write is atomic here.
template <typename T>
inline T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}

// A GPU load of T needs an address aligned to T (a misaligned one faults there): the emulation
// stops on one, so that a kernel's alignment checks are tested too.
template <typename T>
inline T __ldg(const T* p) {
  if (reinterpret_cast<uintptr_t>(p) % alignof(T) != 0) {
    std::fprintf(stderr, "emulation: misaligned %zu-byte load at %p (a GPU faults here)\n",
                 alignof(T), static_cast<const void*>(p));
    std::abort();
  }
  return *p;
}

namespace spk {
inline uint32_t spk_emu_pack_bf16x2(float lo, float hi) {
  auto cvt = [](float f) -> uint32_t {  // round to nearest even, NaN stays NaN
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isnan(f)) return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  };
  return cvt(lo) | (cvt(hi) << 16);
}

// cvt.f32.f16 of both halves (common.cuh f16x2_to_f32x2): exact, subnormals and NaN included.
inline void spk_emu_f16x2_to_f32x2(uint32_t v, float& lo, float& hi) {
  auto cvt = [](uint32_t h) -> float {
    const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
    const int e = static_cast<int>((h >> 10) & 31u), m = static_cast<int>(h & 1023u);
    if (e == 31) return m ? std::nanf("") : sign * INFINITY;
    if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
    return sign * std::ldexp(static_cast<float>(1024 + m), e - 25);
  };
  lo = cvt(v & 0xffffu);
  hi = cvt(v >> 16);
}

// cp.async: the 16 bytes are read now and land at the thread's wait for their group (the file's
// header).
inline void spk_emu_cp_async16(void* shared_dst, const void* global_src) {
  spk_emu::Fiber& f = spk_emu::g_block->fibers[spk_emu::g_block->current];
  spk_emu::AsyncCopy c;
  c.dst = shared_dst;
  std::memcpy(c.bytes, global_src, 16);
  c.group = f.committed;
  f.copies.push_back(c);
}
inline void spk_emu_cp_async4(void* shared_dst, const void* global_src) {
  spk_emu::Fiber& f = spk_emu::g_block->fibers[spk_emu::g_block->current];
  spk_emu::AsyncCopy c;
  c.dst = shared_dst;
  c.size = 4;
  std::memcpy(c.bytes, global_src, 4);
  c.group = f.committed;
  f.copies.push_back(c);
}
inline void spk_emu_cp_async_commit() { ++spk_emu::g_block->fibers[spk_emu::g_block->current].committed; }
inline void spk_emu_cp_async_wait(int pending) {
  spk_emu::LandCopies(spk_emu::g_block->fibers[spk_emu::g_block->current], pending);
}
// The row addresses the 32 lanes of a warp give an ldmatrix (warp-collective): lane l's at [l].
inline const uint64_t* spk_emu_ldmatrix_rows(const void* row) {
  uint64_t* slots = spk_emu::Slots();
  spk_emu::WarpSync();  // previous readers of the slots are done
  slots[spk_emu::Lane()] = reinterpret_cast<uintptr_t>(row);
  spk_emu::WarpSync();
  return slots;
}
// Warp-collective ldmatrix .x4 (common.cuh): every lane reads its words of the four matrices from
// the row addresses the lanes gave.
inline void spk_emu_ldmatrix_x4(uint32_t d[4], const void* row) {
  const uint64_t* rows = spk_emu_ldmatrix_rows(row);
  const int lane = spk_emu::Lane();
  for (int m = 0; m < 4; ++m) {
    const char* r = reinterpret_cast<const char*>(rows[m * 8 + lane / 4]);
    std::memcpy(&d[m], r + (lane % 4) * 4, 4);
  }
}
// ldmatrix .x4 .trans: lane l's half h of d[m] is row 2 (l % 4) + h, column l / 4 of matrix m.
inline void spk_emu_ldmatrix_x4_trans(uint32_t d[4], const void* row) {
  const uint64_t* rows = spk_emu_ldmatrix_rows(row);
  const int lane = spk_emu::Lane();
  for (int m = 0; m < 4; ++m) {
    uint32_t word = 0;
    for (int h = 0; h < 2; ++h) {
      const char* r = reinterpret_cast<const char*>(rows[m * 8 + 2 * (lane % 4) + h]);
      uint16_t v;
      std::memcpy(&v, r + (lane / 4) * 2, 2);
      word |= static_cast<uint32_t>(v) << (16 * h);
    }
    d[m] = word;
  }
}

// Warp-collective m16n8k16 bf16 MMA with the fragment layout documented in common.cuh.
inline void spk_emu_mma_bf16_16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  // slots[lane * 10 + ...]: a0..a3, b0, b1
  const uint64_t* slots = spk_emu::ShareOperands({a[0], a[1], a[2], a[3], b0, b1});
  const int lane = spk_emu::Lane();
  auto bf = [](uint32_t w, int half) {
    const uint32_t u = half ? (w & 0xffff0000u) : (w << 16);
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, q = l & 3;
    const uint64_t* s = slots + l * 10;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * q + h] = bf(static_cast<uint32_t>(s[0]), h);
      A[g + 8][2 * q + h] = bf(static_cast<uint32_t>(s[1]), h);
      A[g][2 * q + 8 + h] = bf(static_cast<uint32_t>(s[2]), h);
      A[g + 8][2 * q + 8 + h] = bf(static_cast<uint32_t>(s[3]), h);
      B[2 * q + h][g] = bf(static_cast<uint32_t>(s[4]), h);
      B[2 * q + 8 + h][g] = bf(static_cast<uint32_t>(s[5]), h);
    }
  }
  const int g = lane >> 2, q = lane & 3;
  for (int e = 0; e < 4; ++e) {
    const int row = g + (e >= 2 ? 8 : 0), col = 2 * q + (e & 1);
    float acc = c[e];
    for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
    c[e] = acc;
  }
}
// Warp-collective block-scaled FP4 MMA (common.cuh mma_nvfp4_m16n8k64), from the PTX ISA's
// fragment layouts for m16n8k64 and its block-scaling rules (.scale_vec::4X, ue4m3, selectors
// {0, 0}): the products of the dequantised values summed exactly (double) and rounded once.
inline void spk_emu_mma_nvfp4_m16n8k64(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1,
                                       uint32_t scale_a, uint32_t scale_b) {
  // slots[lane * 10 + ...]: a0..a3, b0, b1, scale_a, scale_b
  const uint64_t* slots = spk_emu::ShareOperands({a[0], a[1], a[2], a[3], b0, b1, scale_a, scale_b});
  const int lane = spk_emu::Lane();
  auto e2m1 = [](uint32_t code) {
    static const double kMagnitude[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
    return (code & 8u) != 0u ? -kMagnitude[code & 7u] : kMagnitude[code & 7u];
  };
  auto ue4m3 = [](uint32_t byte) {  // bit 7 must be 0 (PTX); 0x7f is NaN
    if (byte > 0x7eu) return std::nan("");
    const uint32_t e = byte >> 3, m = byte & 7u;
    return e == 0u ? m * std::ldexp(1.0, -9) : std::ldexp(1.0 + m / 8.0, static_cast<int>(e) - 7);
  };
  double A[16][64], B[64][8], scale_rows[16][4], scale_cols[8][4];
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, q = l & 3;
    const uint64_t* s = slots + l * 10;
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 8; ++j) {
        A[g + 8 * (i & 1)][8 * q + j + 32 * (i >> 1)] = e2m1((s[i] >> (4 * j)) & 15u);
      }
    }
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 8; ++j) B[8 * q + j + 32 * i][g] = e2m1((s[4 + i] >> (4 * j)) & 15u);
    }
    for (int b = 0; b < 4; ++b) {
      if (q < 2) scale_rows[g + 8 * q][b] = ue4m3((s[6] >> (8 * b)) & 255u);  // lanes 4g, 4g+1
      if (q == 0) scale_cols[g][b] = ue4m3((s[7] >> (8 * b)) & 255u);        // lane 4g
    }
  }
  const int g = lane >> 2, q = lane & 3;
  for (int e = 0; e < 4; ++e) {
    const int row = g + (e >= 2 ? 8 : 0), col = 2 * q + (e & 1);
    double acc = c[e];
    for (int k = 0; k < 64; ++k) {
      acc += A[row][k] * scale_rows[row][k / 16] * B[k][col] * scale_cols[col][k / 16];
    }
    c[e] = static_cast<float>(acc);
  }
}
}  // namespace spk

#endif  // SPARK_TEST_GPU_OP_CHECK_EMULATION_CUDA_EMU_H_

// The sample op (kernel_ops.def): the next token of each logits row, drawn on the device by the
// row's sampling parameters (kernel_abi.h SamplingParams), so that a decode step sends the host
// one token id instead of a vocabulary row of logits.
//
// One block per row (grid-stride over rows), 1024 threads. Every candidate weight is an integer
// (kernel_abi.h SamplingWeightBits), so each sum below is exact whatever order the threads add
// in: the kernel chooses exactly what the host reference (host_kernels.cc) chooses from the same
// weights. The passes over the row:
//   1. the largest key (SamplingKey) and its lowest index: the greedy token, and max_logit;
//   2. with top_k: the top_k-th largest key by radix selection (four passes of 8-bit digits,
//      counting the keys under each digit), then the index of the last candidate among the keys
//      equal to it (ties go to lower indices: a prefix sum over thread chunks in index order);
//   3. with top_p: the same selection weighted by the candidates' weights, down to the key at
//      which the ranked weight sum reaches the nucleus mass, and the last kept index among ties;
//   4. the draw: the kept weights summed, target = floor(sum * draw / 2^64), and the first kept
//      index (in index order) whose running sum exceeds it, from a prefix sum over thread chunks.
// Histogram and sum passes read the row coalesced (thread i reads i, i + blockDim, ...); the
// index-ordered passes give each thread a contiguous chunk.
#include "common.cuh"

namespace spk {
namespace {

constexpr int kBins = 256;
using u64 = unsigned long long;

struct SampleShared {
  u64 bins[kBins];
  u64 warp_values[32];
  u64 above;     // the selection's weight above the digits chosen so far
  unsigned digit;
  int chosen;    // an index a pass found (-1: none)
};

SPK_DEVICE u64 warp_sum_u64(u64 v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
SPK_DEVICE u64 warp_max_u64(u64 v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const u64 other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  return v;
}

// Block-wide sum / max of a u64, given to every thread; ends with a barrier.
SPK_DEVICE u64 block_sum_u64(u64 v, SampleShared& s) {
  v = warp_sum_u64(v);
  if (lane_id() == 0) s.warp_values[warp_id()] = v;
  __syncthreads();
  u64 r = lane_id() < num_warps() ? s.warp_values[lane_id()] : 0ull;
  r = warp_sum_u64(r);
  __syncthreads();
  return r;
}
SPK_DEVICE u64 block_max_u64(u64 v, SampleShared& s) {
  v = warp_max_u64(v);
  if (lane_id() == 0) s.warp_values[warp_id()] = v;
  __syncthreads();
  u64 r = lane_id() < num_warps() ? s.warp_values[lane_id()] : 0ull;
  r = warp_max_u64(r);
  __syncthreads();
  return r;
}

// The sum of `v` over the threads before this one (thread order); ends with a barrier.
SPK_DEVICE u64 block_exclusive_sum_u64(u64 v, SampleShared& s) {
  const int lane = lane_id(), warp = warp_id();
  u64 inclusive = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const u64 up = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += up;
  }
  if (lane == 31) s.warp_values[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const u64 total = lane < num_warps() ? s.warp_values[lane] : 0ull;
    u64 before = total;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const u64 up = __shfl_up_sync(0xffffffffu, before, o);
      if (lane >= o) before += up;
    }
    if (lane < num_warps()) s.warp_values[lane] = before - total;
  }
  __syncthreads();
  const u64 result = s.warp_values[warp] + inclusive - v;
  __syncthreads();
  return result;
}

// A candidate's weight (kernel_ops.def sample): floor(exp((logit - max) / temperature) * 2^bits).
SPK_DEVICE u64 candidate_weight(float logit, unsigned key, float max_logit, float temperature,
                                int bits) {
  if (key == 0u) return 0ull;  // NaN
  const float w = spk_expf((logit - max_logit) / temperature);
  const u64 q = static_cast<u64>(w * u32_as_f32(static_cast<uint32_t>(127 + bits) << 23));
  const u64 cap = 1ull << bits;
  return q < cap ? q : cap;
}

// The key at which the ranked running sum of weight(i, key) (largest key first) reaches `need`,
// by four passes of 8-bit radix digits; s.above is left at the weight of the keys above it.
// weight(i, key) must be 0 for elements outside the selection.
template <typename Weight>
SPK_DEVICE unsigned radix_select(ActIn row, int vocab, u64 need, Weight weight, SampleShared& s) {
  unsigned prefix = 0u, mask = 0u;
  u64 above = 0ull;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) s.bins[b] = 0ull;
    if (threadIdx.x == 0) {  // kept if no digit is found (cannot happen: sums are exact)
      s.digit = 0u;
      s.above = above;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float logit = row.ldg(i);
      const unsigned key = spark::abi::SamplingKey(logit);
      if ((key & mask) != prefix) continue;
      const u64 w = weight(i, logit, key);
      if (w != 0ull) atomicAdd(&s.bins[(key >> shift) & 255u], w);
    }
    __syncthreads();
    if (warp_id() == 0) {
      // Lane l holds bins 255 - 8l down to 248 - 8l: the digits in ranked order.
      const int lane = lane_id();
      u64 own = 0ull;
      for (int j = 0; j < 8; ++j) own += s.bins[255 - 8 * lane - j];
      u64 inclusive = own;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const u64 up = __shfl_up_sync(0xffffffffu, inclusive, o);
        if (lane >= o) inclusive += up;
      }
      u64 running = above + inclusive - own;
      if (running < need && need <= above + inclusive) {
        for (int j = 0; j < 8; ++j) {
          const int bin = 255 - 8 * lane - j;
          if (running + s.bins[bin] >= need) {
            s.digit = static_cast<unsigned>(bin);
            s.above = running;
            break;
          }
          running += s.bins[bin];
        }
      }
    }
    __syncthreads();
    prefix |= s.digit << shift;
    mask |= 255u << shift;
    above = s.above;
    __syncthreads();
  }
  return prefix;
}

// The index at which the running sum of weight(i), over this thread's chunk of the row in index
// order and over the chunks before it, first exceeds `target` (or reaches it, with
// `reach`); -1 when it never does. Every thread gets the result.
template <typename Weight>
SPK_DEVICE int index_at_running_sum(ActIn row, int vocab, u64 target, bool reach, Weight weight,
                                    SampleShared& s) {
  const int chunk = (vocab + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int begin = static_cast<int>(threadIdx.x) * chunk;
  const int end = begin + chunk < vocab ? begin + chunk : vocab;
  u64 own = 0ull;
  for (int i = begin; i < end; ++i) {
    const float logit = row.ldg(i);
    own += weight(i, logit, spark::abi::SamplingKey(logit));
  }
  if (threadIdx.x == 0) s.chosen = -1;
  u64 running = block_exclusive_sum_u64(own, s);  // ends with a barrier
  const bool mine = reach ? running < target && target <= running + own
                          : running <= target && target < running + own;
  if (mine) {
    for (int i = begin; i < end; ++i) {
      const float logit = row.ldg(i);
      running += weight(i, logit, spark::abi::SamplingKey(logit));
      if (reach ? running >= target : running > target) {
        s.chosen = i;
        break;
      }
    }
  }
  __syncthreads();
  const int chosen = s.chosen;
  __syncthreads();
  return chosen;
}

SPK_DEVICE int sample_row(ActIn row, const spark::abi::SamplingParams& p, int vocab,
                          SampleShared& s) {
  using spark::abi::SamplingKey;
  // 1. The largest key, lowest index first: (key << 32) | (~index) is largest for it.
  u64 best = 0ull;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const u64 packed = (static_cast<u64>(SamplingKey(row.ldg(i))) << 32) |
                       static_cast<u64>(~static_cast<uint32_t>(i));
    best = packed > best ? packed : best;
  }
  best = block_max_u64(best, s);
  const int greedy = static_cast<int>(~static_cast<uint32_t>(best & 0xffffffffull));
  const float max_logit = row.ldg(greedy);
  if (spark::abi::SamplingIsGreedy(p) || !(fabsf_(max_logit) < inff_())) return greedy;

  const int bits = spark::abi::SamplingWeightBits(vocab);
  const float temperature = p.temperature;
  const auto weight_of = [&](float logit, unsigned key) {
    return candidate_weight(logit, key, max_logit, temperature, bits);
  };

  // 2. Candidates: keys above top_k_key, and ties at it up to index top_k_last.
  unsigned top_k_key = 0u;
  int top_k_last = vocab - 1;
  if (p.top_k > 0 && p.top_k < vocab) {
    const u64 k = static_cast<u64>(p.top_k);
    top_k_key = radix_select(row, vocab, k, [](int, float, unsigned) { return 1ull; }, s);
    const u64 ties = k - s.above;
    top_k_last = index_at_running_sum(
        row, vocab, ties, /*reach=*/true,
        [&](int, float, unsigned key) { return key == top_k_key ? 1ull : 0ull; }, s);
  }
  const auto candidate = [&](int i, unsigned key) {
    return key > top_k_key || (key == top_k_key && i <= top_k_last);
  };

  // 3. The nucleus: candidates above nucleus_key, and ties at it up to index nucleus_last.
  unsigned nucleus_key = 0u;
  int nucleus_last = vocab - 1;
  if (p.top_p < 1.0f) {
    u64 total = 0ull;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float logit = row.ldg(i);
      const unsigned key = SamplingKey(logit);
      if (candidate(i, key)) total += weight_of(logit, key);
    }
    total = block_sum_u64(total, s);
    const u64 need = spark::abi::SamplingNucleusMass(p.top_p, total);
    const auto candidate_weight_of = [&](int i, float logit, unsigned key) {
      return candidate(i, key) ? weight_of(logit, key) : 0ull;
    };
    nucleus_key = radix_select(row, vocab, need, candidate_weight_of, s);
    const u64 tie_mass = need - s.above;
    nucleus_last = index_at_running_sum(
        row, vocab, tie_mass, /*reach=*/true,
        [&](int i, float logit, unsigned key) {
          return key == nucleus_key ? candidate_weight_of(i, logit, key) : 0ull;
        },
        s);
  }
  const auto kept_weight = [&](int i, float logit, unsigned key) {
    const bool kept =
        candidate(i, key) && (key > nucleus_key || (key == nucleus_key && i <= nucleus_last));
    return kept ? weight_of(logit, key) : 0ull;
  };

  // 4. The draw over the kept weights, in index order.
  u64 kept_total = 0ull;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float logit = row.ldg(i);
    kept_total += kept_weight(i, logit, SamplingKey(logit));
  }
  kept_total = block_sum_u64(kept_total, s);
  const u64 target = mulhi_u64(kept_total, spark::abi::SamplingDraw(p.seed, p.counter));
  const int chosen = index_at_running_sum(row, vocab, target, /*reach=*/false, kept_weight, s);
  return chosen >= 0 ? chosen : greedy;
}

}  // namespace
}  // namespace spk

// params: kSamplingParamWords i32 words per row (kernel_abi.h SamplingParams).
SPK_EXPORT void spark_sample(const void* logits, const int* params, int* token, int num_tokens,
                             int vocab) {
  __shared__ spk::SampleShared shared;
  for (int t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    spark::abi::SamplingParams p;
    __builtin_memcpy(&p, params + static_cast<int64_t>(t) * spark::abi::kSamplingParamWords,
                     sizeof(p));
    const spk::ActIn row = spk::ActIn{logits} + static_cast<int64_t>(t) * vocab;
    const int chosen = spk::sample_row(row, p, vocab, shared);
    if (threadIdx.x == 0) token[t] = chosen;
    __syncthreads();
  }
}

SPARK_CHECK_KERNEL_SIGNATURES()

// Gemma 4 mixture of experts (architecture spec section 9): router, expert gate/up, expert down.
//
// spark_moe_topk: the router's selection (the router's logits come from rms_norm with the
// router scale as weight and a `linear` over proj, so that reading proj is spread over the GPU):
// one block (128 threads) per token, grid-stride over tokens.
//   p      = softmax(logits * logit_scale)                       (f32, logit_scale = hidden^-0.5)
//   top_k of p by iterative block argmax, ties -> lower expert index (torch.topk order)
//   w      = p_sel / sum(p_sel) * per_expert_scale[idx]
//   weights[t, k] = w (f32), indices[t, k] = idx (i32), in descending order of p.
//   num_experts is limited to kMaxExperts (1024; Gemma 4 uses 128): larger counts give NaN
//   weights and index -1.
// spark_moe_gate_up:
//   act[t, k, i] = gelu(x[t] . gate_up[e, i]) * (x[t] . gate_up[e, intermediate + i]),
//   e = indices[t, k]; an index outside [0, num_experts) gives 0. Decode (T < 16): one warp per
//   (token, k, i) output, grid-stride over warps. Prefill (T >= 16): grouped by expert on tensor
//   cores (gate_up_grouped below), each selected expert's weights read once per 64 slots.
// spark_moe_down, ungrouped (decode, or no workspace): one warp per (token, h) output,
// grid-stride over warps:
//   y[t, h] = sum_k weights[t, k] * (act[t, k] . down[e_k, h]); invalid indices contribute 0.
//   The lanes split the top_k x intermediate products of an output together (all rows' loads
//   independent), so a decode step keeps many loads in flight per warp.
// Both expert kernels read weights with 16-byte loads when the row length is a multiple of 8 and
// the pointers are aligned (scalar loads otherwise).
// spark_moe_down, grouped (kernel_abi.h MoeDownGrouped: T >= 16 with a workspace): each slot's
//   weighted expert output to partials[t, k] on tensor cores (down_grouped), and
// spark_moe_combine: y[t] = sum_k partials[t, k], in k order.
#include "common.cuh"
#include "mma_tile.cuh"
#include "spark/runtime/kernel_abi.h"

namespace spk {
namespace moe {
namespace {

constexpr int kMaxExperts = 1024;

// Dot of an activation row with a bf16 row of length n; per-lane partial (not reduced).
template <bool kVec>
SPK_DEVICE float dot_partial(ActIn a, const unsigned short* w, int n) {
  const int lane = lane_id();
  float acc = 0.0f;
  if (kVec) {
#pragma unroll 4
    for (int c = lane; c < n / 8; c += 32) {
      float wf[8];
      unpack_bf16x8(ldg_u4(w + c * 8), wf);
      float4 x0, x1;
      a.ldg8(c * 8, x0, x1);
      acc = dot8_acc(wf, x0, x1, acc);
    }
  } else {
    for (int k = lane; k < n; k += 32) acc = fmaf_(ldg_bf16(w + k), a.ldg(k), acc);
  }
  return acc;
}

// Dot of two rows of gate_up with the same x: gate and up partials.
template <bool kVec>
SPK_DEVICE void dot2_partial(ActIn a, const unsigned short* wg, const unsigned short* wu, int n,
                             float* pg, float* pu) {
  const int lane = lane_id();
  float ag = 0.0f, au = 0.0f;
  if (kVec) {
#pragma unroll 2
    for (int c = lane; c < n / 8; c += 32) {
      float g[8], u[8];
      unpack_bf16x8(ldg_u4(wg + c * 8), g);
      unpack_bf16x8(ldg_u4(wu + c * 8), u);
      float4 x0, x1;
      a.ldg8(c * 8, x0, x1);
      const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        ag = fmaf_(g[j], xv[j], ag);
        au = fmaf_(u[j], xv[j], au);
      }
    }
  } else {
    for (int k = lane; k < n; k += 32) {
      const float xv = a.ldg(k);
      ag = fmaf_(ldg_bf16(wg + k), xv, ag);
      au = fmaf_(ldg_bf16(wu + k), xv, au);
    }
  }
  *pg = ag;
  *pu = au;
}

constexpr int kGroupMinTokens = spark::abi::kMoeGroupMinTokens;

// The slots (t * top_k + k) routed to expert e, in slot order: writes those of rank
// [first, first + mma::kBM) to rows[rank - first] and returns how many slots e has in all.
// Every thread of the (256-thread) block must call it; s_warp holds 8 ints.
SPK_DEVICE int expert_rows(const int* indices, int num_slots, int e, int first, int* rows,
                           int* s_warp) {
  const int lane = lane_id(), warp = warp_id();
  int total = 0;
  __syncthreads();  // the caller is done with rows from the previous call
  for (int base = 0; base < num_slots; base += blockDim.x) {
    const int slot = base + static_cast<int>(threadIdx.x);
    const int hit = slot < num_slots && ldg_i(indices + slot) == e ? 1 : 0;
    int incl = hit;  // inclusive prefix count within the warp
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const int other = __shfl_sync(0xffffffffu, incl, lane >= off ? lane - off : lane);
      if (lane >= off) incl += other;
    }
    if (lane == 31) s_warp[warp] = incl;
    __syncthreads();
    int before = 0, chunk = 0;
    for (int w = 0; w < num_warps(); ++w) {
      if (w < warp) before += s_warp[w];
      chunk += s_warp[w];
    }
    const int rank = total + before + incl - 1;
    if (hit && rank >= first && rank < first + mma::kBM) rows[rank - first] = slot;
    total += chunk;
    __syncthreads();  // s_warp is rewritten by the next chunk
  }
  return total;
}

// Slots whose index is outside [0, num_experts) belong to no expert's group: their rows (of
// row_len elements: an activation buffer, or the f32 partials) are zeros, as in the ungrouped
// paths. Grid-stride over all threads.
template <class Rows>
SPK_DEVICE void zero_unrouted_rows(const int* indices, int num_slots, int num_experts, Rows rows,
                                   int row_len) {
  for (int64_t i = global_thread(); i < static_cast<int64_t>(num_slots) * row_len;
       i += grid_threads()) {
    const int e = ldg_i(indices + i / row_len);
    if (e < 0 || e >= num_experts) rows[i] = 0.0f;
  }
}

// moe_gate_up for a step of many tokens: the slots are grouped by expert and each expert's
// [slots, hidden] x [hidden, 2 * intermediate] product runs on tensor cores (mma_tile.cuh), so
// every selected expert's weights are read once per 64 slots instead of once per slot. Tile =
// (expert, 64 intermediate columns); its 128 B rows interleave gate row i and up row i, so one
// thread's fragment pair (c0, c1) is (gate, up) of the same column: act = gelu(c0) * c1.
SPK_DEVICE void gate_up_grouped(ActIn x, const unsigned short* gate_up, const int* indices,
                                ActOut act, int num_tokens, int hidden, int intermediate,
                                int num_experts, int top_k) {
  __shared__ __align__(16) mma::Smem smem;
  __shared__ int s_rows[mma::kBM];
  __shared__ int s_warp[8];
  const int num_slots = num_tokens * top_k;
  zero_unrouted_rows(indices, num_slots, num_experts, act, intermediate);
  const int col_tiles = (intermediate + mma::kBN / 2 - 1) / (mma::kBN / 2);
  for (int64_t tile = blockIdx.x; tile < static_cast<int64_t>(num_experts) * col_tiles;
       tile += gridDim.x) {
    const int e = static_cast<int>(tile / col_tiles);
    const int i0 = static_cast<int>(tile % col_tiles) * (mma::kBN / 2);
    const unsigned short* base = gate_up + static_cast<int64_t>(e) * 2 * intermediate * hidden;
    for (int first = 0;; first += mma::kBM) {
      const int total = expert_rows(indices, num_slots, e, first, s_rows, s_warp);
      if (first >= total) break;
      const int nrows = total - first < mma::kBM ? total - first : mma::kBM;
      const auto x_row = [&](int r) -> ActIn {
        return r < nrows ? x + static_cast<int64_t>(s_rows[r] / top_k) * hidden : ActIn{nullptr};
      };
      const auto w_row = [&](int n) -> const unsigned short* {
        const int i = i0 + (n >> 1);
        if (i >= intermediate) return nullptr;
        return base + static_cast<int64_t>((n & 1) ? intermediate + i : i) * hidden;
      };
      mma::Accum acc;
      mma::tile_mma(smem, x_row, w_row, hidden, acc);
      mma::for_each_pair(acc, [&](int r, int c, float gate, float up) {
        const int i = i0 + (c >> 1);
        if (r < nrows && i < intermediate) {
          act[static_cast<int64_t>(s_rows[r]) * intermediate + i] = spk_gelu(gate) * up;
        }
      });
    }
  }
}

// moe_down for a grouped step: partials[slot, h] = weights[slot] * (act[slot] @ down[e]^T), the
// slots grouped by expert on tensor cores (tile = expert x 128 hidden columns, K = intermediate),
// each selected expert's weights read once per 64 slots. Zeros for slots with an invalid index.
SPK_DEVICE void down_grouped(ActIn act, const unsigned short* down, ActIn weights,
                             const int* indices, float* partials, int num_tokens, int hidden,
                             int intermediate, int num_experts, int top_k) {
  __shared__ __align__(16) mma::Smem smem;
  __shared__ int s_rows[mma::kBM];
  __shared__ int s_warp[8];
  const int num_slots = num_tokens * top_k;
  zero_unrouted_rows(indices, num_slots, num_experts, partials, hidden);
  const int col_tiles = (hidden + mma::kBN - 1) / mma::kBN;
  for (int64_t tile = blockIdx.x; tile < static_cast<int64_t>(num_experts) * col_tiles;
       tile += gridDim.x) {
    const int e = static_cast<int>(tile / col_tiles);
    const int h0 = static_cast<int>(tile % col_tiles) * mma::kBN;
    const unsigned short* base = down + static_cast<int64_t>(e) * hidden * intermediate;
    for (int first = 0;; first += mma::kBM) {
      const int total = expert_rows(indices, num_slots, e, first, s_rows, s_warp);
      if (first >= total) break;
      const int nrows = total - first < mma::kBM ? total - first : mma::kBM;
      const auto act_row = [&](int r) -> ActIn {
        return r < nrows ? act + static_cast<int64_t>(s_rows[r]) * intermediate : ActIn{nullptr};
      };
      const auto w_row = [&](int n) -> const unsigned short* {
        return h0 + n < hidden ? base + static_cast<int64_t>(h0 + n) * intermediate : nullptr;
      };
      mma::Accum acc;
      mma::tile_mma(smem, act_row, w_row, intermediate, acc);
      mma::for_each_pair(acc, [&](int r, int c, float c0, float c1) {
        if (r >= nrows) return;
        const int slot = s_rows[r], h = h0 + c;
        const float w = weights.ldg(slot);
        float* row = partials + static_cast<int64_t>(slot) * hidden;
        if (h < hidden) row[h] = w * c0;
        if (h + 1 < hidden) row[h + 1] = w * c1;
      });
    }
  }
}

// The same contract without tensor cores (unaligned rows): one warp per (slot, h).
SPK_DEVICE void down_slots(ActIn act, const unsigned short* down, ActIn weights,
                           const int* indices, float* partials, int num_tokens, int hidden,
                           int intermediate, int num_experts, int top_k) {
  const int64_t units = static_cast<int64_t>(num_tokens) * top_k * hidden;
  for (int64_t u = global_warp(); u < units; u += grid_warps()) {
    const int64_t slot = u / hidden;
    const int h = static_cast<int>(u % hidden);
    const int e = ldg_i(indices + slot);
    float part = 0.0f;
    if (e >= 0 && e < num_experts) {
      part = dot_partial<false>(act + slot * intermediate,
                                down + (static_cast<int64_t>(e) * hidden + h) * intermediate,
                                intermediate);
    }
    part = warp_sum(part);
    if (lane_id() == 0) partials[u] = e >= 0 && e < num_experts ? weights.ldg(slot) * part : 0.0f;
  }
}

// Argmax with lower-index tie-break: is (v, i) better than (bv, bi)?
SPK_DEVICE bool better(float v, int i, float bv, int bi) {
  return v > bv || (v == bv && i < bi);
}

}  // namespace
}  // namespace moe
}  // namespace spk

SPK_EXPORT void spark_moe_topk(const void* logits_in, const unsigned short* per_expert_scale,
                               void* weights_out, int* indices, int num_tokens, int num_experts,
                               int top_k, float logit_scale) {
  using namespace spk::moe;
  const spk::ActIn logits{logits_in};
  const spk::ActOut weights{weights_out};
  __shared__ float s_p[kMaxExperts];
  __shared__ float s_selected[kMaxExperts];  // p of selection k (f32 whatever the storage)
  __shared__ float s_scratch[32];
  __shared__ float s_bv[32];
  __shared__ int s_bi[32];
  if (num_tokens <= 0 || top_k <= 0) return;
  const int tid = threadIdx.x, nt = blockDim.x;
  const int lane = spk::lane_id(), warp = spk::warp_id(), nw = spk::num_warps();

  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    if (num_experts <= 0 || num_experts > kMaxExperts) {  // unsupported: loud result
      for (int k = tid; k < top_k; k += nt) {
        weights[t * top_k + k] = spk::nanf_();
        indices[t * top_k + k] = -1;
      }
      continue;
    }
    const spk::ActIn lt = logits + t * num_experts;
    // 1. softmax over all experts.
    float mx = -spk::inff_();
    for (int e = tid; e < num_experts; e += nt) {
      s_p[e] = lt.ldg(e) * logit_scale;
      mx = spk::fmaxf_(mx, s_p[e]);
    }
    mx = spk::block_max(mx, s_scratch);
    float sum = 0.0f;
    for (int e = tid; e < num_experts; e += nt) {
      const float ex = spk::spk_expf(s_p[e] - mx);
      s_p[e] = ex;
      sum += ex;
    }
    sum = spk::block_sum(sum, s_scratch);
    for (int e = tid; e < num_experts; e += nt) s_p[e] = s_p[e] / sum;
    __syncthreads();
    // 2. top_k by iterative block argmax (ties: lower index); a taken expert is marked -1.
    //    Thread 0 writes each selection's index at once, keeps its p in s_selected until step
    //    3 and sums the selected probabilities in selection order.
    float total = 0.0f;
    for (int k = 0; k < top_k; ++k) {
      float bv = -2.0f;
      int bi = 0x7fffffff;
      for (int e = tid; e < num_experts; e += nt) {
        const float v = s_p[e];
        if (better(v, e, bv, bi)) {
          bv = v;
          bi = e;
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (better(ov, oi, bv, bi)) {
          bv = ov;
          bi = oi;
        }
      }
      if (lane == 0) {
        s_bv[warp] = bv;
        s_bi[warp] = bi;
      }
      __syncthreads();
      if (tid == 0) {
        for (int w = 1; w < nw; ++w) {
          if (better(s_bv[w], s_bi[w], bv, bi)) {
            bv = s_bv[w];
            bi = s_bi[w];
          }
        }
        const bool ok = k < num_experts && bi >= 0 && bi < num_experts && bv >= 0.0f;
        indices[t * top_k + k] = ok ? bi : -1;
        s_selected[k] = ok ? bv : 0.0f;
        if (ok) {
          total += bv;
          s_p[bi] = -1.0f;
        }
      }
      __syncthreads();
    }
    // 3. renormalise and scale per expert.
    if (tid == 0) {
      for (int k = 0; k < top_k; ++k) {
        const int e = indices[t * top_k + k];
        const float w = s_selected[k];
        weights[t * top_k + k] = e >= 0 ? w / total * spk::ldg_bf16(per_expert_scale + e) : 0.0f;
      }
    }
    __syncthreads();
  }
}

SPK_EXPORT_INLINE void spark_moe_gate_up(const void* x_in, const unsigned short* gate_up,
                                         const int* indices, void* act_out, int num_tokens,
                                         int hidden, int intermediate, int num_experts, int top_k,
                                         int tokens_from, int tokens_to) {
  using namespace spk::moe;
  const spk::ActIn x{x_in};
  const spk::ActOut act{act_out};
  if (num_tokens < tokens_from || num_tokens > tokens_to) return;
  if (num_tokens <= 0 || intermediate <= 0 || top_k <= 0) return;
  const bool vec = (hidden % 8) == 0 && spk::aligned16(x_in) && spk::aligned16(gate_up);
  if (vec && hidden > 0 && num_tokens >= kGroupMinTokens && blockDim.x == spk::mma::kThreads) {
    gate_up_grouped(x, gate_up, indices, act, num_tokens, hidden, intermediate, num_experts, top_k);
    return;
  }
  const int64_t units = static_cast<int64_t>(num_tokens) * top_k * intermediate;
  const int lane = spk::lane_id();
  for (int64_t u = spk::global_warp(); u < units; u += spk::grid_warps()) {
    const int64_t tk = u / intermediate;  // t * top_k + k
    const int i = static_cast<int>(u % intermediate);
    const int64_t t = tk / top_k;
    const int e = spk::ldg_i(indices + tk);
    float result = 0.0f;
    if (e >= 0 && e < num_experts && hidden > 0) {
      const unsigned short* base =
          gate_up + static_cast<int64_t>(e) * 2 * intermediate * hidden;
      const unsigned short* wg = base + static_cast<int64_t>(i) * hidden;
      const unsigned short* wu = base + static_cast<int64_t>(intermediate + i) * hidden;
      float pg, pu;
      if (vec)
        dot2_partial<true>(x + t * hidden, wg, wu, hidden, &pg, &pu);
      else
        dot2_partial<false>(x + t * hidden, wg, wu, hidden, &pg, &pu);
      pg = spk::warp_sum(pg);
      pu = spk::warp_sum(pu);
      result = spk::spk_gelu(pg) * pu;
    }
    if (lane == 0) act[u] = result;
  }
}

SPK_EXPORT_INLINE void spark_moe_down(const void* act_in, const unsigned short* down,
                                      const void* weights_in, const int* indices, void* y_out,
                                      float* partials, int num_tokens, int hidden,
                                      int intermediate, int num_experts, int top_k,
                                      int tokens_from, int tokens_to) {
  using namespace spk::moe;
  const spk::ActIn act{act_in}, weights{weights_in};
  const spk::ActOut y{y_out};
  if (num_tokens < tokens_from || num_tokens > tokens_to) return;
  if (num_tokens <= 0 || hidden <= 0) return;
  const bool vec = (intermediate % 8) == 0 && spk::aligned16(act_in) && spk::aligned16(down);
  if (spark::abi::MoeDownGrouped(num_tokens, partials != nullptr)) {
    if (top_k <= 0) return;
    if (vec && intermediate > 0 && blockDim.x == spk::mma::kThreads) {
      down_grouped(act, down, weights, indices, partials, num_tokens, hidden, intermediate,
                   num_experts, top_k);
    } else {
      down_slots(act, down, weights, indices, partials, num_tokens, hidden, intermediate,
                 num_experts, top_k);
    }
    return;
  }
  const int64_t units = static_cast<int64_t>(num_tokens) * hidden;
  const int lane = spk::lane_id();
  for (int64_t u = spk::global_warp(); u < units; u += spk::grid_warps()) {
    const int64_t t = u / hidden;
    const int h = static_cast<int>(u % hidden);
    float acc = 0.0f;
    for (int k0 = 0; k0 < top_k && intermediate > 0 && num_experts > 0; k0 += 32) {
      // Lane j holds selection k0 + j (expert, weight, validity); the loops below broadcast
      // them with shuffles. An invalid index reads expert 0's row and contributes nothing (a
      // select, not a branch, so that the unrolled loads stay independent).
      const int kn = top_k - k0 < 32 ? top_k - k0 : 32;
      int my_e = 0;
      float my_w = 0.0f;
      int my_ok = 0;
      if (lane < kn) {
        my_e = spk::ldg_i(indices + t * top_k + k0 + lane);
        my_w = weights.ldg(t * top_k + k0 + lane);
        my_ok = my_e >= 0 && my_e < num_experts;
        if (!my_ok) my_e = 0;
      }
      const spk::ActIn a0 = act + (t * top_k + k0) * static_cast<int64_t>(intermediate);
      if (vec) {
        // The kn x (intermediate / 8) chunks of all selections, dealt to the lanes: every
        // iteration of every lane is an independent 16-byte load.
        const int c8 = intermediate / 8;
        const int total = kn * c8;
        // 4 chunks per lane per step: shuffles are convergent, so the step is unrolled by hand
        // (a constant trip count) instead of by the compiler.
        for (int f0 = 0; f0 < total; f0 += 128) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int fl = f0 + j * 32 + lane;
            const int f = fl < total ? fl : total - 1;
            const int k = f / c8, cc = f - k * c8;
            const int e = __shfl_sync(0xffffffffu, my_e, k);
            const float w = __shfl_sync(0xffffffffu, my_w, k);
            const int ok = __shfl_sync(0xffffffffu, my_ok, k);
            float wf[8];
            spk::unpack_bf16x8(spk::ldg_u4(down + (static_cast<int64_t>(e) * hidden + h) *
                                                      intermediate + cc * 8),
                               wf);
            float4 x0, x1;
            a0.ldg8(static_cast<int64_t>(k) * intermediate + cc * 8, x0, x1);
            const float d = spk::dot8_acc(wf, x0, x1, 0.0f);
            acc = (ok && fl < total) ? spk::fmaf_(w, d, acc) : acc;
          }
        }
      } else {
        for (int k = 0; k < kn; ++k) {
          const int e = __shfl_sync(0xffffffffu, my_e, k);
          const float w = __shfl_sync(0xffffffffu, my_w, k);
          const int ok = __shfl_sync(0xffffffffu, my_ok, k);
          const unsigned short* row = down + (static_cast<int64_t>(e) * hidden + h) * intermediate;
          const float part = dot_partial<false>(a0 + static_cast<int64_t>(k) * intermediate, row,
                                                intermediate);
          acc = ok ? spk::fmaf_(w, part, acc) : acc;
        }
      }
    }
    acc = spk::warp_sum(acc);
    if (lane == 0) y[u] = acc;
  }
}

SPK_EXPORT void spark_moe_combine(const float* partials, void* y_out, int num_tokens, int hidden,
                                  int top_k) {
  const spk::ActOut y{y_out};
  if (!spark::abi::MoeDownGrouped(num_tokens, true) || hidden <= 0) return;
  const int64_t n = static_cast<int64_t>(num_tokens) * hidden;
  for (int64_t i = spk::global_thread(); i < n; i += spk::grid_threads()) {
    const int64_t t = i / hidden, h = i % hidden;
    const float* p = partials + t * top_k * hidden + h;
    float sum = 0.0f;  // in k order, adds only: the host reference's order
    for (int k = 0; k < top_k; ++k) sum += spk::ldg_f(p + static_cast<int64_t>(k) * hidden);
    y[i] = sum;
  }
}

SPARK_CHECK_KERNEL_SIGNATURES()

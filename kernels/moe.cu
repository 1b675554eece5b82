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
//   (token, k) and kDecodeRows outputs i (the format's rows per warp: bf16 1, FP8 2, NVFP4 4),
//   grid-stride over warps. Prefill (T >= 16): grouped by expert on tensor cores
//   (gate_up_grouped below), each selected expert's weights read once per 64 slots.
// spark_moe_down, ungrouped (decode, or no workspace): one warp per token and kDecodeRows
// outputs h, grid-stride over warps:
//   y[t, h] = sum_k weights[t, k] * (act[t, k] . down[e_k, h]); invalid indices contribute 0.
//   The lanes split the top_k x intermediate products of an output together (all rows' loads
//   independent), so a decode step keeps many loads in flight per warp.
// Both expert kernels read weights with 16-byte loads when the row length and pointers allow
// (weight_formats.cuh vector_ok: a multiple of 8 for bf16, 16 for FP8, 32 for NVFP4; scalar
// loads otherwise). The _nvfp4 and _fp8 variants take quantized experts (ModelOpt layouts,
// kernel_ops.def) through the same paths: dequantised in registers for the GEMVs, into bf16 in
// shared memory for the tiles, each matrix's tensor or row scales applied to its sums.
// spark_moe_down, grouped (kernel_abi.h MoeDownGrouped: the grouped path with a workspace; the
//   compiler gives it calls of at least kMoeGroupMinTokens tokens): each slot's
//   weighted expert output to partials[t, k] on tensor cores (down_grouped), and
// spark_moe_combine: y[t] = sum_k partials[t, k], in k order.
#include "common.cuh"
#include "mma_tile.cuh"
#include "weight_formats.cuh"
#include "spark/runtime/kernel_abi.h"

namespace spk {
namespace moe {
namespace {

constexpr int kMaxExperts = 1024;

// Rows per warp of the decode GEMVs: the format's kGemvRows (weight_formats.cuh), at most
// SPARK_MOE_DECODE_ROWS when that is defined (bench/kernel_bench.cu builds variants with it).
// (A variable template: nvcc refuses a constexpr host function in device code.)
#ifdef SPARK_MOE_DECODE_ROWS
template <class W>
constexpr int kDecodeRows =
    W::kGemvRows < SPARK_MOE_DECODE_ROWS ? W::kGemvRows : SPARK_MOE_DECODE_ROWS;
#else
template <class W>
constexpr int kDecodeRows = W::kGemvRows;
#endif

// The slots (t * top_k + k) routed to expert e are listed in shared memory kListedRows at a
// time (an expert has at most one slot per token, so one list holds it for calls of up to
// kListedRows tokens: the default --max-tokens) and taken 64 rows per tile.
constexpr int kListedRows = 1024;

// Writes the slots routed to expert e of rank [first, first + kListedRows), in slot order, to
// rows[rank - first] and returns how many slots e has in all. Two passes over `indices` and
// two barriers: each warp counts the hits in its own run of slots (a ballot per 32), then writes
// its hits after the earlier warps' (the second pass only where its ranks meet the window).
// Every thread of the (256-thread) block must call it; s_warp holds 8 ints.
SPK_DEVICE int expert_rows(const int* indices, int num_slots, int e, int first, int* rows,
                           int* s_warp) {
  const int lane = lane_id(), warp = warp_id(), warps = num_warps();
  const int per_warp = ((num_slots + 31) / 32 + warps - 1) / warps * 32;
  const int begin = warp * per_warp;
  const int end = begin + per_warp < num_slots ? begin + per_warp : num_slots;
  const auto hits = [&](int base) {
    const int slot = base + lane;
    return __ballot_sync(0xffffffffu, slot < end && ldg_i(indices + slot) == e);
  };
  __syncthreads();  // the caller is done with rows and s_warp from the previous call
  int count = 0;
  for (int base = begin; base < end; base += 32) count += popc(hits(base));
  if (lane == 0) s_warp[warp] = count;
  __syncthreads();
  int before = 0, total = 0;
  for (int w = 0; w < warps; ++w) {
    if (w < warp) before += s_warp[w];
    total += s_warp[w];
  }
  if (before < first + kListedRows && before + count > first) {  // warp-uniform
    int rank = before;
    for (int base = begin; base < end; base += 32) {
      const unsigned mask = hits(base);
      const int r = rank + popc(mask & ((1u << lane) - 1u));
      if ((mask >> lane) & 1u && r >= first && r < first + kListedRows) rows[r - first] = base + lane;
      rank += popc(mask);
    }
  }
  __syncthreads();  // rows complete
  return total;
}

// The slots of one tile (the grouped experts' tile shape).
constexpr int kTileRows = mma::GroupedTile::kBM;

// Calls group(rows, n) for expert e's slots n <= kTileRows at a time (rows: n slots in shared
// memory, in slot order). Every thread of the block must call it.
template <class Group>
SPK_DEVICE void for_each_row_group(const int* indices, int num_slots, int e, int* s_rows,
                                   int* s_warp, const Group& group) {
  for (int window = 0;; window += kListedRows) {
    const int total = expert_rows(indices, num_slots, e, window, s_rows, s_warp);
    const int listed = total - window < kListedRows ? total - window : kListedRows;
    for (int first = 0; first < listed; first += kTileRows) {
      group(s_rows + first, listed - first < kTileRows ? listed - first : kTileRows);
    }
    if (total <= window + kListedRows) return;
  }
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
// thread's fragment pair (c0, c1) is (gate, up) of the same column: act = gelu(c0) * c1 (each
// times its row scale first, for quantized experts).
template <class Experts>
SPK_DEVICE void gate_up_grouped(ActIn x, const Experts& experts, const int* indices, ActOut act,
                                int num_tokens, int hidden, int intermediate, int num_experts,
                                int top_k) {
  __shared__ __align__(16) mma::Smem<mma::GroupedTile> smem;
  __shared__ int s_rows[kListedRows];
  __shared__ int s_warp[8];
  const int num_slots = num_tokens * top_k;
  zero_unrouted_rows(indices, num_slots, num_experts, act, intermediate);
  const int col_tiles = (intermediate + mma::kBN / 2 - 1) / (mma::kBN / 2);
  for (int64_t tile = blockIdx.x; tile < static_cast<int64_t>(num_experts) * col_tiles;
       tile += gridDim.x) {
    const int e = static_cast<int>(tile / col_tiles);
    const int i0 = static_cast<int>(tile % col_tiles) * (mma::kBN / 2);
    const auto w = experts(e);
    for_each_row_group(indices, num_slots, e, s_rows, s_warp, [&](const int* rows, int nrows) {
      const auto x_row = [&](int r) -> ActIn {
        return x + static_cast<int64_t>(rows[r] / top_k) * hidden;
      };
      mma::Accum<mma::GroupedTile> acc;
      w.tile_gate_up(smem, x_row, nrows, i0, intermediate, acc);
      mma::for_each_pair(acc, [&](int r, int c, float gate, float up) {
        const int i = i0 + (c >> 1);
        if (r < nrows && i < intermediate) {
          act[static_cast<int64_t>(rows[r]) * intermediate + i] =
              spk_gelu(gate * w.row_scale(i)) * (up * w.row_scale(intermediate + i));
        }
      });
    });
  }
}

// moe_down for a grouped step: partials[slot, h] = weights[slot] * (act[slot] @ down[e]^T), the
// slots grouped by expert on tensor cores (tile = expert x 128 hidden columns, K = intermediate),
// each selected expert's weights read once per 64 slots. Zeros for slots with an invalid index.
template <class Experts>
SPK_DEVICE void down_grouped(ActIn act, const Experts& experts, ActIn weights, const int* indices,
                             float* partials, int num_tokens, int hidden, int intermediate,
                             int num_experts, int top_k) {
  __shared__ __align__(16) mma::Smem<mma::GroupedTile> smem;
  __shared__ int s_rows[kListedRows];
  __shared__ int s_warp[8];
  const int num_slots = num_tokens * top_k;
  zero_unrouted_rows(indices, num_slots, num_experts, partials, hidden);
  const int col_tiles = (hidden + mma::kBN - 1) / mma::kBN;
  for (int64_t tile = blockIdx.x; tile < static_cast<int64_t>(num_experts) * col_tiles;
       tile += gridDim.x) {
    const int e = static_cast<int>(tile / col_tiles);
    const int h0 = static_cast<int>(tile % col_tiles) * mma::kBN;
    const auto w = experts(e);
    for_each_row_group(indices, num_slots, e, s_rows, s_warp, [&](const int* rows, int nrows) {
      const auto act_row = [&](int r) -> ActIn {
        return act + static_cast<int64_t>(rows[r]) * intermediate;
      };
      mma::Accum<mma::GroupedTile> acc;
      w.tile(smem, act_row, nrows, h0, hidden, acc);
      mma::for_each_pair(acc, [&](int r, int c, float c0, float c1) {
        if (r >= nrows) return;
        const int slot = rows[r], h = h0 + c;
        const float ws = weights.ldg(slot);
        float* row = partials + static_cast<int64_t>(slot) * hidden;
        if (h < hidden) row[h] = ws * (c0 * w.row_scale(h));
        if (h + 1 < hidden) row[h + 1] = ws * (c1 * w.row_scale(h + 1));
      });
    });
  }
}

// The same contract without tensor cores (unaligned rows): one warp per (slot, h).
template <class Experts>
SPK_DEVICE void down_slots(ActIn act, const Experts& experts, ActIn weights, const int* indices,
                           float* partials, int num_tokens, int hidden, int intermediate,
                           int num_experts, int top_k) {
  const int64_t units = static_cast<int64_t>(num_tokens) * top_k * hidden;
  for (int64_t u = global_warp(); u < units; u += grid_warps()) {
    const int64_t slot = u / hidden;
    const int h = static_cast<int>(u % hidden);
    const int e = ldg_i(indices + slot);
    const bool ok = e >= 0 && e < num_experts;
    float part = 0.0f;
    if (ok) {
      const auto w = experts(e);
      const ActIn a = act + slot * intermediate;
      for (int k = lane_id(); k < intermediate; k += 32) part = fmaf_(w.element(h, k), a.ldg(k), part);
      part *= w.row_scale(h);
    }
    part = warp_sum(part);
    if (lane_id() == 0) partials[u] = ok ? weights.ldg(slot) * part : 0.0f;
  }
}

// moe_gate_up at few tokens: one warp per (token, k) and kGemvRows consecutive outputs i (the
// format's rows per decode warp: bf16 1, FP8 2, NVFP4 4), the gate and up rows of expert
// e = indices[t, k] read together (16-byte loads when vec, lane j taking chunks j, j + 32, ...),
// each chunk of x loaded once for all of them.
template <class Experts>
SPK_DEVICE void gate_up_gemv(ActIn x, const Experts& experts, const int* indices, ActOut act,
                             int num_tokens, int hidden, int intermediate, int num_experts,
                             int top_k, bool vec) {
  using W = decltype(experts(0));
  constexpr int R = kDecodeRows<W>, R2 = 2 * R;
  const int blocks_per_slot = (intermediate + R - 1) / R;
  const int64_t units = static_cast<int64_t>(num_tokens) * top_k * blocks_per_slot;
  const int lane = lane_id();
  for (int64_t u = global_warp(); u < units; u += grid_warps()) {
    const int64_t tk = u / blocks_per_slot;  // t * top_k + k
    const int i0 = static_cast<int>(u % blocks_per_slot) * R;
    const int64_t t = tk / top_k;
    const int e = ldg_i(indices + tk);
    float result[R];
#pragma unroll
    for (int q = 0; q < R; ++q) result[q] = 0.0f;
    if (e >= 0 && e < num_experts && hidden > 0) {
      const W w = experts(e);
      const ActIn xr = x + t * hidden;
      // Rows q (gate of i0 + q) and R + q (up of i0 + q); past the end: the last row (valid
      // memory, result not stored).
      int64_t rows[R2];
#pragma unroll
      for (int q = 0; q < R; ++q) {
        const int i = i0 + q < intermediate ? i0 + q : intermediate - 1;
        rows[q] = i;
        rows[R + q] = intermediate + i;
      }
      float acc[R2];
#pragma unroll
      for (int q = 0; q < R2; ++q) acc[q] = 0.0f;
      float unit = 1.0f;
      if (vec) {
        const int chunks = hidden / W::kChunk;
        for (int c = lane; c < chunks; c += 32) {
          uint4 raw[R2];
#pragma unroll
          for (int q = 0; q < R2; ++q) raw[q] = w.load(rows[q], c);
          weights::rows_chunk_dot<R2>(w, raw, rows, c, xr, acc);
        }
        unit = W::kDecodedUnit;
      } else {
        for (int k = lane; k < hidden; k += 32) {
          const float xv = xr.ldg(k);
#pragma unroll
          for (int q = 0; q < R2; ++q) acc[q] = fmaf_(w.element(rows[q], k), xv, acc[q]);
        }
      }
#pragma unroll
      for (int q = 0; q < R; ++q) {
        const float g = warp_sum(acc[q]) * (w.row_scale(rows[q]) * unit);
        const float up = warp_sum(acc[R + q]) * (w.row_scale(rows[R + q]) * unit);
        result[q] = spk_gelu(g) * up;
      }
    }
    if (lane == 0) {
#pragma unroll
      for (int q = 0; q < R; ++q)
        if (i0 + q < intermediate) act[tk * intermediate + i0 + q] = result[q];
    }
  }
}

// moe_down at few tokens (or without a workspace): one warp per token and kGemvRows consecutive
// outputs h (as gate_up_gemv),
//   y[t, h] = sum_k weights[t, k] * (act[t, k] . down[e_k, h]); invalid indices contribute 0.
// The lanes split the top_k x intermediate products of the outputs together (all rows' loads
// independent, each chunk of act loaded once for the warp's rows), so a decode step keeps many
// loads in flight per warp.
template <class Experts>
SPK_DEVICE void down_gemv(ActIn act, const Experts& experts, ActIn weights, const int* indices,
                          ActOut y, int num_tokens, int hidden, int intermediate, int num_experts,
                          int top_k, bool vec) {
  using W = decltype(experts(0));
  constexpr int R = kDecodeRows<W>;
  const int blocks_per_token = (hidden + R - 1) / R;
  const int64_t units = static_cast<int64_t>(num_tokens) * blocks_per_token;
  const int lane = lane_id();
  for (int64_t u = global_warp(); u < units; u += grid_warps()) {
    const int64_t t = u / blocks_per_token;
    const int h0 = static_cast<int>(u % blocks_per_token) * R;
    int64_t rows[R];  // past the end: the last row (valid memory, result not stored)
#pragma unroll
    for (int q = 0; q < R; ++q) rows[q] = h0 + q < hidden ? h0 + q : hidden - 1;
    float acc[R];
#pragma unroll
    for (int q = 0; q < R; ++q) acc[q] = 0.0f;
    const float unit = vec ? W::kDecodedUnit : 1.0f;
    for (int k0 = 0; k0 < top_k && intermediate > 0 && num_experts > 0; k0 += 32) {
      // Lane j holds selection k0 + j (expert, weight, validity); the loops below broadcast
      // them with shuffles. An invalid index reads expert 0's rows and contributes nothing (a
      // select, not a branch, so that the unrolled loads stay independent).
      const int kn = top_k - k0 < 32 ? top_k - k0 : 32;
      int my_e = 0;
      float my_w = 0.0f;
      int my_ok = 0;
      if (lane < kn) {
        my_e = ldg_i(indices + t * top_k + k0 + lane);
        my_ok = my_e >= 0 && my_e < num_experts;
        if (!my_ok) my_e = 0;
        my_w = weights.ldg(t * top_k + k0 + lane) * unit;
      }
      const ActIn a0 = act + (t * top_k + k0) * static_cast<int64_t>(intermediate);
      if (vec) {
        // The kn x (intermediate / kChunk) chunks of all selections, dealt to the lanes: every
        // iteration of every lane is R independent 16-byte loads.
        const int cpr = intermediate / W::kChunk;
        const int total = kn * cpr;
        // 4 chunks per lane per step for one row per warp (2 / 1 for more): shuffles are
        // convergent, so the step is unrolled by hand (a constant trip count).
        constexpr int kSteps = R == 1 ? 4 : R == 2 ? 2 : 1;
        for (int f0 = 0; f0 < total; f0 += 32 * kSteps) {
#pragma unroll
          for (int j = 0; j < kSteps; ++j) {
            const int fl = f0 + j * 32 + lane;
            const int f = fl < total ? fl : total - 1;
            const int k = f / cpr, cc = f - k * cpr;
            const int e = __shfl_sync(0xffffffffu, my_e, k);
            const float w = __shfl_sync(0xffffffffu, my_w, k);
            const int ok = __shfl_sync(0xffffffffu, my_ok, k);
            const W ew = experts(e);
            uint4 raw[R];
#pragma unroll
            for (int q = 0; q < R; ++q) raw[q] = ew.load(rows[q], cc);
            float d[R];
#pragma unroll
            for (int q = 0; q < R; ++q) d[q] = 0.0f;
            weights::rows_chunk_dot<R>(ew, raw, rows, cc,
                                       a0 + static_cast<int64_t>(k) * intermediate, d);
#pragma unroll
            for (int q = 0; q < R; ++q)
              acc[q] = (ok && fl < total) ? fmaf_(w * ew.row_scale(rows[q]), d[q], acc[q]) : acc[q];
          }
        }
      } else {
        for (int k = 0; k < kn; ++k) {
          const int e = __shfl_sync(0xffffffffu, my_e, k);
          const float w = __shfl_sync(0xffffffffu, my_w, k);
          const int ok = __shfl_sync(0xffffffffu, my_ok, k);
          const W ew = experts(e);
          const ActIn a = a0 + static_cast<int64_t>(k) * intermediate;
#pragma unroll
          for (int q = 0; q < R; ++q) {
            float part = 0.0f;
            for (int kk = lane; kk < intermediate; kk += 32)
              part = fmaf_(ew.element(rows[q], kk), a.ldg(kk), part);
            acc[q] = ok ? fmaf_(w * ew.row_scale(rows[q]), part, acc[q]) : acc[q];
          }
        }
      }
    }
#pragma unroll
    for (int q = 0; q < R; ++q) {
      const float sum = warp_sum(acc[q]);
      if (lane == 0 && h0 + q < hidden) y[t * hidden + h0 + q] = sum;
    }
  }
}

// The whole moe_gate_up for experts of one format (experts(e): expert e's [2I, hidden] matrix).
template <class Experts>
SPK_DEVICE void gate_up_run(const void* x_in, const Experts& experts, const int* indices,
                            void* act_out, int num_tokens, int hidden, int intermediate,
                            int num_experts, int top_k, int path) {
  const ActIn x{x_in};
  const ActOut act{act_out};
  if (num_tokens <= 0 || intermediate <= 0 || top_k <= 0) return;
  const bool vec = experts(0).vector_ok() && aligned16(x_in);
  if (path == spark::abi::kMoeGrouped && vec && hidden > 0 && blockDim.x == mma::kThreads) {
    gate_up_grouped(x, experts, indices, act, num_tokens, hidden, intermediate, num_experts,
                    top_k);
    return;
  }
  gate_up_gemv(x, experts, indices, act, num_tokens, hidden, intermediate, num_experts, top_k,
               vec);
}

// The whole moe_down for experts of one format (experts(e): expert e's [hidden, I] matrix).
template <class Experts>
SPK_DEVICE void down_run(const void* act_in, const Experts& experts, const void* weights_in,
                         const int* indices, void* y_out, float* partials, int num_tokens,
                         int hidden, int intermediate, int num_experts, int top_k,
                         int path) {
  const ActIn act{act_in}, weights{weights_in};
  const ActOut y{y_out};
  if (num_tokens <= 0 || hidden <= 0) return;
  const bool vec = experts(0).vector_ok() && aligned16(act_in);
  if (spark::abi::MoeDownGrouped(path, partials != nullptr)) {
    if (top_k <= 0) return;
    if (vec && intermediate > 0 && blockDim.x == mma::kThreads) {
      down_grouped(act, experts, weights, indices, partials, num_tokens, hidden, intermediate,
                   num_experts, top_k);
    } else {
      down_slots(act, experts, weights, indices, partials, num_tokens, hidden, intermediate,
                 num_experts, top_k);
    }
    return;
  }
  down_gemv(act, experts, weights, indices, y, num_tokens, hidden, intermediate, num_experts,
            top_k, vec);
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

// The expert matrices of each format (kernel_ops.def): expert e's gate_up is rows
// [e * 2I, (e + 1) * 2I) of the stacked weight, its down rows [e * H, (e + 1) * H).
SPK_EXPORT_INLINE void spark_moe_gate_up(const void* x, const unsigned short* gate_up,
                                         const int* indices, void* act, int num_tokens,
                                         int hidden, int intermediate, int num_experts, int top_k,
                                         int path) {
  const int64_t rows = 2 * static_cast<int64_t>(intermediate);
  const auto experts = [=](int e) {
    return spk::weights::Bf16Weights{gate_up + e * rows * hidden, hidden};
  };
  spk::moe::gate_up_run(x, experts, indices, act, num_tokens, hidden, intermediate, num_experts,
                        top_k, path);
}

SPK_EXPORT_INLINE void spark_moe_gate_up_nvfp4(const void* x, const unsigned char* gate_up,
                                               const unsigned char* block_scale,
                                               const float* tensor_scale, const int* indices,
                                               void* act, int num_tokens, int hidden,
                                               int intermediate, int num_experts, int top_k,
                                               int path) {
  // Tensor scales [experts, 2]: gate rows [0, I) take the first, up rows [I, 2I) the second.
  const int64_t rows = 2 * static_cast<int64_t>(intermediate);
  const auto experts = [=](int e) {
    return spk::weights::Nvfp4Weights{gate_up + e * rows * (hidden / 2),
                                      block_scale + e * rows * (hidden / 16),
                                      tensor_scale + 2 * static_cast<int64_t>(e), intermediate,
                                      hidden};
  };
  spk::moe::gate_up_run(x, experts, indices, act, num_tokens, hidden, intermediate, num_experts,
                        top_k, path);
}

SPK_EXPORT_INLINE void spark_moe_gate_up_fp8(const void* x, const unsigned char* gate_up,
                                             const float* scale, const int* indices, void* act,
                                             int num_tokens, int hidden, int intermediate,
                                             int num_experts, int top_k, int scales_per_matrix,
                                             int path) {
  // Scales [experts, 2, scales_per_matrix]: one per gate / up matrix, or one per row.
  const int64_t rows = 2 * static_cast<int64_t>(intermediate);
  const int rows_per_scale = scales_per_matrix == 1 ? intermediate : 1;
  const auto experts = [=](int e) {
    return spk::weights::Fp8Weights{gate_up + e * rows * hidden,
                                    scale + 2 * static_cast<int64_t>(e) * scales_per_matrix,
                                    rows_per_scale, hidden};
  };
  spk::moe::gate_up_run(x, experts, indices, act, num_tokens, hidden, intermediate, num_experts,
                        top_k, path);
}

SPK_EXPORT_INLINE void spark_moe_down(const void* act, const unsigned short* down,
                                      const void* weights, const int* indices, void* y,
                                      float* partials, int num_tokens, int hidden,
                                      int intermediate, int num_experts, int top_k,
                                      int path) {
  const int64_t size = static_cast<int64_t>(hidden) * intermediate;
  const auto experts = [=](int e) {
    return spk::weights::Bf16Weights{down + e * size, intermediate};
  };
  spk::moe::down_run(act, experts, weights, indices, y, partials, num_tokens, hidden,
                     intermediate, num_experts, top_k, path);
}

SPK_EXPORT_INLINE void spark_moe_down_nvfp4(const void* act, const unsigned char* down,
                                            const unsigned char* block_scale,
                                            const float* tensor_scale, const void* weights,
                                            const int* indices, void* y, float* partials,
                                            int num_tokens, int hidden, int intermediate,
                                            int num_experts, int top_k, int path) {
  const int64_t size = static_cast<int64_t>(hidden) * intermediate;
  const auto experts = [=](int e) {
    return spk::weights::Nvfp4Weights{down + e * (size / 2), block_scale + e * (size / 16),
                                      tensor_scale + e, hidden, intermediate};
  };
  spk::moe::down_run(act, experts, weights, indices, y, partials, num_tokens, hidden,
                     intermediate, num_experts, top_k, path);
}

SPK_EXPORT_INLINE void spark_moe_down_fp8(const void* act, const unsigned char* down,
                                          const float* scale, const void* weights,
                                          const int* indices, void* y, float* partials,
                                          int num_tokens, int hidden, int intermediate,
                                          int num_experts, int top_k, int scales_per_matrix,
                                          int path) {
  const int64_t size = static_cast<int64_t>(hidden) * intermediate;
  const int rows_per_scale = scales_per_matrix == 1 ? hidden : 1;
  const auto experts = [=](int e) {
    return spk::weights::Fp8Weights{down + e * size,
                                    scale + static_cast<int64_t>(e) * scales_per_matrix,
                                    rows_per_scale, intermediate};
  };
  spk::moe::down_run(act, experts, weights, indices, y, partials, num_tokens, hidden,
                     intermediate, num_experts, top_k, path);
}

SPK_EXPORT void spark_moe_combine(const float* partials, void* y_out, int num_tokens, int hidden,
                                  int top_k) {
  const spk::ActOut y{y_out};
  if (hidden <= 0) return;
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

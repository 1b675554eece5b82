// __global__ entries around the kernel library's device functions, for kernel_bench.cu's nvcc
// build (the checks of record run spark-compile's images: test/gpu/op_check). The kernel sources are included
// as one translation unit; each entry does what spark-compile's generated `gpu.func` does: call
// the device function with the step's arguments. `__launch_bounds__` is the ABI block size.
#ifndef SPARK_BENCH_KERNEL_WRAPPERS_CUH_
#define SPARK_BENCH_KERNEL_WRAPPERS_CUH_

// The kernels' activation precision (common.cuh) is a variable here (0: f32 activations, what
// kernel_bench.cu measures); spark-compile makes it a constant of each module.
#define SPARK_ACTIVATION_PRECISION_VARIABLE
#include "kernels/attention.cu"
#include "kernels/elementwise.cu"
#include "kernels/embedding.cu"
#include "kernels/linear.cu"
#include "kernels/moe.cu"
#include "kernels/rms_norm.cu"
#include "kernels/rope.cu"

extern "C" {
__device__ int spark_activation_precision = 0;  // spark::abi::kActivationF32
}

typedef unsigned short bf16_t;

// Activations are void* (f32 or bf16 by the activation precision a case sets), as in the
// registry's device types (abi::ops::<op>::Fn); workspaces (partials) f32.
typedef void act_t;

#define SPK_ENTRY(bs) extern "C" __global__ void __launch_bounds__(bs)

SPK_ENTRY(256) check_embedding(const int* ids, const bf16_t* table, act_t* y, int T, int vocab,
                               int dim, float scale) {
  spark_embedding(ids, table, y, T, vocab, dim, scale);
}
SPK_ENTRY(256) check_rms_norm(const act_t* x, const bf16_t* w, act_t* y, int T, int groups,
                              int cols, float eps) {
  spark_rms_norm(x, w, y, T, groups, cols, eps);
}
SPK_ENTRY(256) check_residual_rms_norm(const act_t* x, const bf16_t* w, const act_t* res, act_t* y,
                                       int T, int cols, float eps) {
  spark_residual_rms_norm(x, w, res, y, T, cols, eps);
}
SPK_ENTRY(256) check_rms_norm_rope(const act_t* x, const bf16_t* w, const int* pos, act_t* y, int T,
                                   int heads, int hd, int rot, float theta, float factor,
                                   float eps) {
  spark_rms_norm_rope(x, w, pos, y, T, heads, hd, rot, theta, factor, eps);
}
SPK_ENTRY(256) check_linear(const act_t* x, const bf16_t* w, act_t* y, int T, int out, int in) {
  spark_linear(x, w, y, T, out, in);
}
SPK_ENTRY(256) check_linear_nvfp4(const act_t* x, const unsigned char* w,
                                  const unsigned char* block_scale, const float* tensor_scale,
                                  act_t* y, int T, int out, int in) {
  spark_linear_nvfp4(x, w, block_scale, tensor_scale, y, T, out, in);
}
SPK_ENTRY(256) check_linear_fp8(const act_t* x, const unsigned char* w, const float* scale,
                                act_t* y, int T, int out, int in, int scale_count) {
  spark_linear_fp8(x, w, scale, y, T, out, in, scale_count);
}
SPK_ENTRY(256) check_add(const act_t* a, const act_t* b, act_t* y, int T, int cols) {
  spark_add(a, b, y, T, cols);
}
SPK_ENTRY(256) check_mul(const act_t* a, const act_t* b, act_t* y, int T, int cols) {
  spark_mul(a, b, y, T, cols);
}
SPK_ENTRY(256) check_scale(const act_t* x, act_t* y, int T, int cols, float f) {
  spark_scale(x, y, T, cols, f);
}
SPK_ENTRY(256) check_scalar_mul(const act_t* x, const bf16_t* s, act_t* y, int T, int cols) {
  spark_scalar_mul(x, s, y, T, cols);
}
SPK_ENTRY(256) check_gelu(const act_t* x, act_t* y, int T, int cols) { spark_gelu(x, y, T, cols); }
SPK_ENTRY(256) check_gelu_mul(const act_t* a, const act_t* b, act_t* y, int T, int cols) {
  spark_gelu_mul(a, b, y, T, cols);
}
SPK_ENTRY(256) check_softcap(const act_t* x, act_t* y, int T, int cols, float cap) {
  spark_softcap(x, y, T, cols, cap);
}
SPK_ENTRY(256) check_rope(const act_t* x, const int* pos, act_t* y, int T, int heads, int hd,
                          int rot, float theta, float factor) {
  spark_rope(x, pos, y, T, heads, hd, rot, theta, factor);
}
SPK_ENTRY(256) check_kv_write(const act_t* k, const act_t* v, const int* pos, const int* seqs,
                              const int* table, void* kc, void* vc, int T, int kvh, int hd,
                              int cap, int cache_dtype) {
  spark_kv_write(k, v, pos, seqs, table, kc, vc, T, kvh, hd, cap, cache_dtype);
}
SPK_ENTRY(128) check_attention(const act_t* q, const int* pos, const int* seqs, const int* table,
                               const void* kc, const void* vc, act_t* y, float* partials, int T,
                               int qh, int kvh, int hd, int cap, int window, float scale,
                               int max_splits, int split_rows, int cache_dtype,
                               const int* last_visible) {
  spark_attention(q, pos, seqs, table, kc, vc, y, partials, T, qh, kvh, hd, cap, window, scale,
                  max_splits, split_rows, cache_dtype, last_visible);
}
SPK_ENTRY(128) check_attention_merge(const float* partials, act_t* y, int T, int qh, int hd,
                                     int max_splits, int split_rows) {
  spark_attention_merge(partials, y, T, qh, hd, max_splits, split_rows);
}
SPK_ENTRY(128) check_moe_topk(const act_t* logits, const bf16_t* pes, act_t* w, int* idx, int T,
                              int E, int K, float logit_scale) {
  spark_moe_topk(logits, pes, w, idx, T, E, K, logit_scale);
}
SPK_ENTRY(256) check_moe_gate_up(const act_t* x, const bf16_t* gu, const int* idx, act_t* act,
                                 int T, int hidden, int inter, int E, int K, int path) {
  spark_moe_gate_up(x, gu, idx, act, T, hidden, inter, E, K, path);
}
SPK_ENTRY(256) check_moe_down(const act_t* act, const bf16_t* down, const act_t* w, const int* idx,
                              act_t* y, float* partials, int T, int hidden, int inter, int E,
                              int K, int path) {
  spark_moe_down(act, down, w, idx, y, partials, T, hidden, inter, E, K, path);
}
SPK_ENTRY(256) check_moe_gate_up_nvfp4(const act_t* x, const unsigned char* gu,
                                       const unsigned char* bs, const float* ts, const int* idx,
                                       act_t* act, int T, int hidden, int inter, int E, int K,
                                       int path) {
  spark_moe_gate_up_nvfp4(x, gu, bs, ts, idx, act, T, hidden, inter, E, K, path);
}
SPK_ENTRY(256) check_moe_gate_up_fp8(const act_t* x, const unsigned char* gu, const float* s,
                                     const int* idx, act_t* act, int T, int hidden, int inter,
                                     int E, int K, int spm, int path) {
  spark_moe_gate_up_fp8(x, gu, s, idx, act, T, hidden, inter, E, K, spm, path);
}
SPK_ENTRY(256) check_moe_down_nvfp4(const act_t* act, const unsigned char* down,
                                    const unsigned char* bs, const float* ts, const act_t* w,
                                    const int* idx, act_t* y, float* partials, int T, int hidden,
                                    int inter, int E, int K, int path) {
  spark_moe_down_nvfp4(act, down, bs, ts, w, idx, y, partials, T, hidden, inter, E, K, path);
}
SPK_ENTRY(256) check_moe_down_fp8(const act_t* act, const unsigned char* down, const float* s,
                                  const act_t* w, const int* idx, act_t* y, float* partials, int T,
                                  int hidden, int inter, int E, int K, int spm, int path) {
  spark_moe_down_fp8(act, down, s, w, idx, y, partials, T, hidden, inter, E, K, spm, path);
}
SPK_ENTRY(256) check_moe_combine(const float* partials, act_t* y, int T, int hidden, int K) {
  spark_moe_combine(partials, y, T, hidden, K);
}
SPK_ENTRY(256) check_scatter_rows(act_t* dest, const int* idx, const act_t* upd, int T, int n,
                                  int cols) {
  spark_scatter_rows(dest, idx, upd, T, n, cols);
}
SPK_ENTRY(256) check_mask_tokens(const int* ids, int* y, int T, int a, int b, int c, int r) {
  spark_mask_tokens(ids, y, T, a, b, c, r);
}
SPK_ENTRY(256) check_select_group(const act_t* x, act_t* y, int T, int groups, int cols,
                                  int index) {
  spark_select_group(x, y, T, groups, cols, index);
}

#undef SPK_ENTRY

#endif  // SPARK_BENCH_KERNEL_WRAPPERS_CUH_

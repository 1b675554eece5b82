// spark-op-check: every op of the registry (runtime/include/spark/runtime/kernel_ops.def) checked
// on the shipped path, as ggml's test-backend-ops checks its backends: kernel-level modules of
// one step per case, generated from the registry (each argument's role, element type and extent
// say what buffer, weight or cache it needs), compiled by spark-compile (clang's NVPTX back end,
// ptxas: the bytes users run), executed by the CUDA executor and compared with the host
// reference executor on the same inputs. Cases with the same call (token count, activation
// precision, positions, soft rows, sequence length) share one module ("group").
//
//   spark-op-check emit DIR [--quick] [--only op,...]     writes DIR/<group>.mlir and DIR/cases.txt
//   spark-op-check run DIR --device cuda|host|emulated [--target T] [--quick] [--only op,...]
//                          [--seed N] [--group NAME]    runs DIR/<group>.<T>.cubin (cuda; T
//                                                          sm_90a by default) or the plan of
//                                                          DIR/<group>.compute_90.ptx (host,
//                                                          emulated)
// `--device emulated` runs the same plans with every launch executed by the kernels' CUDA C++
// compiled for the CPU (emulated_kernels.h) instead of the host reference: a check of the kernel
// sources without a GPU, not of the bytes the GPU runs. test/gpu/run_op_check.sh compiles and
// runs the cuda check.
#ifndef SPARK_TEST_GPU_OP_CHECK_OP_CHECK_H_
#define SPARK_TEST_GPU_OP_CHECK_OP_CHECK_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace op_check {

// How the values of an i32 input are drawn.
enum class Domain {
  kAny,         // any value in [0, 64)
  kVocab,       // token ids below the op's `vocab`
  kExperts,     // top_k distinct experts per token, below the op's `num_experts`
  kScatterRows, // distinct rows of the call, and a few outside it (skipped by scatter_rows)
  kMaskIds,     // ids that hit token_a / token_b / token_c, and others
};

// One step of an op, with everything its arguments need.
struct OpCase {
  std::string op;                              // the registry's op name
  int32_t tokens = 1;                          // the call's token count T
  std::map<std::string, int64_t> ints;         // i32 literals, by argument name
  std::map<std::string, float> floats;         // f32 literals, by argument name
  std::set<std::string> nulls;                 // nullable pointers passed as null
  std::map<std::string, std::string> aliases;  // argument -> argument whose buffer it shares
  std::set<std::string> misaligned;            // buffers one element off 16-byte alignment
  abi::GridRule grid;                          // the launch's grid (the lowering's for the op)
  bool bf16 = false;                           // bf16 activation storage
  int32_t first_position = 0;                  // the call's positions: first_position + t
  int32_t block_begin = -1, block_end = -1;    // last_visible: tokens [begin, end) see each other
  int64_t max_length = 64;                     // the sequence's length (full caches hold it)
  int32_t window = 0;                          // the KV cache's window (0: full)
  bool cache_bf16 = false;                     // the KV cache's element type
  int32_t soft_rows = 0;                       // soft rows of the call (scatter_rows)
  bool nan_codes = false;  // FP8 weights hold some NaN codes: the rows they reach must be NaN
  // A second step that completes the first: attention_merge after a split attention,
  // moe_combine after a grouped moe_down (its workspace and output shared).
  std::string then;
  double tolerance = 0;                        // max |cuda - host| / max |host| per output
  std::string label;                           // the sizes, for the report
};

// Every case; `quick` keeps the small ones (CPU runs, compute-sanitizer).
std::vector<OpCase> AllCases(bool quick);

// The calls cases share a module by: cases with equal keys go into one group.
std::string GroupKey(const OpCase& c);

}  // namespace op_check
}  // namespace spark

#endif  // SPARK_TEST_GPU_OP_CHECK_OP_CHECK_H_

//===- KernelLowering.h - what spark-lower-to-kernels' op families share --*- C++ -*-===//
//
// spark-lower-to-kernels turns the entry function into a spark.program of launches over planned
// buffers. LowerToKernels.cpp is the driver: the entry's inputs, the buffers of values, the
// plan's weights and KV caches, the logits and the sample step, the logits tail, the buffers'
// element types and the spark.program it builds. Each family of ops has a file of its own that
// registers one lowering per op (populate<Family>Lowerings, the layout of torch-mlir's
// TorchToLinalg): a lowering asks the driver, through KernelLowering, for its operands' buffers
// and weights, makes buffers for its results, and appends launches whose arguments follow the
// op registry (runtime/include/spark/runtime/kernel_ops.def). Private to this directory.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_COMPILER_CONVERSION_SPARKTOKERNELS_KERNELLOWERING_H
#define SPARK_COMPILER_CONVERSION_SPARKTOKERNELS_KERNELLOWERING_H

#include "dialects/Spark/IR/SparkOps.h"
#include "dialects/Spark/IR/TypeInference.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/TypeID.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <functional>

#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace kernel_lowering {

/// One argument of a launch, as spark.launch spells it (docs/plan-format.md).
struct Arg {
  enum Kind {
    Buffer, Weight, KCache, VCache, KvCapacity, KvBlockTable, Null, NumTokens, NumSoftTokens,
    I32, F32
  };
  Kind kind;
  int64_t index = 0;
  int32_t i32 = 0;
  float f32 = 0.0f;

  static Arg buffer(int64_t id) { return {Buffer, id}; }
  static Arg weight(int64_t id) { return {Weight, id}; }
  static Arg kCache(int64_t id) { return {KCache, id}; }
  static Arg vCache(int64_t id) { return {VCache, id}; }
  static Arg kvCapacity(int64_t id) { return {KvCapacity, id}; }
  static Arg kvBlockTable(int64_t id) { return {KvBlockTable, id}; }
  static Arg null() { return {Null}; }
  static Arg numTokens() { return {NumTokens}; }
  static Arg numSoftTokens() { return {NumSoftTokens}; }
  static Arg i32v(int64_t v) { return {I32, 0, static_cast<int32_t>(v)}; }
  static Arg f32v(float v) { return {F32, 0, 0, v}; }
  bool isLiteral() const { return kind == I32 || kind == F32; }
};

/// A launch's grid as a function of a call's token count (kernel_abi.h GridRule): `work` items
/// per token, or a fixed count of them, `divisor` items per block.
inline abi::GridRule perToken(int64_t work, int64_t divisor = 1) { return {work, 0, divisor}; }
inline abi::GridRule fixedGrid(int64_t work, int64_t divisor = 1) { return {0, work, divisor}; }
/// The elements of one token's row of activation `v`, and the grid of an op over them (a thread
/// per element, blocks of 256: the elementwise kernels').
inline int64_t elementsPerRow(mlir::Value v) {
  return rowElements(mlir::cast<mlir::RankedTensorType>(v.getType()));
}
inline abi::GridRule rowsOf(mlir::Value v) { return perToken(elementsPerRow(v), 256); }

/// What an op's lowering may ask of the driver. One op is lowered at a time; a misuse of its
/// operands (an activation operand without a buffer, a size that does not fit the kernels' 32-bit
/// arguments) is reported on the op by the driver when its lowering returns.
class KernelLowering {
public:
  virtual ~KernelLowering() = default;

  /// The buffer of an activation operand.
  virtual Arg input(mlir::Value value) = 0;
  /// A new buffer for a result, named after the op being lowered.
  virtual Arg result(mlir::Value value) = 0;
  /// `value` lives in the buffer of `of` (a view, or a result computed in place).
  virtual void alias(mlir::Value value, mlir::Value of) = 0;
  /// A scratch buffer with rows of `rowShape`, named after the op and `suffix`.
  virtual Arg scratch(llvm::StringRef suffix, llvm::ArrayRef<int64_t> rowShape) = 0;
  /// The plan weight a spark.weight operand names.
  virtual mlir::FailureOr<Arg> weight(mlir::Value value) = 0;
  /// A weight operand that may be absent (a weight-less RMSNorm): a null pointer then.
  mlir::FailureOr<Arg> optionalWeight(mlir::Value value) {
    return value ? weight(value) : mlir::FailureOr<Arg>(Arg::null());
  }
  /// A size literal; one that does not fit the kernels' 32-bit arguments fails the op.
  virtual Arg i32(int64_t value) = 0;
  static Arg f32(const llvm::APFloat &value) { return Arg::f32v(value.convertToFloat()); }
  /// The program's sequences input (i32 per token: each token's row of the KV block tables),
  /// made on first use.
  virtual Arg sequences() = 0;
  /// The id of the spark.kv_cache `name`, or an error on `user`.
  virtual mlir::FailureOr<int64_t> cache(mlir::Operation *user,
                                         mlir::FlatSymbolRefAttr name) = 0;
  virtual KvCacheOp cacheOp(int64_t id) = 0;
  /// The rows of every buffer (the most tokens one call processes).
  virtual int64_t maxTokens() const = 0;
  virtual bool bf16Activations() const = 0;
  /// --fp4-activations: NVFP4-weight linears whose input width is a multiple of 64 quantize
  /// their activations to NVFP4 (quantize_nvfp4_rows) and run W4A4 (linear_nvfp4_a4).
  virtual bool fp4Activations() const = 0;
  /// The packed NVFP4 rows of activation `activation`, `cols` wide (a scratch that
  /// quantize_nvfp4_rows writes): launched when first asked for, then shared by every linear that
  /// reads the same value (q, k and v; gate and up).
  virtual Arg nvfp4Rows(mlir::Value activation, int64_t cols) = 0;
  /// Appends a step of registry op `op` with `args` in the registry's order: a launch, or for a
  /// transfer op (a copy) a spark.transfer, which ignores `grid`. Its source is the op's name,
  /// with `suffix` appended after a dot when given ("layers.0.self_attn.merge").
  virtual void launch(abi::OpId op, llvm::SmallVector<Arg> args, abi::GridRule grid,
                      llvm::StringRef suffix = "") = 0;
  /// `op` is computed by the launches of the op being lowered (a scalar_mul fused into the norm
  /// before it): it gets no lowering of its own.
  virtual void fuse(mlir::Operation *op) = 0;
};

/// The buffer an op that updates `dest` in place writes `result` into: dest's own when nothing
/// else can read it (one use, and dest is neither a view (reshape) of another value nor an entry
/// argument), else a copy of dest's rows (a `copy` transfer of `cols` per row).
inline Arg updatedInPlace(KernelLowering &k, mlir::Value result, mlir::Value dest, int64_t cols) {
  Arg in = k.input(dest);
  if (dest.hasOneUse() && dest.getDefiningOp() && !dest.getDefiningOp<ReshapeOp>()) {
    k.alias(result, dest);
    return in;
  }
  Arg copy = k.result(result);
  k.launch(abi::OpId::kCopy, {in, copy, Arg::numTokens(), k.i32(cols)}, {}, "copy");
  return copy;
}

/// The lowering of each op kind, by TypeID.
class LoweringTable {
public:
  using Lowering = std::function<mlir::LogicalResult(mlir::Operation *, KernelLowering &)>;

  template <typename OpTy>
  void add(mlir::LogicalResult (*lower)(OpTy, KernelLowering &)) {
    lowerings[mlir::TypeID::get<OpTy>()] = [lower](mlir::Operation *op, KernelLowering &k) {
      return lower(mlir::cast<OpTy>(op), k);
    };
  }
  /// The lowering of `op`'s kind, or null when none is registered.
  const Lowering *find(mlir::Operation *op) const {
    auto it = lowerings.find(op->getName().getTypeID());
    return it == lowerings.end() ? nullptr : &it->second;
  }

private:
  llvm::DenseMap<mlir::TypeID, Lowering> lowerings;
};

/// embedding, mask_tokens, scatter_nd (the soft-token merge), select_group: token ids and rows.
void populateEmbeddingLowerings(LoweringTable &table);
/// add, mul, scale, scalar_mul, gelu, gelu_mul, softcap, and reshape (a view).
void populateElementwiseLowerings(LoweringTable &table);
/// rms_norm, residual_rms_norm (with the scalar_mul after it, fused), rms_norm_rope.
void populateNormLowerings(LoweringTable &table);
/// linear: bf16, NVFP4 and FP8 weights.
void populateLinearLowerings(LoweringTable &table);
/// rope, attention (kv_write, attention, and attention_merge when split over the KV length).
void populateAttentionLowerings(LoweringTable &table);
/// moe_router (rms_norm + linear + moe_topk), moe_experts (their GEMV and grouped paths).
void populateMoeLowerings(LoweringTable &table);
/// all_reduce, all_gather (a tensor-parallel module's collectives): transfer steps.
void populateCollectiveLowerings(LoweringTable &table);
/// The vision tower's ops (the encode_image function): shift_scale, patch_position_embedding,
/// clamp, rope_2d, bidirectional_attention, pool_by_position, standardize.
void populateVisionLowerings(LoweringTable &table);

} // namespace kernel_lowering
} // namespace spark

#endif // SPARK_COMPILER_CONVERSION_SPARKTOKERNELS_KERNELLOWERING_H

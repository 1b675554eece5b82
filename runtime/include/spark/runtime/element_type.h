// The element types of Spark, one vocabulary for the plan, the runtime and the compiler: what a
// buffer, a weight or a KV cache holds. The names are MLIR's builtin type names (the compiler
// maps each to its mlir::Type: compiler/Import/ElementTypes.h), so the same word means the same
// type in IR, plans and messages. Sizes are in bits: f4E2M1FN is packed two to a byte (ModelOpt's
// NVFP4 layout stores the pairs as U8, element 2j in the low nibble), so byte counts are rounded
// up to whole bytes. Which types each place accepts is the reader's business (plan.cc: activations
// f32 or bf16, KV caches f32 or bf16, plan version 8 weights bf16).
#ifndef SPARK_RUNTIME_ELEMENT_TYPE_H_
#define SPARK_RUNTIME_ELEMENT_TYPE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace spark {
namespace rt {

enum class DType {
  kF32,        // IEEE binary32
  kBF16,       // bfloat16
  kI32,        // int32 (token ids, positions, indices)
  kF16,        // IEEE binary16
  kU8,         // uint8 (raw bytes: packed pairs of f4E2M1FN as ModelOpt stores them)
  kF8E4M3FN,   // float8 e4m3, finite (NaN, no infinities): FP8 weights and NVFP4 block scales
  kF4E2M1FN,   // float4 e2m1, finite: NVFP4 weights, two per byte
};
inline constexpr DType kAllDTypes[] = {DType::kF32,  DType::kBF16,     DType::kI32,     DType::kF16,
                                       DType::kU8,   DType::kF8E4M3FN, DType::kF4E2M1FN};

// Bits of one element: 32, 16, 32, 16, 8, 8, 4.
int DTypeBits(DType dtype);

// Bytes per element of a type of whole bytes; 0 for a packed type (f4E2M1FN): use DTypeBytes.
int DTypeSize(DType dtype);

// Bytes of `count` elements, rounded up to whole bytes; nullopt when that overflows 64 bits.
absl::optional<uint64_t> DTypeBytes(DType dtype, uint64_t count);

// MLIR's name of the type: "f32", "bf16", "i32", "f16", "ui8", "f8E4M3FN", "f4E2M1FN".
absl::string_view DTypeName(DType dtype);

// The type named `name` (DTypeName's spelling; "u8" is accepted for ui8), or kInvalidArgument
// listing the names.
absl::StatusOr<DType> ParseDType(absl::string_view name);

// The safetensors dtype name of a type: "F32", "BF16", "I32", "F16", "U8", "F8_E4M3"; empty for
// f4E2M1FN, which has none (its pairs are stored as U8).
absl::string_view SafetensorsDTypeName(DType dtype);

// The type of a safetensors dtype name, or nullopt for names Spark has no type for (F64, I64,
// BOOL, F8_E5M2, ...). Inverse of SafetensorsDTypeName.
absl::optional<DType> DTypeFromSafetensors(absl::string_view name);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_ELEMENT_TYPE_H_

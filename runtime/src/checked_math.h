// Overflow-checked arithmetic for sizes read from untrusted files (plans, safetensors headers,
// ELF headers). Internal to the runtime.
#ifndef SPARK_RUNTIME_SRC_CHECKED_MATH_H_
#define SPARK_RUNTIME_SRC_CHECKED_MATH_H_

#include <cstdint>
#include <limits>

#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "spark/runtime/element_type.h"

namespace spark {
namespace rt {

// a + b, or nullopt when the sum does not fit in uint64_t.
inline absl::optional<uint64_t> CheckedAdd(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return absl::nullopt;
  return sum;
}

// a * b, or nullopt when the product does not fit in uint64_t.
inline absl::optional<uint64_t> CheckedMul(uint64_t a, uint64_t b) {
  uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return absl::nullopt;
  return product;
}

// element_size * product(shape), or nullopt when a dimension is negative or the product overflows.
inline absl::optional<uint64_t> CheckedShapeBytes(absl::Span<const int64_t> shape,
                                                  uint64_t element_size) {
  absl::optional<uint64_t> bytes = element_size;
  for (int64_t dim : shape) {
    if (dim < 0) return absl::nullopt;
    bytes = CheckedMul(*bytes, static_cast<uint64_t>(dim));
    if (!bytes) return absl::nullopt;
  }
  return bytes;
}

// The same, saturating at UINT64_MAX instead of failing (for accessors on validated data).
inline uint64_t SaturatingShapeBytes(absl::Span<const int64_t> shape, uint64_t element_size) {
  return CheckedShapeBytes(shape, element_size).value_or(std::numeric_limits<uint64_t>::max());
}

// Bytes of a tensor of `shape` and `dtype` (packed types rounded up to whole bytes), or nullopt
// when a dimension is negative or the size overflows.
inline absl::optional<uint64_t> CheckedTensorBytes(absl::Span<const int64_t> shape, DType dtype) {
  const absl::optional<uint64_t> elements = CheckedShapeBytes(shape, 1);
  return elements ? DTypeBytes(dtype, *elements) : absl::nullopt;
}

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_CHECKED_MATH_H_

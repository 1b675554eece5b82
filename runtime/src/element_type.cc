#include "spark/runtime/element_type.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/optional.h"
#include "checked_math.h"

namespace spark {
namespace rt {
namespace {

struct DTypeInfo {
  DType dtype;
  int bits;
  const char* name;
  const char* safetensors;
};

constexpr DTypeInfo kInfo[] = {
    {DType::kF32, 32, "f32", "F32"},          {DType::kBF16, 16, "bf16", "BF16"},
    {DType::kI32, 32, "i32", "I32"},          {DType::kF16, 16, "f16", "F16"},
    {DType::kU8, 8, "ui8", "U8"},             {DType::kF8E4M3FN, 8, "f8E4M3FN", "F8_E4M3"},
    {DType::kF4E2M1FN, 4, "f4E2M1FN", ""},
};
static_assert(sizeof(kInfo) / sizeof(kInfo[0]) == sizeof(kAllDTypes) / sizeof(kAllDTypes[0]),
              "one DTypeInfo per DType");

const DTypeInfo& InfoOf(DType dtype) {
  for (const DTypeInfo& info : kInfo) {
    if (info.dtype == dtype) return info;
  }
  return kInfo[0];  // unreachable for a valid enumerator
}

}  // namespace

int DTypeBits(DType dtype) { return InfoOf(dtype).bits; }

int DTypeSize(DType dtype) { return DTypeBits(dtype) % 8 == 0 ? DTypeBits(dtype) / 8 : 0; }

absl::optional<uint64_t> DTypeBytes(DType dtype, uint64_t count) {
  const absl::optional<uint64_t> bits = CheckedMul(count, static_cast<uint64_t>(DTypeBits(dtype)));
  if (!bits) return absl::nullopt;
  return *bits / 8 + (*bits % 8 != 0 ? 1 : 0);
}

absl::string_view DTypeName(DType dtype) { return InfoOf(dtype).name; }

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (const DTypeInfo& info : kInfo) {
    if (name == info.name) return info.dtype;
  }
  if (name == "u8") return DType::kU8;
  std::vector<std::string> names;
  for (const DTypeInfo& info : kInfo) names.push_back(info.name);
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype \"", name, "\" (expected ",
                                                 absl::StrJoin(names, ", "), ")"));
}

absl::string_view SafetensorsDTypeName(DType dtype) { return InfoOf(dtype).safetensors; }

absl::optional<DType> DTypeFromSafetensors(absl::string_view name) {
  if (name.empty()) return absl::nullopt;
  for (const DTypeInfo& info : kInfo) {
    if (name == info.safetensors) return info.dtype;
  }
  return absl::nullopt;
}

}  // namespace rt
}  // namespace spark

#include "spark/runtime/host_kernel_dispatch.h"

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "op_rules.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

// Calls `kernel` with `args` converted to its parameter types, in order.
template <typename... A, size_t... I>
void CallWith(void (*kernel)(A...), absl::Span<const HostArg> args, std::index_sequence<I...>) {
  kernel(HostArgAs<A>(args[I])...);
}
template <typename... A>
void Call(void (*kernel)(A...), absl::Span<const HostArg> args) {
  CallWith(kernel, args, std::index_sequence_for<A...>());
}

// The host reference of every op, by OpId. Each definition above must have the registry's type:
// one that differs is a second overload, and `&host::Name` then does not deduce.
using HostKernel = void (*)(absl::Span<const HostArg>);
#define SPARK_HOST_KERNEL_ENTRY(Name, op, block_size, runs, flops) \
  [](absl::Span<const HostArg> args) {                                \
    Call(&host::Name, args);                                          \
  },
constexpr HostKernel kHostKernels[] = {SPARK_ALL_OPS(SPARK_HOST_KERNEL_ENTRY)};
#undef SPARK_HOST_KERNEL_ENTRY
static_assert(sizeof(kHostKernels) / sizeof(kHostKernels[0]) ==
                  static_cast<size_t>(abi::OpId::kCount),
              "one host kernel per op");

absl::Status Invalid(const char* op, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("host kernel '", op, "': ", what));
}

absl::string_view KindName(abi::ArgKind kind) {
  switch (kind) {
    case abi::ArgKind::kPtr:
      return "pointer";
    case abi::ArgKind::kI32:
      return "i32";
    case abi::ArgKind::kF32:
      return "f32";
  }
  return "?";
}

absl::Status CheckAgainstAbi(const abi::OpSpec& spec, absl::Span<const HostArg> args) {
  if (static_cast<int>(args.size()) != spec.num_args) {
    return Invalid(spec.op,
                   absl::StrCat("expects ", spec.num_args, " arguments, got ", args.size()));
  }
  for (int i = 0; i < spec.num_args; ++i) {
    const abi::ArgSpec& want = spec.args[i];
    const HostArg& got = args[i];
    if (got.kind != want.kind) {
      return Invalid(spec.op, absl::StrCat("argument ", i, " '", want.name, "' must be ",
                                           KindName(want.kind), ", got ", KindName(got.kind)));
    }
    if (want.kind == abi::ArgKind::kPtr && got.ptr == nullptr && !want.nullable) {
      return Invalid(spec.op, absl::StrCat("argument ", i, " '", want.name, "' is null"));
    }
    // Token ids may be -1 (unused); every other i32 is a size.
    if (want.kind == abi::ArgKind::kI32 && got.i32 < 0 && want.role != abi::Role::kTokenId) {
      return Invalid(spec.op, absl::StrCat("argument ", i, " '", want.name,
                                           "' must not be negative, got ", got.i32));
    }
    if (want.role == abi::Role::kCacheDType && abi::KvCacheElementBytes(got.i32) == 0) {
      return Invalid(spec.op, absl::StrCat("cache_dtype ", got.i32, " is neither ",
                                           static_cast<int>(abi::kCacheF32), " (f32) nor ",
                                           static_cast<int>(abi::kCacheBF16), " (bf16)"));
    }
  }
  const std::string broken = BrokenRule(
      spec, [&](int i) -> int64_t { return args[i].i32; }, [&](int i) { return args[i].f32; });
  if (!broken.empty()) return Invalid(spec.op, broken);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckHostArgs(abi::OpId op, absl::Span<const HostArg> args) {
  if (static_cast<unsigned>(op) >= static_cast<unsigned>(abi::OpId::kCount)) {
    return absl::InvalidArgumentError(
        absl::StrCat("no host kernel for op id ", static_cast<int>(op)));
  }
  return CheckAgainstAbi(abi::Spec(op), args);
}

absl::Status RunHostKernel(abi::OpId op, absl::Span<const HostArg> args) {
  SPARK_RETURN_IF_ERROR(CheckHostArgs(op, args));
  kHostKernels[static_cast<int>(op)](args);
  return absl::OkStatus();
}

absl::Status RunHostKernel(const std::string& op, absl::Span<const HostArg> args) {
  const abi::OpSpec* spec = abi::FindOp(op.c_str());
  if (spec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no host kernel for op '", op, "' (not in the op registry, kernel_ops.def)"));
  }
  return RunHostKernel(spec->id, args);
}

}  // namespace rt
}  // namespace spark

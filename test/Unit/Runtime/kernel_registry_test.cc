// The op registry (kernel_ops.def) is consistent with itself: what every consumer derives from it
// (bounds checks, rules, costs, entry points) relies on these properties.
#include <set>
#include <string>
#include <type_traits>

#include "gtest/gtest.h"
#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace abi {
namespace {

bool IsSizeArg(const OpSpec& spec, int i) {
  return i >= 0 && i < spec.num_args && spec.args[i].kind == ArgKind::kI32;
}

TEST(KernelRegistryTest, TableIsInOpIdOrderAndNamesAreUnique) {
  std::set<std::string> names, symbols;
  for (int i = 0; i < kNumOps; ++i) {
    const OpSpec& spec = kOps[i];
    EXPECT_EQ(static_cast<int>(spec.id), i) << spec.op;
    EXPECT_EQ(&Spec(spec.id), &spec);
    EXPECT_EQ(FindOp(spec.op), &spec);
    // Kernel ops have a device function; transfers (a copy) are carried out by the runtime.
    EXPECT_EQ(std::string(spec.symbol), spec.kernel() ? std::string("spark_") + spec.op : "");
    EXPECT_TRUE(names.insert(spec.op).second) << spec.op;
    if (spec.kernel()) EXPECT_TRUE(symbols.insert(spec.symbol).second) << spec.symbol;
    EXPECT_TRUE(spec.kernel() ? spec.block_size == 128 || spec.block_size == 256 ||
                                    spec.block_size == 1024
                              : spec.block_size == 0)
        << spec.op;
  }
  EXPECT_EQ(FindOp("flash_attention"), nullptr);
}

TEST(KernelRegistryTest, ArgumentsAreConsistent) {
  for (const OpSpec& spec : kOps) {
    std::set<std::string> arg_names;
    int num_tokens = 0;
    for (int i = 0; i < spec.num_args; ++i) {
      const ArgSpec& arg = spec.args[i];
      SCOPED_TRACE(std::string(spec.op) + "." + arg.name);
      EXPECT_TRUE(arg_names.insert(arg.name).second);
      EXPECT_EQ(FindArg(spec, arg.name), i);
      EXPECT_EQ(arg.kind, KindOf(arg.role, arg.element));
      if (arg.role == Role::kNumTokens) ++num_tokens;
      if (arg.kind != ArgKind::kPtr) {
        EXPECT_EQ(arg.extent.kind, Extent::kScalar);
        EXPECT_FALSE(arg.nullable);
        EXPECT_EQ(arg.role == Role::kParam, arg.element == ElementType::kF32);
        continue;
      }
      // Every pointer says what it must hold, over size arguments of its own op.
      EXPECT_NE(arg.extent.kind, Extent::kScalar);
      for (int f = 0; f < arg.extent.num_factors; ++f) {
        EXPECT_TRUE(IsSizeArg(spec, arg.extent.factors[f])) << "factor " << f;
      }
      EXPECT_GE(arg.extent.multiplier, 1);
      const bool cache_role = arg.role >= Role::kKCacheRead && arg.role <= Role::kVCacheWrite;
      EXPECT_EQ(cache_role, arg.element == ElementType::kCache);
      EXPECT_EQ(cache_role, arg.extent.kind == Extent::kCacheRows);
      if (arg.extent.kind == Extent::kRecords) EXPECT_EQ(arg.extent.num_factors, 4);
      if (abi::IsWeightRole(arg.role)) EXPECT_EQ(arg.extent.kind, Extent::kTotal);
      if (IsActivationRole(arg.role)) EXPECT_NE(arg.extent.kind, Extent::kTotal);
      // Activations (of the plan's precision) only in arena buffers other than workspaces,
      // which keep f32 / i32 at every precision.
      if (arg.element == ElementType::kAct) {
        EXPECT_TRUE(IsActivationRole(arg.role) && arg.role != Role::kWorkspace);
      }
      if (arg.role == Role::kWorkspace) EXPECT_NE(arg.element, ElementType::kAct);
    }
    EXPECT_EQ(num_tokens, 1) << spec.op << " takes one num_tokens";
    // Ops with cache parts also take the cache's capacity and element type.
    if (FindRole(spec, Role::kKCacheRead) >= 0 || FindRole(spec, Role::kKCacheWrite) >= 0) {
      EXPECT_GE(FindRole(spec, Role::kKvCapacity), 0) << spec.op;
      EXPECT_GE(FindRole(spec, Role::kCacheDType), 0) << spec.op;
    }
    for (const Rule* rule = spec.rules; rule->kind != RuleKind::kEnd; ++rule) {
      const bool param = rule->kind == RuleKind::kPositiveParam ||
                         rule->kind == RuleKind::kNonZeroParam;
      ASSERT_TRUE(rule->a >= 0 && rule->a < spec.num_args) << spec.op;
      EXPECT_EQ(spec.args[rule->a].kind, param ? ArgKind::kF32 : ArgKind::kI32) << spec.op;
      const bool unary = param || rule->kind == RuleKind::kPositive || rule->kind == RuleKind::kEven ||
                         rule->kind == RuleKind::kMultipleOf16 || rule->kind == RuleKind::kMultipleOf4 ||
                         rule->kind == RuleKind::kMultipleOf64 ||
                         rule->kind == RuleKind::kZeroOrOne ||
                         rule->kind == RuleKind::kWholeKvBlocks;
      if (unary) {
        EXPECT_EQ(rule->b, -1) << spec.op;
      } else {
        EXPECT_TRUE(IsSizeArg(spec, rule->b)) << spec.op;
      }
    }
    if (spec.runs == Runs::kOnItsPath) {
      EXPECT_GE(FindRole(spec, Role::kMoePath), 0) << spec.op;
    }
    if (spec.runs == Runs::kWhenSplit) {
      EXPECT_TRUE(IsSizeArg(spec, FindArg(spec, "max_splits"))) << spec.op;
      EXPECT_TRUE(IsSizeArg(spec, FindArg(spec, "split_rows"))) << spec.op;
    }
    for (int f = 0; f < spec.flops.num_factors; ++f) {
      EXPECT_TRUE(IsSizeArg(spec, spec.flops.factors[f])) << spec.op;
    }
    EXPECT_EQ(spec.flops.kind == kPerKey, FindRole(spec, Role::kKCacheRead) >= 0) << spec.op;
  }
}

// The per-op argument indices and C types follow the call order.
TEST(KernelRegistryTest, IndicesAndTypesFollowTheCallOrder) {
  static_assert(ops::linear::x == 0 && ops::linear::in_features == 5, "");
  static_assert(ops::attention::last_visible == 18 && ops::attention::kNumArgs == 19, "");
  // On the device, activations are void* (f32 or bf16 by the module's precision); the host
  // reference takes them as float*.
  static_assert(std::is_same<ops::linear::Fn,
                             void(const void*, const unsigned short*, void*, int, int, int)>::value,
                "");
  static_assert(std::is_same<ops::linear::HostFn,
                             void(const float*, const unsigned short*, float*, int, int, int)>::value,
                "");
  static_assert(std::is_same<ops::kv_write::Fn,
                             void(const void*, const void*, const int*, const int*, const int*,
                                  void*, void*, int, int, int, int, int)>::value,
                "");
  static_assert(std::is_same<ops::moe_combine::Fn, void(const float*, void*, int, int, int)>::value,
                "");
  EXPECT_STREQ(Spec(OpId::kAttention).args[ops::attention::partials].name, "partials");
  EXPECT_TRUE(Spec(OpId::kAttention).args[ops::attention::partials].nullable);
  EXPECT_TRUE(Spec(OpId::kScatterRows).args[ops::scatter_rows::dest].output());
  EXPECT_FALSE(Spec(OpId::kMoeDown).args[ops::moe_down::partials].output());
}

}  // namespace
}  // namespace abi
}  // namespace spark

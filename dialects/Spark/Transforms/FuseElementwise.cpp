//===- FuseElementwise.cpp - fuse gelu(gate) * up --------------------------===//
#include "dialects/Spark/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace spark {
#define GEN_PASS_DEF_SPARKFUSEELEMENTWISEPASS
#include "dialects/Spark/Transforms/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

/// mul(gelu(a), b) or mul(b, gelu(a)) -> gelu_mul(a, b), when the gelu has no other use.
struct FuseGeluMul : OpRewritePattern<MulOp> {
  FuseGeluMul(MLIRContext *context, llvm::Statistic &numFused)
      : OpRewritePattern<MulOp>(context), numFused(numFused) {}

  LogicalResult matchAndRewrite(MulOp mul, PatternRewriter &rewriter) const override {
    for (auto [gateSide, other] : {std::pair{mul.getLhs(), mul.getRhs()},
                                   std::pair{mul.getRhs(), mul.getLhs()}}) {
      auto gelu = gateSide.getDefiningOp<GeluOp>();
      if (!gelu)
        continue;
      if (!gelu->hasOneUse())
        continue; // the other operand may still be a fusable gelu
      rewriter.replaceOpWithNewOp<GeluMulOp>(mul, mul.getType(), gelu.getInput(), other);
      rewriter.eraseOp(gelu);
      ++numFused;
      return success();
    }
    return rewriter.notifyMatchFailure(mul, "no gelu operand with a single use");
  }

  llvm::Statistic &numFused;
};

struct SparkFuseElementwisePass
    : spark::impl::SparkFuseElementwisePassBase<SparkFuseElementwisePass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseGeluMul>(&getContext(), numFused);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

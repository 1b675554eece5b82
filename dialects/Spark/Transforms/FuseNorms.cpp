//===- FuseNorms.cpp - fuse RMSNorm with the residual add or RoPE after it -===//
#include "dialects/Spark/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace spark {
#define GEN_PASS_DEF_SPARKFUSENORMSPASS
#include "dialects/Spark/Transforms/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

/// add(residual, rms_norm(x, w)) or add(rms_norm(x, w), residual) ->
/// residual_rms_norm(x, residual, w), when the norm has no other use and works on rows ([T, H]).
/// The fused op keeps the add's location: its result is the add's value.
struct FuseResidualRmsNorm : OpRewritePattern<AddOp> {
  FuseResidualRmsNorm(MLIRContext *context, llvm::Statistic &numFused)
      : OpRewritePattern<AddOp>(context), numFused(numFused) {}

  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    for (auto [normSide, residual] : {std::pair{add.getRhs(), add.getLhs()},
                                      std::pair{add.getLhs(), add.getRhs()}}) {
      auto norm = normSide.getDefiningOp<RmsNormOp>();
      if (!norm || !norm->hasOneUse() || norm.getInput().getType().getRank() != 2)
        continue;
      rewriter.replaceOpWithNewOp<ResidualRmsNormOp>(add, add.getType(), norm.getInput(),
                                                     residual, norm.getWeight(),
                                                     norm.getEpsilonAttr());
      rewriter.eraseOp(norm);
      ++numFused;
      return success();
    }
    return rewriter.notifyMatchFailure(add, "no single-use rank-2 rms_norm operand");
  }

  llvm::Statistic &numFused;
};

/// rope(rms_norm(x, w), positions) -> rms_norm_rope(x, positions, w), when the norm has no other
/// use. The fused op keeps the rope's location.
struct FuseRmsNormRope : OpRewritePattern<RopeOp> {
  FuseRmsNormRope(MLIRContext *context, llvm::Statistic &numFused)
      : OpRewritePattern<RopeOp>(context), numFused(numFused) {}

  LogicalResult matchAndRewrite(RopeOp rope, PatternRewriter &rewriter) const override {
    auto norm = rope.getInput().getDefiningOp<RmsNormOp>();
    if (!norm || !norm->hasOneUse())
      return rewriter.notifyMatchFailure(rope, "input is not a single-use rms_norm");
    rewriter.replaceOpWithNewOp<RmsNormRopeOp>(
        rope, rope.getType(), norm.getInput(), rope.getPositions(), norm.getWeight(),
        norm.getEpsilonAttr(), rope.getThetaAttr(), rope.getRotatedPairsAttr(),
        rope.getFactorAttr());
    rewriter.eraseOp(norm);
    ++numFused;
    return success();
  }

  llvm::Statistic &numFused;
};

struct SparkFuseNormsPass : spark::impl::SparkFuseNormsPassBase<SparkFuseNormsPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseResidualRmsNorm>(&getContext(), numResidualFused);
    patterns.add<FuseRmsNormRope>(&getContext(), numRopeFused);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

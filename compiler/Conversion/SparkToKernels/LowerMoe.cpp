//===- LowerMoe.cpp - the MoE router and experts ---------------------------===//
//
// spark.moe_router to rms_norm (the router scale as its weight) + linear (the logits) + moe_topk,
// and spark.moe_experts to moe_gate_up + moe_down (or their NVFP4 / FP8 forms for quantized
// experts) through a scratch buffer: a GEMV pair for calls of fewer than kMoeGroupMinTokens
// tokens and, when a call can be that long, a grouped pair (moe_down into a workspace that
// moe_combine sums), each its own entries.
//
//===----------------------------------------------------------------------===//
#include "KernelLowering.h"

#include <cmath>

using namespace mlir;

namespace spark {
namespace kernel_lowering {
namespace {

LogicalResult lowerMoeRouter(MoeRouterOp r, KernelLowering &k) {
  FailureOr<Arg> scale = k.weight(r.getScale()), proj = k.weight(r.getProj()),
                 pes = k.weight(r.getPerExpertScale());
  if (failed(scale) || failed(proj) || failed(pes))
    return failure();
  auto projType = r.getProj().getType();
  const int64_t experts = projType.getDimSize(0), hidden = projType.getDimSize(1);
  // The logits as rms_norm (the router scale as its weight) + linear, so that reading proj is
  // spread over the GPU like any linear; hidden^-0.5 is applied by moe_topk.
  Arg in = k.input(r.getInput());
  Arg normed = k.scratch("norm", {hidden});
  k.launch(abi::OpId::kRmsNorm,
           {in, *scale, normed, Arg::numTokens(), k.i32(1), k.i32(hidden),
            KernelLowering::f32(r.getEpsilon())},
           perToken(1), "norm");
  Arg logits = k.scratch("logits", {experts});
  k.launch(abi::OpId::kLinear,
           {normed, *proj, logits, Arg::numTokens(), k.i32(experts), k.i32(hidden)},
           fixedGrid(experts, 8), "logits");
  Arg weightsOut = k.result(r.getWeights()), indicesOut = k.result(r.getIndices());
  k.launch(abi::OpId::kMoeTopK,
           {logits, *pes, weightsOut, indicesOut, Arg::numTokens(), k.i32(experts),
            k.i32(r.getTopK()),
            Arg::f32v(static_cast<float>(1.0 / std::sqrt(static_cast<double>(hidden))))},
           perToken(1));
  return success();
}

LogicalResult lowerMoeExperts(MoeExpertsOp m, KernelLowering &k) {
  FailureOr<Arg> gateUpW = k.weight(m.getGateUp()), down = k.weight(m.getDown());
  if (failed(gateUpW) || failed(down))
    return failure();
  SmallVector<Arg, 2> gateUpScales, downScales;
  for (auto [values, args] : {std::pair{m.getGateUpScales(), &gateUpScales},
                              std::pair{m.getDownScales(), &downScales}})
    for (Value scale : values) {
      FailureOr<Arg> arg = k.weight(scale);
      if (failed(arg))
        return failure();
      args->push_back(*arg);
    }
  auto gu = m.getGateUp().getType();
  int64_t experts = gu.getDimSize(0), inter = gu.getDimSize(1) / 2, hidden = gu.getDimSize(2),
          topK = m.getWeights().getType().getDimSize(1);
  Arg in = k.input(m.getInput()), w = k.input(m.getWeights()), idx = k.input(m.getIndices());
  Arg act = k.scratch("act", {topK, inter});
  // FP8 scales per matrix (1) or per row (the matrix's rows); the verifier checked them.
  auto scalesPerMatrix = [&](ValueRange scales, int64_t matrices) {
    return cast<RankedTensorType>(scales[0].getType()).getNumElements() / (experts * matrices);
  };
  // Calls of kMoeGroupMinTokens tokens or more run the experts grouped by expert (tensor cores;
  // moe_down into a workspace that moe_combine sums), fewer tokens on the GEMV path: each path
  // its own launches and entries (the grouped tiles' registers would slow the decode GEMV
  // otherwise); the programs run the launches of the call's path.
  const bool grouped = k.maxTokens() >= abi::kMoeGroupMinTokens;
  Type guElement = gu.getElementType(), downElement = m.getDown().getType().getElementType();
  auto gateUp = [&](abi::MoePath path, StringRef suffix) {
    const abi::GridRule grid = perToken(topK * inter, 8);
    if (isa<Float4E2M1FNType>(guElement))
      k.launch(abi::OpId::kMoeGateUpNvfp4,
               {in, *gateUpW, gateUpScales[0], gateUpScales[1], idx, act, Arg::numTokens(),
                k.i32(hidden), k.i32(inter), k.i32(experts), k.i32(topK), k.i32(path)},
               grid, suffix);
    else if (isa<Float8E4M3FNType>(guElement))
      k.launch(abi::OpId::kMoeGateUpFp8,
               {in, *gateUpW, gateUpScales[0], idx, act, Arg::numTokens(), k.i32(hidden),
                k.i32(inter), k.i32(experts), k.i32(topK),
                k.i32(scalesPerMatrix(m.getGateUpScales(), 2)), k.i32(path)},
               grid, suffix);
    else
      k.launch(abi::OpId::kMoeGateUp,
               {in, *gateUpW, idx, act, Arg::numTokens(), k.i32(hidden), k.i32(inter),
                k.i32(experts), k.i32(topK), k.i32(path)},
               grid, suffix);
  };
  gateUp(abi::kMoeGemv, "gate_up");
  if (grouped)
    gateUp(abi::kMoeGrouped, "gate_up_grouped");
  Arg y = k.result(m.getResult());
  auto downLaunch = [&](Arg partials, abi::MoePath path, StringRef suffix) {
    const abi::GridRule grid = perToken(hidden, 8);
    if (isa<Float4E2M1FNType>(downElement))
      k.launch(abi::OpId::kMoeDownNvfp4,
               {act, *down, downScales[0], downScales[1], w, idx, y, partials, Arg::numTokens(),
                k.i32(hidden), k.i32(inter), k.i32(experts), k.i32(topK), k.i32(path)},
               grid, suffix);
    else if (isa<Float8E4M3FNType>(downElement))
      k.launch(abi::OpId::kMoeDownFp8,
               {act, *down, downScales[0], w, idx, y, partials, Arg::numTokens(), k.i32(hidden),
                k.i32(inter), k.i32(experts), k.i32(topK),
                k.i32(scalesPerMatrix(m.getDownScales(), 1)), k.i32(path)},
               grid, suffix);
    else
      k.launch(abi::OpId::kMoeDown,
               {act, *down, w, idx, y, partials, Arg::numTokens(), k.i32(hidden), k.i32(inter),
                k.i32(experts), k.i32(topK), k.i32(path)},
               grid, suffix);
  };
  downLaunch(Arg::null(), abi::kMoeGemv, "down");
  if (!grouped)
    return success();
  Arg partials = k.scratch("partials", {topK, hidden});
  downLaunch(partials, abi::kMoeGrouped, "down_grouped");
  k.launch(abi::OpId::kMoeCombine,
           {partials, y, Arg::numTokens(), k.i32(hidden), k.i32(topK)}, perToken(hidden, 256),
           "combine");
  return success();
}

} // namespace

void populateMoeLowerings(LoweringTable &table) {
  table.add<MoeRouterOp>(lowerMoeRouter);
  table.add<MoeExpertsOp>(lowerMoeExperts);
}

} // namespace kernel_lowering
} // namespace spark

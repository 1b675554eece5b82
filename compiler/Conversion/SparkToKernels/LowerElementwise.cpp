//===- LowerElementwise.cpp - elementwise ops and views -------------------===//
//
// spark.add, spark.mul, spark.scale, spark.scalar_mul, spark.gelu, spark.gelu_mul and
// spark.softcap to their kernels (one thread per element, 256 per block), and spark.reshape to a
// view of its input's buffer.
//
//===----------------------------------------------------------------------===//
#include "KernelLowering.h"

#include "dialects/Spark/IR/TypeInference.h"

using namespace mlir;

namespace spark {
namespace kernel_lowering {
namespace {


template <typename OpTy, abi::OpId kKernel>
LogicalResult lowerBinary(OpTy b, KernelLowering &k) {
  Arg lhs = k.input(b.getLhs()), rhs = k.input(b.getRhs());
  k.launch(kKernel,
           {lhs, rhs, k.result(b.getResult()), Arg::numTokens(), k.i32(elementsPerRow(b.getResult()))},
           rowsOf(b.getResult()));
  return success();
}

LogicalResult lowerScale(ScaleOp s, KernelLowering &k) {
  Arg in = k.input(s.getInput());
  k.launch(abi::OpId::kScale,
           {in, k.result(s.getResult()), Arg::numTokens(), k.i32(elementsPerRow(s.getResult())),
            KernelLowering::f32(s.getFactor())},
           rowsOf(s.getResult()));
  return success();
}

LogicalResult lowerScalarMul(ScalarMulOp s, KernelLowering &k) {
  FailureOr<Arg> scalar = k.weight(s.getScalar());
  if (failed(scalar))
    return failure();
  Arg in = k.input(s.getInput());
  k.launch(abi::OpId::kScalarMul,
           {in, *scalar, k.result(s.getResult()), Arg::numTokens(),
            k.i32(elementsPerRow(s.getResult()))},
           rowsOf(s.getResult()));
  return success();
}

LogicalResult lowerGelu(GeluOp g, KernelLowering &k) {
  Arg in = k.input(g.getInput());
  k.launch(abi::OpId::kGelu,
           {in, k.result(g.getResult()), Arg::numTokens(), k.i32(elementsPerRow(g.getResult()))},
           rowsOf(g.getResult()));
  return success();
}

LogicalResult lowerGeluMul(GeluMulOp g, KernelLowering &k) {
  Arg gate = k.input(g.getGate()), up = k.input(g.getUp());
  k.launch(abi::OpId::kGeluMul,
           {gate, up, k.result(g.getResult()), Arg::numTokens(), k.i32(elementsPerRow(g.getResult()))},
           rowsOf(g.getResult()));
  return success();
}

LogicalResult lowerSoftcap(SoftcapOp s, KernelLowering &k) {
  Arg in = k.input(s.getInput());
  k.launch(abi::OpId::kSoftcap,
           {in, k.result(s.getResult()), Arg::numTokens(), k.i32(elementsPerRow(s.getResult())),
            KernelLowering::f32(s.getCap())},
           rowsOf(s.getResult()));
  return success();
}

LogicalResult lowerReshape(ReshapeOp r, KernelLowering &k) {
  k.alias(r.getResult(), r.getInput()); // a view: no data moves
  return success();
}

} // namespace

void populateElementwiseLowerings(LoweringTable &table) {
  table.add<AddOp>(lowerBinary<AddOp, abi::OpId::kAdd>);
  table.add<MulOp>(lowerBinary<MulOp, abi::OpId::kMul>);
  table.add<ScaleOp>(lowerScale);
  table.add<ScalarMulOp>(lowerScalarMul);
  table.add<GeluOp>(lowerGelu);
  table.add<GeluMulOp>(lowerGeluMul);
  table.add<SoftcapOp>(lowerSoftcap);
  table.add<ReshapeOp>(lowerReshape);
}

} // namespace kernel_lowering
} // namespace spark

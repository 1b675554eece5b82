// RUN: spark-opt %s --spark-fuse-elementwise --split-input-file | FileCheck %s

// spark-fuse-elementwise: mul(gelu(gate), up) -> gelu_mul(gate, up) when the gelu has one use.

// gelu on the left of the mul: fused, gate first.
// CHECK-LABEL: func.func @gelu_lhs
// CHECK-SAME: (%[[GATE:.*]]: tensor<?x8xf32>, %[[UP:.*]]: tensor<?x8xf32>)
// CHECK-NOT: spark.gelu %
// CHECK: %[[Y:.*]] = spark.gelu_mul %[[GATE]], %[[UP]] : tensor<?x8xf32>
// CHECK-NOT: spark.mul
// CHECK: return %[[Y]] : tensor<?x8xf32>
func.func @gelu_lhs(%gate: tensor<?x8xf32>, %up: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %g = spark.gelu %gate : tensor<?x8xf32>
  %y = spark.mul %g, %up : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// gelu on the right of the mul: fused, still gate first.
// CHECK-LABEL: func.func @gelu_rhs
// CHECK-SAME: (%[[GATE:.*]]: tensor<?x8xf32>, %[[UP:.*]]: tensor<?x8xf32>)
// CHECK-NOT: spark.gelu %
// CHECK: %[[Y:.*]] = spark.gelu_mul %[[GATE]], %[[UP]] : tensor<?x8xf32>
// CHECK-NOT: spark.mul
// CHECK: return %[[Y]] : tensor<?x8xf32>
func.func @gelu_rhs(%gate: tensor<?x8xf32>, %up: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %g = spark.gelu %gate : tensor<?x8xf32>
  %y = spark.mul %up, %g : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Both operands are gelus: the left one is the gate, the right gelu is kept as the up.
// CHECK-LABEL: func.func @gelu_both
// CHECK-SAME: (%[[A:.*]]: tensor<?x8xf32>, %[[B:.*]]: tensor<?x8xf32>)
// CHECK: %[[GB:.*]] = spark.gelu %[[B]] : tensor<?x8xf32>
// CHECK-NOT: spark.gelu %[[A]]
// CHECK: %[[Y:.*]] = spark.gelu_mul %[[A]], %[[GB]] : tensor<?x8xf32>
// CHECK-NOT: spark.mul
// CHECK: return %[[Y]] : tensor<?x8xf32>
func.func @gelu_both(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %ga = spark.gelu %a : tensor<?x8xf32>
  %gb = spark.gelu %b : tensor<?x8xf32>
  %y = spark.mul %ga, %gb : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Does not apply: the gelu has a second use, so it and the mul stay.
// CHECK-LABEL: func.func @gelu_two_uses
// CHECK-SAME: (%[[GATE:.*]]: tensor<?x8xf32>, %[[UP:.*]]: tensor<?x8xf32>)
// CHECK: %[[G:.*]] = spark.gelu %[[GATE]] : tensor<?x8xf32>
// CHECK: %[[Y:.*]] = spark.mul %[[G]], %[[UP]] : tensor<?x8xf32>
// CHECK-NOT: spark.gelu_mul
// CHECK: return %[[Y]], %[[G]] : tensor<?x8xf32>, tensor<?x8xf32>
func.func @gelu_two_uses(%gate: tensor<?x8xf32>, %up: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %g = spark.gelu %gate : tensor<?x8xf32>
  %y = spark.mul %g, %up : tensor<?x8xf32>
  return %y, %g : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// Does not apply: a mul of a gelu by itself (two uses of one gelu) stays.
// CHECK-LABEL: func.func @gelu_squared
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK: %[[G:.*]] = spark.gelu %[[X]] : tensor<?x8xf32>
// CHECK: %[[Y:.*]] = spark.mul %[[G]], %[[G]] : tensor<?x8xf32>
// CHECK-NOT: spark.gelu_mul
// CHECK: return %[[Y]] : tensor<?x8xf32>
func.func @gelu_squared(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %g = spark.gelu %x : tensor<?x8xf32>
  %y = spark.mul %g, %g : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Does not apply: a mul without a gelu operand, and a gelu feeding an add, stay.
// CHECK-LABEL: func.func @no_gelu_operand
// CHECK-SAME: (%[[A:.*]]: tensor<?x8xf32>, %[[B:.*]]: tensor<?x8xf32>)
// CHECK: %[[M:.*]] = spark.mul %[[A]], %[[B]] : tensor<?x8xf32>
// CHECK: %[[G:.*]] = spark.gelu %[[M]] : tensor<?x8xf32>
// CHECK: %[[S:.*]] = spark.add %[[G]], %[[B]] : tensor<?x8xf32>
// CHECK-NOT: spark.gelu_mul
// CHECK: return %[[S]] : tensor<?x8xf32>
func.func @no_gelu_operand(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %m = spark.mul %a, %b : tensor<?x8xf32>
  %g = spark.gelu %m : tensor<?x8xf32>
  %s = spark.add %g, %b : tensor<?x8xf32>
  return %s : tensor<?x8xf32>
}

// -----

// The left gelu has another use, the right one is fused as the gate.
// CHECK-LABEL: func.func @gelu_lhs_shared
// CHECK-SAME: (%[[A:.*]]: tensor<?x8xf32>, %[[B:.*]]: tensor<?x8xf32>)
// CHECK: %[[GA:.*]] = spark.gelu %[[A]] : tensor<?x8xf32>
// CHECK: %[[Y:.*]] = spark.gelu_mul %[[B]], %[[GA]] : tensor<?x8xf32>
// CHECK: spark.add %[[Y]], %[[GA]]
func.func @gelu_lhs_shared(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %ga = spark.gelu %a : tensor<?x8xf32>
  %gb = spark.gelu %b : tensor<?x8xf32>
  %y = spark.mul %ga, %gb : tensor<?x8xf32>
  %z = spark.add %y, %ga : tensor<?x8xf32>
  return %z : tensor<?x8xf32>
}

// RUN: spark-opt %s --spark-fuse-norms --split-input-file | FileCheck %s

// spark-fuse-norms: add(residual, rms_norm(x, w)) -> residual_rms_norm(x, residual, w) and
// rope(rms_norm(x, w), pos) -> rms_norm_rope(x, pos, w), when the norm has one use.

// The post-attention norm and the residual add (norm on the right of the add).
// CHECK-LABEL: func.func @residual_rhs
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>, %[[R:.*]]: tensor<?x8xf32>, %[[W:.*]]: tensor<8xbf16>)
// CHECK-NOT: spark.rms_norm %
// CHECK: %[[Y:.*]] = spark.residual_rms_norm %[[X]], %[[R]], %[[W]] {epsilon = 9.99999997E-7 : f32} : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xbf16>) -> tensor<?x8xf32>
// CHECK-NOT: spark.add
// CHECK: return %[[Y]]
func.func @residual_rhs(%x: tensor<?x8xf32>, %r: tensor<?x8xf32>, %w: tensor<8xbf16>) -> tensor<?x8xf32> {
  %n = spark.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>, tensor<8xbf16>) -> tensor<?x8xf32>
  %y = spark.add %r, %n : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Norm on the left, weight-less: still fused; the other operand is the residual.
// CHECK-LABEL: func.func @residual_lhs_no_weight
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>, %[[R:.*]]: tensor<?x8xf32>)
// CHECK: %[[Y:.*]] = spark.residual_rms_norm %[[X]], %[[R]] {epsilon = 9.99999997E-7 : f32} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-NOT: spark.add
func.func @residual_lhs_no_weight(%x: tensor<?x8xf32>, %r: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %n = spark.rms_norm %x {epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %y = spark.add %n, %r : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// A norm whose result is used twice is not fused (its value is needed on its own).
// CHECK-LABEL: func.func @residual_norm_used_twice
// CHECK: spark.rms_norm
// CHECK: spark.add
// CHECK-NOT: spark.residual_rms_norm
func.func @residual_norm_used_twice(%x: tensor<?x8xf32>, %r: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %n = spark.rms_norm %x {epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %y = spark.add %r, %n : tensor<?x8xf32>
  return %y, %n : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// Both operands are single-use norms: the right one is fused, the left one is the residual.
// CHECK-LABEL: func.func @residual_both_norms
// CHECK-SAME: (%[[A:.*]]: tensor<?x8xf32>, %[[B:.*]]: tensor<?x8xf32>)
// CHECK: %[[NA:.*]] = spark.rms_norm %[[A]]
// CHECK: spark.residual_rms_norm %[[B]], %[[NA]]
func.func @residual_both_norms(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %na = spark.rms_norm %a {epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %nb = spark.rms_norm %b {epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %y = spark.add %na, %nb : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// The q norm and RoPE (proportional: 64 of 256 pairs rotate): fused with both sets of attributes.
// CHECK-LABEL: func.func @norm_rope
// CHECK-SAME: (%[[Q:.*]]: tensor<?x8x512xf32>, %[[W:.*]]: tensor<512xbf16>, %[[P:.*]]: tensor<?xi32>)
// CHECK-NOT: spark.rms_norm %
// CHECK: %[[Y:.*]] = spark.rms_norm_rope %[[Q]], %[[P]], %[[W]] {epsilon = 9.99999997E-7 : f32, factor = 1.000000e+00 : f32, rotated_pairs = 64 : i64, theta = 1.000000e+06 : f32} : (tensor<?x8x512xf32>, tensor<?xi32>, tensor<512xbf16>) -> tensor<?x8x512xf32>
// CHECK-NOT: spark.rope
// CHECK: return %[[Y]]
func.func @norm_rope(%q: tensor<?x8x512xf32>, %w: tensor<512xbf16>, %pos: tensor<?xi32>) -> tensor<?x8x512xf32> {
  %n = spark.rms_norm %q, %w {epsilon = 1.0e-6 : f32} : (tensor<?x8x512xf32>, tensor<512xbf16>) -> tensor<?x8x512xf32>
  %r = spark.rope %n, %pos {theta = 1.0e6 : f32, rotated_pairs = 64 : i64, factor = 1.0 : f32} : (tensor<?x8x512xf32>, tensor<?xi32>) -> tensor<?x8x512xf32>
  return %r : tensor<?x8x512xf32>
}

// -----

// A RoPE of something that is not a norm, and a norm used twice, stay as they are.
// CHECK-LABEL: func.func @rope_not_fused
// CHECK: spark.rms_norm
// CHECK: spark.rope
// CHECK: spark.rope
// CHECK-NOT: spark.rms_norm_rope
func.func @rope_not_fused(%k: tensor<?x2x32xf32>, %pos: tensor<?xi32>) -> (tensor<?x2x32xf32>, tensor<?x2x32xf32>) {
  %n = spark.rms_norm %k {epsilon = 1.0e-6 : f32} : (tensor<?x2x32xf32>) -> tensor<?x2x32xf32>
  %r = spark.rope %n, %pos {theta = 1.0e4 : f32, rotated_pairs = 16 : i64, factor = 1.0 : f32} : (tensor<?x2x32xf32>, tensor<?xi32>) -> tensor<?x2x32xf32>
  %s = spark.rope %k, %pos {theta = 1.0e4 : f32, rotated_pairs = 16 : i64, factor = 1.0 : f32} : (tensor<?x2x32xf32>, tensor<?xi32>) -> tensor<?x2x32xf32>
  %u = spark.add %r, %n : tensor<?x2x32xf32>
  return %u, %s : tensor<?x2x32xf32>, tensor<?x2x32xf32>
}

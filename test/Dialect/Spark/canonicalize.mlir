// RUN: spark-opt %s -canonicalize -split-input-file | FileCheck %s

// Folders of the spark dialect: mask_tokens, scale, reshape.

// A mask_tokens with no placeholder ids is the identity and folds away.
// CHECK-LABEL: func.func @mask_tokens_empty
// CHECK-SAME: (%[[IDS:.*]]: tensor<?xi32>)
// CHECK-NOT: spark.mask_tokens
// CHECK: return %[[IDS]] : tensor<?xi32>
func.func @mask_tokens_empty(%ids: tensor<?xi32>) -> tensor<?xi32> {
  %0 = spark.mask_tokens %ids {token_ids = array<i32>, replacement = 0 : i32} : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

// A mask_tokens with placeholder ids stays.
// CHECK-LABEL: func.func @mask_tokens_kept
// CHECK-SAME: (%[[IDS:.*]]: tensor<?xi32>)
// CHECK: %[[M:.*]] = spark.mask_tokens %[[IDS]] {replacement = 0 : i32, token_ids = array<i32: 7>} : tensor<?xi32>
// CHECK: return %[[M]] : tensor<?xi32>
func.func @mask_tokens_kept(%ids: tensor<?xi32>) -> tensor<?xi32> {
  %0 = spark.mask_tokens %ids {token_ids = array<i32: 7>, replacement = 0 : i32} : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

// A scale by 1.0 folds to its input.
// CHECK-LABEL: func.func @scale_one
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK-NOT: spark.scale
// CHECK: return %[[X]] : tensor<?x8xf32>
func.func @scale_one(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = spark.scale %x {factor = 1.0 : f32} : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// A scale by 2.0 stays.
// CHECK-LABEL: func.func @scale_two
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK: %[[S:.*]] = spark.scale %[[X]] {factor = 2.000000e+00 : f32} : tensor<?x8xf32>
// CHECK: return %[[S]] : tensor<?x8xf32>
func.func @scale_two(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = spark.scale %x {factor = 2.0 : f32} : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// A chain of scales by 1.0 folds away entirely.
// CHECK-LABEL: func.func @scale_one_chain
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK-NOT: spark.scale
// CHECK: return %[[X]] : tensor<?x8xf32>
func.func @scale_one_chain(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = spark.scale %x {factor = 1.0 : f32} : tensor<?x8xf32>
  %1 = spark.scale %0 {factor = 1.0 : f32} : tensor<?x8xf32>
  return %1 : tensor<?x8xf32>
}

// -----

// A reshape to the input's own type folds to its input.
// CHECK-LABEL: func.func @reshape_same_type
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK-NOT: spark.reshape
// CHECK: return %[[X]] : tensor<?x8xf32>
func.func @reshape_same_type(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = spark.reshape %x : tensor<?x8xf32> to tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// A reshape to another row shape stays.
// CHECK-LABEL: func.func @reshape_kept
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK: %[[R:.*]] = spark.reshape %[[X]] : tensor<?x8xf32> to tensor<?x2x4xf32>
// CHECK: return %[[R]] : tensor<?x2x4xf32>
func.func @reshape_kept(%x: tensor<?x8xf32>) -> tensor<?x2x4xf32> {
  %0 = spark.reshape %x : tensor<?x8xf32> to tensor<?x2x4xf32>
  return %0 : tensor<?x2x4xf32>
}

// -----

// reshape(reshape(x)) becomes one reshape of x; the inner one dies.
// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK-NOT: tensor<?x2x4xf32>
// CHECK: %[[R:.*]] = spark.reshape %[[X]] : tensor<?x8xf32> to tensor<?x4x2xf32>
// CHECK-NOT: spark.reshape
// CHECK: return %[[R]] : tensor<?x4x2xf32>
func.func @reshape_of_reshape(%x: tensor<?x8xf32>) -> tensor<?x4x2xf32> {
  %0 = spark.reshape %x : tensor<?x8xf32> to tensor<?x2x4xf32>
  %1 = spark.reshape %0 : tensor<?x2x4xf32> to tensor<?x4x2xf32>
  return %1 : tensor<?x4x2xf32>
}

// -----

// reshape(reshape(x)) back to x's type folds to x.
// CHECK-LABEL: func.func @reshape_round_trip
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK-NOT: spark.reshape
// CHECK: return %[[X]] : tensor<?x8xf32>
func.func @reshape_round_trip(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = spark.reshape %x : tensor<?x8xf32> to tensor<?x2x4xf32>
  %1 = spark.reshape %0 : tensor<?x2x4xf32> to tensor<?x8xf32>
  return %1 : tensor<?x8xf32>
}

// -----

// When the inner reshape has another use it stays, and the outer one reads x directly.
// CHECK-LABEL: func.func @reshape_of_reshape_shared
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK-DAG: %[[INNER:.*]] = spark.reshape %[[X]] : tensor<?x8xf32> to tensor<?x2x4xf32>
// CHECK-DAG: %[[OUTER:.*]] = spark.reshape %[[X]] : tensor<?x8xf32> to tensor<?x4x2xf32>
// CHECK: return %[[INNER]], %[[OUTER]] : tensor<?x2x4xf32>, tensor<?x4x2xf32>
func.func @reshape_of_reshape_shared(%x: tensor<?x8xf32>) -> (tensor<?x2x4xf32>, tensor<?x4x2xf32>) {
  %0 = spark.reshape %x : tensor<?x8xf32> to tensor<?x2x4xf32>
  %1 = spark.reshape %0 : tensor<?x2x4xf32> to tensor<?x4x2xf32>
  return %0, %1 : tensor<?x2x4xf32>, tensor<?x4x2xf32>
}

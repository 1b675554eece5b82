// RUN: spark-opt %s --split-input-file --spark-plan-arena --verify-diagnostics | FileCheck %s

// spark-plan-arena: a buffer lives from the first launch that names it to the last; the inputs
// for the whole program, the logits to its end. Buffers whose lives do not overlap share bytes
// (first fit by first use, 256-byte aligned: 4 rows of 16 f32 = 256 bytes each).
//   launch 0: 0 -> 2      launch 1: 2 -> 3      launch 2: 3 -> 4      launch 3: 4 -> 5 (logits)
// Buffer 2 is dead after launch 1, so 4 takes its bytes; 3 is dead after launch 2, so 5 takes
// its bytes. Input 0 and 1 stay live throughout.
// CHECK-LABEL: spark.program @forward
// CHECK-SAME: arena_bytes = 1024 : i64
// CHECK-SAME: {dtype = "i32", name = "%ids", offset = 0 : i64, row_shape = []}
// CHECK-SAME: {dtype = "i32", name = "%positions", offset = 256 : i64, row_shape = []}
// CHECK-SAME: {dtype = "f32", name = "a", offset = 512 : i64, row_shape = [16]}
// CHECK-SAME: {dtype = "f32", name = "b", offset = 768 : i64, row_shape = [16]}
// CHECK-SAME: {dtype = "f32", name = "c", offset = 512 : i64, row_shape = [16]}
// CHECK-SAME: {dtype = "f32", name = "logits", offset = 768 : i64, row_shape = [16]}
// CHECK-SAME: inputs = {ids = 0 : i64, positions = 1 : i64}
module {
  spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [{dtype = "i32", name = "%ids", row_shape = []}, {dtype = "i32", name = "%positions", row_shape = []}, {dtype = "f32", name = "a", row_shape = [16]}, {dtype = "f32", name = "b", row_shape = [16]}, {dtype = "f32", name = "c", row_shape = [16]}, {dtype = "f32", name = "logits", row_shape = [16]}], weights = [], inputs = {ids = 0 : i64, positions = 1 : i64}, outputs = {logits = 5 : i64}} {
    spark.launch "gelu" @kernels::@spark_gelu__i16 grid(per_token = 16, fixed = 0, divisor = 256) block [256, 1, 1] args [{buffer = 0 : i64}, {buffer = 2 : i64}, {num_tokens = 1 : i64}, {i32 = 16 : i32}]
    spark.launch "gelu" @kernels::@spark_gelu__i16 grid(per_token = 16, fixed = 0, divisor = 256) block [256, 1, 1] args [{buffer = 2 : i64}, {buffer = 3 : i64}, {num_tokens = 1 : i64}, {i32 = 16 : i32}]
    spark.launch "gelu" @kernels::@spark_gelu__i16 grid(per_token = 16, fixed = 0, divisor = 256) block [256, 1, 1] args [{buffer = 3 : i64}, {buffer = 4 : i64}, {num_tokens = 1 : i64}, {i32 = 16 : i32}]
    spark.launch "gelu" @kernels::@spark_gelu__i16 grid(per_token = 16, fixed = 0, divisor = 256) block [256, 1, 1] args [{buffer = 4 : i64}, {buffer = 5 : i64}, {num_tokens = 1 : i64}, {i32 = 16 : i32}]
  }
}

// -----

// The arena is planned once: buffers with offsets are refused.
module {
  // expected-error @+1 {{'spark.program' op buffer 0 already has an offset: the arena is planned once, after spark-lower-to-kernels}}
  spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 256 : i64, buffers = [{dtype = "f32", name = "a", offset = 0 : i64, row_shape = [16]}], weights = [], inputs = {}, outputs = {}} {
  }
}

// -----

// A launch of a buffer the program does not have.
module {
  // expected-error @+1 {{'spark.program' op names buffer 7, which it does not have}}
  spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [{dtype = "f32", name = "a", row_shape = [16]}], weights = [], inputs = {}, outputs = {}} {
    spark.launch "gelu" @kernels::@spark_gelu__i16 grid(per_token = 16, fixed = 0, divisor = 256) block [256, 1, 1] args [{buffer = 0 : i64}, {buffer = 7 : i64}, {num_tokens = 1 : i64}, {i32 = 16 : i32}]
  }
}

// -----

// A buffer too large to place.
module {
  // expected-error @+1 {{'spark.program' op buffer 0 needs more than 2^40 bytes}}
  spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [{dtype = "f32", name = "a", row_shape = [1099511627776]}], weights = [], inputs = {}, outputs = {}} {
  }
}

// RUN: spark-opt %s --split-input-file --spark-plan-arena --verify-diagnostics | FileCheck %s

// spark-plan-arena: a buffer lives from the first launch that names it to the last; the inputs
// for the whole program, the logits to its end. Buffers whose lives do not overlap share bytes
// (first fit by first use, 256-byte aligned: 4 rows of 16 f32 = 256 bytes each).
//   launch 0: 0 -> 2      launch 1: 2 -> 3      launch 2: 3 -> 4      launch 3: 4 -> 5 (logits)
// Buffer 2 is dead after launch 1, so 4 takes its bytes; 3 is dead after launch 2, so 5 takes
// its bytes. Input 0 and 1 stay live throughout.
// CHECK-LABEL: spark.program @forward
// CHECK-SAME: arena_bytes = 1024 : i64
// CHECK-SAME: #spark.buffer<name = "%ids", dtype = i32, row_shape = [], offset = 0>
// CHECK-SAME: #spark.buffer<name = "%positions", dtype = i32, row_shape = [], offset = 256>
// CHECK-SAME: #spark.buffer<name = "a", dtype = f32, row_shape = [16], offset = 512>
// CHECK-SAME: #spark.buffer<name = "b", dtype = f32, row_shape = [16], offset = 768>
// CHECK-SAME: #spark.buffer<name = "c", dtype = f32, row_shape = [16], offset = 512>
// CHECK-SAME: #spark.buffer<name = "logits", dtype = f32, row_shape = [16], offset = 768>
// CHECK-SAME: inputs = #spark.inputs<ids = 0, positions = 1>
module {
  spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "%ids", dtype = i32, row_shape = []>, #spark.buffer<name = "%positions", dtype = i32, row_shape = []>, #spark.buffer<name = "a", dtype = f32, row_shape = [16]>, #spark.buffer<name = "b", dtype = f32, row_shape = [16]>, #spark.buffer<name = "c", dtype = f32, row_shape = [16]>, #spark.buffer<name = "logits", dtype = f32, row_shape = [16]>], weights = [], inputs = #spark.inputs<ids = 0, positions = 1>, outputs = #spark.outputs<logits = 5>} {
    spark.launch "gelu" @kernels::@spark_gelu__i16 grid(per_token = 16, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 0, buffer 2, num_tokens, i32 16]
    spark.launch "gelu" @kernels::@spark_gelu__i16 grid(per_token = 16, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 2, buffer 3, num_tokens, i32 16]
    spark.launch "gelu" @kernels::@spark_gelu__i16 grid(per_token = 16, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 3, buffer 4, num_tokens, i32 16]
    spark.launch "gelu" @kernels::@spark_gelu__i16 grid(per_token = 16, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 4, buffer 5, num_tokens, i32 16]
  }
}

// -----

// The arena is planned once: buffers with offsets are refused.
module {
  // expected-error @+1 {{'spark.program' op buffer 0 already has an offset: the arena is planned once, after spark-lower-to-kernels}}
  spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 256 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [16], offset = 0>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  }
}

// -----

// A launch of a buffer the program does not have (the program's verifier refuses it).
module {
  spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [16]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
    // expected-error @+1 {{'spark.launch' op argument 1 names buffer 7, but there are 1 in the program}}
    spark.launch "gelu" @kernels::@spark_gelu__i16 grid(per_token = 16, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 0, buffer 7, num_tokens, i32 16]
  }
}

// -----

// A buffer too large to place.
module {
  // expected-error @+1 {{'spark.program' op buffer 0 needs more than 2^40 bytes}}
  spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [1099511627776]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  }
}

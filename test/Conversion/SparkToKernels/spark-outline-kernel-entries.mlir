// RUN: spark-opt %s --spark-outline-kernel-entries -split-input-file -verify-diagnostics | FileCheck %s

// spark-outline-kernel-entries on its own (what spark-lower-to-kernels leaves): one gpu.func per
// distinct (op, literals) that calls the library function with the literals as constants, one
// declaration per library function from the op registry, and the activation-precision constant.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @kernels {
// CHECK-DAG: llvm.mlir.global external constant @spark_activation_precision(1 : i32) {addr_space = 1 : i32, alignment = 4 : i64} : i32
// CHECK-DAG: llvm.func @spark_gelu(!llvm.ptr, !llvm.ptr, i32, i32)
// CHECK: gpu.func @spark_gelu__i4(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i32) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// CHECK: llvm.mlir.constant(4 : i32) : i32
// CHECK: llvm.call @spark_gelu(
// CHECK-NOT: gpu.func @spark_gelu__i4
module {
  spark.program @forward attributes {activation_precision = bf16, max_tokens = 4 : i64, arena_bytes = 128 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4], offset = 0>, #spark.buffer<name = "b", dtype = f32, row_shape = [4], offset = 64>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
    spark.launch "gelu" @kernels::@spark_gelu__i4 grid(per_token = 4, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 0, buffer 1, num_tokens, i32 4]
    spark.launch "gelu" @kernels::@spark_gelu__i4 grid(per_token = 4, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 1, buffer 0, num_tokens, i32 4]
  }
}

// -----

// A launch must name the entry its op and literals make (entry_point.h).
module {
  spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 128 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4], offset = 0>, #spark.buffer<name = "b", dtype = f32, row_shape = [4], offset = 64>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
    // expected-error @+1 {{'spark.launch' op names entry @kernels::@spark_gelu__i8, but its op and literal arguments make @kernels::@spark_gelu__i4}}
    spark.launch "gelu" @kernels::@spark_gelu__i8 grid(per_token = 4, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 0, buffer 1, num_tokens, i32 4]
  }
}

// -----

// An op the registry does not know.
module {
  spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 128 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4], offset = 0>, #spark.buffer<name = "b", dtype = f32, row_shape = [4], offset = 64>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
    // expected-error @+1 {{'spark.launch' op of op 'flash_attention', which the op registry (kernel_ops.def) does not know}}
    spark.launch "flash_attention" @kernels::@spark_flash_attention__ grid(per_token = 4, fixed = 0, divisor = 256) block [256, 1, 1] args []
  }
}

// -----

// The registry's argument count.
module {
  spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 128 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4], offset = 0>, #spark.buffer<name = "b", dtype = f32, row_shape = [4], offset = 64>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
    // expected-error @+1 {{'spark.launch' op of gelu expects 4 arguments (kernel_ops.def), got 2}}
    spark.launch "gelu" @kernels::@spark_gelu__ grid(per_token = 4, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 0, buffer 1]
  }
}

// -----

// expected-error @+1 {{expects a spark.program (run spark-lower-to-kernels first)}}
module {
}

// -----

// A transfer op (a copy) has no kernel: written as a launch, it is refused.
module {
  spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4], offset = 0>, #spark.buffer<name = "b", dtype = f32, row_shape = [4], offset = 64>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
    // expected-error @+1 {{'spark.launch' op of op 'copy', which runs without a kernel: it is a spark.transfer}}
    spark.launch "copy" @kernels::@spark_copy__i4 grid(per_token = 4, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 0, buffer 1, num_tokens, i32 4]
  }
}

// RUN: spark-opt %s --spark-lower-to-kernels="max-tokens=4 activation-precision=bf16" --spark-plan-arena --spark-outline-kernel-entries | FileCheck %s --check-prefix=BF16
// RUN: spark-opt %s --spark-lower-to-kernels="max-tokens=4" --spark-plan-arena --spark-outline-kernel-entries | FileCheck %s --check-prefix=F32
// RUN: not spark-opt %s --spark-lower-to-kernels="max-tokens=4 activation-precision=f16" --spark-plan-arena 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: spark-compile %s --target sm_90a --activation-precision bf16 --emit llvm -o - | FileCheck %s --check-prefix=LLVM
// RUN: spark-compile %s --target sm_90a --emit ptx -o - | FileCheck %s --check-prefix=PTX-F32
// The tensor-core paths of the linear entry, in the PTX for sm_121a (the DGX Spark): f32
// activations take two MMAs per product (hi + lo) and reach the tile's shared memory through
// registers; bf16 ones take one MMA per product and go to shared memory by cp.async, like the
// weights. MMA counts: the tile's (f32 32: 64-row tiles, two per product; bf16 32: 128-row
// tiles, one per product) and the small-batch GEMV's (f32 64, bf16 36: its hi + lo pairs,
// n-tiles and 1, 2 and 4 m-tiles per block, as clang unrolls them); cp.async copies: the
// weights' (two in this entry since the small batch's m-tile variants: clang places the weight
// stage's copy in two blocks; the ldmatrix count is unchanged), and with bf16 the two 16-byte
// chunks of each thread's 128-row A tile.
// RUN: spark-compile %s --target sm_121a --emit ptx -o %t.f32.ptx
// RUN: grep -c "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" %t.f32.ptx | FileCheck %s --check-prefix=MMA-F32
// RUN: grep -c "cp.async.cg.shared.global" %t.f32.ptx | FileCheck %s --check-prefix=CPASYNC-F32
// RUN: spark-compile %s --target sm_121a --activation-precision bf16 --emit ptx -o %t.bf16.ptx
// RUN: grep -c "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" %t.bf16.ptx | FileCheck %s --check-prefix=MMA-BF16
// RUN: grep -c "cp.async.cg.shared.global" %t.bf16.ptx | FileCheck %s --check-prefix=CPASYNC-BF16

// The activation precision (kernel_abi.h ActivationPrecision): the program records bf16 (absent:
// f32) and the gpu.module defines the constant the kernel library declares, 1 for bf16 and 0 for
// f32. Every gpu.module defines it: the library cannot link without it. Once linked, the loads of
// the constant fold away: the kernels carry only their mode's code.

// With bf16 activations the activation buffers are bf16 (half the bytes: the arena shrinks from
// 1536 to 1280 bytes here, 256-byte aligned buffers), the token ids and sampling parameters stay
// i32.
// BF16: spark.program @forward attributes {activation_precision = bf16, arena_bytes = 1280 : i64, buffers = [#spark.buffer<name = "%ids", dtype = i32
// BF16-SAME: #spark.buffer<name = "embedding", dtype = bf16, row_shape = [8], offset = 768>, #spark.buffer<name = "linear", dtype = bf16, row_shape = [32], offset = 1024>, #spark.buffer<name = "%sampling", dtype = i32, row_shape = [8], offset = 512>, #spark.buffer<name = "tokens", dtype = i32, row_shape = [], offset = 768>]
// BF16: gpu.module @kernels {
// BF16-NEXT: llvm.mlir.global external constant @spark_activation_precision(1 : i32) {addr_space = 1 : i32, alignment = 4 : i64} : i32

// F32: spark.program @forward attributes {arena_bytes = 1536 : i64, buffers = [#spark.buffer<name = "%ids", dtype = i32
// F32-SAME: #spark.buffer<name = "embedding", dtype = f32, row_shape = [8], offset = 768>, #spark.buffer<name = "linear", dtype = f32, row_shape = [32], offset = 1024>, #spark.buffer<name = "%sampling", dtype = i32, row_shape = [8], offset = 512>, #spark.buffer<name = "tokens", dtype = i32, row_shape = [], offset = 768>]
// F32: gpu.module @kernels {
// F32-NEXT: llvm.mlir.global external constant @spark_activation_precision(0 : i32) {addr_space = 1 : i32, alignment = 4 : i64} : i32

// BAD: error: activation-precision must be f32 or bf16, got 'f16'

// LLVM: @spark_activation_precision = {{.*}}addrspace(1) constant i32 1
// LLVM-NOT: load {{.*}}@spark_activation_precision

// PTX-F32: .visible .global .align 4 .u32 spark_activation_precision;

// MMA-F32: {{^}}96{{$}}
// MMA-BF16: {{^}}68{{$}}
// CPASYNC-F32: {{^}}2{{$}}
// CPASYNC-BF16: {{^}}4{{$}}

module {
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x32xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x8xbf16>
  %e = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x8xbf16>) -> tensor<?x8xf32>
  %logits = spark.linear %e, %table : (tensor<?x8xf32>, tensor<32x8xbf16>) -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}
}

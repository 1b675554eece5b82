// RUN: spark-opt %s --spark-lower-to-kernels="max-tokens=4 kv-cache-dtype=bf16" --spark-plan-arena --spark-outline-kernel-entries | FileCheck %s --check-prefix=BF16
// RUN: spark-opt %s --spark-lower-to-kernels="max-tokens=4" --spark-plan-arena --spark-outline-kernel-entries | FileCheck %s --check-prefix=ASIS
// RUN: spark-opt %s --spark-lower-to-kernels="max-tokens=4 kv-cache-dtype=f32" --spark-plan-arena --spark-outline-kernel-entries | FileCheck %s --check-prefix=F32
// RUN: not spark-opt %s --spark-lower-to-kernels="max-tokens=4 kv-cache-dtype=f16" --spark-plan-arena 2>&1 | FileCheck %s --check-prefix=BAD

// The element type of the KV caches: kv_write takes it as its last argument, attention before last_visible
// (cache_dtype, kernel_abi.h: 0 = f32, 1 = bf16), a literal folded into their entries.
// kv-cache-dtype sets element_type on every spark.kv_cache; without it each cache keeps what the
// module declares (f32 when absent).

// BF16: spark.kv_cache @kv.layers.0 sliding {element_type = bf16,
// BF16: spark.kv_cache @kv.layers.1 full {element_type = bf16,
// BF16: spark.launch "kv_write" {{.*}} kv_capacity 0, i32 1] {source = "layers.0.self_attn.kv_write"}
// BF16: spark.launch "attention" {{.*}} i32 1, null] {source = "layers.0.self_attn"}
// BF16: spark.launch "kv_write" {{.*}} kv_capacity 1, i32 1] {source = "layers.1.self_attn.kv_write"}
// BF16: spark.launch "attention" {{.*}} i32 1, null] {source = "layers.1.self_attn"}
// BF16: gpu.func @spark_kv_write__{{[a-z0-9_]+}}(
// BF16-NEXT: llvm.mlir.constant(1 : i32) : i32
// BF16-NEXT: llvm.mlir.constant(8 : i32) : i32
// BF16-NEXT: %[[DT:.*]] = llvm.mlir.constant(1 : i32) : i32
// BF16-NEXT: llvm.call @spark_kv_write({{.*}}, %[[DT]])

// ASIS: spark.kv_cache @kv.layers.0 sliding {head_dim
// ASIS: spark.kv_cache @kv.layers.1 full {element_type = bf16,
// ASIS: spark.launch "kv_write" {{.*}} kv_capacity 0, i32 0] {source = "layers.0.self_attn.kv_write"}
// ASIS: spark.launch "attention" {{.*}} i32 0, null] {source = "layers.0.self_attn"}
// ASIS: spark.launch "kv_write" {{.*}} kv_capacity 1, i32 1] {source = "layers.1.self_attn.kv_write"}
// ASIS: spark.launch "attention" {{.*}} i32 1, null] {source = "layers.1.self_attn"}

// F32: spark.kv_cache @kv.layers.1 full {element_type = f32,
// F32: spark.launch "kv_write" {{.*}} kv_capacity 1, i32 0] {source = "layers.1.self_attn.kv_write"}

// BAD: error: kv-cache-dtype must be f32 or bf16, got 'f16'

spark.kv_cache @kv.layers.0 sliding {window = 16 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
spark.kv_cache @kv.layers.1 full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64, element_type = bf16}
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x32xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x8xbf16>
  %e = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x8xbf16>) -> tensor<?x8xf32>
  %q = spark.reshape %e : tensor<?x8xf32> to tensor<?x1x8xf32>
  %o0 = spark.attention %q, %q, %q, %pos {cache = @kv.layers.0, window = 16 : i64, scale = 1.0 : f32} : (tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x1x8xf32> loc("layers.0.self_attn")
  %o1 = spark.attention %o0, %o0, %o0, %pos {cache = @kv.layers.1, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x1x8xf32> loc("layers.1.self_attn")
  %o = spark.reshape %o1 : tensor<?x1x8xf32> to tensor<?x8xf32>
  %logits = spark.linear %o, %table : (tensor<?x8xf32>, tensor<32x8xbf16>) -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}

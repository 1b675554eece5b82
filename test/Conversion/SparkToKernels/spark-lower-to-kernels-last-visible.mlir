// RUN: spark-opt %s --spark-lower-to-kernels="max-tokens=4" --spark-plan-arena --spark-outline-kernel-entries | FileCheck %s

// The vision-bidirectional mask: the entry's last_visible input becomes a plan input (an i32
// buffer, live for the whole step like the positions) and the last argument of the attention
// launches that read it; the attention without it (a full layer) passes null there.

// CHECK: spark.program @forward
// CHECK-SAME: inputs = #spark.inputs<ids = 0, positions = [[POS:[0-9]+]], last_visible = [[LV:[0-9]+]], sampling = {{[0-9]+}}, sequences = {{[0-9]+}}>
// CHECK: spark.launch "attention" {{.*}} buffer [[POS]], {{.*}} buffer [[LV]]] {source = "layers.0.self_attn"}
// CHECK: spark.launch "attention" {{.*}} buffer [[POS]], {{.*}} null] {source = "layers.1.self_attn"}
// CHECK: llvm.func @spark_attention({{.*}}, f32, i32, i32, i32, !llvm.ptr)

spark.kv_cache @kv.layers.0 sliding {window = 16 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
spark.kv_cache @kv.layers.1 full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}, %last: tensor<?xi32> {spark.input = "last_visible"}) -> tensor<?x32xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x8xbf16>
  %e = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x8xbf16>) -> tensor<?x8xf32>
  %q = spark.reshape %e : tensor<?x8xf32> to tensor<?x1x8xf32>
  %o0 = spark.attention %q, %q, %q, %pos last_visible %last {cache = @kv.layers.0, window = 16 : i64, scale = 1.0 : f32} : (tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x1x8xf32> loc("layers.0.self_attn")
  %o1 = spark.attention %o0, %o0, %o0, %pos {cache = @kv.layers.1, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x1x8xf32> loc("layers.1.self_attn")
  %o = spark.reshape %o1 : tensor<?x1x8xf32> to tensor<?x8xf32>
  %logits = spark.linear %o, %table : (tensor<?x8xf32>, tensor<32x8xbf16>) -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}

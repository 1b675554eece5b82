// RUN: spark-opt %s | spark-opt | FileCheck %s
// RUN: spark-opt %s --mlir-print-op-generic | spark-opt | FileCheck %s

// Every tensor-level op of the spark dialect, in a small Gemma-4-shaped graph.

spark.kv_cache @kv.layers.0 sliding {window = 8 : i64, kv_heads = 2 : i64, head_dim = 32 : i64}
spark.kv_cache @kv.layers.1 full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 64 : i64}
spark.kv_cache @kv.layers.2 full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 64 : i64, element_type = bf16}

// CHECK: spark.kv_cache @kv.layers.0 sliding {head_dim = 32 : i64, kv_heads = 2 : i64, window = 8 : i64}
// CHECK: spark.kv_cache @kv.layers.1 full
// CHECK: spark.kv_cache @kv.layers.2 full {element_type = bf16,

// CHECK-LABEL: func.func @every_op
func.func @every_op(%ids: tensor<?xi32>, %pos: tensor<?xi32>, %soft: tensor<?x64xf32>, %soft_idx: tensor<?xi32>) -> tensor<?x512xf32> {
  // CHECK: %[[TABLE:.*]] = spark.weight "model.embed_tokens.weight" : tensor<512x64xbf16>
  %table = spark.weight "model.embed_tokens.weight" : tensor<512x64xbf16>
  // CHECK: %[[MASKED:.*]] = spark.mask_tokens %{{.*}} {replacement = 0 : i32, token_ids = array<i32: 500, 501>} : tensor<?xi32>
  %masked = spark.mask_tokens %ids {token_ids = array<i32: 500, 501>, replacement = 0 : i32} : tensor<?xi32>
  // CHECK: %[[EMB:.*]] = spark.embedding %[[MASKED]], %[[TABLE]] {scale = 8.000000e+00 : f32}
  %e = spark.embedding %masked, %table {scale = 8.0 : f32} : (tensor<?xi32>, tensor<512x64xbf16>) -> tensor<?x64xf32>
  // CHECK: spark.scatter_nd %[[EMB]], %{{.*}}, %{{.*}} : (tensor<?x64xf32>, tensor<?xi32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %h0 = spark.scatter_nd %e, %soft_idx, %soft : (tensor<?x64xf32>, tensor<?xi32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %norm_w = spark.weight "model.layers.0.input_layernorm.weight" : tensor<64xbf16>
  // CHECK: spark.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.99999997E-7 : f32} : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  %a = spark.rms_norm %h0, %norm_w {epsilon = 1.0e-6 : f32} : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  %wq = spark.weight "model.layers.0.self_attn.q_proj.weight" : tensor<128x64xbf16>
  %wk = spark.weight "model.layers.0.self_attn.k_proj.weight" : tensor<64x64xbf16>
  // CHECK: spark.linear %{{.*}}, %{{.*}} : (tensor<?x64xf32>, tensor<128x64xbf16>) -> tensor<?x128xf32>
  %q2 = spark.linear %a, %wq : (tensor<?x64xf32>, tensor<128x64xbf16>) -> tensor<?x128xf32>
  %k2 = spark.linear %a, %wk : (tensor<?x64xf32>, tensor<64x64xbf16>) -> tensor<?x64xf32>
  // CHECK: spark.reshape %{{.*}} : tensor<?x128xf32> to tensor<?x4x32xf32>
  %q3 = spark.reshape %q2 : tensor<?x128xf32> to tensor<?x4x32xf32>
  %k3 = spark.reshape %k2 : tensor<?x64xf32> to tensor<?x2x32xf32>
  // CHECK: spark.rms_norm %{{.*}} {epsilon = 9.99999997E-7 : f32} : (tensor<?x2x32xf32>) -> tensor<?x2x32xf32>
  %v3 = spark.rms_norm %k3 {epsilon = 1.0e-6 : f32} : (tensor<?x2x32xf32>) -> tensor<?x2x32xf32>
  // CHECK: spark.rope %{{.*}}, %{{.*}} {factor = 1.000000e+00 : f32, rotated_pairs = 16 : i64, theta = 1.000000e+04 : f32}
  %qr = spark.rope %q3, %pos {theta = 10000.0 : f32, rotated_pairs = 16 : i64, factor = 1.0 : f32} : (tensor<?x4x32xf32>, tensor<?xi32>) -> tensor<?x4x32xf32>
  %kr = spark.rope %k3, %pos {theta = 10000.0 : f32, rotated_pairs = 16 : i64, factor = 1.0 : f32} : (tensor<?x2x32xf32>, tensor<?xi32>) -> tensor<?x2x32xf32>
  // CHECK: spark.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {cache = @kv.layers.0, scale = 1.000000e+00 : f32, window = 8 : i64}
  %o = spark.attention %qr, %kr, %v3, %pos {cache = @kv.layers.0, window = 8 : i64, scale = 1.0 : f32} : (tensor<?x4x32xf32>, tensor<?x2x32xf32>, tensor<?x2x32xf32>, tensor<?xi32>) -> tensor<?x4x32xf32>
  // CHECK: spark.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} last_visible %{{.*}} {cache = @kv.layers.0
  %ob = spark.attention %qr, %kr, %v3, %pos last_visible %pos {cache = @kv.layers.0, window = 8 : i64, scale = 1.0 : f32} : (tensor<?x4x32xf32>, tensor<?x2x32xf32>, tensor<?x2x32xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xf32>
  // CHECK: spark.attention {{.*}} kv_shared
  %o2 = spark.attention %qr, %kr, %v3, %pos {cache = @kv.layers.0, window = 8 : i64, scale = 1.0 : f32, kv_shared} : (tensor<?x4x32xf32>, tensor<?x2x32xf32>, tensor<?x2x32xf32>, tensor<?xi32>) -> tensor<?x4x32xf32>
  %o2d = spark.reshape %o2 : tensor<?x4x32xf32> to tensor<?x128xf32>
  %wo = spark.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x128xbf16>
  %attn = spark.linear %o2d, %wo : (tensor<?x128xf32>, tensor<64x128xbf16>) -> tensor<?x64xf32>
  // CHECK: spark.add %{{.*}}, %{{.*}} : tensor<?x64xf32>
  %h1 = spark.add %h0, %attn : tensor<?x64xf32>
  // CHECK: spark.gelu %{{.*}} : tensor<?x64xf32>
  %g = spark.gelu %h1 : tensor<?x64xf32>
  // CHECK: spark.mul %{{.*}}, %{{.*}} : tensor<?x64xf32>
  %m = spark.mul %g, %h1 : tensor<?x64xf32>
  // CHECK: spark.gelu_mul %{{.*}}, %{{.*}} : tensor<?x64xf32>
  %gm = spark.gelu_mul %h1, %m : tensor<?x64xf32>
  // CHECK: spark.scale %{{.*}} {factor = 5.000000e-01 : f32} : tensor<?x64xf32>
  %s = spark.scale %gm {factor = 0.5 : f32} : tensor<?x64xf32>
  %rscale = spark.weight "model.layers.0.router.scale" : tensor<64xbf16>
  %rproj = spark.weight "model.layers.0.router.proj.weight" : tensor<8x64xbf16>
  %rpes = spark.weight "model.layers.0.router.per_expert_scale" : tensor<8xbf16>
  // CHECK: %{{.*}}, %{{.*}} = spark.moe_router {{.*}} {epsilon = 9.99999997E-7 : f32, top_k = 2 : i64} : (tensor<?x64xf32>, tensor<64xbf16>, tensor<8x64xbf16>, tensor<8xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  %rw, %ri = spark.moe_router %s, %rscale, %rproj, %rpes {top_k = 2 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x64xf32>, tensor<64xbf16>, tensor<8x64xbf16>, tensor<8xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  %gu = spark.weight "model.layers.0.experts.gate_up_proj" : tensor<8x32x64xbf16>
  %dn = spark.weight "model.layers.0.experts.down_proj" : tensor<8x64x16xbf16>
  // CHECK: spark.moe_experts {{.*}} : (tensor<?x64xf32>, tensor<8x32x64xbf16>, tensor<8x64x16xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x64xf32>
  %ex = spark.moe_experts %s, %gu, %dn, %rw, %ri : (tensor<?x64xf32>, tensor<8x32x64xbf16>, tensor<8x64x16xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x64xf32>
  %ls = spark.weight "model.layers.0.layer_scalar" : tensor<1xbf16>
  // CHECK: spark.scalar_mul %{{.*}}, %{{.*}} : (tensor<?x64xf32>, tensor<1xbf16>) -> tensor<?x64xf32>
  %h2 = spark.scalar_mul %ex, %ls : (tensor<?x64xf32>, tensor<1xbf16>) -> tensor<?x64xf32>
  %ple = spark.reshape %h2 : tensor<?x64xf32> to tensor<?x4x16xf32>
  // CHECK: spark.select_group %{{.*}} {index = 3 : i64} : tensor<?x4x16xf32> to tensor<?x16xf32>
  %p3 = spark.select_group %ple {index = 3 : i64} : tensor<?x4x16xf32> to tensor<?x16xf32>
  %logits = spark.linear %h2, %table : (tensor<?x64xf32>, tensor<512x64xbf16>) -> tensor<?x512xf32>
  // CHECK: spark.softcap %{{.*}} {cap = 3.000000e+01 : f32} : tensor<?x512xf32>
  %capped = spark.softcap %logits {cap = 30.0 : f32} : tensor<?x512xf32>
  return %capped : tensor<?x512xf32>
}

// Kernel-level ops.
// CHECK-LABEL: spark.program @forward
// CHECK: spark.launch "gelu" @kernels::@spark_gelu__0 grid(per_token = 4, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 0, buffer 1, num_tokens, i32 4] {source = "x"}
// CHECK: spark.transfer "copy" args [buffer 1, buffer 0, num_tokens, i32 4] {source = "y"} logits_tail
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 128 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4], offset = 0>, #spark.buffer<name = "b", dtype = f32, row_shape = [4], offset = 64>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<logits = 1>} {
  spark.launch "gelu" @kernels::@spark_gelu__0 grid(per_token = 4, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 0, buffer 1, num_tokens, i32 4] {source = "x"}
  spark.transfer "copy" args [buffer 1, buffer 0, num_tokens, i32 4] {source = "y"} logits_tail
}

// The fused norms of spark-fuse-norms, with and without a weight.
// CHECK-LABEL: func.func @fused_norms
func.func @fused_norms(%x: tensor<?x64xf32>, %r: tensor<?x64xf32>, %q: tensor<?x4x32xf32>, %pos: tensor<?xi32>) -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x4x32xf32>, tensor<?x4x32xf32>) {
  %w = spark.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xbf16>
  %qw = spark.weight "model.layers.0.self_attn.q_norm.weight" : tensor<32xbf16>
  // CHECK: spark.residual_rms_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999997E-7 : f32} : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  %a = spark.residual_rms_norm %x, %r, %w {epsilon = 1.0e-6 : f32} : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  // CHECK: spark.residual_rms_norm %{{.*}}, %{{.*}} {epsilon = 9.99999997E-7 : f32} : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %b = spark.residual_rms_norm %x, %r {epsilon = 1.0e-6 : f32} : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK: spark.rms_norm_rope %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999997E-7 : f32, factor = 1.000000e+00 : f32, rotated_pairs = 16 : i64, theta = 1.000000e+04 : f32} : (tensor<?x4x32xf32>, tensor<?xi32>, tensor<32xbf16>) -> tensor<?x4x32xf32>
  %c = spark.rms_norm_rope %q, %pos, %qw {epsilon = 1.0e-6 : f32, theta = 10000.0 : f32, rotated_pairs = 16 : i64, factor = 1.0 : f32} : (tensor<?x4x32xf32>, tensor<?xi32>, tensor<32xbf16>) -> tensor<?x4x32xf32>
  // CHECK: spark.rms_norm_rope %{{.*}}, %{{.*}} {epsilon
  %d = spark.rms_norm_rope %q, %pos {epsilon = 1.0e-6 : f32, theta = 10000.0 : f32, rotated_pairs = 16 : i64, factor = 1.0 : f32} : (tensor<?x4x32xf32>, tensor<?xi32>) -> tensor<?x4x32xf32>
  return %a, %b, %c, %d : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x4x32xf32>, tensor<?x4x32xf32>
}

// Quantized linears round-trip with their scales.
// CHECK-LABEL: func.func @quantized_linears
func.func @quantized_linears(%x: tensor<?x64xf32>) -> (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>) {
  // CHECK: spark.weight "g.weight" : tensor<128x64xf4E2M1FN>
  %w4 = spark.weight "g.weight" : tensor<128x64xf4E2M1FN>
  %bs = spark.weight "g.weight_scale" : tensor<128x4xf8E4M3FN>
  %ts = spark.weight "g.weight_scale_2" : tensor<f32>
  %w8 = spark.weight "u.weight" : tensor<128x64xf8E4M3FN>
  %s8 = spark.weight "u.weight_scale" : tensor<1xf32>
  %r8 = spark.weight "d.weight_scale" : tensor<128x1xf32>
  // CHECK: spark.linear %{{.*}}, %{{.*}} scales(%{{.*}}, %{{.*}}) : (tensor<?x64xf32>, tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<f32>) -> tensor<?x128xf32>
  %a = spark.linear %x, %w4 scales(%bs, %ts) : (tensor<?x64xf32>, tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<f32>) -> tensor<?x128xf32>
  // CHECK: spark.linear %{{.*}}, %{{.*}} scales(%{{.*}}) : (tensor<?x64xf32>, tensor<128x64xf8E4M3FN>, tensor<1xf32>) -> tensor<?x128xf32>
  %b = spark.linear %x, %w8 scales(%s8) : (tensor<?x64xf32>, tensor<128x64xf8E4M3FN>, tensor<1xf32>) -> tensor<?x128xf32>
  // CHECK: spark.linear %{{.*}}, %{{.*}} scales(%{{.*}}) : (tensor<?x64xf32>, tensor<128x64xf8E4M3FN>, tensor<128x1xf32>) -> tensor<?x128xf32>
  %c = spark.linear %x, %w8 scales(%r8) : (tensor<?x64xf32>, tensor<128x64xf8E4M3FN>, tensor<128x1xf32>) -> tensor<?x128xf32>
  return %a, %b, %c : tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>
}

// The vision tower's ops (the image encoder: one image's patches are its tokens).
// CHECK-LABEL: func.func @vision_ops
func.func @vision_ops(%px: tensor<?x768xf32>, %pos: tensor<?x2xi32>) -> tensor<?x64xf32> {
  %w = spark.weight "model.vision_tower.patch_embedder.input_proj.weight" : tensor<32x768xbf16>
  %table = spark.weight "model.vision_tower.patch_embedder.position_embedding_table" : tensor<2x64x32xbf16>
  %lo = spark.weight "lo" : tensor<bf16>
  %hi = spark.weight "hi" : tensor<1xbf16>
  %bias = spark.weight "model.vision_tower.std_bias" : tensor<32xbf16>
  %scale = spark.weight "model.vision_tower.std_scale" : tensor<32xbf16>
  %proj = spark.weight "model.embed_vision.embedding_projection.weight" : tensor<64x32xbf16>
  // CHECK: spark.shift_scale %{{.*}} {scale = 2.000000e+00 : f32, shift = 5.000000e-01 : f32} : tensor<?x768xf32>
  %n = spark.shift_scale %px {shift = 0.5 : f32, scale = 2.0 : f32} : tensor<?x768xf32>
  %h = spark.linear %n, %w : (tensor<?x768xf32>, tensor<32x768xbf16>) -> tensor<?x32xf32>
  // CHECK: spark.patch_position_embedding %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x32xf32>, tensor<?x2xi32>, tensor<2x64x32xbf16>) -> tensor<?x32xf32>
  %e = spark.patch_position_embedding %h, %pos, %table : (tensor<?x32xf32>, tensor<?x2xi32>, tensor<2x64x32xbf16>) -> tensor<?x32xf32>
  // CHECK: spark.clamp %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x32xf32>, tensor<bf16>, tensor<1xbf16>) -> tensor<?x32xf32>
  %c = spark.clamp %e, %lo, %hi : (tensor<?x32xf32>, tensor<bf16>, tensor<1xbf16>) -> tensor<?x32xf32>
  %q = spark.reshape %c : tensor<?x32xf32> to tensor<?x2x16xf32>
  // CHECK: spark.rope_2d %{{.*}}, %{{.*}} {theta = 1.000000e+02 : f32} : (tensor<?x2x16xf32>, tensor<?x2xi32>) -> tensor<?x2x16xf32>
  %r = spark.rope_2d %q, %pos {theta = 100.0 : f32} : (tensor<?x2x16xf32>, tensor<?x2xi32>) -> tensor<?x2x16xf32>
  // CHECK: spark.bidirectional_attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.000000e+00 : f32}
  %a = spark.bidirectional_attention %r, %r, %q {scale = 1.0 : f32} : (tensor<?x2x16xf32>, tensor<?x2x16xf32>, tensor<?x2x16xf32>) -> tensor<?x2x16xf32>
  %f = spark.reshape %a : tensor<?x2x16xf32> to tensor<?x32xf32>
  // CHECK: spark.pool_by_position %{{.*}}, %{{.*}} {kernel_size = 3 : i64, scale = 5.65685415 : f32}
  %p = spark.pool_by_position %f, %pos {kernel_size = 3 : i64, scale = 5.65685415 : f32} : (tensor<?x32xf32>, tensor<?x2xi32>) -> tensor<?x32xf32>
  // CHECK: spark.standardize %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x32xf32>, tensor<32xbf16>, tensor<32xbf16>) -> tensor<?x32xf32>
  %s = spark.standardize %p, %bias, %scale : (tensor<?x32xf32>, tensor<32xbf16>, tensor<32xbf16>) -> tensor<?x32xf32>
  %o = spark.linear %s, %proj : (tensor<?x32xf32>, tensor<64x32xbf16>) -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

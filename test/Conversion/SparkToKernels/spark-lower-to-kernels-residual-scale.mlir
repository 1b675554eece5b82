// RUN: spark-opt %s --spark-lower-to-kernels=max-tokens=4 --spark-plan-arena --spark-outline-kernel-entries -split-input-file | FileCheck %s
// RUN: spark-opt %s --spark-lower-to-kernels="max-tokens=4 activation-precision=bf16" --spark-plan-arena --spark-outline-kernel-entries -split-input-file | FileCheck %s --check-prefix=BF16

// A residual_rms_norm whose only user is a scalar_mul (Gemma 4's layer_scalar) lowers to one
// residual_rms_norm_scale launch writing the product; round_sum (the last argument) is 1 under
// bf16 activations, so that the fused sum is rounded as the two ops would have stored it.
// CHECK-LABEL: spark.program @forward
// CHECK: spark.launch "residual_rms_norm_scale" @kernels::@spark_residual_rms_norm_scale__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[X:[0-9]+]], weight 1, buffer [[R:[0-9]+]], weight 2, buffer [[Y:[0-9]+]], num_tokens, i32 8, f32 9.99999997E-7, i32 0] {source = "post_norm.scale"}
// CHECK-NOT: spark.launch "residual_rms_norm"
// CHECK-NOT: spark.launch "scalar_mul"
// CHECK: spark.launch "linear" {{.*}} args [buffer [[Y]]
// BF16: spark.launch "residual_rms_norm_scale" {{.*}} f32 9.99999997E-7, i32 1] {source = "post_norm.scale"}
module {
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x32xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x8xbf16>
  %e = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x8xbf16>) -> tensor<?x8xf32>
  %w = spark.weight "model.layers.0.post_feedforward_layernorm.weight" : tensor<8xbf16>
  %g = spark.gelu %e : tensor<?x8xf32>
  %h = spark.residual_rms_norm %g, %e, %w {epsilon = 1.0e-06 : f32} : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xbf16>) -> tensor<?x8xf32> loc("post_norm")
  %s = spark.weight "model.layers.0.layer_scalar" : tensor<1xbf16>
  %y = spark.scalar_mul %h, %s : (tensor<?x8xf32>, tensor<1xbf16>) -> tensor<?x8xf32>
  %out = spark.weight "model.lm_head.weight" : tensor<32x8xbf16>
  %logits = spark.linear %y, %out : (tensor<?x8xf32>, tensor<32x8xbf16>) -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}
}

// -----

// Does not apply: the norm's result has another user, so it is stored and the scalar_mul stays.
// CHECK-LABEL: spark.program @forward
// CHECK: spark.launch "residual_rms_norm" @kernels::@spark_residual_rms_norm__
// CHECK: spark.launch "scalar_mul"
// CHECK-NOT: residual_rms_norm_scale
module {
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x32xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x8xbf16>
  %e = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x8xbf16>) -> tensor<?x8xf32>
  %w = spark.weight "model.layers.0.post_feedforward_layernorm.weight" : tensor<8xbf16>
  %g = spark.gelu %e : tensor<?x8xf32>
  %h = spark.residual_rms_norm %g, %e, %w {epsilon = 1.0e-06 : f32} : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xbf16>) -> tensor<?x8xf32>
  %s = spark.weight "model.layers.0.layer_scalar" : tensor<1xbf16>
  %y = spark.scalar_mul %h, %s : (tensor<?x8xf32>, tensor<1xbf16>) -> tensor<?x8xf32>
  %sum = spark.add %y, %h : tensor<?x8xf32>
  %out = spark.weight "model.lm_head.weight" : tensor<32x8xbf16>
  %logits = spark.linear %sum, %out : (tensor<?x8xf32>, tensor<32x8xbf16>) -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}
}

// RUN: spark-opt %s --spark-lower-to-kernels=max-tokens=4 --spark-plan-arena --spark-outline-kernel-entries | FileCheck %s

// Quantized linears lower to their own kernels: linear_nvfp4 takes the codes, the block scales
// and the tensor scale; linear_fp8 the elements and one scale per tensor or per row
// (scale_count, its last argument). The plan's weights keep their element types and logical
// shapes (NVFP4 codes [out, in], stored two to a byte).
// CHECK-LABEL: spark.program @forward
// CHECK-SAME: #spark.weight<name = "model.layers.0.mlp.gate_proj.weight", dtype = f4E2M1FN, shape = [64, 32]>
// CHECK-SAME: #spark.weight<name = "model.layers.0.mlp.gate_proj.weight_scale", dtype = f8E4M3FN, shape = [64, 2]>
// CHECK-SAME: #spark.weight<name = "model.layers.0.mlp.gate_proj.weight_scale_2", dtype = f32, shape = []>
// CHECK-SAME: #spark.weight<name = "model.layers.0.mlp.up_proj.weight", dtype = f8E4M3FN, shape = [64, 32]>
// CHECK-SAME: #spark.weight<name = "model.layers.0.mlp.up_proj.weight_scale", dtype = f32, shape = [64, 1]>
// CHECK: spark.launch "linear_nvfp4" @kernels::@spark_linear_nvfp4__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[X:[0-9]+]], weight 1, weight 2, weight 3, buffer {{[0-9]+}}, num_tokens, i32 64, i32 32] {source = "gate"}
// CHECK: spark.launch "linear_fp8" @kernels::@spark_linear_fp8__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[X]], weight 4, weight 5, buffer {{[0-9]+}}, num_tokens, i32 64, i32 32, i32 64] {source = "up"}
// CHECK: spark.launch "linear" @kernels::@spark_linear__
module {
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x32xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x32xbf16>
  %e = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x32xbf16>) -> tensor<?x32xf32>
  %gw = spark.weight "model.layers.0.mlp.gate_proj.weight" : tensor<64x32xf4E2M1FN>
  %gs = spark.weight "model.layers.0.mlp.gate_proj.weight_scale" : tensor<64x2xf8E4M3FN>
  %gt = spark.weight "model.layers.0.mlp.gate_proj.weight_scale_2" : tensor<f32>
  %g = spark.linear %e, %gw scales(%gs, %gt) : (tensor<?x32xf32>, tensor<64x32xf4E2M1FN>, tensor<64x2xf8E4M3FN>, tensor<f32>) -> tensor<?x64xf32> loc("gate")
  %uw = spark.weight "model.layers.0.mlp.up_proj.weight" : tensor<64x32xf8E4M3FN>
  %us = spark.weight "model.layers.0.mlp.up_proj.weight_scale" : tensor<64x1xf32>
  %u = spark.linear %e, %uw scales(%us) : (tensor<?x32xf32>, tensor<64x32xf8E4M3FN>, tensor<64x1xf32>) -> tensor<?x64xf32> loc("up")
  %m = spark.mul %g, %u : tensor<?x64xf32>
  %dw = spark.weight "model.layers.0.mlp.down_proj.weight" : tensor<32x64xbf16>
  %d = spark.linear %m, %dw : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  return %d : tensor<?x32xf32>
}
}

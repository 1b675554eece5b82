// RUN: spark-opt %s --spark-lower-to-kernels=max-tokens=16 --spark-plan-arena --spark-outline-kernel-entries | FileCheck %s

// Quantized MoE experts: an NVFP4 gate_up and an FP8 down with per-row scales, each a weight
// stacked from per-expert parts (ModelOpt's layout). The plan lists every part of each stacked
// weight with its shape; the experts lower to the _nvfp4 / _fp8 kernels (decode and grouped
// launches), the FP8 launch with scales_per_matrix = 32 (one scale per row of down's 32 rows).
// The gate/up tensor scales are taken as reciprocals (compressed-tensors' inverted global
// scales): the plan's weight says "transform": "reciprocal".
// CHECK-LABEL: spark.program @forward
// CHECK-SAME: #spark.weight<name = "layers.0.experts.{0..1}.{gate,up}_proj.weight", dtype = f4E2M1FN, shape = [2, 32, 32], parts = ["e0.gate.weight", "e0.up.weight", "e1.gate.weight", "e1.up.weight"], part_shape = [16, 32]>
// CHECK-SAME: #spark.weight<name = "layers.0.experts.{0..1}.down_proj.weight", dtype = f8E4M3FN, shape = [2, 32, 16], parts = ["e0.down.weight", "e1.down.weight"], part_shape = [32, 16]>
// CHECK-SAME: #spark.weight<name = "layers.0.experts.{0..1}.{gate,up}_proj.weight_scale_2", dtype = f32, shape = [2, 2], parts = ["e0.gate.weight_scale_2", "e0.up.weight_scale_2", "e1.gate.weight_scale_2", "e1.up.weight_scale_2"], transform = reciprocal>
// CHECK: spark.launch "moe_gate_up_nvfp4" @kernels::@spark_moe_gate_up_nvfp4__i32_i16_i2_i1_i0 {{.*}} args [buffer [[X:[0-9]+]], weight [[GU:[0-9]+]], weight [[GUB:[0-9]+]], weight [[GUT:[0-9]+]], buffer [[IDX:[0-9]+]], buffer [[ACT:[0-9]+]], num_tokens, i32 32, i32 16, i32 2, i32 1, i32 0] {source = "moe_experts.gate_up"}
// CHECK-NEXT: spark.launch "moe_gate_up_nvfp4" @kernels::@spark_moe_gate_up_nvfp4__i32_i16_i2_i1_i1 {{.*}} {source = "moe_experts.gate_up_grouped"}
// CHECK-NEXT: spark.launch "moe_down_fp8" @kernels::@spark_moe_down_fp8__i32_i16_i2_i1_i32_i0 {{.*}} args [buffer [[ACT]], weight [[D:[0-9]+]], weight [[DS:[0-9]+]], buffer {{[0-9]+}}, buffer [[IDX]], buffer [[Y:[0-9]+]], null, num_tokens, i32 32, i32 16, i32 2, i32 1, i32 32, i32 0] {source = "moe_experts.down"}
// CHECK-NEXT: spark.launch "moe_down_fp8" @kernels::@spark_moe_down_fp8__i32_i16_i2_i1_i32_i1 {{.*}} {source = "moe_experts.down_grouped"}
// CHECK-NEXT: spark.launch "moe_combine"
// CHECK: llvm.func @spark_moe_gate_up_nvfp4(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, i32, i32, i32, i32)

func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x32xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<64x32xbf16>
  %h = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<64x32xbf16>) -> tensor<?x32xf32>
  %rscale = spark.weight "model.layers.0.router.scale" : tensor<32xbf16>
  %rproj = spark.weight "model.layers.0.router.proj.weight" : tensor<2x32xbf16>
  %rpes = spark.weight "model.layers.0.router.per_expert_scale" : tensor<2xbf16>
  %w, %i = spark.moe_router %h, %rscale, %rproj, %rpes {top_k = 1 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x32xf32>, tensor<32xbf16>, tensor<2x32xbf16>, tensor<2xbf16>) -> (tensor<?x1xf32>, tensor<?x1xi32>)
  %gu = spark.weight "layers.0.experts.{0..1}.{gate,up}_proj.weight" {parts = ["e0.gate.weight", "e0.up.weight", "e1.gate.weight", "e1.up.weight"], part_shape = array<i64: 16, 32>} : tensor<2x32x32xf4E2M1FN>
  %gub = spark.weight "layers.0.experts.{0..1}.{gate,up}_proj.weight_scale" {parts = ["e0.gate.weight_scale", "e0.up.weight_scale", "e1.gate.weight_scale", "e1.up.weight_scale"], part_shape = array<i64: 16, 2>} : tensor<2x32x2xf8E4M3FN>
  %gut = spark.weight "layers.0.experts.{0..1}.{gate,up}_proj.weight_scale_2" {parts = ["e0.gate.weight_scale_2", "e0.up.weight_scale_2", "e1.gate.weight_scale_2", "e1.up.weight_scale_2"], part_shape = array<i64>, reciprocal} : tensor<2x2xf32>
  %d = spark.weight "layers.0.experts.{0..1}.down_proj.weight" {parts = ["e0.down.weight", "e1.down.weight"], part_shape = array<i64: 32, 16>} : tensor<2x32x16xf8E4M3FN>
  %ds = spark.weight "layers.0.experts.{0..1}.down_proj.weight_scale" {parts = ["e0.down.weight_scale", "e1.down.weight_scale"], part_shape = array<i64: 32>} : tensor<2x32xf32>
  %y = spark.moe_experts %h, %gu, %d, %w, %i gate_up_scales(%gub, %gut) down_scales(%ds) : (tensor<?x32xf32>, tensor<2x32x32xf4E2M1FN>, tensor<2x32x16xf8E4M3FN>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<2x32x2xf8E4M3FN>, tensor<2x2xf32>, tensor<2x32xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

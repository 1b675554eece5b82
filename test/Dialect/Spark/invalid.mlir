// RUN: spark-opt %s -split-input-file -verify-diagnostics

// Every verifier rule of the spark dialect (SparkOps.cpp, TypeInference.cpp), one case each,
// plus a few ODS type constraints.

//===----------------------------------------------------------------------===//
// ODS type constraints
//===----------------------------------------------------------------------===//

// An activation must be f32: an f16 gelu is rejected by the type constraint.
func.func @f16_activation(%x: tensor<?x8xf16>) -> tensor<?x8xf16> {
  // expected-error @+1 {{'spark.gelu' op operand #0 must be ranked tensor of 32-bit float values, but got 'tensor<?x8xf16>'}}
  %0 = spark.gelu %x : tensor<?x8xf16>
  return %0 : tensor<?x8xf16>
}

// -----

// Token ids must be i32: i64 ids are rejected by the type constraint.
func.func @i64_ids(%ids: tensor<?xi64>) -> tensor<?xi64> {
  // expected-error @+1 {{'spark.mask_tokens' op operand #0 must be ranked tensor of 32-bit signless integer values, but got 'tensor<?xi64>'}}
  %0 = spark.mask_tokens %ids {token_ids = array<i32: 7>, replacement = 0 : i32} : tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

// A weight must be bf16 or f32: an i8 weight is rejected by the type constraint.
func.func @i8_weight() {
  // expected-error @+1 {{'spark.weight' op result #0 must be ranked tensor of bfloat16 type or 32-bit float or f8E4M3FN type or f4E2M1FN type values, but got 'tensor<4x4xi8>'}}
  %w = spark.weight "w" : tensor<4x4xi8>
  return
}

// -----

// spark.launch must sit in a spark.program.
func.func @launch_outside_program() {
  // expected-error @+1 {{'spark.launch' op expects parent op 'spark.program'}}
  spark.launch "gelu" @kernels::@spark_gelu__0 grid(per_token = 0, fixed = 1, divisor = 1) block [256, 1, 1] args [buffer 0]
  return
}

// -----

// Elementwise ops take one type for operands and result; only the generic form can spell a mismatch.
func.func @gelu_mul_operand_types(%a: tensor<?x8xf32>, %b: tensor<?x4xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.gelu_mul' op requires the same type for all operands and results}}
  %0 = "spark.gelu_mul"(%a, %b) : (tensor<?x8xf32>, tensor<?x4xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// A weight without a name attribute (the custom form cannot omit it).
func.func @weight_missing_name() {
  // expected-error @+1 {{'spark.weight' op requires attribute 'name'}}
  %w = "spark.weight"() : () -> tensor<4xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// spark.weight
//===----------------------------------------------------------------------===//

// A weight needs a checkpoint name.
func.func @weight_empty_name() {
  // expected-error @+1 {{'spark.weight' op expects a non-empty checkpoint tensor name}}
  %w = spark.weight "" : tensor<4x4xbf16>
  return
}

// -----

// A weight's shape must be static.
func.func @weight_dynamic_shape() {
  // expected-error @+1 {{'spark.weight' op expects a static shape for weight 'w', got [?, 4]}}
  %w = spark.weight "w" : tensor<?x4xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// spark.kv_cache
//===----------------------------------------------------------------------===//

// kv_heads and head_dim must be positive.
// expected-error @+1 {{'spark.kv_cache' op expects positive kv_heads and head_dim, got 0 and 64}}
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 0 : i64, head_dim = 64 : i64}

// -----

// A sliding cache needs a positive window.
// expected-error @+1 {{'spark.kv_cache' op expects a positive window for a sliding cache, got 0}}
spark.kv_cache @kv sliding {window = 0 : i64, kv_heads = 1 : i64, head_dim = 64 : i64}

// -----

// A full cache has window 0.
// expected-error @+1 {{'spark.kv_cache' op expects window = 0 for a full cache, got 512}}
spark.kv_cache @kv full {window = 512 : i64, kv_heads = 1 : i64, head_dim = 64 : i64}

// -----

// K and V are f32 or bf16.
// expected-error @+1 {{'spark.kv_cache' op expects element_type f32 or bf16, got 'f16'}}
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 64 : i64, element_type = f16}

// -----

//===----------------------------------------------------------------------===//
// spark.embedding
//===----------------------------------------------------------------------===//

// ids must be a rank-1 tensor.
func.func @embedding_ids_rank(%ids: tensor<?x1xi32>, %table: tensor<16x8xbf16>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.embedding' op expects ids of rank 1, got [?, 1]}}
  %0 = spark.embedding %ids, %table {scale = 1.0 : f32} : (tensor<?x1xi32>, tensor<16x8xbf16>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The table must be [vocab, dim].
func.func @embedding_table_rank(%ids: tensor<?xi32>, %table: tensor<16x8x2xbf16>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.embedding' op expects a table of rank 2 ([vocab, dim]), got [16, 8, 2]}}
  %0 = spark.embedding %ids, %table {scale = 1.0 : f32} : (tensor<?xi32>, tensor<16x8x2xbf16>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The result is [T, dim].
func.func @embedding_result_shape(%ids: tensor<?xi32>, %table: tensor<16x8xbf16>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'spark.embedding' op expects result of shape [?, 8], got [?, 16]}}
  %0 = spark.embedding %ids, %table {scale = 1.0 : f32} : (tensor<?xi32>, tensor<16x8xbf16>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.mask_tokens
//===----------------------------------------------------------------------===//

// At most 3 placeholder ids.
func.func @mask_tokens_too_many(%ids: tensor<?xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'spark.mask_tokens' op expects at most 3 placeholder token ids, got 4}}
  %0 = spark.mask_tokens %ids {token_ids = array<i32: 1, 2, 3, 4>, replacement = 0 : i32} : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

// ids must be a rank-1 tensor.
func.func @mask_tokens_rank(%ids: tensor<?x2xi32>) -> tensor<?x2xi32> {
  // expected-error @+1 {{'spark.mask_tokens' op expects ids of rank 1, got [?, 2]}}
  %0 = spark.mask_tokens %ids {token_ids = array<i32: 1>, replacement = 0 : i32} : tensor<?x2xi32>
  return %0 : tensor<?x2xi32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.scatter_nd
//===----------------------------------------------------------------------===//

// dest must be [T, cols].
func.func @scatter_nd_dest_rank(%d: tensor<?x2x8xf32>, %i: tensor<?xi32>, %u: tensor<?x8xf32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.scatter_nd' op expects dest of rank 2, got [?, 2, 8]}}
  %0 = spark.scatter_nd %d, %i, %u : (tensor<?x2x8xf32>, tensor<?xi32>, tensor<?x8xf32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// dest's row width must be static.
func.func @scatter_nd_dest_dynamic(%d: tensor<?x?xf32>, %i: tensor<?xi32>, %u: tensor<?x8xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'spark.scatter_nd' op expects dest to have static dimensions after the token dimension, got [?, ?]}}
  %0 = spark.scatter_nd %d, %i, %u : (tensor<?x?xf32>, tensor<?xi32>, tensor<?x8xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// updates must be [N, cols].
func.func @scatter_nd_updates_rank(%d: tensor<?x8xf32>, %i: tensor<?xi32>, %u: tensor<?xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.scatter_nd' op expects updates of rank 2, got [?]}}
  %0 = spark.scatter_nd %d, %i, %u : (tensor<?x8xf32>, tensor<?xi32>, tensor<?xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// indices must be a rank-1 tensor.
func.func @scatter_nd_indices_rank(%d: tensor<?x8xf32>, %i: tensor<?x1xi32>, %u: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.scatter_nd' op expects indices of rank 1, got [?, 1]}}
  %0 = spark.scatter_nd %d, %i, %u : (tensor<?x8xf32>, tensor<?x1xi32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// One index per update row.
func.func @scatter_nd_indices_updates_tokens(%d: tensor<?x8xf32>, %i: tensor<3xi32>, %u: tensor<4x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.scatter_nd' op expects indices and updates to have the same token dimension, got [3] and [4, 8]}}
  %0 = spark.scatter_nd %d, %i, %u : (tensor<?x8xf32>, tensor<3xi32>, tensor<4x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// Update rows have the dest's width.
func.func @scatter_nd_width(%d: tensor<?x8xf32>, %i: tensor<?xi32>, %u: tensor<?x4xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.scatter_nd' op expects update rows of width 8 (the dest's), got [?, 4]}}
  %0 = spark.scatter_nd %d, %i, %u : (tensor<?x8xf32>, tensor<?xi32>, tensor<?x4xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The result has the dest's type.
func.func @scatter_nd_result(%d: tensor<?x8xf32>, %i: tensor<?xi32>, %u: tensor<?x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'spark.scatter_nd' op expects the result type to equal the dest type}}
  %0 = spark.scatter_nd %d, %i, %u : (tensor<?x8xf32>, tensor<?xi32>, tensor<?x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.rms_norm
//===----------------------------------------------------------------------===//

// The input is [T, H] or [T, heads, head_dim].
func.func @rms_norm_rank(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'spark.rms_norm' op expects input of rank 2 ([T, H]) or 3 ([T, heads, head_dim]), got [?]}}
  %0 = spark.rms_norm %x {epsilon = 1.0e-6 : f32} : (tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// The normalised dimensions must be static.
func.func @rms_norm_dynamic(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{'spark.rms_norm' op expects input to have static dimensions after the token dimension, got [?, ?, 8]}}
  %0 = spark.rms_norm %x {epsilon = 1.0e-6 : f32} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

// The result has the input's type.
func.func @rms_norm_result(%x: tensor<?x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'spark.rms_norm' op expects the result type to equal the input type}}
  %0 = spark.rms_norm %x {epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// The weight has one element per normalised column.
func.func @rms_norm_weight(%x: tensor<?x2x8xf32>, %w: tensor<16xbf16>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.rms_norm' op expects weight of shape [8], got [16]}}
  %0 = spark.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : (tensor<?x2x8xf32>, tensor<16xbf16>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// epsilon must not be negative.
func.func @rms_norm_epsilon(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.rms_norm' op expects a finite, non-negative epsilon, got -1.000000e-06}}
  %0 = spark.rms_norm %x {epsilon = -1.0e-6 : f32} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.linear (inferLinearShape)
//===----------------------------------------------------------------------===//

// The input is [T, in].
func.func @linear_input_rank(%x: tensor<?x2x8xf32>, %w: tensor<4x8xbf16>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects input of rank 2, got [?, 2, 8]}}
  %0 = spark.linear %x, %w : (tensor<?x2x8xf32>, tensor<4x8xbf16>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// The input's feature dimension must be static.
func.func @linear_input_dynamic(%x: tensor<?x?xf32>, %w: tensor<4x8xbf16>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects input to have static dimensions after the token dimension, got [?, ?]}}
  %0 = spark.linear %x, %w : (tensor<?x?xf32>, tensor<4x8xbf16>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// The weight is a static [out, in] matrix.
func.func @linear_weight_rank(%x: tensor<?x8xf32>, %w: tensor<2x4x8xbf16>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects a static weight of rank 2 ([out, in]), got [2, 4, 8]}}
  %0 = spark.linear %x, %w : (tensor<?x8xf32>, tensor<2x4x8xbf16>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// Quantized weights (NVFP4, FP8) carry their scales; each rule of LinearOp::verify once.
func.func @linear_f32_weight(%x: tensor<?x32xf32>, %w: tensor<4x32xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects a bf16, f4E2M1FN (NVFP4) or f8E4M3FN (FP8) weight, got 'tensor<4x32xf32>'}}
  %0 = spark.linear %x, %w : (tensor<?x32xf32>, tensor<4x32xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @linear_bf16_with_scales(%x: tensor<?x32xf32>, %w: tensor<4x32xbf16>, %s: tensor<f32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects no scales with a bf16 weight, got 1}}
  %0 = spark.linear %x, %w scales(%s) : (tensor<?x32xf32>, tensor<4x32xbf16>, tensor<f32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @linear_nvfp4_missing_scale(%x: tensor<?x32xf32>, %w: tensor<4x32xf4E2M1FN>, %bs: tensor<4x2xf8E4M3FN>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects an NVFP4 weight with two scales (block scales, tensor scale), got 1}}
  %0 = spark.linear %x, %w scales(%bs) : (tensor<?x32xf32>, tensor<4x32xf4E2M1FN>, tensor<4x2xf8E4M3FN>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @linear_nvfp4_block_shape(%x: tensor<?x32xf32>, %w: tensor<4x32xf4E2M1FN>, %bs: tensor<4x4xf8E4M3FN>, %ts: tensor<f32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects NVFP4 block scales tensor<4x2xf8E4M3FN> for weight [4, 32], got 'tensor<4x4xf8E4M3FN>'}}
  %0 = spark.linear %x, %w scales(%bs, %ts) : (tensor<?x32xf32>, tensor<4x32xf4E2M1FN>, tensor<4x4xf8E4M3FN>, tensor<f32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @linear_nvfp4_block_dtype(%x: tensor<?x32xf32>, %w: tensor<4x32xf4E2M1FN>, %bs: tensor<4x2xbf16>, %ts: tensor<f32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects NVFP4 block scales tensor<4x2xf8E4M3FN> for weight [4, 32], got 'tensor<4x2xbf16>'}}
  %0 = spark.linear %x, %w scales(%bs, %ts) : (tensor<?x32xf32>, tensor<4x32xf4E2M1FN>, tensor<4x2xbf16>, tensor<f32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @linear_nvfp4_tensor_scale(%x: tensor<?x32xf32>, %w: tensor<4x32xf4E2M1FN>, %bs: tensor<4x2xf8E4M3FN>, %ts: tensor<4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects an NVFP4 tensor scale tensor<f32> or tensor<1xf32>, got 'tensor<4xf32>'}}
  %0 = spark.linear %x, %w scales(%bs, %ts) : (tensor<?x32xf32>, tensor<4x32xf4E2M1FN>, tensor<4x2xf8E4M3FN>, tensor<4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @linear_nvfp4_blocks_of_16(%x: tensor<?x24xf32>, %w: tensor<4x24xf4E2M1FN>, %bs: tensor<4x1xf8E4M3FN>, %ts: tensor<f32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects an NVFP4 weight whose input dimension is a multiple of 16 (one block scale per 16 inputs), got [4, 24]}}
  %0 = spark.linear %x, %w scales(%bs, %ts) : (tensor<?x24xf32>, tensor<4x24xf4E2M1FN>, tensor<4x1xf8E4M3FN>, tensor<f32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @linear_fp8_scale_shape(%x: tensor<?x32xf32>, %w: tensor<4x32xf8E4M3FN>, %s: tensor<2xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects an FP8 scale of f32 per tensor (tensor<f32>, tensor<1xf32>) or per row (tensor<4xf32>, tensor<4x1xf32>), got 'tensor<2xf32>'}}
  %0 = spark.linear %x, %w scales(%s) : (tensor<?x32xf32>, tensor<4x32xf8E4M3FN>, tensor<2xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @linear_fp8_two_scales(%x: tensor<?x32xf32>, %w: tensor<4x32xf8E4M3FN>, %s: tensor<f32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects an FP8 weight with one scale (per tensor or per row), got 2}}
  %0 = spark.linear %x, %w scales(%s, %s) : (tensor<?x32xf32>, tensor<4x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// NVFP4 codes are stored two to a byte: an odd last dimension cannot be a checkpoint tensor.
func.func @f4_weight_odd() {
  // expected-error @+1 {{'spark.weight' op expects an f4E2M1FN weight with an even last dimension (two codes per byte), got 'w' 'tensor<4x33xf4E2M1FN>'}}
  %w = spark.weight "w" : tensor<4x33xf4E2M1FN>
  return
}

// -----

// A dynamic weight is rejected too.
func.func @linear_weight_dynamic(%x: tensor<?x8xf32>, %w: tensor<?x8xbf16>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects a static weight of rank 2 ([out, in]), got [?, 8]}}
  %0 = spark.linear %x, %w : (tensor<?x8xf32>, tensor<?x8xbf16>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// The weight's in dimension matches the input's last dimension.
func.func @linear_in_features(%x: tensor<?x8xf32>, %w: tensor<4x16xbf16>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.linear' op expects weight [out, in] with in = 8 (the input's last dimension), got weight [4, 16]}}
  %0 = spark.linear %x, %w : (tensor<?x8xf32>, tensor<4x16xbf16>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// The result is [T, out].
func.func @linear_result(%x: tensor<?x8xf32>, %w: tensor<4x8xbf16>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.linear' op expects result of shape [?, 4], got [?, 8]}}
  %0 = spark.linear %x, %w : (tensor<?x8xf32>, tensor<4x8xbf16>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.scalar_mul, spark.softcap
//===----------------------------------------------------------------------===//

// The scalar is a one-element weight.
func.func @scalar_mul_scalar(%x: tensor<?x8xf32>, %s: tensor<2xbf16>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.scalar_mul' op expects scalar of shape [1], got [2]}}
  %0 = spark.scalar_mul %x, %s : (tensor<?x8xf32>, tensor<2xbf16>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The result has the input's type.
func.func @scalar_mul_result(%x: tensor<?x8xf32>, %s: tensor<1xbf16>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.scalar_mul' op expects the result type to equal the input type}}
  %0 = spark.scalar_mul %x, %s : (tensor<?x8xf32>, tensor<1xbf16>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// The softcap must be positive.
func.func @softcap_cap(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.softcap' op expects a finite, positive cap, got -3.000000e+01}}
  %0 = spark.softcap %x {cap = -30.0 : f32} : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.reshape
//===----------------------------------------------------------------------===//

// The input's row shape must be static.
func.func @reshape_input_dynamic(%x: tensor<?x?xf32>) -> tensor<?x2x4xf32> {
  // expected-error @+1 {{'spark.reshape' op expects input to have static dimensions after the token dimension, got [?, ?]}}
  %0 = spark.reshape %x : tensor<?x?xf32> to tensor<?x2x4xf32>
  return %0 : tensor<?x2x4xf32>
}

// -----

// The result's row shape must be static.
func.func @reshape_result_dynamic(%x: tensor<?x8xf32>) -> tensor<?x2x?xf32> {
  // expected-error @+1 {{'spark.reshape' op expects result to have static dimensions after the token dimension, got [?, 2, ?]}}
  %0 = spark.reshape %x : tensor<?x8xf32> to tensor<?x2x?xf32>
  return %0 : tensor<?x2x?xf32>
}

// -----

// The token dimension is kept.
func.func @reshape_tokens(%x: tensor<4x8xf32>) -> tensor<2x2x8xf32> {
  // expected-error @+1 {{'spark.reshape' op expects input and result to have the same token dimension, got [4, 8] and [2, 2, 8]}}
  %0 = spark.reshape %x : tensor<4x8xf32> to tensor<2x2x8xf32>
  return %0 : tensor<2x2x8xf32>
}

// -----

// A row keeps its number of elements.
func.func @reshape_elements(%x: tensor<?x8xf32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.reshape' op expects the same number of elements per token, got 8 ([?, 8]) and 16 ([?, 2, 8])}}
  %0 = spark.reshape %x : tensor<?x8xf32> to tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.select_group
//===----------------------------------------------------------------------===//

// The input is [T, groups, cols].
func.func @select_group_rank(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.select_group' op expects input of rank 3, got [?, 8]}}
  %0 = spark.select_group %x {index = 0 : i64} : tensor<?x8xf32> to tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The groups and columns must be static.
func.func @select_group_dynamic(%x: tensor<?x?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.select_group' op expects input to have static dimensions after the token dimension, got [?, ?, 8]}}
  %0 = spark.select_group %x {index = 0 : i64} : tensor<?x?x8xf32> to tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The index names an existing group.
func.func @select_group_index(%x: tensor<?x4x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.select_group' op expects index in [0, 4), got 4}}
  %0 = spark.select_group %x {index = 4 : i64} : tensor<?x4x8xf32> to tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The result is [T, cols].
func.func @select_group_result(%x: tensor<?x4x8xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.select_group' op expects result of shape [?, 8], got [?, 4]}}
  %0 = spark.select_group %x {index = 0 : i64} : tensor<?x4x8xf32> to tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.rope
//===----------------------------------------------------------------------===//

// The input is [T, heads, head_dim].
func.func @rope_rank(%x: tensor<?x8xf32>, %pos: tensor<?xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.rope' op expects input of rank 3, got [?, 8]}}
  %0 = spark.rope %x, %pos {theta = 10000.0 : f32, rotated_pairs = 4 : i64, factor = 1.0 : f32} : (tensor<?x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// heads and head_dim must be static.
func.func @rope_dynamic(%x: tensor<?x2x?xf32>, %pos: tensor<?xi32>) -> tensor<?x2x?xf32> {
  // expected-error @+1 {{'spark.rope' op expects input to have static dimensions after the token dimension, got [?, 2, ?]}}
  %0 = spark.rope %x, %pos {theta = 10000.0 : f32, rotated_pairs = 4 : i64, factor = 1.0 : f32} : (tensor<?x2x?xf32>, tensor<?xi32>) -> tensor<?x2x?xf32>
  return %0 : tensor<?x2x?xf32>
}

// -----

// positions must be a rank-1 tensor.
func.func @rope_positions_rank(%x: tensor<?x2x8xf32>, %pos: tensor<?x1xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.rope' op expects positions of rank 1, got [?, 1]}}
  %0 = spark.rope %x, %pos {theta = 10000.0 : f32, rotated_pairs = 4 : i64, factor = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// One position per token.
func.func @rope_tokens(%x: tensor<4x2x8xf32>, %pos: tensor<3xi32>) -> tensor<4x2x8xf32> {
  // expected-error @+1 {{'spark.rope' op expects input and positions to have the same token dimension, got [4, 2, 8] and [3]}}
  %0 = spark.rope %x, %pos {theta = 10000.0 : f32, rotated_pairs = 4 : i64, factor = 1.0 : f32} : (tensor<4x2x8xf32>, tensor<3xi32>) -> tensor<4x2x8xf32>
  return %0 : tensor<4x2x8xf32>
}

// -----

// Rotate-half needs an even head_dim.
func.func @rope_odd_head_dim(%x: tensor<?x2x7xf32>, %pos: tensor<?xi32>) -> tensor<?x2x7xf32> {
  // expected-error @+1 {{'spark.rope' op expects an even head_dim, got 7}}
  %0 = spark.rope %x, %pos {theta = 10000.0 : f32, rotated_pairs = 3 : i64, factor = 1.0 : f32} : (tensor<?x2x7xf32>, tensor<?xi32>) -> tensor<?x2x7xf32>
  return %0 : tensor<?x2x7xf32>
}

// -----

// At most head_dim / 2 pairs rotate.
func.func @rope_rotated_pairs(%x: tensor<?x2x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.rope' op expects rotated_pairs in [0, 4] (head_dim / 2), got 5}}
  %0 = spark.rope %x, %pos {theta = 10000.0 : f32, rotated_pairs = 5 : i64, factor = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// theta must be positive.
func.func @rope_theta(%x: tensor<?x2x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.rope' op expects finite, positive theta and factor, got 0.000000e+00 and 1.000000e+00}}
  %0 = spark.rope %x, %pos {theta = 0.0 : f32, rotated_pairs = 4 : i64, factor = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// factor must be positive.
func.func @rope_factor(%x: tensor<?x2x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.rope' op expects finite, positive theta and factor, got 1.000000e+04 and -1.000000e+00}}
  %0 = spark.rope %x, %pos {theta = 10000.0 : f32, rotated_pairs = 4 : i64, factor = -1.0 : f32} : (tensor<?x2x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// The result has the input's type.
func.func @rope_result(%x: tensor<?x2x8xf32>, %pos: tensor<?xi32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'spark.rope' op expects the result type to equal the input type}}
  %0 = spark.rope %x, %pos {theta = 10000.0 : f32, rotated_pairs = 4 : i64, factor = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.attention
//===----------------------------------------------------------------------===//

// The query is [T, q_heads, head_dim].
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_query_rank(%q: tensor<?x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects query of rank 3, got [?, 8]}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The query's heads and head_dim must be static.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_query_dynamic(%q: tensor<?x?x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?xi32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects query to have static dimensions after the token dimension, got [?, ?, 8]}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x?x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

// last_visible is one i32 per token, as many tokens as the query.
spark.kv_cache @kv sliding {window = 4 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_last_visible_rank(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %pos: tensor<?xi32>, %last: tensor<?x2xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects last_visible of rank 1, got [?, 2]}}
  %0 = spark.attention %q, %k, %k, %pos last_visible %last {cache = @kv, window = 4 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>, tensor<?x2xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

spark.kv_cache @kv sliding {window = 4 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_last_visible_tokens(%q: tensor<3x2x8xf32>, %k: tensor<3x1x8xf32>, %pos: tensor<3xi32>, %last: tensor<4xi32>) -> tensor<3x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects query and last_visible to have the same token dimension, got [3, 2, 8] and [4]}}
  %0 = spark.attention %q, %k, %k, %pos last_visible %last {cache = @kv, window = 4 : i64, scale = 1.0 : f32} : (tensor<3x2x8xf32>, tensor<3x1x8xf32>, tensor<3x1x8xf32>, tensor<3xi32>, tensor<4xi32>) -> tensor<3x2x8xf32>
  return %0 : tensor<3x2x8xf32>
}

// -----

spark.kv_cache @kv sliding {window = 4 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_last_visible_type(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %pos: tensor<?xi32>, %last: tensor<?xf32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{operand #4 must be ranked tensor of 32-bit signless integer values}}
  %0 = spark.attention %q, %k, %k, %pos last_visible %last {cache = @kv, window = 4 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>, tensor<?xf32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// The key is [T, kv_heads, head_dim].
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_key_rank(%q: tensor<?x2x8xf32>, %k: tensor<?x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects key of rank 3, got [?, 8]}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// The value is [T, kv_heads, head_dim].
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_value_rank(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects value of rank 3, got [?, 8]}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// positions must be a rank-1 tensor.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_positions_rank(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?x1xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects positions of rank 1, got [?, 1]}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?x1xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// Query and key cover the same tokens.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_query_key_tokens(%q: tensor<4x2x8xf32>, %k: tensor<3x1x8xf32>, %v: tensor<3x1x8xf32>, %pos: tensor<4xi32>) -> tensor<4x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects query and key to have the same token dimension, got [4, 2, 8] and [3, 1, 8]}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<4x2x8xf32>, tensor<3x1x8xf32>, tensor<3x1x8xf32>, tensor<4xi32>) -> tensor<4x2x8xf32>
  return %0 : tensor<4x2x8xf32>
}

// -----

// One position per query token.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_query_positions_tokens(%q: tensor<4x2x8xf32>, %k: tensor<4x1x8xf32>, %v: tensor<4x1x8xf32>, %pos: tensor<?xi32>) -> tensor<4x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects query and positions to have the same token dimension, got [4, 2, 8] and [?]}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<4x2x8xf32>, tensor<4x1x8xf32>, tensor<4x1x8xf32>, tensor<?xi32>) -> tensor<4x2x8xf32>
  return %0 : tensor<4x2x8xf32>
}

// -----

// Key and value have the same type.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_key_value(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x2x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects key and value of the same type, got [?, 1, 8] and [?, 2, 8]}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x2x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// Query and key have the same head_dim.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_head_dim(%q: tensor<?x2x16xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x16xf32> {
  // expected-error @+1 {{'spark.attention' op expects query and key with the same head_dim, got 16 and 8}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x2x16xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x16xf32>
  return %0 : tensor<?x2x16xf32>
}

// -----

// Grouped-query attention: q_heads is a multiple of kv_heads.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 2 : i64, head_dim = 8 : i64}
func.func @attention_gqa(%q: tensor<?x3x8xf32>, %k: tensor<?x2x8xf32>, %v: tensor<?x2x8xf32>, %pos: tensor<?xi32>) -> tensor<?x3x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects q_heads (3) to be a multiple of kv_heads (2)}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x3x8xf32>, tensor<?x2x8xf32>, tensor<?x2x8xf32>, tensor<?xi32>) -> tensor<?x3x8xf32>
  return %0 : tensor<?x3x8xf32>
}

// -----

// The result has the query's type.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_result(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?xi32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'spark.attention' op expects the result type to equal the query type}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

// The cache symbol must name a spark.kv_cache of the module.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_unknown_cache(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op references unknown KV cache @kv.missing}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv.missing, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// A symbol of another kind is not a KV cache.
func.func @attention_cache_is_func(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op references unknown KV cache @attention_cache_is_func}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @attention_cache_is_func, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// Keys have the cache's kv_heads.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 2 : i64, head_dim = 8 : i64}
func.func @attention_cache_heads(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects keys of 2 heads x 8 (cache @kv), got [?, 1, 8]}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// Keys have the cache's head_dim.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 16 : i64}
func.func @attention_cache_head_dim(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects keys of 1 heads x 16 (cache @kv), got [?, 1, 8]}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// A sliding cache's window must be the attention's window.
spark.kv_cache @kv sliding {window = 512 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_sliding_window(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects window 512 to match cache @kv, got 256}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 256 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// Attention over a full cache has window 0.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_full_window(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects window 0 to match cache @kv, got 512}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = 512 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.moe_router
//===----------------------------------------------------------------------===//

// The input is [T, hidden].
func.func @moe_router_input_rank(%x: tensor<?x2x8xf32>, %s: tensor<8xbf16>, %p: tensor<4x8xbf16>, %e: tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  // expected-error @+1 {{'spark.moe_router' op expects input of rank 2, got [?, 2, 8]}}
  %w, %i = spark.moe_router %x, %s, %p, %e {top_k = 2 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x2x8xf32>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// -----

// The hidden size must be static.
func.func @moe_router_input_dynamic(%x: tensor<?x?xf32>, %s: tensor<8xbf16>, %p: tensor<4x8xbf16>, %e: tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  // expected-error @+1 {{'spark.moe_router' op expects input to have static dimensions after the token dimension, got [?, ?]}}
  %w, %i = spark.moe_router %x, %s, %p, %e {top_k = 2 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x?xf32>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// -----

// proj is [experts, hidden].
func.func @moe_router_proj(%x: tensor<?x8xf32>, %s: tensor<8xbf16>, %p: tensor<4x16xbf16>, %e: tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  // expected-error @+1 {{'spark.moe_router' op expects proj of shape [experts, 8], got [4, 16]}}
  %w, %i = spark.moe_router %x, %s, %p, %e {top_k = 2 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>, tensor<8xbf16>, tensor<4x16xbf16>, tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// -----

// scale has one element per hidden column.
func.func @moe_router_scale(%x: tensor<?x8xf32>, %s: tensor<4xbf16>, %p: tensor<4x8xbf16>, %e: tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  // expected-error @+1 {{'spark.moe_router' op expects scale of shape [8], got [4]}}
  %w, %i = spark.moe_router %x, %s, %p, %e {top_k = 2 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>, tensor<4xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// -----

// per_expert_scale has one element per expert.
func.func @moe_router_per_expert_scale(%x: tensor<?x8xf32>, %s: tensor<8xbf16>, %p: tensor<4x8xbf16>, %e: tensor<8xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  // expected-error @+1 {{'spark.moe_router' op expects per_expert_scale of shape [4], got [8]}}
  %w, %i = spark.moe_router %x, %s, %p, %e {top_k = 2 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// -----

// top_k chooses between 1 and all experts.
func.func @moe_router_top_k(%x: tensor<?x8xf32>, %s: tensor<8xbf16>, %p: tensor<4x8xbf16>, %e: tensor<4xbf16>) -> (tensor<?x5xf32>, tensor<?x5xi32>) {
  // expected-error @+1 {{'spark.moe_router' op expects top_k in [1, 4], got 5}}
  %w, %i = spark.moe_router %x, %s, %p, %e {top_k = 5 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> (tensor<?x5xf32>, tensor<?x5xi32>)
  return %w, %i : tensor<?x5xf32>, tensor<?x5xi32>
}

// -----

// top_k = 0 is rejected too.
func.func @moe_router_top_k_zero(%x: tensor<?x8xf32>, %s: tensor<8xbf16>, %p: tensor<4x8xbf16>, %e: tensor<4xbf16>) -> (tensor<?x0xf32>, tensor<?x0xi32>) {
  // expected-error @+1 {{'spark.moe_router' op expects top_k in [1, 4], got 0}}
  %w, %i = spark.moe_router %x, %s, %p, %e {top_k = 0 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> (tensor<?x0xf32>, tensor<?x0xi32>)
  return %w, %i : tensor<?x0xf32>, tensor<?x0xi32>
}

// -----

// The weights result is [T, top_k].
func.func @moe_router_weights(%x: tensor<?x8xf32>, %s: tensor<8xbf16>, %p: tensor<4x8xbf16>, %e: tensor<4xbf16>) -> (tensor<?x3xf32>, tensor<?x2xi32>) {
  // expected-error @+1 {{'spark.moe_router' op expects weights of shape [?, 2], got [?, 3]}}
  %w, %i = spark.moe_router %x, %s, %p, %e {top_k = 2 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> (tensor<?x3xf32>, tensor<?x2xi32>)
  return %w, %i : tensor<?x3xf32>, tensor<?x2xi32>
}

// -----

// The indices result is [T, top_k].
func.func @moe_router_indices(%x: tensor<?x8xf32>, %s: tensor<8xbf16>, %p: tensor<4x8xbf16>, %e: tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<4x2xi32>) {
  // expected-error @+1 {{'spark.moe_router' op expects indices of shape [?, 2], got [4, 2]}}
  %w, %i = spark.moe_router %x, %s, %p, %e {top_k = 2 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<4x2xi32>)
  return %w, %i : tensor<?x2xf32>, tensor<4x2xi32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.moe_experts
//===----------------------------------------------------------------------===//

// The input is [T, hidden].
func.func @moe_experts_input_rank(%x: tensor<?xf32>, %gu: tensor<4x8x8xbf16>, %d: tensor<4x8x4xbf16>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>) -> tensor<?xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects input of rank 2, got [?]}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i : (tensor<?xf32>, tensor<4x8x8xbf16>, tensor<4x8x4xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// gate_up is [experts, 2 * intermediate, hidden]: its hidden size must match.
func.func @moe_experts_gate_up_hidden(%x: tensor<?x8xf32>, %gu: tensor<4x8x16xbf16>, %d: tensor<4x8x4xbf16>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects gate_up of shape [experts, 2 * intermediate, 8], got [4, 8, 16]}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i : (tensor<?x8xf32>, tensor<4x8x16xbf16>, tensor<4x8x4xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// gate_up stacks gate and up: an even number of rows.
func.func @moe_experts_gate_up_odd(%x: tensor<?x8xf32>, %gu: tensor<4x7x8xbf16>, %d: tensor<4x8x4xbf16>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects gate_up of shape [experts, 2 * intermediate, 8], got [4, 7, 8]}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i : (tensor<?x8xf32>, tensor<4x7x8xbf16>, tensor<4x8x4xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// gate_up has rank 3.
func.func @moe_experts_gate_up_rank(%x: tensor<?x8xf32>, %gu: tensor<8x8xbf16>, %d: tensor<4x8x4xbf16>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects gate_up of shape [experts, 2 * intermediate, 8], got [8, 8]}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i : (tensor<?x8xf32>, tensor<8x8xbf16>, tensor<4x8x4xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// down is [experts, hidden, intermediate].
func.func @moe_experts_down(%x: tensor<?x8xf32>, %gu: tensor<4x8x8xbf16>, %d: tensor<4x4x8xbf16>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects down of shape [4, 8, 4], got [4, 4, 8]}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i : (tensor<?x8xf32>, tensor<4x8x8xbf16>, tensor<4x4x8xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The routing weights are [T, top_k].
func.func @moe_experts_weights_rank(%x: tensor<?x8xf32>, %gu: tensor<4x8x8xbf16>, %d: tensor<4x8x4xbf16>, %w: tensor<?xf32>, %i: tensor<?xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects weights of rank 2, got [?]}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i : (tensor<?x8xf32>, tensor<4x8x8xbf16>, tensor<4x8x4xbf16>, tensor<?xf32>, tensor<?xi32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The routing weights cover the input's tokens.
func.func @moe_experts_weights_tokens(%x: tensor<4x8xf32>, %gu: tensor<4x8x8xbf16>, %d: tensor<4x8x4xbf16>, %w: tensor<3x2xf32>, %i: tensor<3x2xi32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects input and weights to have the same token dimension, got [4, 8] and [3, 2]}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i : (tensor<4x8xf32>, tensor<4x8x8xbf16>, tensor<4x8x4xbf16>, tensor<3x2xf32>, tensor<3x2xi32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// The expert indices have the routing weights' shape.
func.func @moe_experts_indices(%x: tensor<?x8xf32>, %gu: tensor<4x8x8xbf16>, %d: tensor<4x8x4xbf16>, %w: tensor<?x2xf32>, %i: tensor<?x3xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects indices of shape [?, 2], got [?, 3]}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i : (tensor<?x8xf32>, tensor<4x8x8xbf16>, tensor<4x8x4xbf16>, tensor<?x2xf32>, tensor<?x3xi32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The result has the input's shape.
func.func @moe_experts_result(%x: tensor<?x8xf32>, %gu: tensor<4x8x8xbf16>, %d: tensor<4x8x4xbf16>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects result of shape [?, 8], got [?, 4]}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i : (tensor<?x8xf32>, tensor<4x8x8xbf16>, tensor<4x8x4xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.program, spark.launch
//===----------------------------------------------------------------------===//

// A program has at least one token row.
// expected-error @+1 {{'spark.program' op expects max_tokens > 0, got 0}}
spark.program @forward attributes {max_tokens = 0 : i64, arena_bytes = 0 : i64, buffers = [], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
}

// -----

// Every buffer is a #spark.buffer.
// expected-error @+1 {{'spark.program' op attribute 'buffers' failed to satisfy constraint: buffers}}
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = ["a"], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
}

// -----

// An arena buffer holds f32, bf16 or i32.
// expected-error @+1 {{#spark.buffer 'a' has dtype 'f16'; arena buffers hold f32, bf16 or i32}}
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f16, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
}

// -----

// Offsets and dimensions are not negative.
// expected-error @+1 {{#spark.buffer 'a' has a negative offset: -256}}
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4], offset = -256>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
}

// -----

// expected-error @+1 {{#spark.buffer 'a' has a negative row_shape dimension: -4}}
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [2, -4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
}

// -----

// A weight is one of the checkpoint element types the kernels read (an f32 weight is a plain
// f32 tensor; i8 is none).
// expected-error @+1 {{#spark.weight 'w' has dtype 'i8'; weights are bf16, f32, f8E4M3FN or f4E2M1FN}}
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [], weights = [#spark.weight<name = "w", dtype = i8, shape = [4, 4]>], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
}

// -----

// Parts are checkpoint tensor names; a part_shape needs parts.
// expected-error @+1 {{#spark.weight 'w' parts must be checkpoint tensor names, got 3 : i64}}
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [], weights = [#spark.weight<name = "w", dtype = bf16, shape = [2, 4], parts = ["a", 3], part_shape = [4]>], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
}

// -----

// expected-error @+1 {{#spark.weight 'w' has a part_shape but no parts}}
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [], weights = [#spark.weight<name = "w", dtype = bf16, shape = [2, 4], part_shape = [4]>], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
}

// -----

// An input or output names a buffer of the program.
// expected-error @+1 {{'spark.program' op output logits names buffer 2, but the program has 2}}
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<ids = 0>, outputs = #spark.outputs<logits = 2>} {
}

// -----

// The block is 3-dimensional.
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.launch' op expects a 3-dimensional block}}
  spark.launch "gelu" @kernels::@spark_gelu__i4 grid(per_token = 0, fixed = 1, divisor = 1) block [256, 1] args [buffer 0, buffer 1, num_tokens, i32 4]
}

// -----

// Block dimensions are positive.
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.launch' op expects positive block dimensions}}
  spark.launch "gelu" @kernels::@spark_gelu__i4 grid(per_token = 0, fixed = 1, divisor = 1) block [0, 1, 1] args [buffer 0, buffer 1, num_tokens, i32 4]
}

// -----

// A grid rule's divisor is at least 1 (kernel_abi.h GridRule).
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.launch' op expects grid divisor in [1, 2147483648], got 0}}
  spark.launch "gelu" @kernels::@spark_gelu__i4 grid(per_token = 1, fixed = 0, divisor = 0) block [256, 1, 1] args [buffer 0, buffer 1, num_tokens, i32 4]
}

// -----

// Its terms are not negative.
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.launch' op expects grid per_token in [0, 2147483648], got -1}}
  spark.launch "gelu" @kernels::@spark_gelu__i4 grid(per_token = -1, fixed = 0, divisor = 1) block [256, 1, 1] args [buffer 0, buffer 1, num_tokens, i32 4]
}

// -----

// A launch is of an op of the registry,
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.launch' op of op 'flash_attention', which the op registry (kernel_ops.def) does not know}}
  spark.launch "flash_attention" @kernels::@spark_flash_attention__ grid(per_token = 1, fixed = 0, divisor = 1) block [256, 1, 1] args []
}

// -----

// of a kernel op,
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.launch' op of op 'copy', which runs without a kernel: it is a spark.transfer}}
  spark.launch "copy" @kernels::@spark_copy__i4 grid(per_token = 1, fixed = 0, divisor = 1) block [256, 1, 1] args [buffer 0, buffer 1, num_tokens, i32 4]
}

// -----

// with its arguments,
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.launch' op of gelu expects 4 arguments (kernel_ops.def), got 3}}
  spark.launch "gelu" @kernels::@spark_gelu__ grid(per_token = 1, fixed = 0, divisor = 1) block [256, 1, 1] args [buffer 0, buffer 1, num_tokens]
}

// -----

// each of the kind its slot takes,
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.launch' op of gelu: argument 3 (cols) is an i32 (i32, num_tokens, num_soft_tokens or kv_capacity), got f32}}
  spark.launch "gelu" @kernels::@spark_gelu__f40800000 grid(per_token = 1, fixed = 0, divisor = 1) block [256, 1, 1] args [buffer 0, buffer 1, num_tokens, f32 4.0]
}

// -----

// naming buffers the program has,
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.launch' op argument 1 names buffer 2, but there are 2 in the program}}
  spark.launch "gelu" @kernels::@spark_gelu__i4 grid(per_token = 1, fixed = 0, divisor = 1) block [256, 1, 1] args [buffer 0, buffer 2, num_tokens, i32 4]
}

// -----

// weights it has,
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.launch' op argument 1 names weight 0, but there are 0 in the program}}
  spark.launch "add" @kernels::@spark_add__i4 grid(per_token = 1, fixed = 0, divisor = 1) block [256, 1, 1] args [buffer 0, weight 0, buffer 1, num_tokens, i32 4]
}

// -----

// and KV caches of the module.
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.launch' op argument 4 names KV cache 0, but there are 0 (spark.kv_cache ops in the module)}}
  spark.launch "kv_write" @kernels::@spark_kv_write__i1_i4_i0 grid(per_token = 1, fixed = 0, divisor = 1) block [256, 1, 1] args [buffer 0, buffer 1, buffer 0, buffer 0, kv_block_table 0, k_cache 0, v_cache 0, num_tokens, i32 1, i32 4, kv_capacity 0, i32 0]
}

// -----

// An argument is one of the kinds the plan has,
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{unknown launch argument kind 'tensor' (buffer, weight, k_cache, v_cache, kv_capacity, kv_block_table, null, num_tokens, num_soft_tokens, i32, f32)}}
  spark.launch "gelu" @kernels::@spark_gelu__i4 grid(per_token = 1, fixed = 0, divisor = 1) block [256, 1, 1] args [buffer 0, tensor 1, num_tokens, i32 4]
}

// -----

// ids are not negative,
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{launch argument buffer needs an id >= 0, got -1}}
  spark.launch "gelu" @kernels::@spark_gelu__i4 grid(per_token = 1, fixed = 0, divisor = 1) block [256, 1, 1] args [buffer 0, buffer -1, num_tokens, i32 4]
}

// -----

// and an i32 literal fits in 32 bits.
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{launch argument i32 4294967296 is outside the i32 range}}
  spark.launch "gelu" @kernels::@spark_gelu__i4 grid(per_token = 1, fixed = 0, divisor = 1) block [256, 1, 1] args [buffer 0, buffer 1, num_tokens, i32 4294967296]
}

// -----

// A negative index is rejected, and printed signed.
func.func @select_group_negative_index(%x: tensor<?x4x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.select_group' op expects index in [0, 4), got -1}}
  %0 = spark.select_group %x {index = -1 : i64} : tensor<?x4x8xf32> to tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The window is not negative.
spark.kv_cache @kv full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @attention_negative_window(%q: tensor<?x2x8xf32>, %k: tensor<?x1x8xf32>, %v: tensor<?x1x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.attention' op expects window >= 0 (0 = full attention), got -1}}
  %0 = spark.attention %q, %k, %v, %pos {cache = @kv, window = -1 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// Negative kv_heads are rejected.
// expected-error @+1 {{'spark.kv_cache' op expects positive kv_heads and head_dim, got -1 and 64}}
spark.kv_cache @kv full {window = 0 : i64, kv_heads = -1 : i64, head_dim = 64 : i64}

// -----

// A negative sliding window is rejected.
// expected-error @+1 {{'spark.kv_cache' op expects a positive window for a sliding cache, got -1}}
spark.kv_cache @kv sliding {window = -1 : i64, kv_heads = 1 : i64, head_dim = 64 : i64}

// -----

// Negative rotated_pairs are rejected, and printed signed.
func.func @rope_negative_pairs(%x: tensor<?x2x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.rope' op expects rotated_pairs in [0, 4] (head_dim / 2), got -1}}
  %0 = spark.rope %x, %pos {theta = 10000.0 : f32, rotated_pairs = -1 : i64, factor = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// A negative top_k is rejected, and printed signed.
func.func @moe_router_negative_top_k(%x: tensor<?x8xf32>, %s: tensor<8xbf16>, %p: tensor<4x8xbf16>, %e: tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  // expected-error @+1 {{'spark.moe_router' op expects top_k in [1, 4], got -1}}
  %w, %i = spark.moe_router %x, %s, %p, %e {top_k = -1 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// -----

// The activation precision is f32 or bf16 (kernel_abi.h ActivationPrecision): a type attribute.
// expected-error @+1 {{'spark.program' op attribute 'activation_precision' failed to satisfy constraint: type attribute of 32-bit float or bfloat16 type}}
spark.program @forward attributes {activation_precision = f16, max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
}

// -----

// A negative max_tokens is rejected.
// expected-error @+1 {{'spark.program' op expects max_tokens > 0, got -4}}
spark.program @forward attributes {max_tokens = -4 : i64, arena_bytes = 0 : i64, buffers = [], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
}

// -----

// The arena size is not negative.
// expected-error @+1 {{'spark.program' op expects arena_bytes >= 0, got -256}}
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = -256 : i64, buffers = [], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
}

// -----

// A reshape needs a token dimension (crashed the verifier before).
func.func @reshape_rank0(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'spark.reshape' op expects input to have a leading token dimension, got []}}
  %0 = spark.reshape %x : tensor<f32> to tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Elementwise ops need static row shapes.
func.func @gelu_dynamic_row(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'spark.gelu' op expects result to have static dimensions after the token dimension, got [?, ?]}}
  %0 = spark.gelu %x : tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

//===----------------------------------------------------------------------===//
// spark.residual_rms_norm and spark.rms_norm_rope (created by spark-fuse-norms)
//===----------------------------------------------------------------------===//

// The residual has the input's type.
func.func @residual_rms_norm_residual_type(%x: tensor<?x8xf32>, %r: tensor<?x4xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.residual_rms_norm' op expects the residual type to equal the input type}}
  %0 = spark.residual_rms_norm %x, %r {epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>, tensor<?x4xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// Rows only: [T, H].
func.func @residual_rms_norm_rank(%x: tensor<?x2x8xf32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.residual_rms_norm' op expects input of rank 2, got [?, 2, 8]}}
  %0 = spark.residual_rms_norm %x, %x {epsilon = 1.0e-6 : f32} : (tensor<?x2x8xf32>, tensor<?x2x8xf32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// The weight has one element per column.
func.func @residual_rms_norm_weight(%x: tensor<?x8xf32>, %w: tensor<4xbf16>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'spark.residual_rms_norm' op expects weight of shape [8], got [4]}}
  %0 = spark.residual_rms_norm %x, %x, %w {epsilon = 1.0e-6 : f32} : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<4xbf16>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The norm weight spans head_dim.
func.func @rms_norm_rope_weight(%x: tensor<?x2x8xf32>, %w: tensor<16xbf16>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.rms_norm_rope' op expects weight of shape [8], got [16]}}
  %0 = spark.rms_norm_rope %x, %pos, %w {epsilon = 1.0e-6 : f32, theta = 10000.0 : f32, rotated_pairs = 4 : i64, factor = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?xi32>, tensor<16xbf16>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// At most head_dim / 2 pairs rotate.
func.func @rms_norm_rope_pairs(%x: tensor<?x2x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.rms_norm_rope' op expects rotated_pairs in [0, 4] (head_dim / 2), got 5}}
  %0 = spark.rms_norm_rope %x, %pos {epsilon = 1.0e-6 : f32, theta = 10000.0 : f32, rotated_pairs = 5 : i64, factor = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

// A negative epsilon is rejected.
func.func @rms_norm_rope_epsilon(%x: tensor<?x2x8xf32>, %pos: tensor<?xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.rms_norm_rope' op expects a finite, non-negative epsilon, got -1.000000e+00}}
  %0 = spark.rms_norm_rope %x, %pos {epsilon = -1.0 : f32, theta = 10000.0 : f32, rotated_pairs = 4 : i64, factor = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Quantized spark.moe_experts and stacked weights
//===----------------------------------------------------------------------===//

// A bf16 gate_up takes no scales.
func.func @moe_experts_bf16_scales(%x: tensor<?x32xf32>, %gu: tensor<2x32x32xbf16>, %d: tensor<2x32x16xbf16>, %w: tensor<?x1xf32>, %i: tensor<?x1xi32>, %s: tensor<2x2xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects no gate_up scales with bf16 gate_up, got 1}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i gate_up_scales(%s) : (tensor<?x32xf32>, tensor<2x32x32xbf16>, tensor<2x32x16xbf16>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<2x2xf32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

// NVFP4 experts have block scales [E, rows, cols / 16].
func.func @moe_experts_nvfp4_block_shape(%x: tensor<?x32xf32>, %gu: tensor<2x32x32xf4E2M1FN>, %d: tensor<2x32x16xbf16>, %w: tensor<?x1xf32>, %i: tensor<?x1xi32>, %b: tensor<2x32x4xf8E4M3FN>, %t: tensor<2x2xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects NVFP4 gate_up block scales tensor<2x32x2xf8E4M3FN>, got 'tensor<2x32x4xf8E4M3FN>'}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i gate_up_scales(%b, %t) : (tensor<?x32xf32>, tensor<2x32x32xf4E2M1FN>, tensor<2x32x16xbf16>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<2x32x4xf8E4M3FN>, tensor<2x2xf32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

// NVFP4 gate_up has one tensor scale per matrix: [E, 2] (gate, up).
func.func @moe_experts_nvfp4_tensor_scale(%x: tensor<?x32xf32>, %gu: tensor<2x32x32xf4E2M1FN>, %d: tensor<2x32x16xbf16>, %w: tensor<?x1xf32>, %i: tensor<?x1xi32>, %b: tensor<2x32x2xf8E4M3FN>, %t: tensor<2xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects NVFP4 gate_up tensor scales (one per matrix) of shape [2, 2] in f32, got 'tensor<2xf32>'}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i gate_up_scales(%b, %t) : (tensor<?x32xf32>, tensor<2x32x32xf4E2M1FN>, tensor<2x32x16xbf16>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<2x32x2xf8E4M3FN>, tensor<2xf32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

// FP8 down scales: per matrix [E] or per row [E, hidden].
func.func @moe_experts_fp8_scale(%x: tensor<?x32xf32>, %gu: tensor<2x32x32xbf16>, %d: tensor<2x32x16xf8E4M3FN>, %w: tensor<?x1xf32>, %i: tensor<?x1xi32>, %s: tensor<2x16xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects FP8 down scales of f32 per matrix [2] or per row [2, 32], got 'tensor<2x16xf32>'}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i down_scales(%s) : (tensor<?x32xf32>, tensor<2x32x32xbf16>, tensor<2x32x16xf8E4M3FN>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<2x16xf32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

// NVFP4 needs an input dimension of whole 16-element blocks.
func.func @moe_experts_nvfp4_width(%x: tensor<?x32xf32>, %gu: tensor<2x32x32xbf16>, %d: tensor<2x32x8xf4E2M1FN>, %w: tensor<?x1xf32>, %i: tensor<?x1xi32>, %b: tensor<2x32x1xf8E4M3FN>, %t: tensor<2xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{'spark.moe_experts' op expects down of shape [2, 32, 16], got [2, 32, 8]}}
  %0 = spark.moe_experts %x, %gu, %d, %w, %i down_scales(%b, %t) : (tensor<?x32xf32>, tensor<2x32x32xbf16>, tensor<2x32x8xf4E2M1FN>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<2x32x1xf8E4M3FN>, tensor<2xf32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

// Only f32 weights (scales) are taken as their reciprocal.
func.func @weight_reciprocal_bf16() -> tensor<4xbf16> {
  // expected-error @+1 {{'spark.weight' op expects an f32 weight with reciprocal (the reciprocal of a scale), got 'w' 'tensor<4xbf16>'}}
  %0 = spark.weight "w" {reciprocal} : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// Parts must make the whole weight.
func.func @weight_parts_count() -> tensor<2x4x8xbf16> {
  // expected-error @+1 {{'spark.weight' op expects 3 parts of shape [4, 8] (96 elements) to make weight 'w' 'tensor<2x4x8xbf16>' (64 elements)}}
  %0 = spark.weight "w" {parts = ["a", "b", "c"], part_shape = array<i64: 4, 8>} : tensor<2x4x8xbf16>
  return %0 : tensor<2x4x8xbf16>
}

// -----

func.func @weight_parts_twice() -> tensor<2x4x8xbf16> {
  // expected-error @+1 {{'spark.weight' op expects distinct parts for weight 'w', got 'a' twice}}
  %0 = spark.weight "w" {parts = ["a", "a"], part_shape = array<i64: 4, 8>} : tensor<2x4x8xbf16>
  return %0 : tensor<2x4x8xbf16>
}

// -----

func.func @weight_parts_without_shape() -> tensor<2x4x8xbf16> {
  // expected-error @+1 {{'spark.weight' op expects both parts and part_shape, or neither, for weight 'w'}}
  %0 = spark.weight "w" {parts = ["a", "b"]} : tensor<2x4x8xbf16>
  return %0 : tensor<2x4x8xbf16>
}

// -----

// Packed float4 parts hold whole bytes: an even last dimension.
func.func @weight_parts_f4_odd() -> tensor<2x4x6xf4E2M1FN> {
  // expected-error @+1 {{'spark.weight' op expects f4E2M1FN parts with an even last dimension (two codes per byte), got part_shape [4, 3] for weight 'w'}}
  %0 = spark.weight "w" {parts = ["a", "b", "c", "d"], part_shape = array<i64: 4, 3>} : tensor<2x4x6xf4E2M1FN>
  return %0 : tensor<2x4x6xf4E2M1FN>
}

// -----

// spark.model is a #spark.model, not a dictionary.
// expected-error @+1 {{expects spark.model to be a #spark.model<...>, got {vocab_size = 32 : i64}}}
module attributes {spark.model = {vocab_size = 32 : i64}} {
}

// -----

// #spark.model's token ids lie in the vocabulary.
// expected-error @+1 {{#spark.model bos_token_id holds 32, outside the vocabulary [0, 32)}}
module attributes {spark.model = #spark.model<variant = "v", architecture = "Gemma4ForCausalLM", vocab_size = 32, hidden_size = 16, num_layers = 1, max_position_embeddings = 64, eos_token_ids = [1], bos_token_id = 32, pad_token_id = 0, soft_token_ids = [], weight_prefix = "model.">} {
}

// -----

// Its sizes are positive.
// expected-error @+1 {{#spark.model hidden_size must be positive, got 0}}
module attributes {spark.model = #spark.model<variant = "v", architecture = "Gemma4ForCausalLM", vocab_size = 32, hidden_size = 0, num_layers = 1, max_position_embeddings = 64, eos_token_ids = [1], bos_token_id = 2, pad_token_id = 0, soft_token_ids = [], weight_prefix = "model.">} {
}

// -----

// At least one end-of-sequence id.
// expected-error @+1 {{#spark.model needs at least one eos_token_ids entry}}
module attributes {spark.model = #spark.model<variant = "v", architecture = "Gemma4ForCausalLM", vocab_size = 32, hidden_size = 16, num_layers = 1, max_position_embeddings = 64, eos_token_ids = [], bos_token_id = 2, pad_token_id = 0, soft_token_ids = [], weight_prefix = "model.">} {
}

// -----

// A required field is named when it is missing.
// expected-error @+1 {{struct is missing required parameter: weight_prefix}}
module attributes {spark.model = #spark.model<variant = "v", architecture = "Gemma4ForCausalLM", vocab_size = 32, hidden_size = 16, num_layers = 1, max_position_embeddings = 64, eos_token_ids = [1], bos_token_id = 2, pad_token_id = 0, soft_token_ids = []>} {
}

// -----

// A transfer names a transfer op of the registry (kernel_ops.def SPARK_TRANSFER_OPS).
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.transfer' op of op 'broadcast', which the op registry (kernel_ops.def) does not know}}
  spark.transfer "broadcast" args [buffer 0]
}

// -----

// A kernel op is a launch, not a transfer.
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.transfer' op of op 'gelu', a kernel op: a kernel runs as spark.launch}}
  spark.transfer "gelu" args [buffer 0, buffer 1, num_tokens, i32 4]
}

// -----

// The op's arguments, as many as the registry lists.
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{'spark.transfer' op of copy expects 4 arguments (kernel_ops.def), got 2}}
  spark.transfer "copy" args [buffer 0, buffer 1]
}

// -----

// Each a one-entry dictionary.
spark.program @forward attributes {max_tokens = 4 : i64, arena_bytes = 0 : i64, buffers = [#spark.buffer<name = "a", dtype = f32, row_shape = [4]>, #spark.buffer<name = "b", dtype = f32, row_shape = [4]>], weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<>} {
  // expected-error @+1 {{expected a launch argument kind (buffer, weight, k_cache, v_cache, kv_capacity, kv_block_table, null, num_tokens, num_soft_tokens, i32, f32)}}
  spark.transfer "copy" args [buffer 0, buffer 1, num_tokens, 4]
}

// -----

//===----------------------------------------------------------------------===//
// The vision tower's ops
//===----------------------------------------------------------------------===//

func.func @shift_scale_not_finite(%x: tensor<?x768xf32>) -> tensor<?x768xf32> {
  // expected-error @+1 {{'spark.shift_scale' op expects a finite shift and scale, got 5.000000e-01 and INF}}
  %0 = spark.shift_scale %x {shift = 0.5 : f32, scale = 0x7F800000 : f32} : tensor<?x768xf32>
  return %0 : tensor<?x768xf32>
}

// -----

func.func @position_table_width(%x: tensor<?x48xf32>, %pos: tensor<?x2xi32>) -> tensor<?x48xf32> {
  %t = spark.weight "t" : tensor<2x64x32xbf16>
  // expected-error @+1 {{'spark.patch_position_embedding' op expects a position table [2, table_size, 48], got [2, 64, 32]}}
  %0 = spark.patch_position_embedding %x, %pos, %t : (tensor<?x48xf32>, tensor<?x2xi32>, tensor<2x64x32xbf16>) -> tensor<?x48xf32>
  return %0 : tensor<?x48xf32>
}

// -----

func.func @patch_positions_not_pairs(%x: tensor<?x48xf32>, %pos: tensor<?x3xi32>) -> tensor<?x48xf32> {
  %t = spark.weight "t" : tensor<2x64x48xbf16>
  // expected-error @+1 {{'spark.patch_position_embedding' op expects positions of shape [T, 2] (x, y per patch), got [?, 3]}}
  %0 = spark.patch_position_embedding %x, %pos, %t : (tensor<?x48xf32>, tensor<?x3xi32>, tensor<2x64x48xbf16>) -> tensor<?x48xf32>
  return %0 : tensor<?x48xf32>
}

// -----

func.func @clamp_bound_not_scalar(%x: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %lo = spark.weight "lo" : tensor<2xbf16>
  %hi = spark.weight "hi" : tensor<bf16>
  // expected-error @+1 {{'spark.clamp' op expects min of type tensor<bf16> or tensor<1xbf16>, got 'tensor<2xbf16>'}}
  %0 = spark.clamp %x, %lo, %hi : (tensor<?x32xf32>, tensor<2xbf16>, tensor<bf16>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @rope_2d_head_dim(%x: tensor<?x2x6xf32>, %pos: tensor<?x2xi32>) -> tensor<?x2x6xf32> {
  // expected-error @+1 {{'spark.rope_2d' op expects a head_dim that is a multiple of 4 (two halves of rotate-half pairs), got 6}}
  %0 = spark.rope_2d %x, %pos {theta = 100.0 : f32} : (tensor<?x2x6xf32>, tensor<?x2xi32>) -> tensor<?x2x6xf32>
  return %0 : tensor<?x2x6xf32>
}

// -----

func.func @rope_2d_theta(%x: tensor<?x2x8xf32>, %pos: tensor<?x2xi32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.rope_2d' op expects a finite, positive theta, got 0.000000e+00}}
  %0 = spark.rope_2d %x, %pos {theta = 0.0 : f32} : (tensor<?x2x8xf32>, tensor<?x2xi32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

func.func @bidirectional_heads(%q: tensor<?x3x8xf32>, %k: tensor<?x2x8xf32>) -> tensor<?x3x8xf32> {
  // expected-error @+1 {{'spark.bidirectional_attention' op expects q_heads (3) to be a multiple of kv_heads (2)}}
  %0 = spark.bidirectional_attention %q, %k, %k {scale = 1.0 : f32} : (tensor<?x3x8xf32>, tensor<?x2x8xf32>, tensor<?x2x8xf32>) -> tensor<?x3x8xf32>
  return %0 : tensor<?x3x8xf32>
}

// -----

func.func @bidirectional_value(%q: tensor<?x2x8xf32>, %k: tensor<?x2x8xf32>, %v: tensor<?x2x4xf32>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{'spark.bidirectional_attention' op expects key and value of the same type, got [?, 2, 8] and [?, 2, 4]}}
  %0 = spark.bidirectional_attention %q, %k, %v {scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x2x8xf32>, tensor<?x2x4xf32>) -> tensor<?x2x8xf32>
  return %0 : tensor<?x2x8xf32>
}

// -----

func.func @pool_kernel_size(%x: tensor<?x16xf32>, %pos: tensor<?x2xi32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'spark.pool_by_position' op expects kernel_size in [1, 64], got 0}}
  %0 = spark.pool_by_position %x, %pos {kernel_size = 0 : i64, scale = 4.0 : f32} : (tensor<?x16xf32>, tensor<?x2xi32>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

func.func @standardize_bias_width(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %b = spark.weight "b" : tensor<8xbf16>
  %s = spark.weight "s" : tensor<16xbf16>
  // expected-error @+1 {{'spark.standardize' op expects bias of shape [16], got [8]}}
  %0 = spark.standardize %x, %b, %s : (tensor<?x16xf32>, tensor<8xbf16>, tensor<16xbf16>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

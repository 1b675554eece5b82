// RUN: spark-opt %s --spark-lower-to-kernels=max-tokens=4 --spark-plan-arena -split-input-file -verify-diagnostics

// Errors of spark-lower-to-kernels, one case per message.

// The module has no @forward to lower.
// expected-error @+1 {{no entry function @forward to lower}}
module {
  func.func @main(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?xi32> {
    return %ids : tensor<?xi32>
  }
}

// -----

// The module was already lowered: it holds a gpu.module.
// expected-error @+1 {{module already contains a gpu.module: lower an imported model}}
module attributes {gpu.container_module} {
  gpu.module @kernels {
  }
  func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?xi32> {
    return %ids : tensor<?xi32>
  }
}

// -----

// The entry is a declaration without a body.
// expected-error @+1 {{'func.func' op expects a body, got a declaration}}
func.func private @forward(tensor<?xi32> {spark.input = "ids"}, tensor<?xi32> {spark.input = "positions"}) -> tensor<?x16xf32>

// -----

// An entry argument without a spark.input attribute.
// expected-error @+1 {{'func.func' op expects every argument to carry spark.input = "ids", "positions", "soft_embeddings", "soft_indices" or "last_visible"; argument 1 does not}}
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32>) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}

// -----

// An entry argument whose spark.input names no known input.
// expected-error @+1 {{'func.func' op expects every argument to carry spark.input = "ids", "positions", "soft_embeddings", "soft_indices" or "last_visible"; argument 0 does not}}
func.func @forward(%ids: tensor<?xi32> {spark.input = "tokens"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}

// -----

// Entry arguments are ranked tensors.
// expected-error @+1 {{'func.func' op expects ranked tensor arguments}}
func.func @forward(%ids: tensor<*xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?xi32> {
  return %pos : tensor<?xi32>
}

// -----

// The entry needs both ids and positions.
// expected-error @+1 {{'func.func' op expects "ids" and "positions" arguments}}
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}

// -----

// An op of another dialect has no kernel.
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}, %soft: tensor<?x16xf32> {spark.input = "soft_embeddings"}) -> tensor<?x16xf32> {
  // expected-error @+1 {{'arith.addf' op cannot be lowered to a kernel: no kernel implements it}}
  %0 = arith.addf %soft, %soft : tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

// A call has no kernel: the entry must be a single flat function.
func.func private @layer(tensor<?x16xf32>) -> tensor<?x16xf32>

func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}, %soft: tensor<?x16xf32> {spark.input = "soft_embeddings"}) -> tensor<?x16xf32> {
  // expected-error @+1 {{'func.call' op cannot be lowered to a kernel: no kernel implements it}}
  %0 = func.call @layer(%soft) : (tensor<?x16xf32>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

// The entry returns exactly one value, the logits.
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
  %e = spark.embedding %ids, %table {scale = 1.0 : f32} : (tensor<?xi32>, tensor<32x16xbf16>) -> tensor<?x16xf32>
  // expected-error @+1 {{'func.return' op expects the entry to return exactly the logits}}
  return %e, %e : tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// One checkpoint tensor cannot be bound with two types.
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x16xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
  %e = spark.embedding %ids, %table {scale = 1.0 : f32} : (tensor<?xi32>, tensor<32x16xbf16>) -> tensor<?x16xf32>
  // expected-error @+1 {{'spark.weight' op weight 'model.embed_tokens.weight' is used with two types: 'tensor<32x16xbf16>' and 'tensor<32x16xf8E4M3FN>'}}
  %head = spark.weight "model.embed_tokens.weight" : tensor<32x16xf8E4M3FN>
  %scale = spark.weight "model.embed_tokens.weight_scale" : tensor<f32>
  %l = spark.linear %e, %head scales(%scale) : (tensor<?x16xf32>, tensor<32x16xf8E4M3FN>, tensor<f32>) -> tensor<?x32xf32>
  %r = spark.reshape %l : tensor<?x32xf32> to tensor<?x2x16xf32>
  %s = spark.select_group %r {index = 0 : i64} : tensor<?x2x16xf32> to tensor<?x16xf32>
  return %s : tensor<?x16xf32>
}

// -----

// A weight operand must come from a spark.weight.
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}, %soft: tensor<4x16xf32> {spark.input = "soft_embeddings"}) -> tensor<?x4xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
  %e = spark.embedding %ids, %table {scale = 1.0 : f32} : (tensor<?xi32>, tensor<32x16xbf16>) -> tensor<?x16xf32>
  // expected-error @+1 {{'spark.embedding' op expects operand #1 to be a spark.weight result}}
  %e2 = spark.embedding %ids, %soft {scale = 1.0 : f32} : (tensor<?xi32>, tensor<4x16xf32>) -> tensor<?x16xf32>
  %l = spark.add %e, %e2 : tensor<?x16xf32>
  %w = spark.weight "lm_head.weight" : tensor<4x16xbf16>
  %o = spark.linear %l, %w : (tensor<?x16xf32>, tensor<4x16xbf16>) -> tensor<?x4xf32>
  return %o : tensor<?x4xf32>
}


// -----

// A spark.weight read as an activation.
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}, %x: tensor<4x16xf32> {spark.input = "soft_embeddings"}) -> tensor<4x16xf32> {
  %w = spark.weight "w" : tensor<4x16xf32>
  // expected-error @+1 {{'spark.add' op expects operand #1 to be an activation, got a value without a buffer (a spark.weight?)}}
  %y = spark.add %x, %w : tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// The entry returns a weight instead of computed logits.
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<32x16xbf16> {
  %t = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
  // expected-error @+1 {{'func.return' op expects the logits to be an activation computed by the entry}}
  return %t : tensor<32x16xbf16>
}

// -----

// Two arguments with the same spark.input.
// expected-error @+1 {{'func.func' op expects one argument per spark.input, got "ids" twice}}
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %ids2: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}

// -----

// ids must be tensor<?xi32> (a rank-0 argument crashed the pass before).
// expected-error @+1 {{'func.func' op expects argument 0 ("ids") of type tensor<?xi32>, got 'tensor<i32>'}}
func.func @forward(%ids: tensor<i32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?xi32> {
  return %pos : tensor<?xi32>
}

// -----

// A weight the kernels cannot read: every weight argument of the registry is bf16 in plan version
// 8, so an f32 (or quantized) weight is refused at the op that takes it.
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x8xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x8xf32>
  // expected-error @+1 {{'spark.embedding' op expects weight 'model.embed_tokens.weight' in bf16 (the embedding kernel's table), got 'tensor<32x8xf32>'; only spark.linear and spark.moe_experts take quantized weights}}
  %e = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x8xf32>) -> tensor<?x8xf32>
  return %e : tensor<?x8xf32>
}

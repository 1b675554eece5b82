//===- SparkOps.td - spark dialect ops -------------------------*- tablegen -*-===//
//
// Tensor-level ops: the Gemma 4 text decoder (gemma4-architecture.md). Activations are float32
// tensors with a dynamic leading token dimension; weights are tensors named by their checkpoint
// names: bf16, or quantized (f4E2M1FN / f8E4M3FN with their f32 / f8E4M3FN scales) where an op
// says so. Kernel-level ops: spark.program / spark.launch (docs/plan-format.md).
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_OPS_TD
#define SPARK_OPS_TD

include "dialects/Spark/IR/SparkDialect.td"
include "dialects/Spark/IR/SparkAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Spark_Activation : RankedTensorOf<[F32]>;
def Spark_IndexTensor : RankedTensorOf<[I32]>;
// bf16 weights; quantized ones: NVFP4 codes (f4E2M1FN, [out, in] logical, stored two to a byte)
// with f8E4M3FN block scales and an f32 tensor scale, FP8 elements (f8E4M3FN) with f32 scales.
def Spark_WeightTensor : RankedTensorOf<[BF16, F32, F8E4M3FN, F4E2M1FN]>;

// I64Attr's accessor returns uint64_t, which turns `x < 0` checks into dead code and prints
// negative values as 18446744073709551615. Same storage and constraint, signed accessor.
def Spark_I64Attr : TypedSignlessIntegerAttrBase<I64, "int64_t",
                                                 "64-bit signless integer attribute"> {
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

//===----------------------------------------------------------------------===//
// Model structure
//===----------------------------------------------------------------------===//

def Spark_WeightOp : Spark_Op<"weight", [Pure]> {
  let summary = "a checkpoint tensor, referenced by its name";
  let description = [{
    Binds a tensor of the checkpoint by its full safetensors name. The type is the shape and
    dtype the graph needs; the compiler records it in the plan and the runtime checks it against
    the checkpoint's header before anything runs.

    A weight the checkpoint stores in pieces names them in `parts`: the weight is their
    concatenation in that order (row-major bytes), each of shape `part_shape` and the weight's
    element type; `name` then only names the whole in plans and messages. The importer uses it
    for MoE experts stored one matrix per expert (ModelOpt's quantized checkpoints:
    `experts.E.gate_proj`, `up_proj`, `down_proj`), which the kernels read as one stacked
    tensor; the runtime assembles it once, when it loads the weights.

    With `reciprocal` the weight is the element-wise reciprocal (1 / x in f32) of what the
    checkpoint stores: compressed-tensors keeps NVFP4 tensor scales as their inverse (the
    `weight_global_scale` that dequantisation divides by), the kernels multiply by ModelOpt's
    `weight_scale_2`. f32 weights only; the runtime computes it once, when it loads the weights.

    ```mlir
    %w = spark.weight "model.language_model.layers.3.self_attn.q_proj.weight" : tensor<4096x2816xbf16>
    %d = spark.weight "model.language_model.layers.0.experts.{0..1}.down_proj.weight" {parts = ["model.language_model.layers.0.experts.0.down_proj.weight", "model.language_model.layers.0.experts.1.down_proj.weight"], part_shape = array<i64: 64, 32>} : tensor<2x64x32xf4E2M1FN>
    %g = spark.weight "model.language_model.layers.3.mlp.up_proj.weight_global_scale" {reciprocal} : tensor<1xf32>
    ```

    With `shard` (`#spark.shard`, set by `spark-shard-tensor-parallel`) the type is one rank's
    slice of the tensor, which has `parts` times as much along the shard's axis.

    ```mlir
    %q = spark.weight "model.language_model.layers.0.self_attn.q_proj.weight" {shard = #spark.shard<axis = 0, parts = 2, chunks = 1>} : tensor<2048x2816xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<StrArrayAttr>:$parts,
                       OptionalAttr<DenseI64ArrayAttr>:$part_shape, UnitAttr:$reciprocal,
                       OptionalAttr<Spark_ShardAttr>:$shard);
  let results = (outs Spark_WeightTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Spark_KvCacheOp : Spark_Op<"kv_cache", [Symbol]> {
  let summary = "declares one layer's KV cache";
  let description = [{
    The K/V cache an attention layer writes and reads. `full` caches hold every position up to
    the runtime's `--max-length`; `sliding` caches keep the last `window - 1` positions (plus room
    for one step's new tokens). Layout at run time: K and V, each
    `[capacity, kv_heads, head_dim]` of `element_type` (f32 when absent, or bf16;
    `spark-compile --kv-cache-dtype` sets it on every cache), position p in slot p % capacity.

    ```mlir
    spark.kv_cache @kv.layers.0 sliding {window = 512 : i64, kv_heads = 1 : i64, head_dim = 256 : i64}
    spark.kv_cache @kv.layers.5 full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 512 : i64, element_type = bf16}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Spark_KvKindAttr:$kind, Spark_I64Attr:$window,
                       Spark_I64Attr:$kv_heads, Spark_I64Attr:$head_dim,
                       OptionalAttr<TypeAttr>:$element_type);
  let extraClassDeclaration = [{
    /// The element type of K and V: `element_type`, or f32 when it is absent.
    ::mlir::Type getCacheElementType();
  }];
  let assemblyFormat = "$sym_name `` $kind attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embeddings and token ids
//===----------------------------------------------------------------------===//

def Spark_EmbeddingOp : Spark_Op<"embedding", [Pure]> {
  let summary = "embedding lookup times a scale";
  let description = [{
    `result[t] = table[ids[t]] * scale`. Gemma 4 scales the token embedding by sqrt(hidden)
    (rounded to bf16 in a bf16 model) and the per-layer embedding table by sqrt(ple_dim).

    ```mlir
    %e = spark.embedding %ids, %table {scale = 39.25 : f32} : (tensor<?xi32>, tensor<262144x1536xbf16>) -> tensor<?x1536xf32>
    ```
  }];
  let arguments = (ins Spark_IndexTensor:$ids, Spark_WeightTensor:$table, F32Attr:$scale);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$ids `,` $table attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Spark_MaskTokensOp : Spark_Op<"mask_tokens", [Pure, SameOperandsAndResultType]> {
  let summary = "replaces soft-token placeholder ids by the pad id";
  let description = [{
    `result[t] = ids[t]` unless it is one of `token_ids` (at most 3), else `replacement`. Gemma 4
    embeds placeholder positions with the pad id before the soft tokens overwrite them, and the
    per-layer embeddings read the masked ids.

    ```mlir
    %m = spark.mask_tokens %ids {token_ids = array<i32: 258880, 258881, 258884>, replacement = 0 : i32} : tensor<?xi32>
    ```
  }];
  let arguments = (ins Spark_IndexTensor:$ids, DenseI32ArrayAttr:$token_ids, I32Attr:$replacement);
  let results = (outs Spark_IndexTensor:$result);
  let assemblyFormat = "$ids attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Spark_ScatterNdOp : Spark_Op<"scatter_nd", [Pure]> {
  let summary = "replaces rows, skipping out-of-bounds indices";
  let description = [{
    `result = dest` except `result[indices[n]] = updates[n]` for every n whose index lies in
    `[0, rows(dest))`; negative and too-large indices are skipped, never written. This merges
    image/audio soft-token embeddings into the text embedding sequence.

    ```mlir
    %m = spark.scatter_nd %e, %idx, %soft : (tensor<?x1536xf32>, tensor<?xi32>, tensor<?x1536xf32>) -> tensor<?x1536xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$dest, Spark_IndexTensor:$indices, Spark_Activation:$updates);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$dest `,` $indices `,` $updates attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalisation, linear algebra, elementwise
//===----------------------------------------------------------------------===//

def Spark_RmsNormOp : Spark_Op<"rms_norm", [Pure]> {
  let summary = "Gemma 4 RMSNorm over the last dimension (x * w, in f32)";
  let description = [{
    `y = x * (mean(x^2) + epsilon)^-0.5`, times `weight` when given (Gemma 4 multiplies by `w`,
    not `1 + w`). Without a weight it is the weight-less form used by `v_norm` and the router.
    Works on `[T, H]` and per head on `[T, heads, head_dim]`.

    ```mlir
    %y = spark.rms_norm %x, %w {epsilon = 1.0e-06 : f32} : (tensor<?x1536xf32>, tensor<1536xbf16>) -> tensor<?x1536xf32>
    %v = spark.rms_norm %x {epsilon = 1.0e-06 : f32} : (tensor<?x1x256xf32>) -> tensor<?x1x256xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Optional<Spark_WeightTensor>:$weight,
                       F32Attr:$epsilon);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input (`,` $weight^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Spark_ResidualRmsNormOp : Spark_Op<"residual_rms_norm", [Pure]> {
  let summary = "residual + rms_norm(x) [* w]: a norm and the residual add after it, fused";
  let description = [{
    Created by `spark-fuse-norms` from `spark.add(%residual, spark.rms_norm(%x, %w))` (either
    operand order): Gemma 4's post-attention and post-feedforward norms followed by the residual
    add, one kernel and no intermediate buffer. Rows of `[T, H]`.

    ```mlir
    %h = spark.residual_rms_norm %x, %residual, %w {epsilon = 1.0e-06 : f32} : (tensor<?x1536xf32>, tensor<?x1536xf32>, tensor<1536xbf16>) -> tensor<?x1536xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_Activation:$residual,
                       Optional<Spark_WeightTensor>:$weight, F32Attr:$epsilon);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = [{
    $input `,` $residual (`,` $weight^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Spark_RmsNormRopeOp : Spark_Op<"rms_norm_rope", [Pure]> {
  let summary = "rope(rms_norm(x) [* w]) per head: the q/k norm and RoPE, fused";
  let description = [{
    Created by `spark-fuse-norms` from `spark.rope(spark.rms_norm(%x, %w), %positions)`: each
    head row of `[T, heads, head_dim]` is normalised (as `spark.rms_norm`), then rotated (as
    `spark.rope`, same attributes), in one kernel.

    ```mlir
    %q = spark.rms_norm_rope %x, %pos, %w {epsilon = 1.0e-06 : f32, theta = 1.0e+04 : f32, rotated_pairs = 128 : i64, factor = 1.0 : f32} : (tensor<?x8x256xf32>, tensor<?xi32>, tensor<256xbf16>) -> tensor<?x8x256xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_IndexTensor:$positions,
                       Optional<Spark_WeightTensor>:$weight, F32Attr:$epsilon, F32Attr:$theta,
                       Spark_I64Attr:$rotated_pairs, F32Attr:$factor);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = [{
    $input `,` $positions (`,` $weight^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Spark_LinearOp : Spark_Op<"linear", [Pure]> {
  let summary = "x @ W^T with W [out, in] (no bias), W bf16 or quantized";
  let description = [{
    A bf16 weight takes no scales. A quantized weight (ModelOpt's layouts, read by the importer
    from the checkpoint's quantization config) carries its dequantisation scales:
      - NVFP4: `weight` is `tensor<O x I x f4E2M1FN>` (codes, stored two to a byte), `scales`
        are the block scales `tensor<O x I/16 x f8E4M3FN>` (one per 16 inputs; I % 16 == 0)
        and the tensor scale (`tensor<f32>` or `tensor<1xf32>`);
        W = e2m1(code) * e4m3(block scale) * tensor scale;
      - FP8: `weight` is `tensor<O x I x f8E4M3FN>`, `scales` one f32 scale per tensor
        (`tensor<f32>`, `tensor<1xf32>`) or per output row (`tensor<Oxf32>`, `tensor<Ox1xf32>`);
        W = e4m3(q) * scale.

    ```mlir
    %q = spark.linear %x, %wq : (tensor<?x1536xf32>, tensor<2048x1536xbf16>) -> tensor<?x2048xf32>
    %g = spark.linear %x, %wg scales(%bs, %ts) : (tensor<?x5376xf32>, tensor<21504x5376xf4E2M1FN>, tensor<21504x336xf8E4M3FN>, tensor<f32>) -> tensor<?x21504xf32>
    %u = spark.linear %x, %wu scales(%s) : (tensor<?x5376xf32>, tensor<21504x5376xf8E4M3FN>, tensor<f32>) -> tensor<?x21504xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_WeightTensor:$weight,
                       Variadic<Spark_WeightTensor>:$scales);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight (`scales` `(` $scales^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input, "::mlir::Value":$weight), [{
      build($_builder, $_state, result, input, weight, ::mlir::ValueRange());
    }]>
  ];
  let extraClassDeclaration = [{
    /// How the weight is stored: bf16, NVFP4 (f4E2M1FN codes + block and tensor scales) or FP8.
    enum class WeightFormat { kBF16, kNvfp4, kFp8 };
    WeightFormat getWeightFormat();
  }];
  let hasVerifier = 1;
}

class Spark_BinaryOp<string mnemonic, string what> : Spark_Op<mnemonic,
    [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise " # what;
  let description = [{
    ```mlir
    %y = spark.}] # mnemonic # [{ %a, %b : tensor<?x1536xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$lhs, Spark_Activation:$rhs);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
  let hasVerifier = 1;
}
def Spark_AddOp : Spark_BinaryOp<"add", "sum">;
def Spark_MulOp : Spark_BinaryOp<"mul", "product">;

def Spark_ScaleOp : Spark_Op<"scale", [Pure, SameOperandsAndResultType]> {
  let summary = "multiplies by a constant";
  let description = [{
    ```mlir
    %y = spark.scale %x {factor = 0.707106769 : f32} : tensor<?x256xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, F32Attr:$factor);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Spark_ScalarMulOp : Spark_Op<"scalar_mul", [Pure]> {
  let summary = "multiplies by a one-element weight (Gemma 4's layer_scalar)";
  let description = [{
    ```mlir
    %y = spark.scalar_mul %h, %s : (tensor<?x1536xf32>, tensor<1xbf16>) -> tensor<?x1536xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_WeightTensor:$scalar);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input `,` $scalar attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Spark_GeluOp : Spark_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "GELU, tanh approximation";
  let description = [{
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.

    ```mlir
    %y = spark.gelu %x : tensor<?x6144xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Spark_GeluMulOp : Spark_Op<"gelu_mul", [Pure, SameOperandsAndResultType]> {
  let summary = "gelu(gate) * up, the fused gate of the MLP";
  let description = [{
    Created by `spark-fuse-elementwise` from `spark.mul(spark.gelu(%gate), %up)`.

    ```mlir
    %y = spark.gelu_mul %gate, %up : tensor<?x6144xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$gate, Spark_Activation:$up);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Spark_SoftcapOp : Spark_Op<"softcap", [Pure, SameOperandsAndResultType]> {
  let summary = "cap * tanh(x / cap), the final-logit softcap";
  let description = [{
    ```mlir
    %y = spark.softcap %logits {cap = 30.0 : f32} : tensor<?x262144xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, F32Attr:$cap);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Spark_ReshapeOp : Spark_Op<"reshape", [Pure]> {
  let summary = "reinterprets the per-token row shape";
  let description = [{
    Changes the trailing dimensions; the leading token dimension is kept. Used to split a
    projection into heads (`[T, n*d]` <-> `[T, n, d]`). No data moves.

    ```mlir
    %h = spark.reshape %q : tensor<?x2048xf32> to tensor<?x8x256xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Spark_SelectGroupOp : Spark_Op<"select_group", [Pure]> {
  let summary = "selects group `index` of a [T, groups, cols] tensor";
  let description = [{
    Picks layer `index`'s per-layer input out of the per-layer-embedding tensor.

    ```mlir
    %p3 = spark.select_group %ple {index = 3 : i64} : tensor<?x35x256xf32> to tensor<?x256xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_I64Attr:$index);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Spark_RopeOp : Spark_Op<"rope", [Pure]> {
  let summary = "rotate-half rotary embedding, default or proportional/partial";
  let description = [{
    Rotates pairs `(i, i + head_dim/2)` of `[T, heads, head_dim]` by
    `positions[t] * theta^(-2i/head_dim) / factor` for `i < rotated_pairs`; the other pairs pass
    through. Default RoPE rotates every pair (`rotated_pairs = head_dim/2`); Gemma 4's full layers
    use proportional RoPE (theta 1e6, 64 of 256 pairs at head_dim 512).

    ```mlir
    %r = spark.rope %q, %pos {theta = 1.0e+06 : f32, rotated_pairs = 64 : i64, factor = 1.0 : f32} : (tensor<?x8x512xf32>, tensor<?xi32>) -> tensor<?x8x512xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_IndexTensor:$positions, F32Attr:$theta,
                       Spark_I64Attr:$rotated_pairs, F32Attr:$factor);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input `,` $positions attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Spark_AttentionOp : Spark_Op<"attention",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "grouped-query causal attention over a KV cache, full or sliding window";
  let description = [{
    `q` is `[T, q_heads, head_dim]`, `k`/`v` `[T, kv_heads, head_dim]` are this step's new keys
    and values, `positions` their absolute positions. Unless `kv_shared` is set, the op first
    writes k/v into `cache` at their positions; then each query at position p attends keys
    `j <= p` (and `j > p - window` when `window > 0`) of the cache, scores times `scale`
    (1.0 in Gemma 4), softmax in f32. Query head h uses KV head `h / (q_heads / kv_heads)`.

    A KV-shared layer (E2B/E4B) names the cache of its source layer, passes the source layer's
    k/v values and sets `kv_shared`: it reads the cache and writes nothing.

    `last_visible` (optional, `[T]` i32, the entry's `last_visible` input) widens the causal
    bound: the query of token t sees keys `j <= max(p, last_visible[t])`, the window bound
    unchanged. It is Gemma 4's vision-bidirectional mask (`use_bidirectional_attention:
    "vision"`, 26B/31B, sliding layers only): a soft token of an image also sees the image's later
    tokens, which are keys of the same step.

    ```mlir
    %o = spark.attention %q, %k, %v, %pos {cache = @kv.layers.0, window = 512 : i64, scale = 1.0 : f32} : (tensor<?x8x256xf32>, tensor<?x1x256xf32>, tensor<?x1x256xf32>, tensor<?xi32>) -> tensor<?x8x256xf32>
    %b = spark.attention %q, %k, %v, %pos last_visible %last {cache = @kv.layers.0, window = 512 : i64, scale = 1.0 : f32} : (tensor<?x8x256xf32>, tensor<?x1x256xf32>, tensor<?x1x256xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x256xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$query, Spark_Activation:$key, Spark_Activation:$value,
                       Spark_IndexTensor:$positions, Optional<Spark_IndexTensor>:$last_visible,
                       FlatSymbolRefAttr:$cache, Spark_I64Attr:$window, F32Attr:$scale,
                       UnitAttr:$kv_shared);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $positions (`last_visible` $last_visible^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The vision tower (the `encode_image` function: one image's patches are its tokens)
//===----------------------------------------------------------------------===//

def Spark_ShiftScaleOp : Spark_Op<"shift_scale", [Pure, SameOperandsAndResultType]> {
  let summary = "(x - shift) * scale, elementwise";
  let description = [{
    The patch embedder's `2 * (pixel_values - 0.5)` (shift 0.5, scale 2), in f32.

    ```mlir
    %p = spark.shift_scale %pixels {shift = 5.0e-01 : f32, scale = 2.0 : f32} : tensor<?x768xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, F32Attr:$shift, F32Attr:$scale);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Spark_PatchPositionEmbeddingOp : Spark_Op<"patch_position_embedding", [Pure]> {
  let summary = "adds the learned 2-D position embedding of each patch";
  let description = [{
    `result[t] = input[t] + (table[0, positions[t, 0]] + table[1, positions[t, 1]])`: `table` is
    `[2, table_size, H]` (row 0 indexed by the patch's x coordinate, row 1 by its y), `positions`
    the `[T, 2]` i32 patch coordinates (the `patch_positions` input). A coordinate outside
    `[0, table_size)` (a padding patch) adds nothing.

    ```mlir
    %h = spark.patch_position_embedding %x, %pos, %table : (tensor<?x1152xf32>, tensor<?x2xi32>, tensor<2x10240x1152xbf16>) -> tensor<?x1152xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_IndexTensor:$positions,
                       Spark_WeightTensor:$table);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input `,` $positions `,` $table attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Spark_ClampOp : Spark_Op<"clamp", [Pure]> {
  let summary = "clamps every element to [min, max] (bf16 scalar weights)";
  let description = [{
    `result = min(max(input, min[0]), max[0])`: the input and output bounds of the clipped
    linears of E2B/E4B's vision tower (`use_clipped_linears`; checkpoint scalars `input_min`,
    `input_max`, `output_min`, `output_max`). A NaN stays NaN.

    ```mlir
    %c = spark.clamp %x, %lo, %hi : (tensor<?x768xf32>, tensor<bf16>, tensor<bf16>) -> tensor<?x768xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_WeightTensor:$min, Spark_WeightTensor:$max);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input `,` $min `,` $max attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Spark_Rope2dOp : Spark_Op<"rope_2d", [Pure]> {
  let summary = "axial 2-D rotary embedding by patch coordinates";
  let description = [{
    On `[T, heads, head_dim]` (head_dim a multiple of 4) at `positions` `[T, 2]`: the first half
    of each head is rotated by the patch's x coordinate, the second half by its y, each half as a
    rotate-half RoPE over `n = head_dim / 2` channels (pairs `(c, c + n/2)`,
    `inv_freq[c] = theta^(-2c/n)`). Gemma 4's vision tower uses theta 100.

    ```mlir
    %q = spark.rope_2d %x, %pos {theta = 1.0e+02 : f32} : (tensor<?x16x72xf32>, tensor<?x2xi32>) -> tensor<?x16x72xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_IndexTensor:$positions, F32Attr:$theta);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input `,` $positions attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Spark_BidirectionalAttentionOp : Spark_Op<"bidirectional_attention", [Pure]> {
  let summary = "grouped-query attention of every token over every token (no cache)";
  let description = [{
    `q` `[T, q_heads, head_dim]`, `k`/`v` `[T, kv_heads, head_dim]`: each query attends to all T
    keys (the patches of one image see each other both ways), scores times `scale` (1.0 in Gemma
    4), softmax in f32. Query head h uses KV head `h / (q_heads / kv_heads)`.

    ```mlir
    %o = spark.bidirectional_attention %q, %k, %v {scale = 1.0 : f32} : (tensor<?x16x72xf32>, tensor<?x16x72xf32>, tensor<?x16x72xf32>) -> tensor<?x16x72xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$query, Spark_Activation:$key, Spark_Activation:$value,
                       F32Attr:$scale);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$query `,` $key `,` $value attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Spark_PoolByPositionOp : Spark_Op<"pool_by_position", [Pure]> {
  let summary = "k x k average pooling of patches by their coordinates, then a scale";
  let description = [{
    Gemma 4's vision pooler: with W the largest x coordinate + 1, the patch at `(x, y)` belongs
    to row `x / k + (W / k) * (y / k)` of the result; each row is `scale` times the sum of its
    patches divided by `k^2` (in f32), and rows no patch belongs to are zero (for an image of
    `T` patches the first `T / k^2` rows are its soft tokens). Gemma 4: `k = 3`,
    `scale = sqrt(hidden)`.

    ```mlir
    %p = spark.pool_by_position %x, %pos {kernel_size = 3 : i64, scale = 33.94 : f32} : (tensor<?x1152xf32>, tensor<?x2xi32>) -> tensor<?x1152xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_IndexTensor:$positions,
                       Spark_I64Attr:$kernel_size, F32Attr:$scale);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input `,` $positions attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Spark_StandardizeOp : Spark_Op<"standardize", [Pure]> {
  let summary = "(x - bias) * scale per column (bf16 [H] weights)";
  let description = [{
    The vision tower's `standardize` (31B/26B: `std_bias`, `std_scale`), on `[T, H]` rows.

    ```mlir
    %s = spark.standardize %x, %bias, %scale : (tensor<?x1152xf32>, tensor<1152xbf16>, tensor<1152xbf16>) -> tensor<?x1152xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_WeightTensor:$bias,
                       Spark_WeightTensor:$scale);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input `,` $bias `,` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

def Spark_MoeRouterOp : Spark_Op<"moe_router", [Pure]> {
  let summary = "Gemma 4 MoE router: top-k expert weights and indices";
  let description = [{
    Architecture spec 9.1: `z = RMS0(x) * scale * hidden^-0.5`, `logits = z @ proj^T`, softmax
    over all experts in f32, top `top_k` (ties: lower index), renormalised to sum 1, then times
    `per_expert_scale[index]`.

    ```mlir
    %w, %i = spark.moe_router %r, %scale, %proj, %pes {top_k = 8 : i64, epsilon = 1.0e-06 : f32} : (tensor<?x2816xf32>, tensor<2816xbf16>, tensor<128x2816xbf16>, tensor<128xbf16>) -> (tensor<?x8xf32>, tensor<?x8xi32>)
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_WeightTensor:$scale,
                       Spark_WeightTensor:$proj, Spark_WeightTensor:$per_expert_scale,
                       Spark_I64Attr:$top_k, F32Attr:$epsilon);
  let results = (outs Spark_Activation:$weights, Spark_IndexTensor:$indices);
  let assemblyFormat = [{
    $input `,` $scale `,` $proj `,` $per_expert_scale attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Spark_MoeExpertsOp : Spark_Op<"moe_experts", [Pure, AttrSizedOperandSegments]> {
  let summary = "weighted sum of the chosen experts' GELU-gated MLPs";
  let description = [{
    Architecture spec 9.2: for each token t and choice k with e = indices[t, k]:
    `[gate; up] = x[t] @ gate_up[e]^T`, `y_e = (gelu(gate) * up) @ down[e]^T`,
    `result[t] = sum_k weights[t, k] * y_e`. `gate_up` is `[E, 2I, H]` (first I rows gate),
    `down` is `[E, H, I]`.

    Each of `gate_up` and `down` is bf16 (no scales) or quantized like spark.linear's weight,
    one matrix per expert and, for gate_up, per half (gate, up), each with its own scales:
      - NVFP4: `f4E2M1FN` codes; scales = the block scales (`[E, 2I, H/16]` / `[E, H, I/16]`
        f8E4M3FN) and the tensor scales (`[E, 2]` / `[E]` f32);
      - FP8: `f8E4M3FN` elements; one f32 scale per matrix (`[E, 2]` / `[E]`) or per row
        (`[E, 2I]` / `[E, H]`).

    ```mlir
    %y = spark.moe_experts %x, %gu, %down, %w, %i : (tensor<?x2816xf32>, tensor<128x1408x2816xbf16>, tensor<128x2816x704xbf16>, tensor<?x8xf32>, tensor<?x8xi32>) -> tensor<?x2816xf32>
    %q = spark.moe_experts %x, %gu, %down, %w, %i gate_up_scales(%gub, %gut) down_scales(%db, %dt) : (tensor<?x2816xf32>, tensor<128x1408x2816xf4E2M1FN>, tensor<128x2816x704xf4E2M1FN>, tensor<?x8xf32>, tensor<?x8xi32>, tensor<128x1408x176xf8E4M3FN>, tensor<128x2xf32>, tensor<128x2816x44xf8E4M3FN>, tensor<128xf32>) -> tensor<?x2816xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_WeightTensor:$gate_up,
                       Spark_WeightTensor:$down, Spark_Activation:$weights,
                       Spark_IndexTensor:$indices,
                       Variadic<Spark_WeightTensor>:$gate_up_scales,
                       Variadic<Spark_WeightTensor>:$down_scales);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = [{
    $input `,` $gate_up `,` $down `,` $weights `,` $indices
    (`gate_up_scales` `(` $gate_up_scales^ `)`)? (`down_scales` `(` $down_scales^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input, "::mlir::Value":$gate_up,
                   "::mlir::Value":$down, "::mlir::Value":$weights, "::mlir::Value":$indices), [{
      build($_builder, $_state, result, input, gate_up, down, weights, indices,
            ::mlir::ValueRange(), ::mlir::ValueRange());
    }]>
  ];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Kernel level
//===----------------------------------------------------------------------===//

def Spark_LaunchArgsAttr : TypedArrayAttrBase<Spark_LaunchArgAttr, "launch arguments">;

def Spark_AllReduceOp : Spark_Op<"all_reduce", [Pure, SameOperandsAndResultType]> {
  let summary = "the sum of every rank's rows (tensor parallelism)";
  let description = [{
    In a module sharded over `ranks` ranks (`spark-shard-tensor-parallel`): every rank's
    `input` summed, each rank getting the sum (after a row-parallel linear: attention's o_proj,
    the MLP's down_proj, the MoE experts). Lowers to the `all_reduce` transfer step
    (kernel_ops.def), which the runtime carries out through NCCL or, on the host, in memory.

    ```mlir
    %s = spark.all_reduce %o {ranks = 2 : i64} : tensor<?x2816xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_I64Attr:$ranks);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Spark_AllGatherOp : Spark_Op<"all_gather", [Pure]> {
  let summary = "every rank's columns side by side (tensor parallelism)";
  let description = [{
    In a module sharded over `ranks` ranks: rows of `ranks` times the input's columns, rank r's
    `input` in columns [r * cols, (r + 1) * cols) (the embedding lookup of a column slice of the
    table, the LM head's logits of a slice of the vocabulary). Lowers to the `all_gather`
    transfer step.

    ```mlir
    %l = spark.all_gather %part {ranks = 2 : i64} : tensor<?x131072xf32> -> tensor<?x262144xf32>
    ```
  }];
  let arguments = (ins Spark_Activation:$input, Spark_I64Attr:$ranks);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Spark_ProgramOp : Spark_Op<"program", [Symbol, NoTerminator, SingleBlock, NoRegionArguments]> {
  let summary = "a planned launch sequence over one activation arena";
  let description = [{
    What `spark-lower-to-kernels` makes of an entry function: the buffers it is split into
    (`#spark.buffer`, `[max_tokens, row_shape...]`), the weights by name (`#spark.weight`), the
    buffers its caller fills and reads (`#spark.inputs`, `#spark.outputs`), and a body of
    `spark.launch` and `spark.transfer` ops run in order; `spark-plan-arena` then gives each
    buffer its byte offset
    and the program its arena size (0 before). The plan writer serialises it into
    the `.spark.plan` section (docs/plan-format.md). `activation_precision = bf16` (absent:
    f32) says that every f32 output of a launch is rounded to bf16 as it is stored. `ranks`
    (absent: 1) is the number of ranks of a tensor-parallel program: every rank runs it on its
    weight slices, joined by its `all_reduce` / `all_gather` transfers.

    ```mlir
    spark.program @forward attributes {max_tokens = 64 : i64, arena_bytes = 2048 : i64,
        buffers = [#spark.buffer<name = "%x", dtype = f32, row_shape = [4], offset = 0>,
                   #spark.buffer<name = "gelu", dtype = f32, row_shape = [4], offset = 1024>],
        weights = [], inputs = #spark.inputs<>, outputs = #spark.outputs<logits = 1>,
        model = #spark.model<...>} {
      spark.launch "gelu" @kernels::@spark_gelu__i4 grid(per_token = 4, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 0, buffer 1, num_tokens, i32 4]
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Spark_I64Attr:$max_tokens,
                       Spark_I64Attr:$arena_bytes,
                       TypedArrayAttrBase<Spark_BufferAttr, "buffers">:$buffers,
                       TypedArrayAttrBase<Spark_WeightAttr, "weights">:$weights,
                       Spark_ProgramInputsAttr:$inputs, Spark_ProgramOutputsAttr:$outputs,
                       OptionalAttr<Spark_ModelAttr>:$model,
                       OptionalAttr<TypeAttrOf<AnyTypeOf<[F32, BF16]>>>:$activation_precision,
                       OptionalAttr<Spark_I64Attr>:$ranks);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Spark_LaunchOp : Spark_Op<"launch", [HasParent<"ProgramOp">]> {
  let summary = "one kernel launch of a plan step";
  let description = [{
    Launches `kernel` (a `gpu.func` entry) for kernel-level op `op` with the plan's arguments
    in the op's order (kernel_ops.def), each a `#spark.arg` written without its wrapper:
    `buffer N`, `weight N`, `k_cache N`, `v_cache N`, `kv_capacity N`, `num_tokens`,
    `num_soft_tokens`, `null`, `i32 N`, `f32 X`. Literal `i32`/`f32` arguments are compiled into
    the entry; its parameters are the other arguments, in order. The verifier checks the op
    against the registry: a kernel op, its argument count, and a pointer, i32 or f32 where the
    op's signature has one.

    `grid` is the launch's grid as a function of a call's token count T (kernel_abi.h
    GridRule): ceil(max(T * per_token, fixed) / divisor) blocks, at least 1 and at most 2048, so
    that each call, a decode call of one token included, gets the blocks its own tokens need.
    Which calls run the launch at all follows from its op (plan.h StepRuns): the plan's programs
    (docs/plan-format.md "Programs").

    `logits_tail` marks the launches that only turn the last hidden state into logits (the
    final norm, the LM head, the softcap): the last launches of the program, each of a row-local
    op. The runtime runs them on the last token's row only when a step needs no other logits,
    and skips them when it needs none (docs/plan-format.md "The logits tail").

    ```mlir
    spark.launch "add" @kernels::@spark_add__i64 grid(per_token = 64, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 1, buffer 2, buffer 3, num_tokens, i32 64] {source = "layers.0.residual"}
    ```
  }];
  let arguments = (ins StrAttr:$op, SymbolRefAttr:$kernel, I64Attr:$grid_per_token,
                       I64Attr:$grid_fixed, I64Attr:$grid_divisor, DenseI32ArrayAttr:$block,
                       Spark_LaunchArgsAttr:$args, UnitAttr:$logits_tail);
  let assemblyFormat =
      "$op $kernel `grid` `(` `per_token` `=` $grid_per_token `,` `fixed` `=` $grid_fixed `,` "
      "`divisor` `=` $grid_divisor `)` `block` $block `args` custom<LaunchArgs>($args) attr-dict "
      "(`logits_tail` $logits_tail^)?";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The entry point of kernel-level op `symbol` (its device function, e.g. "spark_linear")
    /// with launch arguments `args`: the symbol, "__", then each literal i32 / f32 argument
    /// (runtime/include/spark/runtime/entry_point.h, which the plan reader recomputes).
    static std::string entryPointName(::llvm::StringRef symbol, ::mlir::ArrayAttr args);
  }];
}

def Spark_TransferOp : Spark_Op<"transfer", [HasParent<"ProgramOp">]> {
  let summary = "a plan step the runtime carries out without a kernel";
  let description = [{
    A step of a transfer op of the registry (kernel_ops.def SPARK_TRANSFER_OPS: `copy`, a
    device-to-device copy of the call's rows; collectives next), with the plan's arguments in
    the op's order as `spark.launch` spells them. No kernel entry, grid or block: the runtime
    moves the data itself (a copy on the stream; on the host, the op's host reference). Which
    calls run it follows from its op as for a launch; `logits_tail` likewise.

    ```mlir
    spark.transfer "copy" args [buffer 4, buffer 5, num_tokens, i32 16] {source = "scatter_nd.copy"}
    ```
  }];
  let arguments = (ins StrAttr:$op, Spark_LaunchArgsAttr:$args, UnitAttr:$logits_tail);
  let assemblyFormat = "$op `args` custom<LaunchArgs>($args) attr-dict (`logits_tail` $logits_tail^)?";
  let hasVerifier = 1;
}

#endif // SPARK_OPS_TD

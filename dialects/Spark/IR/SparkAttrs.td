//===- SparkAttrs.td - spark dialect attributes ----------------*- tablegen -*-===//
#ifndef SPARK_ATTRS_TD
#define SPARK_ATTRS_TD

include "mlir/IR/AttrTypeBase.td"
include "dialects/Spark/IR/SparkEnums.td"

class Spark_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Spark_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// A list of token ids, printed and parsed in brackets ([1, 106]; [] for none), so that the
// struct format's commas stay unambiguous.
class Spark_IdListParameter<string desc> : ArrayRefParameter<"int64_t", desc> {
  let parser = [{ ::spark::parseIdList($_parser) }];
  let printer = [{ ::spark::printIdList($_printer, $_self) }];
}

// A shape, printed and parsed in brackets ([16, 32]; [] for a scalar row).
class Spark_ShapeParameter<string desc> : ArrayRefParameter<"int64_t", desc> {
  let parser = [{ ::spark::parseIdList($_parser) }];
  let printer = [{ ::spark::printIdList($_printer, $_self) }];
}
class Spark_OptionalShapeParameter<string desc> : OptionalArrayRefParameter<"int64_t", desc> {
  let parser = [{ ::spark::parseIdList($_parser) }];
  let printer = [{ ::spark::printIdList($_printer, $_self) }];
}

def Spark_ModelAttr : Spark_Attr<"Model", "model"> {
  let summary = "the model facts the runtime needs, from the checkpoint's config";
  let description = [{
    What `spark-import` records about the model on the module (`spark.model`) and the lowering
    copies onto `spark.program` (`model`); the plan writer puts it in the plan's `model` object
    (docs/plan-format.md). Every field is required except `bidirectional_vision` (Gemma 4 26B-A4B
    and 31B: `use_bidirectional_attention: "vision"`) and the image ids `image_token_id`,
    `boi_token_id`, `eoi_token_id` (-1, left out when printed: none; a model with a vision tower
    has all three: each image is expanded to boi + soft tokens + eoi); `soft_token_ids` (the
    image / audio / video placeholder ids) may be `[]`. The verifier checks the sizes are positive, the
    token ids lie in the vocabulary and at least one end-of-sequence id is given.

    ```mlir
    #spark.model<variant = "gemma4-e2b-like", architecture = "Gemma4ForConditionalGeneration",
                 vocab_size = 262144, hidden_size = 1536, num_layers = 35,
                 max_position_embeddings = 131072, eos_token_ids = [1, 106], bos_token_id = 2,
                 pad_token_id = 0, soft_token_ids = [258880, 258881],
                 weight_prefix = "model.language_model.">
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the variant name spark-import derives">:$variant,
    StringRefParameter<"config.json's architecture">:$architecture,
    "int64_t":$vocab_size,
    "int64_t":$hidden_size,
    "int64_t":$num_layers,
    "int64_t":$max_position_embeddings,
    Spark_IdListParameter<"end-of-sequence ids">:$eos_token_ids,
    "int64_t":$bos_token_id,
    "int64_t":$pad_token_id,
    Spark_IdListParameter<"soft-token placeholder ids">:$soft_token_ids,
    StringRefParameter<"prefix of every text-model checkpoint tensor">:$weight_prefix,
    DefaultValuedParameter<"bool", "false",
                           "attention is bidirectional over image blocks">:$bidirectional_vision,
    DefaultValuedParameter<"int64_t", "-1", "the image placeholder id">:$image_token_id,
    DefaultValuedParameter<"int64_t", "-1", "the begin-of-image id">:$boi_token_id,
    DefaultValuedParameter<"int64_t", "-1", "the end-of-image id">:$eoi_token_id
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Kernel level: what a spark.program holds (docs/plan-format.md)
//===----------------------------------------------------------------------===//

def Spark_BufferAttr : Spark_Attr<"Buffer", "buffer"> {
  let summary = "one activation buffer of a spark.program's arena";
  let description = [{
    A buffer of `[max_tokens, row_shape...]` elements of `dtype` (f32, bf16 or i32; bf16 only in
    a program of bf16 activation precision). `offset` (its byte offset in the arena) is absent
    until `spark-plan-arena` places it.

    ```mlir
    #spark.buffer<name = "layers.0.mlp.down", dtype = f32, row_shape = [2816], offset = 4096>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the value it holds (for profiles and errors)">:$name,
    "::mlir::Type":$dtype,
    Spark_ShapeParameter<"a token row's shape">:$row_shape,
    OptionalParameter<"std::optional<int64_t>", "byte offset in the arena">:$offset
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Bytes of one element (4 for f32 and i32, 2 for bf16).
    int64_t elementBytes() const { return getDtype().isBF16() ? 2 : 4; }
    /// The same buffer at arena byte offset `offset`.
    BufferAttr withOffset(int64_t offset) const {
      return get(getContext(), getName(), getDtype(), getRowShape(), offset);
    }
  }];
}

def Spark_ShardAttr : Spark_Attr<"Shard", "shard"> {
  let summary = "the slice of a checkpoint tensor one rank of a tensor-parallel model reads";
  let description = [{
    On a `spark.weight` (and its `#spark.weight` in a program) of a module sharded by
    `spark-shard-tensor-parallel` (`spark-compile --tensor-parallel N`): the checkpoint tensor
    has `parts` times the weight's size along `axis`; that dimension is `chunks` equal chunks
    (2 for the MoE experts' fused gate_up: gate rows, then up rows), each split into `parts`
    slices, and rank r of the module's N ranks reads slice r * parts / N of every chunk
    (`parts` divides N; fewer parts than ranks replicate a slice on N / parts ranks: the KV
    heads of a model with fewer KV heads than ranks). docs/multi-gpu.md.

    ```mlir
    #spark.shard<axis = 0, parts = 2, chunks = 1>
    ```
  }];
  let parameters = (ins "int64_t":$axis, "int64_t":$parts, "int64_t":$chunks);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Spark_WeightAttr : Spark_Attr<"Weight", "weight"> {
  let summary = "one checkpoint tensor a spark.program's launches read";
  let description = [{
    A weight of `shape` and element type `dtype` (bf16, f32, f8E4M3FN, or f4E2M1FN codes
    packed two per byte) named as in the checkpoint. `parts` (with `part_shape`) concatenates
    several checkpoint tensors into one (the MoE experts of a checkpoint that stores one tensor
    per expert; `part_shape` left out: scalar parts); `transform = reciprocal` stores 1/x of each value (an FP8 input scale);
    `shard` (a tensor-parallel module's) says which slice of the tensor one rank reads: `shape`
    is the slice's.

    ```mlir
    #spark.weight<name = "model.language_model.layers.0.mlp.down_proj.weight", dtype = bf16, shape = [2816, 2112]>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the checkpoint tensor's name">:$name,
    "::mlir::Type":$dtype,
    Spark_ShapeParameter<"the tensor's shape">:$shape,
    OptionalParameter<"::mlir::ArrayAttr", "checkpoint tensors concatenated into it">:$parts,
    Spark_OptionalShapeParameter<"the shape of each part">:$part_shape,
    DefaultValuedParameter<"::spark::WeightTransform", "::spark::WeightTransform::none",
                           "transform at load">:$transform,
    OptionalParameter<"::spark::ShardAttr", "a tensor-parallel rank's slice">:$shard
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Spark_LaunchArgAttr : Spark_Attr<"LaunchArg", "arg"> {
  let summary = "one argument of a spark.launch or spark.transfer";
  let description = [{
    In the op's argument order (kernel_ops.def): `buffer N`, `weight N`, `k_cache N`,
    `v_cache N`, `kv_capacity N`, `kv_block_table N` (the id of an arena buffer, a weight or a
    KV cache: its block table is that of the cache's capacity group, bound by the runtime),
    `null`, `num_tokens`, `num_soft_tokens` (values of the call, filled in by the runtime), or a
    literal `i32 N` / `f32 X` compiled into the kernel entry. In a launch's `args [...]` list the
    `#spark.arg<...>` around each is left out.

    ```mlir
    #spark.arg<buffer 3>
    #spark.arg<num_tokens>
    #spark.arg<f32 9.99999997E-7>
    ```
  }];
  let parameters = (ins
    "::spark::LaunchArgKind":$kind,
    "int64_t":$value,
    APFloatParameter<"an f32 literal's value (0 for other kinds)">:$f32
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "::spark::LaunchArgKind":$kind, "int64_t":$value), [{
      return $_get($_ctxt, kind, value, ::llvm::APFloat(0.0f));
    }]>,
    AttrBuilder<(ins "float":$f32), [{
      return $_get($_ctxt, ::spark::LaunchArgKind::f32, 0, ::llvm::APFloat(f32));
    }]>
  ];
  let extraClassDeclaration = [{
    /// Whether the argument is a literal compiled into the kernel entry (i32 or f32).
    bool isLiteral() const {
      return getKind() == ::spark::LaunchArgKind::i32 || getKind() == ::spark::LaunchArgKind::f32;
    }
    /// The f32 literal's value.
    float getF32Value() const { return getF32().convertToFloat(); }
    /// Parses / prints what follows the mnemonic inside `<...>`: `buffer 3`, `null`, `f32 0.5`.
    static ::mlir::FailureOr<LaunchArgAttr> parseBody(::mlir::AsmParser &parser);
    void printBody(::mlir::AsmPrinter &printer) const;
  }];
}

def Spark_ProgramInputsAttr : Spark_Attr<"ProgramInputs", "inputs"> {
  let summary = "the buffers a spark.program's caller fills";
  let description = [{
    Buffer ids (-1, left out when printed: no such input): the token `ids`, their
    `positions`, the `soft_embeddings` rows and their `soft_indices` (a multimodal model),
    `last_visible` (bidirectional image blocks), `sampling` (per-row sampling parameters),
    `sequences` (each token's row of the KV block tables: the sequence it belongs to); for the
    image encoder program (`encode_image`) instead the `pixel_patches` (`[T, 768]` f32 in
    [0, 1]) and their `patch_positions` (`[T, 2]` i32 x, y).

    ```mlir
    #spark.inputs<ids = 0, positions = 1, sampling = 2>
    #spark.inputs<pixel_patches = 0, patch_positions = 1>
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"int64_t", "-1">:$ids,
    DefaultValuedParameter<"int64_t", "-1">:$positions,
    DefaultValuedParameter<"int64_t", "-1">:$soft_embeddings,
    DefaultValuedParameter<"int64_t", "-1">:$soft_indices,
    DefaultValuedParameter<"int64_t", "-1">:$last_visible,
    DefaultValuedParameter<"int64_t", "-1">:$sampling,
    DefaultValuedParameter<"int64_t", "-1">:$sequences,
    DefaultValuedParameter<"int64_t", "-1">:$pixel_patches,
    DefaultValuedParameter<"int64_t", "-1">:$patch_positions
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def Spark_ProgramOutputsAttr : Spark_Attr<"ProgramOutputs", "outputs"> {
  let summary = "the buffers a spark.program's caller reads";
  let description = [{
    Buffer ids (-1, left out when printed: none): the `logits` (`[T, vocab]` f32) and the
    sampled `tokens` (i32 per row); for the image encoder program the `embeddings` (`[T, hidden]`:
    the image's soft tokens in its first rows).

    ```mlir
    #spark.outputs<logits = 9, tokens = 10>
    #spark.outputs<embeddings = 41>
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"int64_t", "-1">:$logits,
    DefaultValuedParameter<"int64_t", "-1">:$tokens,
    DefaultValuedParameter<"int64_t", "-1">:$embeddings
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

#endif // SPARK_ATTRS_TD

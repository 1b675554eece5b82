//===- ImportGemma.cpp - Gemma 4 config -> spark dialect module -----------===//
//
// Builds the Gemma 4 text decoder graph exactly as gemma4-architecture.md sections 2-10 give it.
// Every op gets a NameLoc naming the model part it computes (e.g. layers.3.self_attn.q_proj), so
// plan steps and diagnostics can say where they come from.
//
//===----------------------------------------------------------------------===//
#include "compiler/Import/ImportGemma.h"

#include "compiler/Import/QuantizationConfig.h"
#include "compiler/Support/ElementTypes.h"
#include "dialects/Spark/IR/SparkOps.h"
#include "dialects/Spark/IR/TypeInference.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include "spark/runtime/plan.h"
#include "spark/runtime/safetensors.h"

#include <cmath>
#include <cstring>
#include <map>

using namespace mlir;
using llvm::formatv;

namespace spark {
namespace {

/// Rounds a float to the nearest bf16 value (ties to even), returned as float.
float roundToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  bits += 0x7FFF + ((bits >> 16) & 1);
  bits &= 0xFFFF0000u;
  std::memcpy(&value, &bits, sizeof(bits));
  return value;
}

class GraphBuilder {
public:
  GraphBuilder(const GemmaConfig &config, const ImportOptions &options, MLIRContext *ctx)
      : c(config), options(options), ctx(ctx), b(ctx) {}

  OwningOpRef<ModuleOp> build();

private:
  Location loc(const Twine &name) {
    return NameLoc::get(StringAttr::get(ctx, name.str()), fileLoc);
  }
  RankedTensorType act(ArrayRef<int64_t> row) {
    SmallVector<int64_t> shape{ShapedType::kDynamic};
    shape.append(row.begin(), row.end());
    return RankedTensorType::get(shape, b.getF32Type());
  }
  RankedTensorType idsType() {
    return RankedTensorType::get({ShapedType::kDynamic}, b.getI32Type());
  }
  Value weight(const Twine &name, ArrayRef<int64_t> shape) {
    return tensor(c.weightPrefix + name, name, shape, b.getBF16Type());
  }
  /// A checkpoint tensor by its full name; `locName` names the op in plans and messages.
  /// Checkpoint tensor `full`; with `reciprocal`, the graph takes 1 / x of it (an inverted
  /// scale, spark.weight's `reciprocal`).
  Value tensor(const Twine &full, const Twine &locName, ArrayRef<int64_t> shape, Type element,
               bool reciprocal = false) {
    auto type = RankedTensorType::get(shape, element);
    return WeightOp::create(b, loc(locName), type, b.getStringAttr(full.str()), ArrayAttr(),
                            DenseI64ArrayAttr(), reciprocal ? b.getUnitAttr() : UnitAttr(),
                            ShardAttr());
  }
  /// A weight of `shape` assembled from checkpoint tensors `parts` (each `partShape`), named
  /// `full` in plans and messages.
  Value stacked(const Twine &full, const Twine &locName, ArrayRef<std::string> parts,
                ArrayRef<int64_t> partShape, ArrayRef<int64_t> shape, Type element,
                bool reciprocal = false) {
    SmallVector<StringRef> names(parts.begin(), parts.end());
    auto type = RankedTensorType::get(shape, element);
    return WeightOp::create(b, loc(locName), type, b.getStringAttr(full.str()),
                            b.getStrArrayAttr(names), b.getDenseI64ArrayAttr(partShape),
                            reciprocal ? b.getUnitAttr() : UnitAttr(), ShardAttr());
  }
  /// The routed experts' weights as spark.moe_experts takes them (stacked [E, 2I, H] gate_up and
  /// [E, H, I] down, with their scales when quantized), from either checkpoint layout: the fused
  /// bf16 tensors (`experts.gate_up_proj`, `experts.down_proj`) or one linear per expert and
  /// projection (`experts.E.gate_proj`, `up_proj`, `down_proj`: ModelOpt's quantized
  /// checkpoints), whose tensors the runtime stacks when it loads them.
  struct ExpertWeights {
    Value gateUp, down;
    SmallVector<Value, 2> gateUpScales, downScales;
  };
  ExpertWeights expertWeights(const std::string &p);
  /// One stacked expert weight from the per-expert linears `projections` (gate and up, or down)
  /// of every expert: the weight and its scales in format `format`.
  Value stackedExperts(const std::string &experts, const std::string &locName,
                       ArrayRef<StringRef> projections, int64_t rows, int64_t cols,
                       QuantizationConfig::Format format, SmallVectorImpl<Value> &scales);
  Value rmsNorm(Value x, Value w, const Twine &name) {
    return RmsNormOp::create(b, loc(name), x.getType(), x, w, b.getF32FloatAttr(c.rmsNormEps));
  }
  Value linear(Value x, const Twine &name, int64_t out) {
    return linearOf(x, c.weightPrefix + name, name, out);
  }
  /// The linear layer `module` (full name), bf16 or quantized as the checkpoint stores it.
  Value linearOf(Value x, const Twine &module, const Twine &name, int64_t out);
  /// The shape of FP8 scale tensor `name` of a matrix of `rows` rows: [] / [1] (per tensor) or
  /// [rows] / [rows, 1] (per row); another shape is an import error naming the tensor.
  SmallVector<int64_t> fp8ScaleShape(StringRef name, int64_t rows);
  /// How the checkpoint stores linear `module` (full name): bf16, or the config's format.
  QuantizationConfig::Format formatOf(StringRef module) const;
  /// The shape the checkpoint gives tensor `name`, or `fallback` without headers.
  SmallVector<int64_t> shapeOf(StringRef name, ArrayRef<int64_t> fallback) const;
  /// Records the first import error (a module Spark cannot run quantized).
  void fail(const Twine &message) {
    if (error.empty())
      error = message.str();
  }
  Value reshape(Value x, ArrayRef<int64_t> row, const Twine &name) {
    return ReshapeOp::create(b, loc(name), act(row), x);
  }
  Value rope(Value x, const LayerConfig &l, const Twine &name) {
    const RopeConfig &r = l.full ? c.fullRope : c.slidingRope;
    return RopeOp::create(b, loc(name), x.getType(), x, positions,
                          b.getF32FloatAttr(r.theta), b.getI64IntegerAttr(l.rotatedPairs),
                          b.getF32FloatAttr(r.factor));
  }
  float scaleConstant(double value) {
    float f = static_cast<float>(value);
    return options.roundScalesToBf16 ? roundToBf16(f) : f;
  }

  Value embed(Value ids);
  Value perLayerInputs(Value ids, Value embedded);
  Value layer(Value h, const LayerConfig &l, Value pleInputs);
  Value attention(Value a, const LayerConfig &l);
  Value mlp(Value x, const LayerConfig &l, const std::string &p);
  Value moe(Value mlpOut, Value residual, const std::string &p);
  void declareCaches(ModuleOp module);
  ModelAttr modelAttr();
  /// The vision tower and the multimodal embedder as `func.func @encode_image`.
  void buildImageEncoder(ModuleOp module);
  /// A linear of the vision tower (`module`.linear.weight), between the clamps of its
  /// `input_min`/`input_max` and `output_min`/`output_max` scalars when the config clips.
  Value visionLinear(Value x, const std::string &module, const std::string &name, int64_t out);

  const GemmaConfig &c;
  const ImportOptions &options;
  MLIRContext *ctx;
  OpBuilder b;
  Location fileLoc = UnknownLoc::get(ctx);
  Value positions;
  /// Whether the module gets the vision tower (@encode_image).
  bool encoder = false;
  /// The entry's last_visible input (vision-bidirectional models only), else null.
  Value lastVisible;
  /// K/V values of each non-shared layer, for the layers that share them.
  DenseMap<int64_t, std::pair<Value, Value>> layerKv;

public:
  /// The first error of build(), or empty.
  std::string error;
};

QuantizationConfig::Format GraphBuilder::formatOf(StringRef module) const {
  const QuantizationConfig &q = c.quantization;
  if (!q.quantized())
    return QuantizationConfig::Format::kNone;
  // With headers the tensors decide: ModelOpt writes a weight_scale beside every quantized
  // weight (exclude lists in published configs are not always complete).
  if (options.checkpoint)
    return options.checkpoint->Find((module + ".weight_scale").str()) != nullptr
               ? q.format
               : QuantizationConfig::Format::kNone;
  return q.quantizes(module) ? q.format : QuantizationConfig::Format::kNone;
}

SmallVector<int64_t> GraphBuilder::shapeOf(StringRef name, ArrayRef<int64_t> fallback) const {
  if (options.checkpoint)
    if (const rt::TensorView *t = options.checkpoint->Find(name.str()))
      return SmallVector<int64_t>(t->shape.begin(), t->shape.end());
  return SmallVector<int64_t>(fallback.begin(), fallback.end());
}

SmallVector<int64_t> GraphBuilder::fp8ScaleShape(StringRef name, int64_t rows) {
  SmallVector<int64_t> perTensor, perRow{rows};
  SmallVector<int64_t> shape = shapeOf(name, c.quantization.fp8PerChannel ? perRow : perTensor);
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  const bool perTensorShape = shape.size() <= 1 && count == 1;
  const bool perRowShape =
      !shape.empty() && shape.size() <= 2 && shape[0] == rows && count == rows;
  if (!perTensorShape && !perRowShape)
    fail(name + " has shape " + formatShape(shape) +
         ": an FP8 scale is one f32 value per tensor ([] or [1]) or per output row ([" +
         Twine(rows) + "] or [" + Twine(rows) + ", 1]); block-wise FP8 is not supported");
  return shape;
}

Value GraphBuilder::linearOf(Value x, const Twine &moduleName, const Twine &name, int64_t out) {
  const std::string module = moduleName.str();
  const int64_t in = cast<RankedTensorType>(x.getType()).getDimSize(1);
  switch (formatOf(module)) {
  case QuantizationConfig::Format::kNone:
    return LinearOp::create(b, loc(name), act({out}), x,
                            tensor(module + ".weight", name, {out, in}, b.getBF16Type()));
  case QuantizationConfig::Format::kNvfp4: {
    if (in % 16 != 0)
      fail(module + " is NVFP4 with " + Twine(in) +
           " inputs, not a multiple of 16 (one block scale per 16 inputs); Spark cannot run it");
    const QuantizationConfig::Nvfp4Tensors &names = c.quantization.nvfp4;
    Value w = tensor(module + "." + names.codes, name, {out, in}, b.getType<Float4E2M1FNType>());
    Value blocks = tensor(module + "." + names.blockScale, name, {out, in / 16},
                          b.getType<Float8E4M3FNType>());
    const std::string globalName = module + "." + names.tensorScale;
    SmallVector<int64_t> globalShape = shapeOf(globalName, {});
    if (globalShape.size() > 1 || (globalShape.size() == 1 && globalShape[0] != 1))
      fail(globalName + " has shape " + formatShape(globalShape) +
           ": an NVFP4 tensor scale is one f32 value ([] or [1])");
    Value global = tensor(globalName, name, globalShape, b.getF32Type(), names.tensorScaleInverted);
    return LinearOp::create(b, loc(name), act({out}), x, w, ValueRange{blocks, global});
  }
  case QuantizationConfig::Format::kFp8: {
    Value w = tensor(module + ".weight", name, {out, in}, b.getType<Float8E4M3FNType>());
    SmallVector<int64_t> scaleShape = fp8ScaleShape(module + ".weight_scale", out);
    Value scale = tensor(module + ".weight_scale", name, scaleShape, b.getF32Type());
    return LinearOp::create(b, loc(name), act({out}), x, w, ValueRange{scale});
  }
  }
  return Value();
}

void GraphBuilder::declareCaches(ModuleOp module) {
  b.setInsertionPointToEnd(module.getBody());
  for (const LayerConfig &l : c.layers) {
    if (l.kvShared)
      continue;
    KvCacheOp::create(b, loc(formatv("layers.{0}.kv_cache", l.index)),
                      b.getStringAttr(formatv("kv.layers.{0}", l.index).str()),
                      KvKindAttr::get(ctx, l.full ? KvKind::full : KvKind::sliding),
                      b.getI64IntegerAttr(l.full ? 0 : c.slidingWindow),
                      b.getI64IntegerAttr(l.numKvHeads), b.getI64IntegerAttr(l.headDim),
                      /*element_type=*/TypeAttr());
  }
}

ModelAttr GraphBuilder::modelAttr() {
  return ModelAttr::get(b.getContext(), c.variant(), c.architecture, c.vocabSize, c.hiddenSize,
                        c.numLayers, c.maxPositionEmbeddings, c.eosTokenIds, c.bosTokenId,
                        c.padTokenId, c.softTokenIds, c.weightPrefix, c.bidirectionalVision,
                        // The image ids are the image encoder's: a model without one takes no
                        // images (precomputed soft tokens need no ids).
                        encoder ? c.imageTokenId : -1, encoder ? c.boiTokenId : -1,
                        encoder ? c.eoiTokenId : -1);
}

Value GraphBuilder::visionLinear(Value x, const std::string &module, const std::string &name,
                                 int64_t out) {
  const int64_t in = cast<RankedTensorType>(x.getType()).getDimSize(1);
  auto clamp = [&](Value v, const char *low, const char *high, const char *what) -> Value {
    auto bound = [&](const char *suffix) {
      return tensor(module + "." + suffix, name + "." + what, shapeOf(module + "." + suffix, {}),
                    b.getBF16Type());
    };
    return ClampOp::create(b, loc(name + "." + what), v.getType(), v, bound(low), bound(high));
  };
  if (c.vision->clippedLinears)
    x = clamp(x, "input_min", "input_max", "clamp_input");
  Value y = LinearOp::create(b, loc(name), act({out}), x,
                             tensor(module + ".linear.weight", name, {out, in}, b.getBF16Type()));
  if (c.vision->clippedLinears)
    y = clamp(y, "output_min", "output_max", "clamp_output");
  return y;
}

// transformers' Gemma4VisionModel + Gemma4MultimodalEmbedder on the real patches of one image:
// patch embedding of 2 (x - 0.5), the 2-D position table, the encoder layers (bidirectional
// attention with q/k/v norms and axial RoPE, GELU-gated MLP, sandwich norms), 3x3 pooling by
// position times sqrt(hidden), standardize, then the embedder's weight-less RMSNorm and the
// projection to the text hidden size. Its rows past T / 9 are zero (pool_by_position).
void GraphBuilder::buildImageEncoder(ModuleOp module) {
  const VisionConfig &v = *c.vision;
  const std::string tower = "model.vision_tower.";
  const int64_t H = v.hiddenSize, nh = v.numHeads, nkv = v.numKvHeads, d = v.headDim;
  const int64_t patchValues = 3 * v.patchSize * v.patchSize;
  b.setInsertionPointToEnd(module.getBody());
  auto positionsType = RankedTensorType::get({ShapedType::kDynamic, 2}, b.getI32Type());
  auto fn = func::FuncOp::create(
      b, loc("encode_image"), "encode_image",
      b.getFunctionType({act({patchValues}), positionsType}, {act({c.hiddenSize})}));
  fn.setArgAttr(0, "spark.input", b.getStringAttr("pixel_patches"));
  fn.setArgAttr(1, "spark.input", b.getStringAttr("patch_positions"));
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  Value pixels = body->getArgument(0), pos = body->getArgument(1);
  auto norm = [&](Value x, Value w, const Twine &name) -> Value {
    return RmsNormOp::create(b, loc(name), x.getType(), x, w, b.getF32FloatAttr(v.rmsNormEps));
  };
  auto visionWeight = [&](const std::string &name, ArrayRef<int64_t> shape) {
    return tensor(tower + name, "vision_tower." + name, shape, b.getBF16Type());
  };

  Value x = ShiftScaleOp::create(b, loc("vision_tower.patch_embedder.normalize"), pixels,
                                 b.getF32FloatAttr(0.5f), b.getF32FloatAttr(2.0f));
  Value h = LinearOp::create(
      b, loc("vision_tower.patch_embedder.input_proj"), act({H}), x,
      visionWeight("patch_embedder.input_proj.weight", {H, patchValues}));
  h = PatchPositionEmbeddingOp::create(
      b, loc("vision_tower.patch_embedder.position_embedding"), h.getType(), h, pos,
      visionWeight("patch_embedder.position_embedding_table", {2, v.positionEmbeddingSize, H}));
  for (int64_t i = 0; i < v.numLayers; ++i) {
    const std::string p = formatv("encoder.layers.{0}.", i).str();
    const std::string name = "vision_tower." + p;
    Value a = norm(h, visionWeight(p + "input_layernorm.weight", {H}), name + "input_layernorm");
    auto heads = [&](const char *proj, int64_t n) {
      return reshape(visionLinear(a, tower + p + "self_attn." + proj, name + "self_attn." + proj,
                                  n * d),
                     {n, d}, name + "self_attn." + proj + ".reshape");
    };
    auto rope2d = [&](Value t, const char *what) -> Value {
      return Rope2dOp::create(b, loc(name + "self_attn." + what), t.getType(), t, pos,
                              b.getF32FloatAttr(v.ropeTheta));
    };
    Value q = rope2d(norm(heads("q_proj", nh), visionWeight(p + "self_attn.q_norm.weight", {d}),
                          name + "self_attn.q_norm"),
                     "q_rope");
    Value k = rope2d(norm(heads("k_proj", nkv), visionWeight(p + "self_attn.k_norm.weight", {d}),
                          name + "self_attn.k_norm"),
                     "k_rope");
    Value val = norm(heads("v_proj", nkv), Value(), name + "self_attn.v_norm");
    Value o = BidirectionalAttentionOp::create(b, loc(name + "self_attn.attention"), q.getType(),
                                               q, k, val, b.getF32FloatAttr(1.0f));
    o = reshape(o, {nh * d}, name + "self_attn.attention.reshape");
    o = visionLinear(o, tower + p + "self_attn.o_proj", name + "self_attn.o_proj", H);
    o = norm(o, visionWeight(p + "post_attention_layernorm.weight", {H}),
             name + "post_attention_layernorm");
    h = AddOp::create(b, loc(name + "attention_residual"), h, o);
    Value m = norm(h, visionWeight(p + "pre_feedforward_layernorm.weight", {H}),
                   name + "pre_feedforward_layernorm");
    Value gate = visionLinear(m, tower + p + "mlp.gate_proj", name + "mlp.gate_proj",
                              v.intermediateSize);
    Value up = visionLinear(m, tower + p + "mlp.up_proj", name + "mlp.up_proj",
                            v.intermediateSize);
    m = GeluMulOp::create(b, loc(name + "mlp.gelu_mul"), gate, up);
    m = visionLinear(m, tower + p + "mlp.down_proj", name + "mlp.down_proj", H);
    m = norm(m, visionWeight(p + "post_feedforward_layernorm.weight", {H}),
             name + "post_feedforward_layernorm");
    h = AddOp::create(b, loc(name + "mlp_residual"), h, m);
  }
  h = PoolByPositionOp::create(b, loc("vision_tower.pooler"), h.getType(), h, pos,
                               b.getI64IntegerAttr(v.poolingKernel),
                               b.getF32FloatAttr(static_cast<float>(
                                   std::sqrt(static_cast<double>(H)))));
  if (v.standardize)
    h = StandardizeOp::create(b, loc("vision_tower.standardize"), h.getType(), h,
                              visionWeight("std_bias", {H}), visionWeight("std_scale", {H}));
  h = norm(h, Value(), "embed_vision.embedding_pre_projection_norm");
  h = LinearOp::create(b, loc("embed_vision.embedding_projection"), act({c.hiddenSize}), h,
                       tensor("model.embed_vision.embedding_projection.weight",
                              "embed_vision.embedding_projection", {c.hiddenSize, H},
                              b.getBF16Type()));
  func::ReturnOp::create(b, loc("encode_image.return"), h);
}

Value GraphBuilder::embed(Value ids) {
  Value table = weight("embed_tokens.weight", {c.vocabSize, c.hiddenSize});
  float scale = scaleConstant(std::sqrt(static_cast<double>(c.hiddenSize)));
  return EmbeddingOp::create(b, loc("embed_tokens"), act({c.hiddenSize}), ids, table,
                             b.getF32FloatAttr(scale));
}

// Section 3.2: P = (RMS(reshape(e @ Wproj^T * H^-0.5)) + embed_per_layer[ids] * sqrt(Dp)) * 2^-0.5
Value GraphBuilder::perLayerInputs(Value ids, Value embedded) {
  int64_t L = c.numLayers, dp = c.pleDim;
  Value table = weight("embed_tokens_per_layer.weight", {c.pleVocab, L * dp});
  Value tokenPart = EmbeddingOp::create(
      b, loc("embed_tokens_per_layer"), act({L * dp}), ids, table,
      b.getF32FloatAttr(scaleConstant(std::sqrt(static_cast<double>(dp)))));
  tokenPart = reshape(tokenPart, {L, dp}, "embed_tokens_per_layer.reshape");
  Value proj = linear(embedded, "per_layer_model_projection", L * dp);
  proj = ScaleOp::create(b, loc("per_layer_model_projection.scale"), proj.getType(), proj,
                         b.getF32FloatAttr(std::pow(static_cast<double>(c.hiddenSize), -0.5)));
  proj = reshape(proj, {L, dp}, "per_layer_model_projection.reshape");
  proj = rmsNorm(proj, weight("per_layer_projection_norm.weight", {dp}),
                 "per_layer_projection_norm");
  Value sum = AddOp::create(b, loc("per_layer_inputs.add"), proj, tokenPart);
  return ScaleOp::create(b, loc("per_layer_inputs.scale"), sum.getType(), sum,
                         b.getF32FloatAttr(std::sqrt(0.5)));
}

// Section 6: projections, per-head norms, RoPE, attention over the cache, output projection.
Value GraphBuilder::attention(Value a, const LayerConfig &l) {
  std::string p = formatv("layers.{0}.self_attn", l.index).str();
  int64_t nq = l.numHeads, nkv = l.numKvHeads, d = l.headDim;
  Value q = reshape(linear(a, p + ".q_proj", nq * d), {nq, d}, p + ".q_proj.reshape");
  q = rmsNorm(q, weight(p + ".q_norm.weight", {d}), p + ".q_norm");
  q = rope(q, l, p + ".q_rope");
  Value k, v;
  std::string cache;
  if (l.kvShared) {
    std::tie(k, v) = layerKv.lookup(l.kvSource);
    cache = formatv("kv.layers.{0}", l.kvSource).str();
  } else {
    Value kRaw = reshape(linear(a, p + ".k_proj", nkv * d), {nkv, d}, p + ".k_proj.reshape");
    Value vRaw = l.kEqV ? kRaw
                        : reshape(linear(a, p + ".v_proj", nkv * d), {nkv, d},
                                  p + ".v_proj.reshape");
    k = rope(rmsNorm(kRaw, weight(p + ".k_norm.weight", {d}), p + ".k_norm"), l, p + ".k_rope");
    v = rmsNorm(vRaw, Value(), p + ".v_norm");
    layerKv[l.index] = {k, v};
    cache = formatv("kv.layers.{0}", l.index).str();
  }
  // Section 6.5: with use_bidirectional_attention "vision", the soft tokens of one image see
  // each other on sliding layers (last_visible); full layers stay causal.
  Value lastVisibleOperand = l.full ? Value() : lastVisible;
  auto attn = AttentionOp::create(
      b, loc(p + ".attention"), q.getType(), q, k, v, positions, lastVisibleOperand,
      FlatSymbolRefAttr::get(ctx, cache), b.getI64IntegerAttr(l.full ? 0 : c.slidingWindow),
      b.getF32FloatAttr(1.0f), l.kvShared ? b.getUnitAttr() : UnitAttr());
  Value o = reshape(attn, {nq * d}, p + ".attention.reshape");
  return linear(o, p + ".o_proj", c.hiddenSize);
}

// Section 8: (gelu(x Wg^T) * (x Wu^T)) Wd^T.
Value GraphBuilder::mlp(Value x, const LayerConfig &l, const std::string &p) {
  Value gate = linear(x, p + ".mlp.gate_proj", l.intermediate);
  Value up = linear(x, p + ".mlp.up_proj", l.intermediate);
  Value g = GeluOp::create(b, loc(p + ".mlp.gelu"), gate);
  Value gu = MulOp::create(b, loc(p + ".mlp.gate_mul"), g, up);
  return linear(gu, p + ".mlp.down_proj", c.hiddenSize);
}

Value GraphBuilder::stackedExperts(const std::string &experts, const std::string &locName,
                                   ArrayRef<StringRef> projections, int64_t rows, int64_t cols,
                                   QuantizationConfig::Format format,
                                   SmallVectorImpl<Value> &scales) {
  const int64_t e = c.numExperts, m = static_cast<int64_t>(projections.size());
  // "layers.0.experts.{0..127}.{gate,up}_proj" names the stack in plans and messages.
  std::string projectionNames = projections.size() == 1
                                    ? (projections[0] + "_proj").str()
                                    : "{" + llvm::join(projections, ",") + "}_proj";
  const std::string whole = formatv("{0}.{{0..{1}}.{2}", experts, e - 1, projectionNames).str();
  // The parts of one tensor kind (suffix: weight, weight_scale, ...), expert by expert.
  auto parts = [&](StringRef suffix) {
    std::vector<std::string> names;
    for (int64_t x = 0; x < e; ++x)
      for (StringRef proj : projections)
        names.push_back(formatv("{0}.{1}.{2}_proj.{3}", experts, x, proj, suffix).str());
    return names;
  };
  auto part = [&](StringRef suffix) {
    return formatv("{0}.0.{1}_proj.{2}", experts, projections[0], suffix).str();
  };
  const int64_t matrixRows = rows / m;
  switch (format) {
  case QuantizationConfig::Format::kNone:
    return stacked(whole + ".weight", locName, parts("weight"), {matrixRows, cols},
                   {e, rows, cols}, b.getBF16Type());
  case QuantizationConfig::Format::kNvfp4: {
    if (cols % 16 != 0)
      fail(whole + " is NVFP4 with " + Twine(cols) +
           " inputs, not a multiple of 16 (one block scale per 16 inputs); Spark cannot run it");
    const QuantizationConfig::Nvfp4Tensors &names = c.quantization.nvfp4;
    SmallVector<int64_t> globalShape = shapeOf(part(names.tensorScale), {});
    if (globalShape.size() > 1 || (globalShape.size() == 1 && globalShape[0] != 1))
      fail(part(names.tensorScale) + " has shape " + formatShape(globalShape) +
           ": an NVFP4 tensor scale is one f32 value ([] or [1])");
    SmallVector<int64_t> perMatrix{e};
    if (m > 1)
      perMatrix.push_back(m);
    scales.push_back(stacked(whole + "." + names.blockScale, locName, parts(names.blockScale),
                             {matrixRows, cols / 16}, {e, rows, cols / 16},
                             b.getType<Float8E4M3FNType>()));
    scales.push_back(stacked(whole + "." + names.tensorScale, locName, parts(names.tensorScale),
                             globalShape, perMatrix, b.getF32Type(), names.tensorScaleInverted));
    return stacked(whole + "." + names.codes, locName, parts(names.codes), {matrixRows, cols},
                   {e, rows, cols}, b.getType<Float4E2M1FNType>());
  }
  case QuantizationConfig::Format::kFp8: {
    SmallVector<int64_t> scaleShape = fp8ScaleShape(part("weight_scale"), matrixRows);
    const bool perRowShape = !scaleShape.empty() && scaleShape[0] == matrixRows && matrixRows > 1;
    SmallVector<int64_t> stackShape{e};
    if (perRowShape)
      stackShape.push_back(rows);
    else if (m > 1)
      stackShape.push_back(m);
    scales.push_back(stacked(whole + ".weight_scale", locName, parts("weight_scale"), scaleShape,
                             stackShape, b.getF32Type()));
    return stacked(whole + ".weight", locName, parts("weight"), {matrixRows, cols},
                   {e, rows, cols}, b.getType<Float8E4M3FNType>());
  }
  }
  return Value();
}

GraphBuilder::ExpertWeights GraphBuilder::expertWeights(const std::string &p) {
  const int64_t h = c.hiddenSize, e = c.numExperts, i = c.moeIntermediate;
  const std::string experts = c.weightPrefix + p + ".experts";
  const std::string locName = p + ".experts";
  ExpertWeights w;
  const rt::Checkpoint *ckpt = options.checkpoint;
  const bool fused = ckpt ? ckpt->Find(experts + ".gate_up_proj") != nullptr
                          : formatOf(experts + ".0.gate_proj") == QuantizationConfig::Format::kNone;
  if (fused) {
    // The fused 3-D tensors of a bf16 checkpoint. (A quantized checkpoint in this packed form,
    // U8 codes [E, 2I, H/2] with scales, has not been published: its tensor names are unknown.)
    const rt::TensorView *packed = ckpt ? ckpt->Find(experts + ".gate_up_proj") : nullptr;
    if (packed && packed->dtype != "BF16")
      fail(experts + ".gate_up_proj is " + packed->dtype +
           ": Spark reads quantized MoE experts stored one linear per expert "
           "(experts.N.gate_proj / up_proj / down_proj with their scales, ModelOpt's layout), "
           "not packed 3-D tensors");
    w.gateUp = weight(p + ".experts.gate_up_proj", {e, 2 * i, h});
    w.down = weight(p + ".experts.down_proj", {e, h, i});
    return w;
  }
  // One linear per expert: every expert's projection must be stored as expert 0's is, and gate
  // and up alike (the kernels read them as one stacked tensor of one format).
  auto formatOfAll = [&](ArrayRef<StringRef> projections) {
    const QuantizationConfig::Format first =
        formatOf(formatv("{0}.0.{1}_proj", experts, projections[0]).str());
    for (int64_t x = 0; x < e; ++x)
      for (StringRef proj : projections) {
        const std::string module = formatv("{0}.{1}.{2}_proj", experts, x, proj).str();
        if (formatOf(module) != first)
          fail(module + " is stored " +
               (formatOf(module) == QuantizationConfig::Format::kNone ? "in bf16" : "quantized") +
               " but " + experts + ".0." + projections[0] + "_proj is " +
               (first == QuantizationConfig::Format::kNone ? "in bf16" : "quantized") +
               ": Spark needs every expert's " + llvm::join(projections, " and ") +
               " projections in one format");
      }
    return first;
  };
  w.gateUp = stackedExperts(experts, locName, {"gate", "up"}, 2 * i, h,
                            formatOfAll({"gate", "up"}), w.gateUpScales);
  w.down = stackedExperts(experts, locName, {"down"}, h, i, formatOfAll({"down"}), w.downScales);
  return w;
}

// Sections 5 and 9: the dense branch and the routed experts, each normalised, summed.
Value GraphBuilder::moe(Value mlpOut, Value residual, const std::string &p) {
  int64_t h = c.hiddenSize, e = c.numExperts;
  // The router's projection is bf16 in this release.
  const std::string routerProj = c.weightPrefix + p + ".router.proj";
  if (formatOf(routerProj) != QuantizationConfig::Format::kNone)
    fail(routerProj + " is quantized (" + c.quantization.formatName() +
         "); Spark runs the MoE router in bf16: quantize the checkpoint with the router "
         "excluded (ModelOpt and spark-quantize exclude \"*router*\" by default)");
  Value f1 = rmsNorm(mlpOut, weight(p + ".post_feedforward_layernorm_1.weight", {h}),
                     p + ".post_feedforward_layernorm_1");
  auto router = MoeRouterOp::create(
      b, loc(p + ".router"), act({c.topKExperts}),
      RankedTensorType::get({ShapedType::kDynamic, c.topKExperts}, b.getI32Type()), residual,
      weight(p + ".router.scale", {h}), weight(p + ".router.proj.weight", {e, h}),
      weight(p + ".router.per_expert_scale", {e}), b.getI64IntegerAttr(c.topKExperts),
      b.getF32FloatAttr(c.rmsNormEps));
  Value x2 = rmsNorm(residual, weight(p + ".pre_feedforward_layernorm_2.weight", {h}),
                     p + ".pre_feedforward_layernorm_2");
  ExpertWeights w = expertWeights(p);
  Value f2 = MoeExpertsOp::create(b, loc(p + ".experts"), act({h}), x2, w.gateUp, w.down,
                                  router.getWeights(), router.getIndices(), w.gateUpScales,
                                  w.downScales);
  f2 = rmsNorm(f2, weight(p + ".post_feedforward_layernorm_2.weight", {h}),
               p + ".post_feedforward_layernorm_2");
  return AddOp::create(b, loc(p + ".moe_add"), f1, f2);
}

// Section 5: the exact order of a decoder layer.
Value GraphBuilder::layer(Value h, const LayerConfig &l, Value pleInputs) {
  std::string p = formatv("layers.{0}", l.index).str();
  int64_t hs = c.hiddenSize;
  Value a = rmsNorm(h, weight(p + ".input_layernorm.weight", {hs}), p + ".input_layernorm");
  a = attention(a, l);
  a = rmsNorm(a, weight(p + ".post_attention_layernorm.weight", {hs}),
              p + ".post_attention_layernorm");
  h = AddOp::create(b, loc(p + ".attention_residual"), h, a);

  Value r = h;
  Value f = rmsNorm(h, weight(p + ".pre_feedforward_layernorm.weight", {hs}),
                    p + ".pre_feedforward_layernorm");
  f = mlp(f, l, p);
  if (c.moe)
    f = moe(f, r, p);
  f = rmsNorm(f, weight(p + ".post_feedforward_layernorm.weight", {hs}),
              p + ".post_feedforward_layernorm");
  h = AddOp::create(b, loc(p + ".mlp_residual"), r, f);

  if (pleInputs) {
    Value pi = SelectGroupOp::create(b, loc(p + ".per_layer_input"), act({c.pleDim}),
                                     pleInputs, b.getI64IntegerAttr(l.index));
    Value g = linear(h, p + ".per_layer_input_gate", c.pleDim);
    g = GeluOp::create(b, loc(p + ".per_layer_input_gelu"), g);
    g = MulOp::create(b, loc(p + ".per_layer_input_mul"), g, pi);
    g = linear(g, p + ".per_layer_projection", hs);
    g = rmsNorm(g, weight(p + ".post_per_layer_input_norm.weight", {hs}),
                p + ".post_per_layer_input_norm");
    h = AddOp::create(b, loc(p + ".per_layer_residual"), h, g);
  }
  return ScalarMulOp::create(b, loc(p + ".layer_scalar"), h.getType(), h,
                             weight(p + ".layer_scalar", {1}));
}

OwningOpRef<ModuleOp> GraphBuilder::build() {
  fileLoc = FileLineColLoc::get(ctx, c.path, 1, 1);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  encoder = importsVisionTower(c, options);
  (*module)->setAttr("spark.model", modelAttr());
  declareCaches(*module);

  Type hiddenRows = act({c.hiddenSize});
  SmallVector<Type> inputs{idsType(), idsType(), hiddenRows, idsType()};
  SmallVector<StringRef> inputNames{"ids", "positions", "soft_embeddings", "soft_indices"};
  if (c.bidirectionalVision) {
    inputs.push_back(idsType());
    inputNames.push_back("last_visible");
  }
  auto fn = func::FuncOp::create(b, loc("forward"), "forward",
                                 b.getFunctionType(inputs, {act({c.vocabSize})}));
  for (auto [i, name] : llvm::enumerate(inputNames))
    fn.setArgAttr(i, "spark.input", b.getStringAttr(name));
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  Value ids = body->getArgument(0);
  positions = body->getArgument(1);
  if (c.bidirectionalVision)
    lastVisible = body->getArgument(4);

  // Section 10: placeholder ids embed as the pad id, then the soft tokens replace those rows.
  Value maskedIds = ids;
  if (!c.softTokenIds.empty()) {
    SmallVector<int32_t> placeholders(c.softTokenIds.begin(), c.softTokenIds.end());
    maskedIds = MaskTokensOp::create(b, loc("mask_soft_tokens"), ids,
                                     b.getDenseI32ArrayAttr(placeholders),
                                     b.getI32IntegerAttr(c.padTokenId));
  }
  Value h = embed(maskedIds);
  h = ScatterNdOp::create(b, loc("merge_soft_tokens"), h.getType(), h, body->getArgument(3),
                          body->getArgument(2));
  Value pleInputs = c.pleDim > 0 ? perLayerInputs(maskedIds, h) : Value();
  for (const LayerConfig &l : c.layers)
    h = layer(h, l, pleInputs);
  h = rmsNorm(h, weight("norm.weight", {c.hiddenSize}), "norm");
  // A tied head reads the (bf16) embedding table; an untied one is a linear like the others.
  Value logits =
      c.tieWordEmbeddings
          ? LinearOp::create(b, loc("lm_head"), act({c.vocabSize}), h,
                             weight("embed_tokens.weight", {c.vocabSize, c.hiddenSize}))
                .getResult()
          : linearOf(h, "lm_head", "lm_head", c.vocabSize);
  if (c.finalLogitSoftcapping)
    logits = SoftcapOp::create(b, loc("final_logit_softcap"), logits,
                               b.getF32FloatAttr(*c.finalLogitSoftcapping));
  func::ReturnOp::create(b, loc("return"), logits);
  if (encoder)
    buildImageEncoder(*module);
  return module;
}

} // namespace

bool importsVisionTower(const GemmaConfig &config, const ImportOptions &options) {
  if (!config.vision || !options.vision)
    return false;
  return !options.checkpoint ||
         options.checkpoint->Find("model.vision_tower.patch_embedder.input_proj.weight");
}

llvm::Expected<OwningOpRef<ModuleOp>> importGemma(const GemmaConfig &config,
                                            const ImportOptions &options, MLIRContext *context) {
  context->loadDialect<SparkDialect, func::FuncDialect>();
  GraphBuilder builder(config, options, context);
  OwningOpRef<ModuleOp> module = builder.build();
  if (!builder.error.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s",
                                   builder.error.c_str());
  return module;
}

bool hasSafetensors(llvm::StringRef dir) {
  // An index alone (its shards missing) is a checkpoint too: the check must report the missing
  // shards, not be skipped.
  llvm::SmallString<256> index(dir);
  llvm::sys::path::append(index, "model.safetensors.index.json");
  if (llvm::sys::fs::exists(index))
    return true;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ".safetensors")
      return true;
  return false;
}

llvm::Error checkWeightsAgainstCheckpoint(ModuleOp module, llvm::StringRef dir,
                                          const rt::Checkpoint *opened) {
  // One implementation of the check: the runtime's, over a plan that lists the weights.
  rt::Plan plan;
  if (auto model = module->getAttrOfType<ModelAttr>("spark.model"))
    plan.model.weight_prefix = model.getWeightPrefix().str();
  llvm::StringSet<> seen;
  module.walk([&](WeightOp w) {
    if (!seen.insert(w.getName()).second)
      return;
    rt::WeightInfo info;
    info.name = w.getName().str();
    // An element type the runtime has no name for cannot be in a checkpoint: f32 then makes the
    // check below report the mismatch with the checkpoint's real dtype.
    info.dtype = runtimeElementType(w.getType().getElementType()).value_or(rt::DType::kF32);
    info.shape.assign(w.getType().getShape().begin(), w.getType().getShape().end());
    if (std::optional<ArrayAttr> parts = w.getParts()) {
      for (Attribute part : *parts)
        info.parts.push_back(cast<StringAttr>(part).str());
      ArrayRef<int64_t> partShape = *w.getPartShape();
      info.part_shape.assign(partShape.begin(), partShape.end());
    }
    plan.weights.push_back(std::move(info));
  });
  std::unique_ptr<rt::Checkpoint> own;
  if (!opened) {
    absl::StatusOr<std::unique_ptr<rt::Checkpoint>> checkpoint = rt::Checkpoint::Open(dir.str());
    if (!checkpoint.ok())
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s",
                                     std::string(checkpoint.status().message()).c_str());
    own = std::move(*checkpoint);
    opened = own.get();
  }
  absl::Status status = rt::CheckPlanWeights(plan, *opened, "the config");
  if (!status.ok())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "does not match the checkpoint in %s: %s", dir.str().c_str(),
                                   std::string(status.message()).c_str());
  return llvm::Error::success();
}

void printSummary(const GemmaConfig &c, ModuleOp module, llvm::raw_ostream &os) {
  ParameterCounts counts = countParameters(c);
  os << "model:      " << c.variant() << " (" << c.architecture << ", weights under '"
     << c.weightPrefix << "')\n";
  os << llvm::formatv("hidden {0}, {1} layers, vocab {2}, sliding window {3}, softcap {4}\n",
                      c.hiddenSize, c.numLayers, c.vocabSize, c.slidingWindow,
                      c.finalLogitSoftcapping
                          ? llvm::formatv("{0}", *c.finalLogitSoftcapping).str()
                          : std::string("none"));
  if (c.moe)
    os << llvm::formatv("moe:        {0} experts, top {1}, expert width {2}, dense MLP beside "
                        "them in every layer\n",
                        c.numExperts, c.topKExperts, c.moeIntermediate);
  if (c.pleDim > 0)
    os << llvm::formatv("ple:        {0} per layer ({1}-token table)\n", c.pleDim, c.pleVocab);
  if (c.numKvSharedLayers > 0)
    os << llvm::formatv("kv sharing: last {0} layers read earlier layers' caches\n",
                        c.numKvSharedLayers);
  if (c.bidirectionalVision)
    os << "vision:     bidirectional within each image on sliding layers "
          "(use_bidirectional_attention \"vision\"); full layers and decode causal\n";
  if (c.vision && module.lookupSymbol<func::FuncOp>("encode_image")) {
    const VisionConfig &v = *c.vision;
    os << llvm::formatv("images:     vision tower (@encode_image) hidden {0}, {1} layers, {2} "
                        "heads x {3}, mlp {4}{5}{6}; 16x16 patches pooled 3x3 into soft tokens "
                        "(ids: image {7}, boi {8}, eoi {9})\n",
                        v.hiddenSize, v.numLayers, v.numHeads, v.headDim, v.intermediateSize,
                        v.standardize ? ", standardize" : "",
                        v.clippedLinears ? ", clipped linears" : "", c.imageTokenId, c.boiTokenId,
                        c.eoiTokenId);
  }
  os << "layer  type     heads  kv  head_dim  rope_pairs  k=v  kv_cache     mlp\n";
  for (const LayerConfig &l : c.layers) {
    std::string cache = l.kvShared ? llvm::formatv("<- layer {0}", l.kvSource).str()
                                   : std::string("own");
    os << llvm::formatv("{0,5}  {1,-7}  {2,5}  {3,2}  {4,8}  {5,10}  {6,-3}  {7,-11}  {8}\n",
                        l.index, l.full ? "full" : "sliding", l.numHeads, l.numKvHeads,
                        l.headDim, l.rotatedPairs, l.kEqV ? "yes" : "no", cache,
                        l.intermediate);
  }
  auto scaled = [](int64_t n) {
    return n >= 1000000000 ? llvm::formatv("{0:F2} B", n / 1e9).str()
                           : llvm::formatv("{0:F2} M", n / 1e6).str();
  };
  os << llvm::formatv("parameters: {0} total ({1}), {2} active per token ({3})\n", counts.total,
                      scaled(counts.total), counts.activePerToken, scaled(counts.activePerToken));
  // The bytes of the tensors the graph reads, by element type (each tensor once).
  llvm::StringSet<> seen;
  std::map<std::string, uint64_t> bytesByType;
  uint64_t bytes = 0;
  module.walk([&](WeightOp w) {
    if (!seen.insert(w.getName()).second)
      return;
    std::optional<rt::DType> dtype = runtimeElementType(w.getType().getElementType());
    uint64_t n = dtype ? rt::DTypeBytes(*dtype, w.getType().getNumElements()).value_or(0) : 0;
    std::string name;
    llvm::raw_string_ostream(name) << w.getType().getElementType();
    bytesByType[name] += n;
    bytes += n;
  });
  auto size = [](uint64_t n) {
    return n >= (uint64_t{1} << 30)   ? llvm::formatv("{0:F2} GiB", n / 1073741824.0).str()
           : n >= (uint64_t{1} << 20) ? llvm::formatv("{0:F2} MiB", n / 1048576.0).str()
                                      : llvm::formatv("{0:F1} KiB", n / 1024.0).str();
  };
  os << "weights:    " << size(bytes);
  if (c.quantization.quantized()) {
    os << " (" << c.quantization.formatName() << " linears;";
    const char *separator = " ";
    for (auto &[type, n] : bytesByType) {
      os << separator << type << " " << size(n);
      separator = ", ";
    }
    os << ")\n";
  } else {
    os << " in bf16\n";
  }
}

} // namespace spark

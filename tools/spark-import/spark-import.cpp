//===- spark-import.cpp - HF Gemma 4 config.json -> model.mlir -------------===//
//
//   spark-import CHECKPOINT_DIR_OR_CONFIG -o model.mlir [--summary] [--no-weight-check]
//
//===----------------------------------------------------------------------===//
#include "compiler/Import/ImportGemma.h"
#include "compiler/InitAll.h"
#include "spark/runtime/safetensors.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

static cl::OptionCategory sparkImportCategory("spark-import options");

static cl::opt<std::string> inputPath(cl::Positional,
                                      cl::desc("<checkpoint directory or config.json>"),
                                      cl::Required, cl::cat(sparkImportCategory));
static cl::opt<std::string> outputPath("o", cl::desc("Output model.mlir (default: stdout)"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::cat(sparkImportCategory));
static cl::opt<bool> summary("summary",
                             cl::desc("Print the variant, the layer table and the parameter "
                                      "counts to stdout (with -o, the module is still written)"),
                             cl::cat(sparkImportCategory));
static cl::opt<bool> noWeightCheck(
    "no-weight-check",
    cl::desc("Do not check the graph's weights against the directory's safetensors headers"),
    cl::cat(sparkImportCategory));
static cl::opt<bool> weightOnlyQuantization(
    "weight-only-quantization",
    cl::desc("Import a quantized checkpoint whose config also quantizes activations or the KV "
             "cache (compressed-tensors input_activations / kv_cache_scheme, ModelOpt "
             "kv_cache_quant_algo), which Spark does not do: its weights run quantized, its "
             "activations and KV cache in f32 / bf16. Without it such a config is refused"),
    cl::cat(sparkImportCategory));
static cl::opt<bool> roundScales(
    "round-scales-to-bf16",
    cl::desc("Round the embedding scales to bf16, as transformers does in a bf16 model "
             "(default: f32, matching Spark's f32 activations and transformers in float32)"),
    cl::cat(sparkImportCategory));

static cl::opt<bool> noVision(
    "no-vision",
    cl::desc("Leave out the vision tower of a multimodal checkpoint (no @encode_image: the "
             "compiled model takes no --image, only text and precomputed --soft-tokens)"),
    cl::cat(sparkImportCategory));

static int fail(const Twine &message) {
  WithColor::error(errs(), "spark-import") << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&sparkImportCategory, &getColorCategory()});
  cl::ParseCommandLineOptions(
      argc, argv,
      "spark-import: turns a Gemma 4 HuggingFace checkpoint's config.json into a spark dialect "
      "module (model.mlir) for spark-compile.\n\n"
      "When the directory holds *.safetensors, every weight the graph uses is checked against "
      "their headers (present, shape, dtype).\n\n"
      "A quantized checkpoint in NVIDIA ModelOpt's NVFP4 or FP8 layout (quantization_config "
      "in config.json, or hf_quant_config.json) or in compressed-tensors' NVFP4 or FP8 layout "
      "(quant_method compressed-tensors: nvfp4-pack-quantized weights, or float-quantized "
      "weights per tensor or channel) is imported with its scales; any other quantization is "
      "refused (docs/quantization.md).\n");

  Expected<spark::GemmaConfig> config = spark::parseGemmaConfig(inputPath);
  if (!config)
    return fail(toString(config.takeError()));
  for (const std::string &warning : config->warnings)
    WithColor::warning(errs(), "spark-import") << config->path << ": " << warning << "\n";
  const std::vector<std::string> &unhonoured = config->quantization.unhonoured;
  if (!unhonoured.empty() && !weightOnlyQuantization)
    return fail(config->path + ": " + unhonoured.front() +
                (unhonoured.size() > 1
                     ? " (and " + Twine(unhonoured.size() - 1) + " more such field(s))"
                     : Twine()) +
                "; pass --weight-only-quantization to run the quantized weights with f32 / bf16 "
                "activations and KV cache anyway");
  for (const std::string &field : unhonoured)
    WithColor::note(errs(), "spark-import")
        << config->path << ": " << field << " (--weight-only-quantization)\n";

  mlir::DialectRegistry registry;
  spark::registerAllDialects(registry);
  mlir::MLIRContext context(registry);

  SmallString<256> dir(inputPath);
  if (!sys::fs::is_directory(dir))
    sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  const bool checkWeights = !noWeightCheck && spark::hasSafetensors(dir);
  // The headers say which linears of a quantized checkpoint are quantized and how a MoE
  // checkpoint stores its experts (fused, or one linear per expert: ImportOptions).
  std::unique_ptr<spark::rt::Checkpoint> checkpoint;
  if (checkWeights) {
    // (A checkpoint that cannot be opened is reported by the weight check below, in context.)
    absl::StatusOr<std::unique_ptr<spark::rt::Checkpoint>> opened =
        spark::rt::Checkpoint::Open(dir.str().str());
    if (opened.ok())
      checkpoint = std::move(*opened);
  }
  spark::ImportOptions options;
  options.roundScalesToBf16 = roundScales;
  options.checkpoint = checkpoint.get();
  options.vision = !noVision;
  if (config->vision && options.vision && !spark::importsVisionTower(*config, options))
    WithColor::note(errs(), "spark-import")
        << config->path << ": the config has a vision_config but the checkpoint has no vision "
        << "tower (model.vision_tower.*): imported without image input\n";
  Expected<mlir::OwningOpRef<mlir::ModuleOp>> imported =
      spark::importGemma(*config, options, &context);
  if (!imported)
    return fail(config->path + ": " + toString(imported.takeError()));
  mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*imported);
  if (failed(mlir::verify(*module)))
    return fail("the imported module does not verify (a bug in spark-import: please report it)");

  if (checkWeights) {
    if (Error e = spark::checkWeightsAgainstCheckpoint(*module, dir, checkpoint.get()))
      return fail(config->path + ": " + toString(std::move(e)));
  }

  if (summary)
    spark::printSummary(*config, *module, outs());
  if (summary && outputPath == "-")
    return 0;
  std::string error;
  std::unique_ptr<ToolOutputFile> out = mlir::openOutputFile(outputPath, &error);
  if (!out)
    return fail(error);
  // Keep the NameLocs: they name each plan step's source (layers.3.self_attn.q_proj) and
  // --dump's tensors.
  mlir::OpPrintingFlags flags;
  flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  module->print(out->os(), flags);
  out->keep();
  return 0;
}

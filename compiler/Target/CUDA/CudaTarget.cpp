//===- CudaTarget.cpp - targets, kernel library, ptxas, plan section -------===//
#include "compiler/Target/CUDA/CudaTarget.h"

#include "compiler/Support/ElementTypes.h"
#include "dialects/Spark/IR/SparkOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Object/ELF.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"

#include "spark/runtime/module_resolver.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/plan_format.h"
#include "spark/runtime/target.h"

#include <cstring>

using namespace llvm;
using mlir::ArrayAttr;
using mlir::Attribute;

namespace spark {
namespace {

Error makeError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), "%s", message.str().c_str());
}

std::string fromStatus(const absl::Status &status) { return std::string(status.message()); }

} // namespace

StringRef supportedTargetsText() {
  return "sm_121a (DGX Spark, default), sm_120a, sm_120f, sm_100a, sm_90a, sm_80, "
         "or compute_XY for PTX only (e.g. compute_90)";
}

Expected<CudaTarget> parseCudaTarget(StringRef name) {
  absl::StatusOr<rt::Target> parsed = rt::ParseTarget(std::string(name));
  if (!parsed.ok())
    return makeError(fromStatus(parsed.status()) + "; supported targets: " +
                     supportedTargetsText());
  int cc = parsed->major * 10 + parsed->minor;
  if (cc < 80)
    return makeError(formatv("target '{0}' is older than compute capability 8.0, which Spark "
                             "does not support; supported targets: {1}",
                             name, supportedTargetsText()));
  CudaTarget target;
  target.name = name.str();
  // PTX ISA 8.8 is the first that knows sm_121a; CUDA 13's ptxas takes it for every target.
  target.features = "+ptx88";
  if (parsed->kind == rt::TargetKind::kPtx) {
    target.ptxOnly = true;
    target.chip = formatv("sm_{0}", cc).str();
  } else {
    target.chip = name.str();
    target.ptxasArch = name.str();
  }
  return target;
}

Expected<std::string> findKernelLibrary(const CudaTarget &target, ArrayRef<std::string> extraDirs,
                                        const char *argv0, raw_ostream *log) {
  // The libraries a target can link: its own; for PTX targets, the generic, arch-specific or
  // family build of the same architecture.
  SmallVector<std::string> names{target.name};
  if (target.ptxOnly)
    names = {target.chip, target.chip + "a", target.chip + "f"};

  // The runtime's search path (flags, SPARK_MODULE_PATH, ..., install prefix): one resolver.
  rt::ResolveRequest request;
  request.module_path.assign(extraDirs.begin(), extraDirs.end());
  if (const char *env = std::getenv("SPARK_MODULE_PATH"))
    request.env_module_path = env;
  std::string exe = sys::fs::getMainExecutable(argv0, (void *)&findKernelLibrary);
  SmallString<256> prefix(sys::path::parent_path(sys::path::parent_path(exe)));
  request.install_prefix = std::string(prefix);
  std::vector<std::string> dirs;
  for (const std::string &d : extraDirs)
    dirs.push_back(d);
  for (const rt::SearchDir &dir : rt::ModuleSearchPath(request))
    // No artifact here: skip the "directory of the model" entry (it would be the working
    // directory, where a stale kernels/ must not win over the installed library).
    if (!StringRef(dir.origin).starts_with("directory of") &&
        !llvm::is_contained(dirs, dir.path))
      dirs.push_back(dir.path);

  std::string tried;
  for (const std::string &dir : dirs)
    for (const std::string &name : names) {
      SmallString<256> path(dir);
      sys::path::append(path, "kernels", name, "spark_kernels.bc");
      bool exists = sys::fs::exists(path);
      if (log)
        *log << "kernel library: " << path << (exists ? ": found\n" : ": not found\n");
      if (exists)
        return std::string(path);
      tried += ("\n  " + path).str();
    }
  return makeError(formatv("no kernel library for target '{0}'; looked for:{1}\nbuild it with "
                           "`cmake -DSPARK_TARGETS=\"{2}\" ...` and `ninja spark_kernel_library`, "
                           "or point --kernel-library-dir / SPARK_MODULE_PATH at a directory "
                           "holding kernels/{2}/spark_kernels.bc",
                           target.name, tried, names.front()));
}

Expected<std::string> findPtxas(StringRef flag, raw_ostream *log) {
  SmallVector<std::pair<std::string, std::string>> candidates; // (where, path)
  if (!flag.empty())
    candidates.push_back({"--ptxas", flag.str()});
  if (const char *env = std::getenv("SPARK_PTXAS"))
    candidates.push_back({"SPARK_PTXAS", env});
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *env = std::getenv(var)) {
      SmallString<256> p(env);
      sys::path::append(p, "bin", "ptxas");
      candidates.push_back({(Twine("$") + var + "/bin").str(), std::string(p)});
    }
  candidates.push_back({"the default CUDA install", "/usr/local/cuda/bin/ptxas"});
  std::string tried;
  for (auto &[where, path] : candidates) {
    bool ok = sys::fs::can_execute(path);
    if (log)
      *log << "ptxas: " << where << ": " << path << (ok ? " (using it)\n" : " (not executable)\n");
    if (ok)
      return path;
    tried += formatv("\n  {0}: {1} (not found or not executable)", where, path).str();
    // An explicit choice that does not work is an error, not something to fall back from.
    if (where == "--ptxas" || where == "SPARK_PTXAS")
      return makeError(formatv("ptxas given by {0} is not executable: {1}", where, path));
  }
  if (ErrorOr<std::string> onPath = sys::findProgramByName("ptxas")) {
    if (log)
      *log << "ptxas: PATH: " << *onPath << " (using it)\n";
    return *onPath;
  }
  return makeError("cannot find ptxas; looked at:" + tried +
                   "\n  PATH: no ptxas\ninstall the CUDA toolkit (13.0 or newer for sm_121a), "
                   "or pass --ptxas /path/to/ptxas, or set SPARK_PTXAS or CUDA_HOME");
}

Expected<std::string> runPtxas(StringRef ptxas, const CudaTarget &target, StringRef ptx,
                               StringRef keepDir, raw_ostream *log) {
  SmallString<256> ptxPath, cubinPath, errPath;
  if (!keepDir.empty()) {
    if (std::error_code ec = sys::fs::create_directories(keepDir))
      return makeError("cannot create " + keepDir + ": " + ec.message());
    ptxPath = keepDir;
    sys::path::append(ptxPath, "model." + target.name + ".ptx");
    cubinPath = keepDir;
    sys::path::append(cubinPath, "model." + target.name + ".ptxas.cubin");
  } else {
    if (std::error_code ec = sys::fs::createTemporaryFile("spark-" + target.name, "ptx", ptxPath))
      return makeError("cannot create a temporary file: " + ec.message());
    if (std::error_code ec =
            sys::fs::createTemporaryFile("spark-" + target.name, "cubin", cubinPath))
      return makeError("cannot create a temporary file: " + ec.message());
  }
  if (std::error_code ec = sys::fs::createTemporaryFile("spark-ptxas", "log", errPath))
    return makeError("cannot create a temporary file: " + ec.message());
  {
    std::error_code ec;
    raw_fd_ostream os(ptxPath, ec);
    if (ec)
      return makeError("cannot write " + ptxPath + ": " + ec.message());
    os << ptx;
  }
  std::string archArg = "-arch=" + target.ptxasArch;
  SmallVector<StringRef> args{ptxas, archArg, "-O3", ptxPath, "-o", cubinPath};
  std::string command = join(args, " ");
  if (log)
    *log << "ptxas: running " << command << "\n";
  std::optional<StringRef> redirects[] = {std::nullopt, std::nullopt, StringRef(errPath)};
  std::string execError;
  int rc = sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0, 0, &execError);
  std::string stderrText;
  if (ErrorOr<std::unique_ptr<MemoryBuffer>> err = MemoryBuffer::getFile(errPath))
    stderrText = (*err)->getBuffer().str();
  sys::fs::remove(errPath);
  if (rc != 0) {
    if (keepDir.empty())
      sys::fs::remove(cubinPath); // keep the .ptx for the repro command
    return makeError(formatv("ptxas failed for target {0} (exit code {1}){2}\n{3}\nreproduce "
                             "with:\n  {4}",
                             target.name, rc, execError.empty() ? "" : ": " + execError,
                             StringRef(stderrText).trim(), command));
  }
  ErrorOr<std::unique_ptr<MemoryBuffer>> cubin = MemoryBuffer::getFile(cubinPath);
  if (!cubin)
    return makeError("ptxas wrote no output at " + cubinPath);
  std::string bytes = (*cubin)->getBuffer().str();
  if (keepDir.empty()) {
    sys::fs::remove(ptxPath);
    sys::fs::remove(cubinPath);
  }
  return bytes;
}

namespace {

rt::StepArg stepArg(LaunchArgAttr attr) {
  rt::StepArg arg;
  switch (attr.getKind()) {
  case LaunchArgKind::buffer: arg.kind = rt::ArgRefKind::kBuffer; break;
  case LaunchArgKind::weight: arg.kind = rt::ArgRefKind::kWeight; break;
  case LaunchArgKind::k_cache: arg.kind = rt::ArgRefKind::kKCache; break;
  case LaunchArgKind::v_cache: arg.kind = rt::ArgRefKind::kVCache; break;
  case LaunchArgKind::kv_capacity: arg.kind = rt::ArgRefKind::kKvCapacity; break;
  case LaunchArgKind::kv_block_table: arg.kind = rt::ArgRefKind::kKvBlockTable; break;
  case LaunchArgKind::null: arg.kind = rt::ArgRefKind::kNull; break;
  case LaunchArgKind::num_tokens: arg.kind = rt::ArgRefKind::kNumTokens; break;
  case LaunchArgKind::num_soft_tokens: arg.kind = rt::ArgRefKind::kNumSoftTokens; break;
  case LaunchArgKind::i32:
    arg.kind = rt::ArgRefKind::kI32;
    arg.i32 = static_cast<int32_t>(attr.getValue());  // the attribute verifier checked the range
    return arg;
  case LaunchArgKind::f32:
    arg.kind = rt::ArgRefKind::kF32;
    arg.f32 = attr.getF32Value();
    return arg;
  }
  arg.index = attr.getValue();
  return arg;
}

/// The width of the logits buffer `id` of `program` (-1 when it is not one [T, N] buffer).
int64_t logitsWidth(ProgramOp program, int64_t id) {
  if (id < 0 || id >= int64_t(program.getBuffers().size()))
    return -1;
  ArrayRef<int64_t> row = cast<BufferAttr>(program.getBuffers()[id]).getRowShape();
  return row.size() == 1 ? row[0] : -1;
}

/// The runtime's element type of a buffer or weight (the verifiers admitted only those it has).
Expected<rt::DType> dtypeOf(mlir::Type type, StringRef what, StringRef name) {
  if (std::optional<rt::DType> dtype = runtimeElementType(type))
    return *dtype;
  std::string text;
  llvm::raw_string_ostream(text) << type;
  return makeError(llvm::formatv("spark.program {0} '{1}' has element type {2}, which the runtime "
                                 "has no type for",
                                 what, name, text)
                       .str());
}

/// The model facts the runtime needs, from the program's #spark.model (spark-import writes it on
/// the module; its verifier checked sizes and token ids); the vocabulary must be the logits'
/// width.
Error readModelFacts(ModelAttr model, std::optional<int64_t> logitsWidth, rt::ModelInfo &info) {
  if (!model)
    return makeError("the module has no spark.model attribute (the model facts spark-import "
                     "writes: vocab_size, hidden_size, eos_token_ids, ...); import the model with "
                     "spark-import");
  info.variant = model.getVariant().str();
  info.architecture = model.getArchitecture().str();
  info.vocab_size = model.getVocabSize();
  info.hidden_size = model.getHiddenSize();
  info.num_layers = model.getNumLayers();
  info.max_position_embeddings = model.getMaxPositionEmbeddings();
  info.bos_token_id = model.getBosTokenId();
  info.pad_token_id = model.getPadTokenId();
  info.weight_prefix = model.getWeightPrefix().str();
  info.eos_token_ids.assign(model.getEosTokenIds().begin(), model.getEosTokenIds().end());
  info.soft_token_ids.assign(model.getSoftTokenIds().begin(), model.getSoftTokenIds().end());
  info.image_token_id = model.getImageTokenId();
  info.boi_token_id = model.getBoiTokenId();
  info.eoi_token_id = model.getEoiTokenId();
  if (logitsWidth && info.vocab_size != *logitsWidth)
    return makeError(llvm::formatv("spark.model says vocab_size {0}, but the entry returns logits "
                                   "{1} wide",
                                   info.vocab_size, logitsWidth)
                         .str());
  return Error::success();
}


/// The plan of one spark.program: the model's text program, or its image encoder (a program
/// with the pixel_patches input: no KV caches, no logits).
Expected<rt::Plan> planOfProgram(mlir::ModuleOp module, ProgramOp program,
                                 const CudaTarget &target) {
  rt::Plan plan;
  plan.version = plan_format::kPlanVersion;
  plan.target = target.name;
  plan.max_tokens = program.getMaxTokens();
  plan.ranks = program.getRanks().value_or(1);
  plan.arena_bytes = program.getArenaBytes();
  std::optional<mlir::Type> precision = program.getActivationPrecision();
  plan.activation_precision = precision && precision->isBF16() ? rt::DType::kBF16 : rt::DType::kF32;

  ProgramInputsAttr inputs = program.getInputs();
  plan.input_ids = inputs.getIds();
  plan.input_positions = inputs.getPositions();
  plan.soft_embeddings = inputs.getSoftEmbeddings();
  plan.soft_indices = inputs.getSoftIndices();
  plan.input_last_visible = inputs.getLastVisible();
  plan.input_sampling = inputs.getSampling();
  plan.input_sequences = inputs.getSequences();
  plan.input_pixel_patches = inputs.getPixelPatches();
  plan.input_patch_positions = inputs.getPatchPositions();
  plan.output_logits = program.getOutputs().getLogits();
  plan.output_tokens = program.getOutputs().getTokens();
  plan.output_embeddings = program.getOutputs().getEmbeddings();
  if (Error e = readModelFacts(program.getModelAttr(),
                               plan.is_image_encoder()
                                   ? std::nullopt
                                   : std::optional<int64_t>(
                                         logitsWidth(program, plan.output_logits)),
                               plan.model))
    return std::move(e);

  for (auto attr : program.getBuffers().getAsRange<BufferAttr>()) {
    rt::BufferInfo buffer;
    buffer.name = attr.getName().str();
    // ValidatePlan (below) checks that the dtype fits the plan's activation precision.
    Expected<rt::DType> dtype = dtypeOf(attr.getDtype(), "buffer", buffer.name);
    if (!dtype)
      return dtype.takeError();
    buffer.dtype = *dtype;
    buffer.row_shape.assign(attr.getRowShape().begin(), attr.getRowShape().end());
    if (!attr.getOffset())
      return makeError(llvm::formatv("spark.program buffer '{0}' has no offset (run "
                                     "spark-plan-arena after spark-lower-to-kernels)",
                                     buffer.name)
                           .str());
    buffer.offset = *attr.getOffset();
    plan.buffers.push_back(std::move(buffer));
  }
  for (auto attr : program.getWeights().getAsRange<WeightAttr>()) {
    rt::WeightInfo weight;
    weight.name = attr.getName().str();
    Expected<rt::DType> dtype = dtypeOf(attr.getDtype(), "weight", weight.name);
    if (!dtype)
      return dtype.takeError();
    weight.dtype = *dtype;  // ValidatePlan (below) says which types plans may hold
    weight.shape.assign(attr.getShape().begin(), attr.getShape().end());
    if (attr.getParts()) {
      for (auto part : attr.getParts().getAsRange<mlir::StringAttr>())
        weight.parts.push_back(part.str());
      weight.part_shape.assign(attr.getPartShape().begin(), attr.getPartShape().end());
    }
    if (attr.getTransform() == WeightTransform::reciprocal)
      weight.transform = rt::WeightTransform::kReciprocal;
    if (ShardAttr shard = attr.getShard())
      weight.shard = {shard.getAxis(), shard.getParts(), shard.getChunks()};
    plan.weights.push_back(std::move(weight));
  }
  for (KvCacheOp cache : module.getOps<KvCacheOp>()) {
    if (plan.is_image_encoder())
      break; // the image encoder reads no KV cache
    rt::KvCacheInfo info;
    info.name = cache.getSymName().str();
    info.kind = cache.getKind() == KvKind::sliding ? rt::KvKind::kSliding : rt::KvKind::kFull;
    info.window = cache.getWindow();
    info.kv_heads = cache.getKvHeads();
    info.head_dim = cache.getHeadDim();
    std::optional<rt::DType> cacheType = runtimeElementType(cache.getCacheElementType());
    if (!cacheType)
      return makeError(llvm::formatv("KV cache '{0}' has element type {1}, which the runtime has "
                                     "no type for",
                                     info.name, cache.getCacheElementType())
                           .str());
    info.dtype = *cacheType;
    plan.kv_caches.push_back(std::move(info));
  }
  // The steps in program order: kernel launches and transfers (a step the runtime carries out
  // without a kernel, plan.h TransferStep).
  auto readArgs = [](ArrayAttr attrs) {
    std::vector<rt::StepArg> args;
    for (auto arg : attrs.getAsRange<LaunchArgAttr>())
      args.push_back(stepArg(arg));
    return args;
  };
  // The launch and transfer verifiers checked each op against the registry (a known op of the
  // right execution, its arity and argument kinds).
  for (mlir::Operation &op : program.getBody().front()) {
    if (auto transfer = dyn_cast<TransferOp>(op)) {
      const abi::OpSpec *spec = abi::FindOp(transfer.getOp().str().c_str());
      std::vector<rt::StepArg> args = readArgs(transfer.getArgs());
      auto source = transfer->getAttrOfType<mlir::StringAttr>("source");
      plan.steps.push_back(
          rt::TransferStep(spec->id, source ? source.getValue().str() : "", std::move(args)));
      plan.steps.back().logits_tail = transfer.getLogitsTail();
      continue;
    }
    auto launch = dyn_cast<LaunchOp>(op);
    if (!launch)
      continue;
    rt::Step step;
    step.op = abi::FindOp(launch.getOp().str().c_str())->id;
    step.kernel = launch.getKernel().getLeafReference().getValue().str();
    if (auto source = launch->getAttrOfType<mlir::StringAttr>("source"))
      step.source = source.getValue().str();
    step.logits_tail = launch.getLogitsTail();
    step.grid = {launch.getGridPerTokenAttr().getInt(), launch.getGridFixedAttr().getInt(),
                 launch.getGridDivisorAttr().getInt()};
    for (int i = 0; i < 3; ++i)
      step.block[i] = launch.getBlock()[i];
    step.args = readArgs(launch.getArgs());
    plan.steps.push_back(std::move(step));
  }
  // The programs (plan.h): decode, then ranges of prefill sizes that run the same steps.
  rt::BuildPrograms(&plan);
  return plan;
}

} // namespace

Expected<std::string> buildPlanSection(mlir::ModuleOp module, const CudaTarget &target) {
  // The model's text program and, for a multimodal model, its image encoder (named
  // encode_image, with the pixel_patches input).
  ProgramOp text, encoder;
  for (ProgramOp program : module.getOps<ProgramOp>()) {
    ProgramOp &slot = program.getInputs().getPixelPatches() >= 0 ? encoder : text;
    if (slot)
      return makeError("the module has two spark.program ops of one kind (text, or image "
                       "encoder); spark-compile writes one plan of each");
    slot = program;
  }
  if (!text)
    return makeError("the module has no spark.program (run spark-lower-to-kernels first)");
  Expected<rt::Plan> built = planOfProgram(module, text, target);
  if (!built)
    return built.takeError();
  rt::Plan plan = std::move(*built);
  if (encoder) {
    Expected<rt::Plan> encoderPlan = planOfProgram(module, encoder, target);
    if (!encoderPlan)
      return encoderPlan.takeError();
    plan.image_encoder = std::make_shared<const rt::Plan>(std::move(*encoderPlan));
  }
  absl::Status valid = rt::ValidatePlan(plan, "the compiled plan");
  if (!valid.ok())
    return makeError("internal error: the compiler built an invalid plan: " + fromStatus(valid));
  return rt::SerializePlanSection(plan);
}

Expected<std::string> addPlanSection(StringRef cubin, StringRef plan) {
  using Elf = object::ELF64LE;
  Expected<object::ELFFile<Elf>> file = object::ELFFile<Elf>::create(cubin);
  if (!file)
    return makeError("ptxas output is not an ELF64 file: " + toString(file.takeError()));
  const Elf::Ehdr &header = file->getHeader();
  Expected<Elf::ShdrRange> sections = file->sections();
  if (!sections)
    return sections.takeError();
  if (header.e_shstrndx == 0 || header.e_shstrndx >= sections->size())
    return makeError("ptxas output has no section name table");

  // New layout: the original bytes, the plan, a new section-name table (old + ".spark.plan"),
  // then a new section header table (old headers + one). Program headers still point at the
  // original offsets, which do not move.
  std::string out = cubin.str();
  auto align = [&](size_t to) { out.resize((out.size() + to - 1) / to * to, '\0'); };
  align(8);
  uint64_t planOffset = out.size();
  out += plan.str();

  const Elf::Shdr &oldNames = (*sections)[header.e_shstrndx];
  Expected<ArrayRef<uint8_t>> namesData = file->getSectionContents(oldNames);
  if (!namesData)
    return namesData.takeError();
  uint64_t namesOffset = out.size();
  out.append(reinterpret_cast<const char *>(namesData->data()), namesData->size());
  uint32_t planNameIndex = namesData->size();
  out += StringRef(plan_format::kSectionName).str();
  out += '\0';
  uint64_t namesSize = out.size() - namesOffset;

  align(8);
  uint64_t headersOffset = out.size();
  std::vector<Elf::Shdr> headers(sections->begin(), sections->end());
  headers[header.e_shstrndx].sh_offset = namesOffset;
  headers[header.e_shstrndx].sh_size = namesSize;
  Elf::Shdr planHeader;
  std::memset(&planHeader, 0, sizeof(planHeader));
  planHeader.sh_name = planNameIndex;
  planHeader.sh_type = ELF::SHT_PROGBITS;
  planHeader.sh_flags = 0; // not allocated: the loader ignores it
  planHeader.sh_offset = planOffset;
  planHeader.sh_size = plan.size();
  planHeader.sh_addralign = 8;
  headers.push_back(planHeader);
  out.append(reinterpret_cast<const char *>(headers.data()), headers.size() * sizeof(Elf::Shdr));

  Elf::Ehdr newHeader = header;
  newHeader.e_shoff = headersOffset;
  newHeader.e_shnum = headers.size();
  std::memcpy(out.data(), &newHeader, sizeof(newHeader));
  return out;
}

} // namespace spark

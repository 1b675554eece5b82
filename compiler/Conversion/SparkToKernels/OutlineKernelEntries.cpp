//===- OutlineKernelEntries.cpp - one gpu.func entry per launch kind -------===//
//
// After spark-lower-to-kernels: every spark.launch names the entry point of its op and literal
// arguments (@kernels::@<spark_op>__<literals>, runtime/include/spark/runtime/entry_point.h).
// This pass builds gpu.module @kernels with those entries: each calls the kernel library's
// device function (declared from the op registry, kernel_abi.h) with the literals as constants
// and its other arguments as the entry's parameters; and it defines the library's
// `spark_activation_precision` constant from the program's activation precision.
//
//===----------------------------------------------------------------------===//
#include "compiler/Conversion/Passes.h"

#include "dialects/Spark/IR/SparkOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include "spark/runtime/kernel_abi.h"

namespace spark {
#define GEN_PASS_DEF_SPARKOUTLINEKERNELENTRIESPASS
#include "compiler/Conversion/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

struct SparkOutlineKernelEntriesPass
    : spark::impl::SparkOutlineKernelEntriesPassBase<SparkOutlineKernelEntriesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    auto programs = module.getOps<ProgramOp>();
    if (programs.empty()) {
      module.emitError("expects a spark.program (run spark-lower-to-kernels first)");
      return signalPassFailure();
    }
    if (!module.getOps<gpu::GPUModuleOp>().empty()) {
      module.emitError("module already contains a gpu.module: its entries are outlined once");
      return signalPassFailure();
    }
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    auto kernels = gpu::GPUModuleOp::create(b, module.getLoc(), "kernels");
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
    b.setInsertionPointToStart(kernels.getBody());

    Type ptr = LLVM::LLVMPointerType::get(ctx), i32 = b.getI32Type(), f32 = b.getF32Type();
    auto typeOf = [&](abi::ArgKind kind) {
      return kind == abi::ArgKind::kPtr ? ptr : kind == abi::ArgKind::kI32 ? i32 : f32;
    };
    llvm::StringMap<LLVM::LLVMFuncOp> declarations;
    llvm::StringSet<> built;
    bool bf16 = false;
    for (ProgramOp program : programs) {
      if (std::optional<Type> precision = program.getActivationPrecision())
        bf16 |= precision->isBF16();
      for (LaunchOp launch : program.getBody().getOps<LaunchOp>()) {
        // The launch verifier checked the op against the registry: a kernel op, its arity and
        // argument kinds.
        const abi::OpSpec *spec = abi::FindOp(launch.getOp().str().c_str());
        SmallVector<LaunchArgAttr> args(launch.getArgs().getAsRange<LaunchArgAttr>());
        // One entry per (op, literal arguments), named after them (entry_point.h): the runtime
        // recomputes the name from each step and refuses a step that names another entry.
        const std::string name = LaunchOp::entryPointName(spec->symbol, launch.getArgs());
        SymbolRefAttr kernel = launch.getKernel();
        if (kernel.getRootReference() != "kernels" || kernel.getNestedReferences().size() != 1 ||
            kernel.getLeafReference() != name) {
          launch.emitOpError("names entry ")
              << kernel << ", but its op and literal arguments make @kernels::@" << name;
          return signalPassFailure();
        }
        if (!built.insert(name).second)
          continue;
        LLVM::LLVMFuncOp &decl = declarations[spec->symbol];
        if (!decl) {
          SmallVector<Type> params;
          for (int i = 0; i < spec->num_args; ++i)
            params.push_back(typeOf(spec->args[i].kind));
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(kernels.getBody());
          decl = LLVM::LLVMFuncOp::create(
              b, module.getLoc(), spec->symbol,
              LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), params));
        }
        SmallVector<Type> entryParams;
        for (int i = 0; i < spec->num_args; ++i)
          if (!args[i].isLiteral())
            entryParams.push_back(typeOf(spec->args[i].kind));
        auto func = gpu::GPUFuncOp::create(b, module.getLoc(), name,
                                           b.getFunctionType(entryParams, {}));
        func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
        func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({spec->block_size, 1, 1}));
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&func.getBody().front());
        SmallVector<Value> callArgs;
        unsigned param = 0;
        for (int i = 0; i < spec->num_args; ++i) {
          if (args[i].getKind() == LaunchArgKind::i32)
            callArgs.push_back(LLVM::ConstantOp::create(
                b, module.getLoc(), i32,
                b.getI32IntegerAttr(static_cast<int32_t>(args[i].getValue()))));
          else if (args[i].getKind() == LaunchArgKind::f32)
            callArgs.push_back(LLVM::ConstantOp::create(b, module.getLoc(), f32,
                                                        b.getF32FloatAttr(args[i].getF32Value())));
          else
            callArgs.push_back(func.getArgument(param++));
        }
        LLVM::CallOp::create(b, module.getLoc(), decl, callArgs);
        gpu::ReturnOp::create(b, module.getLoc());
      }
    }
    // The kernel library declares spark_activation_precision (kernel_abi.h ActivationPrecision)
    // and cannot link without it; as a constant it folds every kernel's rounding.
    b.setInsertionPointToStart(kernels.getBody());
    LLVM::GlobalOp::create(b, module.getLoc(), i32, /*isConstant=*/true, LLVM::Linkage::External,
                           abi::kActivationPrecisionSymbol,
                           b.getI32IntegerAttr(bf16 ? abi::kActivationBF16 : abi::kActivationF32),
                           /*alignment=*/4, /*addrSpace=*/1);
    numEntries = built.size();
  }
};

} // namespace

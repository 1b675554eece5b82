//===- InitAll.cpp - the only registration entry point ---------------------===//
#include "compiler/InitAll.h"

#include "compiler/Pipelines/Pipelines.h"
#include "dialects/Spark/IR/SparkDialect.h"
#include "compiler/Conversion/Passes.h"
#include "dialects/Spark/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

void spark::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<spark::SparkDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::gpu::GPUDialect, mlir::LLVM::LLVMDialect, mlir::NVVM::NVVMDialect>();
  // gpu-module-to-binary: the NVVM target and the LLVM IR translations it serialises through.
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
}

void spark::registerAllPasses() {
  spark::registerSparkPasses();
  spark::registerSparkConversionPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerConvertGpuOpsToNVVMOpsPass();
  mlir::registerReconcileUnrealizedCastsPass();
  mlir::registerGpuNVVMAttachTarget();
  mlir::registerGpuModuleToBinaryPass();
  spark::registerPipelines();
}

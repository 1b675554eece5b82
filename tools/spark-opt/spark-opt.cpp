//===- spark-opt.cpp - mlir-opt with the spark dialect ---------------------===//
#include "compiler/InitAll.h"
#include "compiler/Support/InputFile.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/WithColor.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  spark::registerAllDialects(registry);
  spark::registerAllPasses();
  auto [inputFilename, outputFilename] =
      mlir::registerAndParseCLIOptions(argc, argv, "Spark optimizer driver\n", registry);
  // The input is checked before MLIR reads it (a FIFO, /dev/zero, a huge file or a nesting deep
  // enough to overflow the parser's stack are errors, not hangs or crashes). Standard input is
  // left to MlirOptMain, which reads it once.
  if (inputFilename != "-") {
    llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> input =
        spark::readInputFile(inputFilename, spark::kMlirModuleInput);
    llvm::Error problem = input ? spark::checkMlirNesting((*input)->getBuffer(), inputFilename)
                                : input.takeError();
    if (problem) {
      llvm::WithColor::error(llvm::errs(), "spark-opt") << llvm::toString(std::move(problem))
                                                        << "\n";
      return 1;
    }
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));
}

//===- spark-opt.cpp - mlir-opt with the spark dialect ---------------------===//
#include "compiler/InitAll.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  spark::registerAllDialects(registry);
  spark::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Spark optimizer driver\n", registry));
}

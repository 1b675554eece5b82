// RUN: spark-compile %s --verify-diagnostics -o %t.cubin

// --verify-diagnostics should check only the diagnostics the input expects, as mlir-opt does.
//
// Expected to fail today: spark-compile leaves MLIRContext::printOpOnDiagnostic on in
// --verify-diagnostics mode, so every op error carries an unexpected
// "note: see current operation: ..." (mlir-opt turns it off when verifying diagnostics).

func.func private @layer(tensor<?x16xf32>) -> tensor<?x16xf32>

func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}, %soft: tensor<?x16xf32> {spark.input = "soft_embeddings"}) -> tensor<?x16xf32> {
  // expected-error @+1 {{'func.call' op cannot be lowered to a kernel: no kernel implements it}}
  %0 = func.call @layer(%soft) : (tensor<?x16xf32>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

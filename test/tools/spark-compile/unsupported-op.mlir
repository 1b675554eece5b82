// RUN: spark-compile %s --verify-diagnostics --mlir-print-op-on-diagnostic=false -o %t.cubin
// RUN: not ls %t.cubin

// A call in @forward has no kernel: spark-compile reports it at the call, before any code
// generation.
func.func private @layer(tensor<?x16xf32>) -> tensor<?x16xf32>

func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}, %soft: tensor<?x16xf32> {spark.input = "soft_embeddings"}) -> tensor<?x16xf32> {
  // expected-error @+1 {{'func.call' op cannot be lowered to a kernel: no kernel implements it}}
  %0 = func.call @layer(%soft) : (tensor<?x16xf32>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// RUN: spark-opt %s --spark-lower-to-kernels=max-tokens=0 --spark-plan-arena -verify-diagnostics

// max-tokens sizes every activation buffer: it must be positive.
// expected-error @+1 {{max-tokens must be in [1, 65536], got 0}}
module {
  func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?xi32> {
    return %ids : tensor<?xi32>
  }
}

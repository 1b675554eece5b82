// The smallest model spark-compile turns into a valid plan: an embedding and a tied LM head, two
// kernels. For tests of the driver itself (outputs, ptxas handling) that need a fast compile.
module attributes {spark.model = #spark.model<variant = "embed-head", architecture = "Gemma4ForCausalLM", vocab_size = 32, hidden_size = 16, num_layers = 1, max_position_embeddings = 64, eos_token_ids = [1], bos_token_id = 2, pad_token_id = 0, soft_token_ids = [], weight_prefix = "model.">} {
  func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x32xf32> {
    %table = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
    %e = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x16xbf16>) -> tensor<?x16xf32>
    %logits = spark.linear %e, %table : (tensor<?x16xf32>, tensor<32x16xbf16>) -> tensor<?x32xf32>
    return %logits : tensor<?x32xf32>
  }
}

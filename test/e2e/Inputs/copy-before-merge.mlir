// A graph whose soft-token merge (spark.scatter_nd) writes into a view of a value that is read
// again afterwards: the lowering copies the embeddings first, as a transfer step (a copy the
// runtime makes, no kernel). logits = merge(e) + e, so a soft-token row reads soft + e and every
// other row 2e; merging in place would give 2 soft on the soft rows.
module attributes {spark.model = #spark.model<variant = "copy-before-merge", architecture = "Gemma4ForCausalLM", vocab_size = 16, hidden_size = 16, num_layers = 1, max_position_embeddings = 64, eos_token_ids = [15], bos_token_id = 2, pad_token_id = 0, soft_token_ids = [], weight_prefix = "model.">} {
  func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}, %soft: tensor<?x16xf32> {spark.input = "soft_embeddings"}, %sidx: tensor<?xi32> {spark.input = "soft_indices"}) -> tensor<?x16xf32> {
    %table = spark.weight "model.embed_tokens.weight" : tensor<16x16xbf16>
    %e = spark.embedding %ids, %table {scale = 1.0 : f32} : (tensor<?xi32>, tensor<16x16xbf16>) -> tensor<?x16xf32>
    %v = spark.reshape %e : tensor<?x16xf32> to tensor<?x2x8xf32>
    %v2 = spark.reshape %v : tensor<?x2x8xf32> to tensor<?x16xf32>
    %h = spark.scatter_nd %v2, %sidx, %soft : (tensor<?x16xf32>, tensor<?xi32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %y = spark.add %h, %e : tensor<?x16xf32>
    return %y : tensor<?x16xf32>
  }
}

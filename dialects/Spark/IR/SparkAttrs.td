//===- SparkAttrs.td - spark dialect attributes ----------------*- tablegen -*-===//
#ifndef SPARK_ATTRS_TD
#define SPARK_ATTRS_TD

include "mlir/IR/AttrTypeBase.td"
include "dialects/Spark/IR/SparkEnums.td"

class Spark_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Spark_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// A list of token ids, printed and parsed in brackets ([1, 106]; [] for none), so that the
// struct format's commas stay unambiguous.
class Spark_IdListParameter<string desc> : ArrayRefParameter<"int64_t", desc> {
  let parser = [{ ::spark::parseIdList($_parser) }];
  let printer = [{ ::spark::printIdList($_printer, $_self) }];
}

def Spark_ModelAttr : Spark_Attr<"Model", "model"> {
  let summary = "the model facts the runtime needs, from the checkpoint's config";
  let description = [{
    What `spark-import` records about the model on the module (`spark.model`) and the lowering
    copies onto `spark.program` (`model`); the plan writer puts it in the plan's `model` object
    (docs/plan-format.md). Every field is required except `bidirectional_vision` (Gemma 4 26B-A4B
    and 31B: `use_bidirectional_attention: "vision"`); `soft_token_ids` (the image / audio / video
    placeholder ids) may be `[]`. The verifier checks the sizes are positive, the
    token ids lie in the vocabulary and at least one end-of-sequence id is given.

    ```mlir
    #spark.model<variant = "gemma4-e2b-like", architecture = "Gemma4ForConditionalGeneration",
                 vocab_size = 262144, hidden_size = 1536, num_layers = 35,
                 max_position_embeddings = 131072, eos_token_ids = [1, 106], bos_token_id = 2,
                 pad_token_id = 0, soft_token_ids = [258880, 258881],
                 weight_prefix = "model.language_model.">
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the variant name spark-import derives">:$variant,
    StringRefParameter<"config.json's architecture">:$architecture,
    "int64_t":$vocab_size,
    "int64_t":$hidden_size,
    "int64_t":$num_layers,
    "int64_t":$max_position_embeddings,
    Spark_IdListParameter<"end-of-sequence ids">:$eos_token_ids,
    "int64_t":$bos_token_id,
    "int64_t":$pad_token_id,
    Spark_IdListParameter<"soft-token placeholder ids">:$soft_token_ids,
    StringRefParameter<"prefix of every text-model checkpoint tensor">:$weight_prefix,
    DefaultValuedParameter<"bool", "false",
                           "attention is bidirectional over image blocks">:$bidirectional_vision
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // SPARK_ATTRS_TD

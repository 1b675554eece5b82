// Fuzzes the config.json importer's reader (parseGemmaConfigText: JSON, both config styles,
// derivations and rejections) and the parameter count derived from an accepted config.
//
// Invariants: a rejection carries a message; an accepted config has one resolved layer per
// decoder layer with positive head dims and head counts, and KV sources that point at an
// earlier or the same layer.
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler/Import/GemmaConfig.h"
#include "fuzz_check.h"
#include "llvm/Support/Error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const llvm::StringRef text(reinterpret_cast<const char*>(data), size);
  llvm::Expected<spark::GemmaConfig> config = spark::parseGemmaConfigText(text, "fuzz.json");
  if (!config) {
    const std::string message = llvm::toString(config.takeError());
    SPARK_FUZZ_CHECK(!message.empty());
    return 0;
  }
  SPARK_FUZZ_CHECK(static_cast<int64_t>(config->layers.size()) == config->numLayers);
  for (const spark::LayerConfig& layer : config->layers) {
    SPARK_FUZZ_CHECK(layer.headDim > 0 && layer.numHeads > 0 && layer.numKvHeads > 0);
    SPARK_FUZZ_CHECK(layer.kvSource >= 0 && layer.kvSource <= layer.index);
  }
  (void)spark::countParameters(*config);
  (void)config->variant();
  return 0;
}

//===- QuantizationConfig.cpp - a checkpoint's weight quantization --------===//
#include "compiler/Import/QuantizationConfig.h"

#include <fnmatch.h>

#include "llvm/ADT/StringExtras.h"

using namespace llvm;

namespace spark {
namespace {

Error fail(StringRef origin, const Twine &message) {
  return createStringError(inconvertibleErrorCode(), "%s: %s", origin.str().c_str(),
                           message.str().c_str());
}

const char *const kUseBf16 =
    "; Spark runs ModelOpt NVFP4 (group size 16) and FP8 checkpoints, or the model's bf16 "
    "checkpoint (spark-quantize turns a bf16 checkpoint into NVFP4 or FP8)";

/// The ModelOpt fields shared by both files: quant_algo, group_size, the exclude list.
Expected<QuantizationConfig> readModelOpt(const json::Object &q, StringRef origin,
                                          StringRef source) {
  QuantizationConfig config;
  config.source = source.str();
  std::optional<StringRef> algo = q.getString("quant_algo");
  if (!algo)
    return fail(origin, Twine("quant_algo is missing (expected \"NVFP4\" or \"FP8\")") + kUseBf16);
  config.algo = algo->str();
  if (*algo == "NVFP4") {
    config.format = QuantizationConfig::Format::kNvfp4;
    if (const json::Value *group = q.get("group_size")) {
      std::optional<int64_t> size = group->getAsInteger();
      if (!size || *size != 16)
        return fail(origin, Twine("NVFP4 with group_size ") +
                                (size ? Twine(*size) : Twine("(not an integer)")) +
                                ": Spark's NVFP4 kernels take blocks of 16 (the format's size)" +
                                kUseBf16);
    }
  } else if (*algo == "FP8") {
    config.format = QuantizationConfig::Format::kFp8;
  } else if (*algo == "FP8_PER_CHANNEL_PER_TOKEN") {
    config.format = QuantizationConfig::Format::kFp8;
    config.fp8PerChannel = true;
  } else {
    return fail(origin, Twine("quant_algo \"") + *algo + "\" is not supported" + kUseBf16);
  }
  for (StringRef key : {"exclude_modules", "ignore"}) {
    const json::Value *list = q.get(key);
    if (!list || list->kind() == json::Value::Null)
      continue;
    const json::Array *array = list->getAsArray();
    if (!array)
      return fail(origin, Twine(key) + " must be a list of module name patterns");
    for (const json::Value &item : *array) {
      std::optional<StringRef> pattern = item.getAsString();
      if (!pattern)
        return fail(origin, Twine(key) + " must be a list of module name patterns");
      config.exclude.push_back(pattern->str());
    }
  }
  if (const json::Value *kv = q.get("kv_cache_quant_algo");
      kv && kv->kind() != json::Value::Null) {
    std::optional<StringRef> algo = kv->getAsString();
    const std::string name = algo ? "\"" + algo->str() + "\"" : std::string("(not a string)");
    config.warnings.push_back(
        "kv_cache_quant_algo " + name +
        " is not used: Spark keeps the KV cache in f32 or bf16 (spark-compile --kv-cache-dtype), "
        "and the checkpoint's k_scale / v_scale tensors are not read");
  }
  return config;
}

} // namespace

bool QuantizationConfig::quantizes(StringRef module) const {
  if (!quantized())
    return false;
  // POSIX fnmatch without flags: the wildcards of Python's fnmatch, which ModelOpt matches
  // exclude_modules with, and of spark-quantize --exclude.
  const std::string name = module.str();
  for (const std::string &pattern : exclude)
    if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0)
      return false;
  return true;
}

std::string QuantizationConfig::formatName() const {
  switch (format) {
  case Format::kNone:
    return "bf16";
  case Format::kNvfp4:
    return "NVFP4";
  case Format::kFp8:
    return fp8PerChannel ? "FP8 (per channel)" : "FP8";
  }
  return "?";
}

Expected<QuantizationConfig> parseQuantizationConfig(const json::Object &object,
                                                     StringRef origin) {
  std::string what;
  for (StringRef key : {"quant_method", "quant_algo", "format"})
    if (std::optional<StringRef> value = object.getString(key))
      what += (what.empty() ? "" : ", ") + key.str() + " '" + value->str() + "'";
  std::optional<StringRef> method = object.getString("quant_method");
  if (!method || *method != "modelopt")
    return fail(origin, Twine("quantization_config") + (what.empty() ? "" : " (" + what + ")") +
                            ": this quantization is not supported" + kUseBf16);
  return readModelOpt(object, origin, "config.json quantization_config");
}

Expected<QuantizationConfig> parseHfQuantConfig(StringRef text, StringRef origin) {
  Expected<json::Value> root = json::parse(text);
  if (!root)
    return fail(origin, "not valid JSON: " + toString(root.takeError()));
  const json::Object *top = root->getAsObject();
  const json::Object *quantization = top ? top->getObject("quantization") : nullptr;
  if (!quantization)
    return fail(origin, "expected an object with a \"quantization\" object (ModelOpt's "
                        "hf_quant_config.json)");
  return readModelOpt(*quantization, origin, origin);
}

} // namespace spark

//===- QuantizationConfig.cpp - a checkpoint's weight quantization --------===//
#include "compiler/Import/QuantizationConfig.h"

#include <fnmatch.h>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

using namespace llvm;

namespace spark {
namespace {

Error fail(StringRef origin, const Twine &message) {
  return createStringError(inconvertibleErrorCode(), "%s: %s", origin.str().c_str(),
                           message.str().c_str());
}

const char *const kUseBf16 =
    "; Spark runs ModelOpt NVFP4 (group size 16) and FP8 checkpoints and compressed-tensors "
    "NVFP4 and FP8 ones, or the model's bf16 checkpoint (spark-quantize turns a bf16 checkpoint "
    "into NVFP4 or FP8)";

/// A list of strings (`key` of `q`: `what`, for the message), absent or null meaning none.
Expected<std::vector<std::string>> stringList(const json::Object &q, StringRef key,
                                              StringRef origin, StringRef what) {
  std::vector<std::string> out;
  const json::Value *list = q.get(key);
  if (!list || list->kind() == json::Value::Null)
    return out;
  const json::Array *array = list->getAsArray();
  if (!array)
    return fail(origin, Twine(key) + " must be a list of " + what);
  for (const json::Value &item : *array) {
    std::optional<StringRef> name = item.getAsString();
    if (!name)
      return fail(origin, Twine(key) + " must be a list of " + what);
    out.push_back(name->str());
  }
  return out;
}

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
    Expected<std::vector<std::string>> patterns =
        stringList(q, key, origin, "module name patterns");
    if (!patterns)
      return patterns.takeError();
    config.exclude.insert(config.exclude.end(), patterns->begin(), patterns->end());
  }
  if (const json::Value *kv = q.get("kv_cache_quant_algo");
      kv && kv->kind() != json::Value::Null) {
    std::optional<StringRef> algo = kv->getAsString();
    const std::string name = algo ? "\"" + algo->str() + "\"" : std::string("(not a string)");
    config.unhonoured.push_back(
        "kv_cache_quant_algo " + name +
        " is not used: Spark keeps the KV cache in f32 or bf16 (spark-compile --kv-cache-dtype), "
        "and the checkpoint's k_scale / v_scale tensors are not read");
  }
  return config;
}

/// A Python regular expression as the POSIX extended one llvm::Regex reads: the escapes configs
/// use that POSIX lacks (\d, \w, \s, \Z) spelt out; anything else is left for Regex to accept
/// or refuse.
std::string posixRegex(StringRef python) {
  std::string out;
  for (size_t i = 0; i < python.size(); ++i) {
    if (python[i] != '\\' || i + 1 == python.size()) {
      out += python[i];
      continue;
    }
    const char next = python[++i];
    if (next == 'd')
      out += "[0-9]";
    else if (next == 'w')
      out += "[A-Za-z0-9_]";
    else if (next == 's')
      out += "[[:space:]]";
    else if (next == 'Z')
      out += "$";
    else
      out += std::string{'\\', next};
  }
  return out;
}

/// Sorts compressed-tensors module references into plain names and "re:" expressions (checked
/// to compile), for `what` ("ignore" or "targets").
Error splitNames(ArrayRef<std::string> names, StringRef what, StringRef origin,
                 std::vector<std::string> &plain, std::vector<std::string> &regex) {
  for (const std::string &name : names) {
    StringRef n = name;
    if (!n.consume_front("re:")) {
      plain.push_back(name);
      continue;
    }
    const std::string posix = posixRegex(n);
    std::string error;
    if (!Regex(posix).isValid(error))
      return fail(origin, Twine(what) + " entry '" + name +
                              "' is not a valid regular expression (" + error + ")");
    regex.push_back(posix);
  }
  return Error::success();
}

/// compressed-tensors (llm-compressor): the NVFP4 and FP8 weight schemes Spark runs, every
/// other refused.
Expected<QuantizationConfig> readCompressedTensors(const json::Object &q, StringRef origin) {
  QuantizationConfig config;
  config.source = "config.json quantization_config";
  const char *const ct = "compressed-tensors ";
  // The compression format names the layout: NVFP4's packed codes or FP8's elements. A group's
  // own format, where given, must agree with the weights it describes.
  auto checkFormat = [&](std::optional<StringRef> format, const Twine &where) -> Error {
    if (!format || *format == "float-quantized" || *format == "naive-quantized" ||
        *format == "nvfp4-pack-quantized")
      return Error::success();
    return fail(origin, Twine(ct) + where + "format '" + *format +
                            "' is not supported (Spark runs 'nvfp4-pack-quantized' NVFP4 and "
                            "'float-quantized' FP8 weights)" +
                            kUseBf16);
  };
  std::optional<StringRef> topFormat = q.getString("format");
  if (Error e = checkFormat(topFormat, ""))
    return std::move(e);
  std::optional<QuantizationConfig::Format> format;
  const json::Object *groups = q.getObject("config_groups");
  if (!groups || groups->empty())
    return fail(origin, Twine(ct) + "quantization_config has no config_groups");
  std::optional<StringRef> strategy;
  for (const auto &[key, value] : *groups) {
    const std::string group = "config_groups['" + key.str() + "']";
    const json::Object *g = value.getAsObject();
    if (!g)
      return fail(origin, Twine(ct) + group + " must be an object");
    std::optional<StringRef> groupFormat = g->getString("format");
    if (Error e = checkFormat(groupFormat, group + " "))
      return std::move(e);
    if (!groupFormat)
      groupFormat = topFormat;
    const json::Object *w = g->getObject("weights");
    if (!w)
      return fail(origin, Twine(ct) + group +
                              " quantizes no weights (activation-only schemes are not supported)" +
                              kUseBf16);
    std::optional<int64_t> bits = w->getInteger("num_bits");
    std::optional<StringRef> type = w->getString("type");
    std::optional<StringRef> s = w->getString("strategy");
    const std::string scheme =
        (bits ? std::to_string(*bits) : std::string("?")) + "-bit " +
        (type ? type->str() : std::string("?")) + ", strategy " +
        (s ? s->str() : std::string("?"));
    const bool nvfp4 = bits && *bits == 4 && type && *type == "float";
    if (!nvfp4 && (!bits || *bits != 8 || !type || *type != "float"))
      return fail(origin, Twine(ct) + group + " weights are " + scheme +
                              ": only 4-bit float (NVFP4) and 8-bit float (FP8) weights are "
                              "supported" +
                              kUseBf16);
    const QuantizationConfig::Format groupKind =
        nvfp4 ? QuantizationConfig::Format::kNvfp4 : QuantizationConfig::Format::kFp8;
    if (format && *format != groupKind)
      return fail(origin, Twine(ct) + "config groups mix NVFP4 and FP8 weights: one format per "
                                      "checkpoint is supported");
    format = groupKind;
    if (std::optional<bool> symmetric = w->getBoolean("symmetric"); symmetric && !*symmetric)
      return fail(origin, Twine(ct) + group + " " + (nvfp4 ? "NVFP4" : "FP8") +
                              " weights are asymmetric (a zero point): not supported" + kUseBf16);
    if (groupFormat && (*groupFormat == "nvfp4-pack-quantized") != nvfp4)
      return fail(origin, Twine(ct) + group + " weights are " + scheme + " in format '" +
                              *groupFormat + "': the format does not store such weights");
    if (nvfp4) {
      // NVFP4 (compressed_tensors_w4a4_nvfp4 / w4a16_nvfp4): e4m3 scales per 16 inputs and an
      // f32 global scale per tensor.
      std::optional<int64_t> groupSize = w->getInteger("group_size");
      if (!s || *s != "tensor_group" || !groupSize || *groupSize != 16)
        return fail(origin, Twine(ct) + group + " NVFP4 weights with strategy " +
                                (s ? "'" + s->str() + "'" : std::string("(none)")) +
                                " and group_size " +
                                (groupSize ? std::to_string(*groupSize) : std::string("(none)")) +
                                ": Spark runs strategy 'tensor_group' with group_size 16 (the "
                                "format's blocks)" +
                                kUseBf16);
    }
    if (!nvfp4 && (!s || (*s != "tensor" && *s != "channel")))
      return fail(origin, Twine(ct) + group + " FP8 weights with strategy " +
                              (s ? "'" + s->str() + "'" : std::string("(none)")) +
                              ": Spark runs per-tensor and per-channel scales (block and group "
                              "scales are not supported)" + kUseBf16);
    if (strategy && *strategy != *s) {
      // (Named in sorted order: JSON objects have no order here.)
      const StringRef first = std::min(*strategy, *s), second = std::max(*strategy, *s);
      return fail(origin, Twine(ct) + "config groups disagree on the weight strategy ('" + first +
                              "' and '" + second + "'): one FP8 scale layout per checkpoint is "
                              "supported");
    }
    strategy = s;
    if (const json::Value *a = g->get("input_activations"); a && a->kind() != json::Value::Null)
      config.unhonoured.push_back(group + " input_activations are not used: Spark multiplies the " +
                                  (nvfp4 ? "NVFP4 weights with its f32 / bf16 activations (W4A16; "
                                           "input_global_scale is not read)"
                                         : "FP8 weights with its f32 / bf16 activations (W8A16)"));
    Expected<std::vector<std::string>> targets = stringList(*g, "targets", origin, "module names");
    if (!targets)
      return targets.takeError();
    std::vector<std::string> named;
    bool allLinears = targets->empty();
    for (const std::string &t : *targets)
      if (t == "Linear")
        allLinears = true;
      else
        named.push_back(t);
    if (!allLinears)
      if (Error e = splitNames(named, "targets", origin, config.targets, config.targetRegex))
        return std::move(e);
  }
  config.format = *format;
  if (config.format == QuantizationConfig::Format::kNvfp4) {
    config.algo = "compressed-tensors NVFP4";
    config.nvfp4 = {"weight_packed", "weight_scale", "weight_global_scale",
                    /*tensorScaleInverted=*/true};
  } else {
    config.fp8PerChannel = *strategy == "channel";
    config.algo = config.fp8PerChannel ? "compressed-tensors FP8 (channel)"
                                       : "compressed-tensors FP8 (tensor)";
  }
  Expected<std::vector<std::string>> ignore = stringList(q, "ignore", origin, "module names");
  if (!ignore)
    return ignore.takeError();
  if (Error e = splitNames(*ignore, "ignore", origin, config.exclude, config.excludeRegex))
    return std::move(e);
  if (const json::Value *kv = q.get("kv_cache_scheme"); kv && kv->kind() != json::Value::Null)
    config.unhonoured.push_back(
        "kv_cache_scheme is not used: Spark keeps the KV cache in f32 or bf16 (spark-compile "
        "--kv-cache-dtype), and the checkpoint's k_scale / v_scale tensors are not read");
  return config;
}

/// Whether `name` matches a regular expression from its start (Python's re.match).
bool matchesFromStart(ArrayRef<std::string> expressions, StringRef name) {
  for (const std::string &e : expressions)
    if (Regex("^(" + e + ")").match(name))
      return true;
  return false;
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
  if (matchesFromStart(excludeRegex, module))
    return false;
  if (!targets.empty() || !targetRegex.empty())
    return llvm::is_contained(targets, name) || matchesFromStart(targetRegex, module);
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
  if (method && *method == "compressed-tensors")
    return readCompressedTensors(object, origin);
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

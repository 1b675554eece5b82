// Reading tokenizer.json (HF tokenizers' serialisation) into Tokenizer::Impl, with RapidJSON.
// Every component, option and value is checked against what Encode/Decode implement; anything
// else is refused with an error naming the file, the component and the option, so that a file
// is never tokenised differently from HF tokenizers.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "file_util.h"
#include "host_allocation.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/status_macros.h"
#include "tokenizer_internal.h"

namespace spark {
namespace rt {

using tokenizer_internal::AddedToken;
using tokenizer_internal::DecoderStep;
using tokenizer_internal::ReplaceStep;
using tokenizer_internal::SplitBehavior;
using tokenizer_internal::SplitStep;
using tokenizer_internal::TemplatePiece;

namespace {

using Value = rapidjson::Value;

// Nested Sequence components are read recursively: a hostile file cannot make the stack deep.
constexpr int kMaxSequenceDepth = 32;

// Error helpers: `where` is a JSON path such as "model.merges[12]".
class Errors {
 public:
  explicit Errors(absl::string_view source) : source_(source) {}
  absl::Status Error(absl::string_view where, absl::string_view message) const {
    return absl::InvalidArgumentError(
        PrintableText(absl::StrCat(source_, ": ", where, ": ", message)));
  }
  absl::Status Unsupported(absl::string_view where, absl::string_view what) const {
    return Error(where, absl::StrCat(what,
                                     " is not supported by Spark's tokenizer (it would tokenise "
                                     "differently from HF tokenizers)"));
  }

 private:
  std::string source_;
};

std::string TypeName(const Value& value) {
  switch (value.GetType()) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "a boolean";
    case rapidjson::kObjectType:
      return "an object";
    case rapidjson::kArrayType:
      return "an array";
    case rapidjson::kStringType:
      return "a string";
    case rapidjson::kNumberType:
      return "a number";
  }
  return "?";
}

absl::string_view Str(const Value& value) {
  return absl::string_view(value.GetString(), value.GetStringLength());
}

// Checks that `object` has only keys from `allowed`.
absl::Status CheckKeys(const Errors& errors, absl::string_view where, const Value& object,
                       std::initializer_list<absl::string_view> allowed) {
  for (auto it = object.MemberBegin(); it != object.MemberEnd(); ++it) {
    absl::string_view key = Str(it->name);
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return errors.Unsupported(where, absl::StrCat("option \"", key, "\""));
    }
  }
  return absl::OkStatus();
}

const Value* Find(const Value& object, const char* key) {
  auto it = object.FindMember(key);
  return it == object.MemberEnd() ? nullptr : &it->value;
}

absl::StatusOr<bool> GetBool(const Errors& errors, absl::string_view where, const Value& object,
                             const char* key, bool default_value) {
  const Value* value = Find(object, key);
  if (value == nullptr) return default_value;
  if (!value->IsBool()) {
    return errors.Error(absl::StrCat(where, ".", key),
                        absl::StrCat("expected a boolean, got ", TypeName(*value)));
  }
  return value->GetBool();
}

absl::StatusOr<std::string> GetString(const Errors& errors, absl::string_view where,
                                      const Value& object, const char* key) {
  const Value* value = Find(object, key);
  if (value == nullptr) return errors.Error(where, absl::StrCat("missing \"", key, "\""));
  if (!value->IsString()) {
    return errors.Error(absl::StrCat(where, ".", key),
                        absl::StrCat("expected a string, got ", TypeName(*value)));
  }
  return std::string(Str(*value));
}

absl::StatusOr<uint64_t> GetUint(const Errors& errors, absl::string_view where, const Value& object,
                                 const char* key) {
  const Value* value = Find(object, key);
  if (value == nullptr) return errors.Error(where, absl::StrCat("missing \"", key, "\""));
  if (!value->IsUint64()) {
    return errors.Error(absl::StrCat(where, ".", key),
                        absl::StrCat("expected a non-negative integer, got ", TypeName(*value)));
  }
  return value->GetUint64();
}

absl::StatusOr<const Value*> GetTyped(const Errors& errors, absl::string_view where,
                                      const Value& object, const char* key,
                                      rapidjson::Type type, absl::string_view type_name) {
  const Value* value = Find(object, key);
  if (value == nullptr) return errors.Error(where, absl::StrCat("missing \"", key, "\""));
  if (value->GetType() != type &&
      !(type == rapidjson::kTrueType && value->GetType() == rapidjson::kFalseType)) {
    return errors.Error(absl::StrCat(where, ".", key),
                        absl::StrCat("expected ", type_name, ", got ", TypeName(*value)));
  }
  return value;
}

// A component object with a string "type".
absl::StatusOr<std::string> ComponentType(const Errors& errors, absl::string_view where,
                                          const Value& value) {
  if (!value.IsObject()) {
    return errors.Error(where, absl::StrCat("expected an object or null, got ", TypeName(value)));
  }
  return GetString(errors, where, value, "type");
}

// A pattern {"String": "..."}; {"Regex": ...} is refused.
absl::StatusOr<std::string> GetStringPattern(const Errors& errors, absl::string_view where,
                                             const Value& object) {
  std::string pattern_where = absl::StrCat(where, ".pattern");
  SPARK_ASSIGN_OR_RETURN(const Value* pattern,
                         GetTyped(errors, where, object, "pattern", rapidjson::kObjectType,
                                  "an object"));
  if (pattern->MemberCount() != 1) {
    return errors.Error(pattern_where, "expected exactly one of \"String\" or \"Regex\"");
  }
  absl::string_view kind = Str(pattern->MemberBegin()->name);
  const Value& text = pattern->MemberBegin()->value;
  if (kind == "Regex") return errors.Unsupported(pattern_where, "a Regex pattern");
  if (kind != "String") {
    return errors.Error(pattern_where, absl::StrCat("unknown pattern kind \"", kind, "\""));
  }
  if (!text.IsString()) {
    return errors.Error(absl::StrCat(pattern_where, ".String"),
                        absl::StrCat("expected a string, got ", TypeName(text)));
  }
  if (text.GetStringLength() == 0) {
    return errors.Unsupported(pattern_where, "an empty String pattern");
  }
  return std::string(Str(text));
}

absl::Status ParseNormalizer(const Errors& errors, const std::string& where, const Value& value,
                             int depth,
                             std::vector<ReplaceStep>* steps) {
  if (value.IsNull()) return absl::OkStatus();
  SPARK_ASSIGN_OR_RETURN(std::string type, ComponentType(errors, where, value));
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) return errors.Error(where, "Sequence nested too deep");
    SPARK_RETURN_IF_ERROR(CheckKeys(errors, where, value, {"type", "normalizers"}));
    SPARK_ASSIGN_OR_RETURN(const Value* list, GetTyped(errors, where, value, "normalizers",
                                                       rapidjson::kArrayType, "an array"));
    for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
      const Value& item = (*list)[i];
      std::string item_where = absl::StrCat(where, ".normalizers[", i, "]");
      if (item.IsNull()) return errors.Error(item_where, "expected an object, got null");
      SPARK_RETURN_IF_ERROR(ParseNormalizer(errors, item_where, item, depth + 1, steps));
    }
    return absl::OkStatus();
  }
  if (type == "Replace") {
    SPARK_RETURN_IF_ERROR(CheckKeys(errors, where, value, {"type", "pattern", "content"}));
    ReplaceStep step;
    SPARK_ASSIGN_OR_RETURN(step.pattern, GetStringPattern(errors, where, value));
    SPARK_ASSIGN_OR_RETURN(step.content, GetString(errors, where, value, "content"));
    steps->push_back(std::move(step));
    return absl::OkStatus();
  }
  return errors.Unsupported(where, absl::StrCat("normalizer type \"", type, "\""));
}

absl::Status ParsePreTokenizer(const Errors& errors, const std::string& where, const Value& value,
                             int depth,
                               std::vector<SplitStep>* steps) {
  if (value.IsNull()) return absl::OkStatus();
  SPARK_ASSIGN_OR_RETURN(std::string type, ComponentType(errors, where, value));
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) return errors.Error(where, "Sequence nested too deep");
    SPARK_RETURN_IF_ERROR(CheckKeys(errors, where, value, {"type", "pretokenizers"}));
    SPARK_ASSIGN_OR_RETURN(const Value* list, GetTyped(errors, where, value, "pretokenizers",
                                                       rapidjson::kArrayType, "an array"));
    for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
      const Value& item = (*list)[i];
      std::string item_where = absl::StrCat(where, ".pretokenizers[", i, "]");
      if (item.IsNull()) return errors.Error(item_where, "expected an object, got null");
      SPARK_RETURN_IF_ERROR(ParsePreTokenizer(errors, item_where, item, depth + 1, steps));
    }
    return absl::OkStatus();
  }
  if (type == "Split") {
    SPARK_RETURN_IF_ERROR(CheckKeys(errors, where, value, {"type", "pattern", "behavior", "invert"}));
    SplitStep step;
    SPARK_ASSIGN_OR_RETURN(step.pattern, GetStringPattern(errors, where, value));
    SPARK_ASSIGN_OR_RETURN(std::string behavior, GetString(errors, where, value, "behavior"));
    static constexpr std::pair<absl::string_view, SplitBehavior> kBehaviors[] = {
        {"Removed", SplitBehavior::kRemoved},
        {"Isolated", SplitBehavior::kIsolated},
        {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
        {"MergedWithNext", SplitBehavior::kMergedWithNext},
        {"Contiguous", SplitBehavior::kContiguous},
    };
    bool found = false;
    for (const auto& [name, kind] : kBehaviors) {
      if (behavior == name) {
        step.behavior = kind;
        found = true;
      }
    }
    if (!found) {
      return errors.Error(absl::StrCat(where, ".behavior"),
                          absl::StrCat("unknown behavior \"", behavior,
                                       "\" (expected Removed, Isolated, MergedWithPrevious, "
                                       "MergedWithNext or Contiguous)"));
    }
    SPARK_ASSIGN_OR_RETURN(step.invert, GetBool(errors, where, value, "invert", false));
    steps->push_back(std::move(step));
    return absl::OkStatus();
  }
  return errors.Unsupported(where, absl::StrCat("pre-tokenizer type \"", type, "\""));
}

absl::Status ParseDecoder(const Errors& errors, const std::string& where, const Value& value,
                             int depth,
                          std::vector<DecoderStep>* steps) {
  SPARK_ASSIGN_OR_RETURN(std::string type, ComponentType(errors, where, value));
  DecoderStep step;
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) return errors.Error(where, "Sequence nested too deep");
    SPARK_RETURN_IF_ERROR(CheckKeys(errors, where, value, {"type", "decoders"}));
    SPARK_ASSIGN_OR_RETURN(const Value* list, GetTyped(errors, where, value, "decoders",
                                                       rapidjson::kArrayType, "an array"));
    for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
      SPARK_RETURN_IF_ERROR(
          ParseDecoder(errors, absl::StrCat(where, ".decoders[", i, "]"), (*list)[i], depth + 1, steps));
    }
    return absl::OkStatus();
  }
  if (type == "Replace") {
    SPARK_RETURN_IF_ERROR(CheckKeys(errors, where, value, {"type", "pattern", "content"}));
    step.kind = DecoderStep::Kind::kReplace;
    SPARK_ASSIGN_OR_RETURN(step.replace.pattern, GetStringPattern(errors, where, value));
    SPARK_ASSIGN_OR_RETURN(step.replace.content, GetString(errors, where, value, "content"));
  } else if (type == "ByteFallback") {
    SPARK_RETURN_IF_ERROR(CheckKeys(errors, where, value, {"type"}));
    step.kind = DecoderStep::Kind::kByteFallback;
  } else if (type == "Fuse") {
    SPARK_RETURN_IF_ERROR(CheckKeys(errors, where, value, {"type"}));
    step.kind = DecoderStep::Kind::kFuse;
  } else if (type == "Strip") {
    SPARK_RETURN_IF_ERROR(CheckKeys(errors, where, value, {"type", "content", "start", "stop"}));
    step.kind = DecoderStep::Kind::kStrip;
    SPARK_ASSIGN_OR_RETURN(std::string content, GetString(errors, where, value, "content"));
    if (content.empty() ||
        tokenizer_internal::Utf8Length(static_cast<uint8_t>(content[0])) != content.size()) {
      return errors.Error(absl::StrCat(where, ".content"), "expected exactly one character");
    }
    step.strip_char = tokenizer_internal::DecodeUtf8At(content, 0);
    SPARK_ASSIGN_OR_RETURN(step.strip_start, GetUint(errors, where, value, "start"));
    SPARK_ASSIGN_OR_RETURN(step.strip_stop, GetUint(errors, where, value, "stop"));
  } else {
    return errors.Unsupported(where, absl::StrCat("decoder type \"", type, "\""));
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status ParseModel(const Errors& errors, const Value& model, Tokenizer::Impl* impl) {
  const std::string where = "model";
  SPARK_ASSIGN_OR_RETURN(std::string type, ComponentType(errors, where, model));
  if (type != "BPE") return errors.Unsupported(where, absl::StrCat("model type \"", type, "\""));
  SPARK_RETURN_IF_ERROR(CheckKeys(errors, where, model,
                                  {"type", "dropout", "unk_token", "continuing_subword_prefix",
                                   "end_of_word_suffix", "fuse_unk", "byte_fallback",
                                   "ignore_merges", "vocab", "merges"}));
  if (const Value* dropout = Find(model, "dropout");
      dropout != nullptr && !dropout->IsNull() &&
      !(dropout->IsNumber() && dropout->GetDouble() == 0.0)) {
    return errors.Unsupported("model.dropout", "a dropout other than null or 0");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const Value* value = Find(model, key);
    if (value == nullptr || value->IsNull()) continue;
    if (!value->IsString()) {
      return errors.Error(absl::StrCat(where, ".", key),
                          absl::StrCat("expected a string or null, got ", TypeName(*value)));
    }
    if (value->GetStringLength() != 0) {
      return errors.Unsupported(absl::StrCat(where, ".", key), "a non-empty value");
    }
  }
  SPARK_ASSIGN_OR_RETURN(impl->fuse_unk, GetBool(errors, where, model, "fuse_unk", false));
  SPARK_ASSIGN_OR_RETURN(impl->byte_fallback, GetBool(errors, where, model, "byte_fallback", false));
  SPARK_ASSIGN_OR_RETURN(impl->ignore_merges, GetBool(errors, where, model, "ignore_merges", false));

  SPARK_ASSIGN_OR_RETURN(const Value* vocab, GetTyped(errors, where, model, "vocab",
                                                      rapidjson::kObjectType, "an object"));
  impl->vocab.reserve(vocab->MemberCount());
  int64_t max_id = -1;
  std::vector<std::pair<int32_t, absl::string_view>> by_id;
  by_id.reserve(vocab->MemberCount());
  for (auto it = vocab->MemberBegin(); it != vocab->MemberEnd(); ++it) {
    absl::string_view token = Str(it->name);
    if (!it->value.IsUint() || it->value.GetUint() > 0x7fffffffu) {
      return errors.Error(absl::StrCat("model.vocab[\"", token, "\"]"),
                          absl::StrCat("expected an id in [0, 2^31), got ",
                                       it->value.IsNumber() ? "a number out of range"
                                                            : TypeName(it->value)));
    }
    int32_t id = static_cast<int32_t>(it->value.GetUint());
    if (!impl->vocab.emplace(std::string(token), id).second) {
      return errors.Error("model.vocab", absl::StrCat("token \"", token, "\" appears twice"));
    }
    by_id.emplace_back(id, token);
    max_id = std::max<int64_t>(max_id, id);
  }
  // Ids index a vector: a sparse vocabulary with a huge id is refused rather than allocated.
  if (max_id >= static_cast<int64_t>(by_id.size()) * 2 + 1024) {
    return errors.Error("model.vocab",
                        absl::StrCat("ids are sparse: largest id ", max_id, " for ", by_id.size(),
                                     " tokens"));
  }
  impl->id_to_token.assign(max_id + 1, std::string());
  impl->id_kind.assign(max_id + 1, Tokenizer::Impl::kNone);
  for (const auto& [id, token] : by_id) {
    if (impl->id_kind[id] != Tokenizer::Impl::kNone) {
      return errors.Error("model.vocab",
                          absl::StrCat("id ", id, " is given to both \"", impl->id_to_token[id],
                                       "\" and \"", token, "\""));
    }
    impl->id_to_token[id] = std::string(token);
    impl->id_kind[id] = Tokenizer::Impl::kModel;
  }

  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = impl->vocab.find(name);
    impl->byte_ids[b] = it == impl->vocab.end() ? -1 : it->second;
  }

  if (const Value* unk = Find(model, "unk_token"); unk != nullptr && !unk->IsNull()) {
    if (!unk->IsString()) {
      return errors.Error("model.unk_token",
                          absl::StrCat("expected a string or null, got ", TypeName(*unk)));
    }
    auto it = impl->vocab.find(Str(*unk));
    if (it == impl->vocab.end()) {
      return errors.Error("model.unk_token",
                          absl::StrCat("\"", Str(*unk), "\" is not in the vocabulary"));
    }
    impl->unk_id = it->second;
  }

  SPARK_ASSIGN_OR_RETURN(const Value* merges, GetTyped(errors, where, model, "merges",
                                                       rapidjson::kArrayType, "an array"));
  impl->merges.reserve(merges->Size());
  std::string merged;
  int32_t rank = 0;
  for (rapidjson::SizeType i = 0; i < merges->Size(); ++i) {
    const Value& merge = (*merges)[i];
    absl::string_view a, b;
    if (merge.IsString()) {
      absl::string_view line = Str(merge);
      // HF's legacy form "a b": lines starting "#version" are skipped (and take no rank).
      if (absl::StartsWith(line, "#version")) continue;
      std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
      if (parts.size() != 2) {
        return errors.Error(absl::StrCat("model.merges[", i, "]"),
                            absl::StrCat("\"", line, "\" is not two tokens separated by one space"));
      }
      a = parts[0];
      b = parts[1];
    } else if (merge.IsArray() && merge.Size() == 2 && merge[0].IsString() && merge[1].IsString()) {
      a = Str(merge[0]);
      b = Str(merge[1]);
    } else {
      return errors.Error(absl::StrCat("model.merges[", i, "]"),
                          absl::StrCat("expected a string \"a b\" or an array of two strings, got ",
                                       TypeName(merge)));
    }
    auto a_it = impl->vocab.find(a);
    auto b_it = impl->vocab.find(b);
    merged.assign(a.data(), a.size());
    merged.append(b.data(), b.size());
    auto merged_it = impl->vocab.find(merged);
    for (auto [it, text] : {std::pair{a_it, a}, std::pair{b_it, b},
                            std::pair{merged_it, absl::string_view(merged)}}) {
      if (it == impl->vocab.end()) {
        return errors.Error(absl::StrCat("model.merges[", i, "]"),
                            absl::StrCat("token \"", text, "\" is not in the vocabulary"));
      }
    }
    uint64_t key = (static_cast<uint64_t>(a_it->second) << 32) | static_cast<uint32_t>(b_it->second);
    // A repeated pair keeps its last rank (HF collects the merges into a hash map).
    impl->merges[key] = {rank, merged_it->second};
    ++rank;
  }
  return absl::OkStatus();
}

absl::Status ParseAddedTokens(const Errors& errors, const Value& list, Tokenizer::Impl* impl) {
  if (!list.IsArray()) {
    return errors.Error("added_tokens", absl::StrCat("expected an array, got ", TypeName(list)));
  }
  const int64_t model_size = static_cast<int64_t>(impl->vocab.size());
  int64_t next_id = model_size;  // HF AddedVocabulary::add_tokens, on an empty vocabulary
  for (rapidjson::SizeType i = 0; i < list.Size(); ++i) {
    const Value& item = list[i];
    std::string where = absl::StrCat("added_tokens[", i, "]");
    if (!item.IsObject()) {
      return errors.Error(where, absl::StrCat("expected an object, got ", TypeName(item)));
    }
    SPARK_RETURN_IF_ERROR(CheckKeys(errors, where, item,
                                    {"id", "content", "single_word", "lstrip", "rstrip",
                                     "normalized", "special"}));
    AddedToken token;
    SPARK_ASSIGN_OR_RETURN(uint64_t id, GetUint(errors, where, item, "id"));
    SPARK_ASSIGN_OR_RETURN(token.content, GetString(errors, where, item, "content"));
    SPARK_ASSIGN_OR_RETURN(token.single_word, GetBool(errors, where, item, "single_word", false));
    SPARK_ASSIGN_OR_RETURN(token.lstrip, GetBool(errors, where, item, "lstrip", false));
    SPARK_ASSIGN_OR_RETURN(token.rstrip, GetBool(errors, where, item, "rstrip", false));
    SPARK_ASSIGN_OR_RETURN(token.special, GetBool(errors, where, item, "special", false));
    SPARK_ASSIGN_OR_RETURN(token.normalized,
                           GetBool(errors, where, item, "normalized", !token.special));
    if (token.content.empty()) continue;  // HF ignores empty added tokens
    if (impl->added_by_content.contains(token.content)) {
      return errors.Error(where, absl::StrCat("token \"", token.content, "\" is added twice"));
    }
    // HF gives an added token the model's id for the same text, else the next free id after the
    // model's vocabulary; a file whose ids disagree is refused rather than renumbered.
    int64_t hf_id;
    if (auto it = impl->vocab.find(token.content); it != impl->vocab.end()) {
      hf_id = it->second;
    } else {
      hf_id = next_id++;
    }
    if (static_cast<int64_t>(id) != hf_id) {
      return errors.Error(
          where, absl::StrCat("token \"", token.content, "\" has id ", id,
                              " but HF tokenizers would give it id ", hf_id,
                              " (the model's id for that text, or the next id after the model's ",
                              model_size, " tokens)"));
    }
    token.id = static_cast<int32_t>(hf_id);
    if (hf_id >= static_cast<int64_t>(impl->id_to_token.size())) {
      if (hf_id > model_size + static_cast<int64_t>(list.Size()) + 1024) {
        return errors.Error(where, absl::StrCat("id ", hf_id, " is out of range"));
      }
      impl->id_to_token.resize(hf_id + 1);
      impl->id_kind.resize(hf_id + 1, Tokenizer::Impl::kNone);
    }
    impl->id_to_token[hf_id] = token.content;
    impl->id_kind[hf_id] = token.special ? Tokenizer::Impl::kSpecial : Tokenizer::Impl::kAdded;
    impl->added_by_content.emplace(token.content, token.id);
    impl->added.push_back(std::move(token));
  }
  return absl::OkStatus();
}

absl::Status ParsePostProcessor(const Errors& errors, const Value& value, Tokenizer::Impl* impl) {
  const std::string where = "post_processor";
  if (value.IsNull()) return absl::OkStatus();
  SPARK_ASSIGN_OR_RETURN(std::string type, ComponentType(errors, where, value));
  if (type != "TemplateProcessing") {
    return errors.Unsupported(where, absl::StrCat("post-processor type \"", type, "\""));
  }
  SPARK_RETURN_IF_ERROR(CheckKeys(errors, where, value, {"type", "single", "pair", "special_tokens"}));
  SPARK_ASSIGN_OR_RETURN(const Value* specials, GetTyped(errors, where, value, "special_tokens",
                                                         rapidjson::kObjectType, "an object"));
  absl::flat_hash_map<std::string, std::vector<int32_t>> special_ids;
  for (auto it = specials->MemberBegin(); it != specials->MemberEnd(); ++it) {
    std::string item_where = absl::StrCat(where, ".special_tokens[\"", Str(it->name), "\"]");
    if (!it->value.IsObject()) {
      return errors.Error(item_where, absl::StrCat("expected an object, got ", TypeName(it->value)));
    }
    SPARK_RETURN_IF_ERROR(CheckKeys(errors, item_where, it->value, {"id", "ids", "tokens"}));
    SPARK_ASSIGN_OR_RETURN(const Value* ids, GetTyped(errors, item_where, it->value, "ids",
                                                      rapidjson::kArrayType, "an array"));
    std::vector<int32_t> id_list;
    for (rapidjson::SizeType i = 0; i < ids->Size(); ++i) {
      const Value& id = (*ids)[i];
      if (!id.IsUint() || id.GetUint() >= impl->id_to_token.size() ||
          impl->id_kind[id.GetUint()] == Tokenizer::Impl::kNone) {
        return errors.Error(absl::StrCat(item_where, ".ids[", i, "]"),
                            "expected the id of a token in the vocabulary");
      }
      id_list.push_back(static_cast<int32_t>(id.GetUint()));
    }
    special_ids[std::string(Str(it->name))] = std::move(id_list);
  }
  for (const char* key : {"single", "pair"}) {
    SPARK_ASSIGN_OR_RETURN(const Value* pieces, GetTyped(errors, where, value, key,
                                                         rapidjson::kArrayType, "an array"));
    for (rapidjson::SizeType i = 0; i < pieces->Size(); ++i) {
      const Value& piece = (*pieces)[i];
      std::string piece_where = absl::StrCat(where, ".", key, "[", i, "]");
      if (!piece.IsObject() || piece.MemberCount() != 1 || !piece.MemberBegin()->value.IsObject()) {
        return errors.Error(piece_where,
                            "expected {\"SpecialToken\": {...}} or {\"Sequence\": {...}}");
      }
      absl::string_view kind = Str(piece.MemberBegin()->name);
      const Value& body = piece.MemberBegin()->value;
      std::string body_where = absl::StrCat(piece_where, ".", kind);
      SPARK_RETURN_IF_ERROR(CheckKeys(errors, body_where, body, {"id", "type_id"}));
      SPARK_ASSIGN_OR_RETURN(std::string id, GetString(errors, body_where, body, "id"));
      SPARK_RETURN_IF_ERROR(GetUint(errors, body_where, body, "type_id").status());
      TemplatePiece out;
      if (kind == "Sequence") {
        if (id != "A" && id != "B") {
          return errors.Error(body_where, absl::StrCat("unknown sequence \"", id, "\""));
        }
        if (std::string(key) == "single" && id != "A") {
          return errors.Error(body_where, "the single template can only use sequence A");
        }
        out.is_sequence = true;
      } else if (kind == "SpecialToken") {
        auto it = special_ids.find(id);
        if (it == special_ids.end()) {
          return errors.Error(body_where,
                              absl::StrCat("special token \"", id, "\" is not in special_tokens"));
        }
        out.ids = it->second;
      } else {
        return errors.Error(piece_where, absl::StrCat("unknown template piece \"", kind, "\""));
      }
      if (std::string(key) == "single") impl->single_template.push_back(std::move(out));
    }
  }
  impl->has_post_processor = true;
  return absl::OkStatus();
}

absl::Status BuildTries(Tokenizer::Impl* impl) {
  for (size_t i = 0; i < impl->added.size(); ++i) {
    const AddedToken& token = impl->added[i];
    if (!token.normalized) {
      impl->raw_trie.Insert(token.content, static_cast<int32_t>(i));
      continue;
    }
    // HF matches normalized tokens by their normalized text, in the normalized pieces.
    std::string normalized = token.content;
    for (const ReplaceStep& step : impl->normalizers) {
      normalized = tokenizer_internal::ApplyReplace(step, normalized);
    }
    if (!normalized.empty()) impl->normalized_trie.Insert(normalized, static_cast<int32_t>(i));
  }
  return absl::OkStatus();
}

std::string LineColumn(absl::string_view json, size_t offset) {
  offset = std::min(offset, json.size());
  size_t line = 1 + std::count(json.begin(), json.begin() + offset, '\n');
  size_t line_start = json.rfind('\n', offset == 0 ? 0 : offset - 1);
  size_t column = line_start == absl::string_view::npos ? offset + 1 : offset - line_start;
  return absl::StrCat("line ", line, ", column ", column);
}

absl::Status ParseTokenizer(absl::string_view json, const Errors& errors, Tokenizer::Impl* impl) {
  rapidjson::Document doc;
  // Iterative: deep nesting in a hostile file uses heap, not stack.
  doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseFullPrecisionFlag |
            rapidjson::kParseIterativeFlag>(
      json.data(), json.size());
  if (doc.HasParseError()) {
    return errors.Error(LineColumn(json, doc.GetErrorOffset()),
                        absl::StrCat("malformed JSON: ", rapidjson::GetParseError_En(doc.GetParseError())));
  }
  if (!doc.IsObject()) {
    return errors.Error("top level", absl::StrCat("expected an object, got ", TypeName(doc)));
  }
  SPARK_RETURN_IF_ERROR(CheckKeys(errors, "top level", doc,
                                  {"version", "truncation", "padding", "added_tokens", "normalizer",
                                   "pre_tokenizer", "post_processor", "decoder", "model"}));
  for (const char* key : {"truncation", "padding"}) {
    const Value* value = Find(doc, key);
    if (value != nullptr && !value->IsNull()) return errors.Unsupported(key, "a non-null value");
  }
  const Value* model = Find(doc, "model");
  if (model == nullptr) return errors.Error("top level", "missing \"model\"");
  SPARK_RETURN_IF_ERROR(ParseModel(errors, *model, impl));
  if (const Value* value = Find(doc, "normalizer")) {
    SPARK_RETURN_IF_ERROR(ParseNormalizer(errors, "normalizer", *value, 0, &impl->normalizers));
  }
  if (const Value* value = Find(doc, "pre_tokenizer")) {
    SPARK_RETURN_IF_ERROR(ParsePreTokenizer(errors, "pre_tokenizer", *value, 0, &impl->pre_tokenizers));
  }
  if (const Value* value = Find(doc, "decoder"); value != nullptr && !value->IsNull()) {
    impl->has_decoder = true;
    SPARK_RETURN_IF_ERROR(ParseDecoder(errors, "decoder", *value, 0, &impl->decoders));
  }
  if (const Value* value = Find(doc, "added_tokens")) {
    SPARK_RETURN_IF_ERROR(ParseAddedTokens(errors, *value, impl));
  }
  if (const Value* value = Find(doc, "post_processor")) {
    SPARK_RETURN_IF_ERROR(ParsePostProcessor(errors, *value, impl));
  }
  return BuildTries(impl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(absl::string_view json,
                                                               absl::string_view source) {
  auto impl = std::make_unique<Impl>();
  impl->source = std::string(source);
  Errors errors(source);
  SPARK_RETURN_IF_ERROR(WithHostAllocation("the tokenizer", json.size(), [&]() -> absl::Status {
    return ParseTokenizer(json, errors, impl.get());
  }));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path) {
  std::string file = path;
  if (IsDirectory(path)) {
    file = JoinPath(path, "tokenizer.json");
    if (!IsRegularFile(file)) {
      return absl::NotFoundError(PrintableText(
          absl::StrCat(path, ": directory has no tokenizer.json (looked for ", file, ")")));
    }
  }
  SPARK_ASSIGN_OR_RETURN(std::string json, ReadFileToString(file));
  return FromJson(json, file);
}

}  // namespace rt
}  // namespace spark

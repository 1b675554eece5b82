// The parsed pipeline of a tokenizer.json (Tokenizer::Impl) and the helpers that the loader
// (tokenizer_load.cc), the encoder/decoder (tokenizer.cc) and the streaming detokeniser
// (tokenizer_stream.cc) share. Internal to spark_text.
#ifndef SPARK_RUNTIME_SRC_TEXT_TOKENIZER_INTERNAL_H_
#define SPARK_RUNTIME_SRC_TEXT_TOKENIZER_INTERNAL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "spark/runtime/tokenizer.h"
#include "utf8.h"

namespace spark {
namespace rt {
namespace tokenizer_internal {

// A literal-string Replace (normalizer or decoder): every non-overlapping occurrence of `pattern`,
// left to right, becomes `content`. `pattern` is never empty (the loader refuses that).
struct ReplaceStep {
  std::string pattern;
  std::string content;
};

// HF SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitStep {
  std::string pattern;  // literal, never empty
  SplitBehavior behavior;
  bool invert = false;
};

struct DecoderStep {
  enum class Kind { kReplace, kByteFallback, kFuse, kStrip };
  Kind kind;
  ReplaceStep replace;      // kReplace
  uint32_t strip_char = 0;  // kStrip: the code point `content` names
  uint64_t strip_start = 0;
  uint64_t strip_stop = 0;
};

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// Leftmost-longest matching of a set of strings (HF's added-token tries: aho-corasick / daachorse
// with MatchKind::LeftmostLongest). A byte trie: from each position the longest entry starting
// there; the scan takes the first position with any match.
class TokenTrie {
 public:
  TokenTrie();
  void Insert(absl::string_view text, int32_t value);
  bool empty() const { return nodes_.size() <= 1; }
  // The longest entry starting at `pos`: {length, value}, or {0, -1} if none.
  std::pair<size_t, int32_t> LongestAt(absl::string_view text, size_t pos) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte (the root uses root_)
    int32_t value = -1;
  };
  std::vector<Node> nodes_;
  int32_t root_[256];
};

// A piece of TemplateProcessing's `single` template: the input sequence, or special-token ids.
struct TemplatePiece {
  bool is_sequence = false;
  std::vector<int32_t> ids;
};

// UTF-8 helpers (the input of every function is valid UTF-8 unless it says otherwise).
// The byte offset of the first invalid UTF-8 sequence in `text` (Rust's from_utf8 rules:
// no overlong forms, no surrogates, nothing above U+10FFFF), or npos if valid.
size_t FirstInvalidUtf8(absl::string_view text);
// The length of the UTF-8 sequence starting with `lead`.
inline size_t Utf8Length(uint8_t lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
uint32_t DecodeUtf8At(absl::string_view text, size_t pos);
using ::spark::rt::AppendUtf8;  // utf8.h
// Rust's char::is_whitespace (Unicode White_Space), and regex `\w`.
bool IsWhiteSpace(uint32_t code_point);
bool IsWordChar(uint32_t code_point);

// Applies a literal Replace.
std::string ApplyReplace(const ReplaceStep& step, absl::string_view text);
// HF's ByteFallback token test: "<0xHH>" (6 bytes) whose HH Rust's u8::from_str_radix(_, 16)
// accepts. Returns the byte, or -1.
int ByteFallbackValue(absl::string_view token);
// The decoder chain over token strings (HF Decoder::decode_chain of each step in turn).
std::vector<std::string> RunDecoderSteps(const std::vector<DecoderStep>& steps, size_t begin,
                                         size_t end, std::vector<std::string> tokens);
std::string StripToken(const DecoderStep& step, absl::string_view token);

}  // namespace tokenizer_internal

struct Tokenizer::Impl {
  std::string source;

  // Normalizer: a sequence of literal Replace steps (empty: none).
  std::vector<tokenizer_internal::ReplaceStep> normalizers;
  // Pre-tokenizer: a sequence of literal Split steps (empty: none).
  std::vector<tokenizer_internal::SplitStep> pre_tokenizers;
  // Decoder: absent (tokens joined with " ") or a chain.
  bool has_decoder = false;
  std::vector<tokenizer_internal::DecoderStep> decoders;
  // Post-processor: absent, or TemplateProcessing's `single` template.
  bool has_post_processor = false;
  std::vector<tokenizer_internal::TemplatePiece> single_template;

  // BPE model.
  absl::flat_hash_map<std::string, int32_t> vocab;
  absl::flat_hash_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (a<<32|b) -> (rank, id)
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
  int32_t unk_id = -1;
  int32_t byte_ids[256];

  // Added tokens, and the token text of each id (model vocabulary and added tokens).
  std::vector<tokenizer_internal::AddedToken> added;  // index = trie value
  absl::flat_hash_map<std::string, int32_t> added_by_content;
  tokenizer_internal::TokenTrie raw_trie;         // normalized == false
  tokenizer_internal::TokenTrie normalized_trie;  // normalized == true (normalized content)
  std::vector<std::string> id_to_token;
  std::vector<uint8_t> id_kind;  // IdKind
  enum IdKind : uint8_t { kNone = 0, kModel = 1, kAdded = 2, kSpecial = 3 };

  // Encode helpers (tokenizer.cc).
  void EncodeAddedSplit(absl::string_view text, std::vector<int32_t>* ids) const;
  void EncodeNormalized(absl::string_view normalized, std::vector<int32_t>* ids) const;
  void EncodeWord(absl::string_view word, std::vector<int32_t>* ids) const;
  const std::string* TokenText(int32_t id) const;
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_TEXT_TOKENIZER_INTERNAL_H_

// Text <-> token ids for a checkpoint's HF `tokenizer.json` (the kind Gemma 3 and Gemma 4 ship:
// BPE with byte fallback, a Replace normalizer, a Split pre-tokenizer, a Replace/ByteFallback/Fuse/
// Strip decoder chain, a TemplateProcessing post-processor and added tokens). Encode and Decode
// give exactly the ids and text of HF tokenizers (Rust) for the components read here; any other
// component or option value is refused at load with an error naming it and the file, never
// tokenised differently.
//
// Thread safety: a loaded Tokenizer is immutable; Encode and Decode may run concurrently.
#ifndef SPARK_RUNTIME_TOKENIZER_H_
#define SPARK_RUNTIME_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace spark {
namespace rt {

class Tokenizer {
 public:
  // Reads `path`: a tokenizer.json file, or a directory holding one.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path);
  // Parses the text of a tokenizer.json; `source` names it in error messages.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(absl::string_view json,
                                                             absl::string_view source);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // HF `encode(text, add_special_tokens=...)`: `add_special_tokens` applies the post-processor
  // (Gemma's <bos>); special-token text inside `text` is matched either way. `text` must be
  // valid UTF-8 (a Rust &str): otherwise kInvalidArgument naming the byte offset.
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              bool add_special_tokens = true) const;

  // HF `decode(ids, skip_special_tokens=...)`. An id that names no token is kInvalidArgument
  // (HF would drop it silently).
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens = false) const;

  // One past the largest id (HF `get_vocab_size(with_added_tokens=True)`).
  int32_t vocab_size() const;
  // The id of token `token` (added tokens first, then the model's vocabulary).
  std::optional<int32_t> TokenToId(absl::string_view token) const;
  // The token string of `id`; nullopt when no token has that id.
  std::optional<std::string> IdToToken(int32_t id) const;
  // Whether `id` is an added token marked "special" (skipped by skip_special_tokens).
  bool IsSpecial(int32_t id) const;
  // The file or source the tokenizer was read from.
  const std::string& source() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  friend class StreamingDetokenizer;
  std::unique_ptr<Impl> impl_;
};

// The byte offset of the first invalid UTF-8 sequence in `text` (Rust's rules: no overlong forms,
// surrogates or code points above U+10FFFF), or nullopt when `text` is valid UTF-8.
std::optional<size_t> InvalidUtf8Offset(absl::string_view text);

// Turns ids into text as they arrive (one generated token at a time). Every piece it returns is
// valid UTF-8, and the concatenation of all pieces (Push... then Finish) equals
// Tokenizer::Decode(all ids, skip_special_tokens). Byte-fallback tokens (<0xAB>) are held until
// their run ends, because HF decodes a run of them as a whole: valid UTF-8 gives its characters,
// anything else one U+FFFD per byte. A decoder chain other than per-token steps (Replace, Strip),
// at most one ByteFallback, then Fuse and Strip is decoded whole at Finish.
// The tokenizer must outlive the detokeniser.
class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);
  ~StreamingDetokenizer();

  // The text that `id` completes (possibly empty); kInvalidArgument for an unknown id.
  absl::StatusOr<std::string> Push(int32_t id);
  // The text still held back; the detokeniser is then empty and may start again.
  std::string Finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_TOKENIZER_H_

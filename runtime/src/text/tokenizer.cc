// Encode and Decode with the same results as HF tokenizers (Rust) for the pipeline that
// tokenizer_load.cc accepts. Written by hand from HF's semantics (no C++ library implements
// tokenizer.json): AddedVocabulary (leftmost-longest added tokens, lstrip/rstrip/single_word,
// normalized or not), Replace normalizers, Split pre-tokenizers, BPE with byte fallback and
// unk fusing (a priority-queue merge over a linked list of symbols, as HF's Word::merge_all),
// TemplateProcessing, and the Replace/ByteFallback/Fuse/Strip decoders.
#include "spark/runtime/tokenizer.h"

#include <algorithm>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "host_allocation.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/status_macros.h"
#include "tokenizer_internal.h"

namespace spark {
namespace rt {
namespace tokenizer_internal {

namespace {
struct CodePointRange {
  uint32_t first;
  uint32_t last;
};
constexpr CodePointRange kWordChars[] = {
#include "tokenizer_word_chars.inc"
};
}  // namespace

size_t FirstInvalidUtf8(absl::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;  // bounds of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return absl::string_view::npos;
}

uint32_t DecodeUtf8At(absl::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  uint8_t c = s[0];
  if (c < 0x80) return c;
  if (c < 0xE0) return ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu);
  if (c < 0xF0) return ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
  return ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
}

bool IsWhiteSpace(uint32_t c) {
  // Unicode White_Space (Rust char::is_whitespace, regex \s).
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool IsWordChar(uint32_t c) {
  const CodePointRange* end = kWordChars + sizeof(kWordChars) / sizeof(kWordChars[0]);
  const CodePointRange* it = std::upper_bound(
      kWordChars, end, c, [](uint32_t value, const CodePointRange& r) { return value < r.first; });
  return it != kWordChars && c <= (it - 1)->last;
}

std::string ApplyReplace(const ReplaceStep& step, absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    size_t found = text.find(step.pattern, pos);
    if (found == absl::string_view::npos) break;
    out.append(text.data() + pos, found - pos);
    out.append(step.content);
    pos = found + step.pattern.size();
  }
  out.append(text.data() + pos, text.size() - pos);
  return out;
}

int ByteFallbackValue(absl::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  // Rust's u8::from_str_radix accepts a leading '+'.
  if (token[3] == '+') {
    int d = hex(token[4]);
    return d;
  }
  int hi = hex(token[3]), lo = hex(token[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

std::string StripToken(const DecoderStep& step, absl::string_view token) {
  std::vector<std::pair<size_t, uint32_t>> chars;  // (byte offset, code point)
  for (size_t i = 0; i < token.size(); i += Utf8Length(static_cast<uint8_t>(token[i]))) {
    chars.emplace_back(i, DecodeUtf8At(token, i));
  }
  size_t start_cut = 0;
  for (size_t i = 0; i < chars.size() && i < step.strip_start; ++i) {
    if (chars[i].second != step.strip_char) break;
    start_cut = i + 1;
  }
  size_t stop_cut = chars.size();
  for (uint64_t i = 0; i < step.strip_stop && i < chars.size(); ++i) {
    size_t index = chars.size() - i - 1;
    if (chars[index].second != step.strip_char) break;
    stop_cut = index;
  }
  // (HF panics when the cuts cross; Spark gives the empty string.)
  if (start_cut >= stop_cut) return std::string();
  size_t begin = start_cut < chars.size() ? chars[start_cut].first : token.size();
  size_t end = stop_cut < chars.size() ? chars[stop_cut].first : token.size();
  return std::string(token.substr(begin, end - begin));
}

std::vector<std::string> RunDecoderSteps(const std::vector<DecoderStep>& steps, size_t begin,
                                         size_t end, std::vector<std::string> tokens) {
  for (size_t s = begin; s < end; ++s) {
    const DecoderStep& step = steps[s];
    switch (step.kind) {
      case DecoderStep::Kind::kReplace:
        for (std::string& token : tokens) token = ApplyReplace(step.replace, token);
        break;
      case DecoderStep::Kind::kStrip:
        for (std::string& token : tokens) token = StripToken(step, token);
        break;
      case DecoderStep::Kind::kFuse: {
        std::string joined = absl::StrJoin(tokens, "");
        tokens.clear();
        tokens.push_back(std::move(joined));
        break;
      }
      case DecoderStep::Kind::kByteFallback: {
        std::vector<std::string> out;
        out.reserve(tokens.size());
        std::string bytes;
        auto flush = [&]() {
          if (bytes.empty()) return;
          if (FirstInvalidUtf8(bytes) == absl::string_view::npos) {
            out.push_back(bytes);
          } else {
            for (size_t i = 0; i < bytes.size(); ++i) out.push_back("\xEF\xBF\xBD");  // U+FFFD
          }
          bytes.clear();
        };
        for (std::string& token : tokens) {
          int byte = ByteFallbackValue(token);
          if (byte >= 0) {
            bytes.push_back(static_cast<char>(byte));
          } else {
            flush();
            out.push_back(std::move(token));
          }
        }
        flush();
        tokens = std::move(out);
        break;
      }
    }
  }
  return tokens;
}

TokenTrie::TokenTrie() {
  nodes_.emplace_back();
  for (int32_t& child : root_) child = -1;
}

void TokenTrie::Insert(absl::string_view text, int32_t value) {
  if (text.empty()) return;
  auto first = static_cast<uint8_t>(text[0]);
  if (root_[first] < 0) {
    root_[first] = static_cast<int32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  int32_t node = root_[first];
  for (size_t i = 1; i < text.size(); ++i) {
    auto byte = static_cast<uint8_t>(text[i]);
    auto& children = nodes_[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1}));
    if (it != children.end() && it->first == byte) {
      node = it->second;
    } else {
      int32_t child = static_cast<int32_t>(nodes_.size());
      children.insert(it, {byte, child});
      nodes_.emplace_back();
      node = child;
    }
  }
  nodes_[node].value = value;
}

std::pair<size_t, int32_t> TokenTrie::LongestAt(absl::string_view text, size_t pos) const {
  int32_t node = root_[static_cast<uint8_t>(text[pos])];
  std::pair<size_t, int32_t> best{0, -1};
  size_t i = pos + 1;
  while (node >= 0) {
    if (nodes_[node].value >= 0) best = {i - pos, nodes_[node].value};
    if (i >= text.size()) break;
    const auto& children = nodes_[node].children;
    auto byte = static_cast<uint8_t>(text[i]);
    auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1}));
    node = (it != children.end() && it->first == byte) ? it->second : -1;
    ++i;
  }
  return best;
}

namespace {

// A split of the input: [begin, end) and the added token it is (-1: text to encode further).
struct Segment {
  size_t begin;
  size_t end;
  int32_t added = -1;  // index into Impl::added
};

uint32_t LastChar(absl::string_view text) {
  size_t i = text.size() - 1;
  while (i > 0 && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80) --i;
  return DecodeUtf8At(text, i);
}

// HF AddedVocabulary::find_matches.
std::vector<Segment> FindAdded(const TokenTrie& trie, const std::vector<AddedToken>& added,
                               absl::string_view sentence) {
  std::vector<Segment> splits;
  if (trie.empty()) {
    splits.push_back({0, sentence.size(), -1});
    return splits;
  }
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < sentence.size()) {
    auto [length, index] = trie.LongestAt(sentence, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + length;
    pos = stop;  // the matcher resumes after the match, whatever lstrip/rstrip take
    const AddedToken& token = added[index];
    if (token.single_word) {
      bool start_space = start == 0 || !IsWordChar(LastChar(sentence.substr(0, start)));
      bool stop_space = stop == sentence.size() || !IsWordChar(DecodeUtf8At(sentence, stop));
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        size_t prev = new_start - 1;
        while (prev > 0 && (static_cast<uint8_t>(sentence[prev]) & 0xC0) == 0x80) --prev;
        if (!IsWhiteSpace(DecodeUtf8At(sentence, prev))) break;
        new_start = prev;
      }
      start = std::max(new_start, start_offset);
    }
    if (token.rstrip) {
      while (stop < sentence.size() && IsWhiteSpace(DecodeUtf8At(sentence, stop))) {
        stop += Utf8Length(static_cast<uint8_t>(sentence[stop]));
      }
    }
    if (start_offset < start) splits.push_back({start_offset, start, -1});
    splits.push_back({start, std::max(start, stop), index});
    start_offset = stop;
  }
  if (start_offset < sentence.size()) splits.push_back({start_offset, sentence.size(), -1});
  return splits;
}

// One Split pre-tokenizer step over one piece (HF NormalizedString::split with a literal
// pattern), appending the non-empty resulting pieces.
void SplitPiece(const SplitStep& step, absl::string_view piece,
                std::vector<absl::string_view>* out) {
  struct Part {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Part> matches;
  size_t prev = 0;
  while (true) {
    size_t found = piece.find(step.pattern, prev);
    if (found == absl::string_view::npos) break;
    if (found != prev) matches.push_back({prev, found, false});
    matches.push_back({found, found + step.pattern.size(), true});
    prev = found + step.pattern.size();
  }
  if (prev != piece.size()) matches.push_back({prev, piece.size(), false});
  if (step.invert) {
    for (Part& part : matches) part.is_match = !part.is_match;
  }
  // (offsets, remove)
  std::vector<Part> splits;
  switch (step.behavior) {
    case SplitBehavior::kIsolated:
      for (Part part : matches) splits.push_back({part.begin, part.end, false});
      break;
    case SplitBehavior::kRemoved:
      splits = matches;
      break;
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const Part& part : matches) {
        if (part.is_match == previous_match && !splits.empty()) {
          splits.back().end = part.end;
        } else {
          splits.push_back({part.begin, part.end, false});
        }
        previous_match = part.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Part& part : matches) {
        if (part.is_match && !previous_match && !splits.empty()) {
          splits.back().end = part.end;
        } else {
          splits.push_back({part.begin, part.end, false});
        }
        previous_match = part.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->is_match && !previous_match && !splits.empty()) {
          splits.back().begin = it->begin;
        } else {
          splits.push_back({it->begin, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(splits.begin(), splits.end());
      break;
    }
  }
  for (const Part& part : splits) {
    if (!part.is_match && part.end > part.begin) {
      out->push_back(piece.substr(part.begin, part.end - part.begin));
    }
  }
}

}  // namespace
}  // namespace tokenizer_internal

using tokenizer_internal::AddedToken;
using tokenizer_internal::DecoderStep;
using tokenizer_internal::Segment;

std::optional<size_t> InvalidUtf8Offset(absl::string_view text) {
  size_t offset = tokenizer_internal::FirstInvalidUtf8(text);
  if (offset == absl::string_view::npos) return std::nullopt;
  return offset;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_to_token.size()); }
const std::string& Tokenizer::source() const { return impl_->source; }

std::optional<int32_t> Tokenizer::TokenToId(absl::string_view token) const {
  if (auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end()) {
    return it->second;
  }
  if (auto it = impl_->vocab.find(token); it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::IdToToken(int32_t id) const {
  const std::string* text = impl_->TokenText(id);
  if (text == nullptr) return std::nullopt;
  return *text;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->id_kind[id] == Impl::kSpecial;
}

const std::string* Tokenizer::Impl::TokenText(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token.size() || id_kind[id] == kNone) {
    return nullptr;
  }
  return &id_to_token[id];
}

// HF BPE::merge_word + Word::merge_all.
void Tokenizer::Impl::EncodeWord(absl::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges) {
    if (auto it = vocab.find(word); it != vocab.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool removed;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&symbols](int32_t id) {
    int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, -1, false});
    if (index > 0) symbols[index - 1].next = index;
  };
  bool have_unk = false;
  for (size_t i = 0; i < word.size();) {
    size_t length = tokenizer_internal::Utf8Length(static_cast<uint8_t>(word[i]));
    absl::string_view ch = word.substr(i, length);
    i += length;
    if (auto it = vocab.find(ch); it != vocab.end()) {
      if (have_unk) {
        add(unk_id);
        have_unk = false;
      }
      add(it->second);
      continue;
    }
    if (byte_fallback) {
      bool all = true;
      for (char c : ch) all = all && byte_ids[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        // (HF adds these before a pending unk; so does Spark.)
        for (char c : ch) add(byte_ids[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (unk_id >= 0) {
      if (have_unk && !fuse_unk) add(unk_id);
      have_unk = true;
    }
  }
  if (have_unk) add(unk_id);

  struct Merge {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    // std::priority_queue pops the largest: the smallest rank, then the leftmost position.
    bool operator<(const Merge& other) const {
      if (rank != other.rank) return rank > other.rank;
      return pos > other.pos;
    }
  };
  auto lookup = [this](int32_t a, int32_t b) -> const std::pair<int32_t, int32_t>* {
    auto it = merges.find((static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b));
    return it == merges.end() ? nullptr : &it->second;
  };
  std::vector<Merge> heap_storage;
  heap_storage.reserve(symbols.size());
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const auto* m = lookup(symbols[i].id, symbols[i + 1].id)) {
      heap_storage.push_back({m->first, static_cast<int32_t>(i), m->second});
    }
  }
  std::priority_queue<Merge> queue(std::less<Merge>(), std::move(heap_storage));
  while (!queue.empty()) {
    Merge top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.removed || left.next < 0) continue;
    int32_t next_pos = left.next;
    const Symbol right = symbols[next_pos];
    const auto* current = lookup(left.id, right.id);
    // A stale entry: HF checks only that the pair now there still merges into the same id.
    if (current == nullptr || current->second != top.new_id) continue;
    left.id = top.new_id;
    left.next = right.next;
    symbols[next_pos].removed = true;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const auto* m = lookup(symbols[left.prev].id, left.id)) {
        queue.push({m->first, left.prev, m->second});
      }
    }
    if (left.next >= 0) {
      if (const auto* m = lookup(left.id, symbols[left.next].id)) {
        queue.push({m->first, top.pos, m->second});
      }
    }
  }
  for (const Symbol& symbol : symbols) {
    if (!symbol.removed) ids->push_back(symbol.id);
  }
}

// A normalized piece that is not a normalized added token: pre-tokenize, then BPE.
void Tokenizer::Impl::EncodeNormalized(absl::string_view normalized,
                                       std::vector<int32_t>* ids) const {
  if (pre_tokenizers.empty()) {
    EncodeWord(normalized, ids);
    return;
  }
  std::vector<absl::string_view> pieces{normalized};
  std::vector<absl::string_view> next;
  for (const tokenizer_internal::SplitStep& step : pre_tokenizers) {
    next.clear();
    for (absl::string_view piece : pieces) tokenizer_internal::SplitPiece(step, piece, &next);
    pieces.swap(next);
  }
  for (absl::string_view piece : pieces) EncodeWord(piece, ids);
}

// A piece of the raw input that is not a raw added token (HF extract_and_normalize, step 2).
void Tokenizer::Impl::EncodeAddedSplit(absl::string_view text, std::vector<int32_t>* ids) const {
  std::string normalized(text);
  for (const tokenizer_internal::ReplaceStep& step : normalizers) {
    normalized = tokenizer_internal::ApplyReplace(step, normalized);
  }
  if (normalized.empty()) return;
  for (const Segment& segment : tokenizer_internal::FindAdded(normalized_trie, added, normalized)) {
    if (segment.end <= segment.begin) continue;
    if (segment.added >= 0) {
      ids->push_back(added[segment.added].id);
    } else {
      EncodeNormalized(absl::string_view(normalized).substr(segment.begin,
                                                            segment.end - segment.begin),
                       ids);
    }
  }
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(absl::string_view text,
                                                       bool add_special_tokens) const {
  if (size_t bad = tokenizer_internal::FirstInvalidUtf8(text); bad != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("text to encode is not valid UTF-8 (first bad byte at offset ", bad, ")"));
  }
  std::vector<int32_t> ids;
  SPARK_RETURN_IF_ERROR(WithHostAllocation("the token ids", text.size() * 4, [&]() {
    for (const Segment& segment : tokenizer_internal::FindAdded(impl_->raw_trie, impl_->added, text)) {
      if (segment.end <= segment.begin) continue;
      if (segment.added >= 0) {
        ids.push_back(impl_->added[segment.added].id);
      } else {
        impl_->EncodeAddedSplit(text.substr(segment.begin, segment.end - segment.begin), &ids);
      }
    }
    if (add_special_tokens && impl_->has_post_processor) {
      std::vector<int32_t> out;
      for (const tokenizer_internal::TemplatePiece& piece : impl_->single_template) {
        if (piece.is_sequence) {
          out.insert(out.end(), ids.begin(), ids.end());
        } else {
          out.insert(out.end(), piece.ids.begin(), piece.ids.end());
        }
      }
      ids.swap(out);
    }
  }));
  return ids;
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids,
                                              bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string* text = impl_->TokenText(ids[i]);
    if (text == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("cannot decode id ", ids[i], " (position ", i,
                                                     "): not in the vocabulary of ",
                                                     PrintableText(impl_->source), " (", vocab_size(),
                                                     " ids)"));
    }
    if (skip_special_tokens && impl_->id_kind[ids[i]] == Impl::kSpecial) continue;
    tokens.push_back(*text);
  }
  if (!impl_->has_decoder) return absl::StrJoin(tokens, " ");
  tokens = tokenizer_internal::RunDecoderSteps(impl_->decoders, 0, impl_->decoders.size(),
                                               std::move(tokens));
  return absl::StrJoin(tokens, "");
}

}  // namespace rt
}  // namespace spark

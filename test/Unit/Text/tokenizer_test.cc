// Unit tests of each piece of the tokenizer pipeline on small hand-made tokenizer.json files:
// normalizer, Split behaviours, BPE ties, byte fallback and unk, added tokens (lstrip, rstrip,
// single_word, normalized, leftmost-longest), post-processor, decoder chain, streaming
// detokeniser, and one test per load/encode/decode error message. The expected ids follow HF
// tokenizers' semantics (tokenizer_parity_test.cc checks the same options against HF's output).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spark/runtime/tokenizer.h"

namespace spark {
namespace rt {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A BPE tokenizer.json over `tokens` (id = position) with `merges` ("a b"), no other component.
json Base(const std::vector<std::string>& tokens, const std::vector<std::string>& merges = {}) {
  json vocab = json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  return json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", json::array()},
              {"normalizer", nullptr},
              {"pre_tokenizer", nullptr},
              {"post_processor", nullptr},
              {"decoder", nullptr},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merges}}}};
}

json GemmaDecoder() {
  return json{{"type", "Sequence"},
              {"decoders",
               {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                {{"type", "ByteFallback"}},
                {{"type", "Fuse"}}}}};
}

json SpaceNormalizer() {
  return json{{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
}

json Added(int id, const std::string& content, bool special, json options = json::object()) {
  json token{{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
             {"rstrip", false},  {"normalized", false}, {"special", special}};
  for (auto& [key, value] : options.items()) token[key] = value;
  return token;
}

std::unique_ptr<Tokenizer> Make(const json& j) {
  auto tokenizer = Tokenizer::FromJson(j.dump(), "test.json");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

std::string LoadError(const json& j) {
  auto tokenizer = Tokenizer::FromJson(j.dump(), "test.json");
  EXPECT_FALSE(tokenizer.ok());
  return tokenizer.ok() ? "" : std::string(tokenizer.status().message());
}

std::vector<int32_t> Ids(const Tokenizer& tokenizer, const std::string& text, bool special = true) {
  auto ids = tokenizer.Encode(text, special);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{-1};
}

std::string Text(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip = false) {
  auto text = tokenizer.Decode(ids, skip);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "<error>";
}

// --- Normalizer -------------------------------------------------------------------------------

TEST(TokenizerNormalizer, ReplaceIsLiteralNonOverlappingLeftToRight) {
  json j = Base({"X", "a"});
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", "aa"}}}, {"content", "X"}};
  auto t = Make(j);
  EXPECT_THAT(Ids(*t, "aaa"), ElementsAre(0, 1));
  EXPECT_THAT(Ids(*t, "aaaa"), ElementsAre(0, 0));
}

TEST(TokenizerNormalizer, SequenceAppliesInOrder) {
  json j = Base({"a", "b", "c"});
  j["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "b"}},
        {{"type", "Replace"}, {"pattern", {{"String", "b"}}}, {"content", "c"}}}}};
  auto t = Make(j);
  EXPECT_THAT(Ids(*t, "ab"), ElementsAre(2, 2));
}

// --- Split pre-tokenizer: "ab-ab" / "ab--ab" with merges a+b, ab+-, -+ab, -+- -----------------

json SplitTokenizer(const std::string& behavior, bool invert) {
  json j = Base({"a", "b", "-", "ab", "ab-", "-ab", "--"}, {"a b", "ab -", "- ab", "- -"});
  j["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"String", "-"}}},
                        {"behavior", behavior},
                        {"invert", invert}};
  return j;
}

TEST(TokenizerSplit, WithoutPreTokenizerMergesAcrossTheDelimiter) {
  auto t = Make(Base({"a", "b", "-", "ab", "ab-", "-ab", "--"}, {"a b", "ab -", "- ab", "- -"}));
  EXPECT_THAT(Ids(*t, "ab-ab"), ElementsAre(4, 3));
}

TEST(TokenizerSplit, Removed) {
  auto t = Make(SplitTokenizer("Removed", false));
  EXPECT_THAT(Ids(*t, "ab-ab"), ElementsAre(3, 3));
  EXPECT_THAT(Ids(*t, "-"), IsEmpty());
}

TEST(TokenizerSplit, Isolated) {
  auto t = Make(SplitTokenizer("Isolated", false));
  EXPECT_THAT(Ids(*t, "ab-ab"), ElementsAre(3, 2, 3));
  EXPECT_THAT(Ids(*t, "ab--ab"), ElementsAre(3, 2, 2, 3));
}

TEST(TokenizerSplit, MergedWithPrevious) {
  auto t = Make(SplitTokenizer("MergedWithPrevious", false));
  EXPECT_THAT(Ids(*t, "ab-ab"), ElementsAre(4, 3));
  EXPECT_THAT(Ids(*t, "-ab"), ElementsAre(2, 3));  // nothing before: the delimiter stands alone
}

TEST(TokenizerSplit, MergedWithNext) {
  auto t = Make(SplitTokenizer("MergedWithNext", false));
  EXPECT_THAT(Ids(*t, "ab-ab"), ElementsAre(3, 5));
  EXPECT_THAT(Ids(*t, "ab-"), ElementsAre(3, 2));
}

TEST(TokenizerSplit, Contiguous) {
  auto t = Make(SplitTokenizer("Contiguous", false));
  EXPECT_THAT(Ids(*t, "ab--ab"), ElementsAre(3, 6, 3));
}

TEST(TokenizerSplit, InvertRemovedKeepsTheDelimiters) {
  auto t = Make(SplitTokenizer("Removed", true));
  EXPECT_THAT(Ids(*t, "ab-ab"), ElementsAre(2));
}

TEST(TokenizerSplit, SequenceAppliesEachSplitToEveryPiece) {
  json j = SplitTokenizer("Isolated", false);
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {j["pre_tokenizer"],
                          {{"type", "Split"},
                           {"pattern", {{"String", "b"}}},
                           {"behavior", "Isolated"},
                           {"invert", false}}}}};
  auto t = Make(j);
  EXPECT_THAT(Ids(*t, "ab-ab"), ElementsAre(0, 1, 2, 0, 1));
}

// --- BPE ----------------------------------------------------------------------------------------

TEST(TokenizerBpe, EqualRankPairsMergeLeftmostFirst) {
  auto t = Make(Base({"a", "aa"}, {"a a"}));
  EXPECT_THAT(Ids(*t, "aaa"), ElementsAre(1, 0));
  EXPECT_THAT(Ids(*t, "aaaa"), ElementsAre(1, 1));
  EXPECT_THAT(Ids(*t, "aaaaa"), ElementsAre(1, 1, 0));
}

TEST(TokenizerBpe, LowerRankMergesFirst) {
  // "abc": b+c (rank 0) before a+b (rank 1), so "a" "bc" even though "ab" is leftmost.
  auto t = Make(Base({"a", "b", "c", "ab", "bc"}, {"b c", "a b"}));
  EXPECT_THAT(Ids(*t, "abc"), ElementsAre(0, 4));
  auto u = Make(Base({"a", "b", "c", "ab", "bc"}, {"a b", "b c"}));
  EXPECT_THAT(Ids(*u, "abc"), ElementsAre(3, 2));
}

TEST(TokenizerBpe, PairFormAndStringFormMergesAgree) {
  json j = Base({"a", "b", "ab"});
  j["model"]["merges"] = json::array({json::array({"a", "b"})});
  EXPECT_THAT(Ids(*Make(j), "abab"), ElementsAre(2, 2));
}

TEST(TokenizerBpe, IgnoreMergesTakesAWholeWordInTheVocabulary) {
  // "abc" is in the vocabulary but no merge builds it.
  json j = Base({"a", "b", "c", "ab", "abc"}, {"a b"});
  EXPECT_THAT(Ids(*Make(j), "abc"), ElementsAre(3, 2));
  j["model"]["ignore_merges"] = true;
  EXPECT_THAT(Ids(*Make(j), "abc"), ElementsAre(4));
}

std::vector<std::string> WithBytes(std::vector<std::string> tokens) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens.push_back(name);
  }
  return tokens;
}

TEST(TokenizerBpe, ByteFallbackSpellsUnknownCharactersAsBytes) {
  json j = Base(WithBytes({"<unk>", "a"}));
  j["model"]["byte_fallback"] = true;
  j["model"]["unk_token"] = "<unk>";
  auto t = Make(j);
  // U+00E9 = C3 A9; ids are 2 + byte.
  EXPECT_THAT(Ids(*t, "a\u00e9a"), ElementsAre(1, 2 + 0xC3, 2 + 0xA9, 1));
}

TEST(TokenizerBpe, UnkFusedOrNotWithoutByteFallback) {
  json j = Base({"<unk>", "a"});
  j["model"]["unk_token"] = "<unk>";
  j["model"]["fuse_unk"] = true;
  EXPECT_THAT(Ids(*Make(j), "a\u00e9\u00e9a\u00e9"), ElementsAre(1, 0, 1, 0));
  j["model"]["fuse_unk"] = false;
  EXPECT_THAT(Ids(*Make(j), "a\u00e9\u00e9a\u00e9"), ElementsAre(1, 0, 0, 1, 0));
}

TEST(TokenizerBpe, UnknownCharacterWithoutUnkTokenIsDropped) {
  auto t = Make(Base({"a"}));
  EXPECT_THAT(Ids(*t, "a\u00e9a"), ElementsAre(0, 0));
}

TEST(TokenizerBpe, LongRunsDoNotDegenerate) {
  auto t = Make(Base({"a", "aa", "aaaa"}, {"a a", "aa aa"}));
  std::vector<int32_t> ids = Ids(*t, std::string(100001, 'a'));
  ASSERT_EQ(ids.size(), 25001u);
  EXPECT_EQ(ids.back(), 0);
}

// --- Added tokens -------------------------------------------------------------------------------

json AddedTokenizer(json options) {
  json j = Base({"x", "y", "\u2581", "<", "t", ">", "T"});
  j["normalizer"] = SpaceNormalizer();
  j["added_tokens"] = {Added(6, "T", true, options)};
  return j;
}

TEST(TokenizerAdded, MatchedBeforeTheModel) {
  auto t = Make(AddedTokenizer(json::object()));
  EXPECT_THAT(Ids(*t, "x T y"), ElementsAre(0, 2, 6, 2, 1));
  EXPECT_THAT(Ids(*t, "xTy"), ElementsAre(0, 6, 1));
}

TEST(TokenizerAdded, LstripTakesTheSpacesBefore) {
  auto t = Make(AddedTokenizer({{"lstrip", true}}));
  EXPECT_THAT(Ids(*t, "x   T y"), ElementsAre(0, 6, 2, 1));
}

TEST(TokenizerAdded, RstripTakesTheSpacesAfter) {
  auto t = Make(AddedTokenizer({{"rstrip", true}}));
  EXPECT_THAT(Ids(*t, "x T \t\n y"), ElementsAre(0, 2, 6, 1));
}

TEST(TokenizerAdded, SingleWordNeedsNonWordNeighbours) {
  // "<T>" next to a word character is not the added token: the model spells it "<" "T" ">".
  json j = Base({"x", "y", " ", "T", "<T>"});
  j["added_tokens"] = {Added(4, "<T>", true, {{"single_word", true}})};
  j["model"]["vocab"].erase("<T>");
  j["model"]["vocab"]["<"] = 4;
  j["model"]["vocab"][">"] = 5;
  j["added_tokens"][0]["id"] = 6;  // not in the model's 6 tokens: the next id
  auto u = Make(j);
  EXPECT_THAT(Ids(*u, "x <T> y"), ElementsAre(0, 2, 6, 2, 1));
  EXPECT_THAT(Ids(*u, "x<T>y"), ElementsAre(0, 4, 3, 5, 1));
  EXPECT_THAT(Ids(*u, "\u00e9<T>"), ElementsAre(4, 3, 5));  // U+00E9 is a word character (dropped)
  EXPECT_THAT(Ids(*u, "-<T>-"), ElementsAre(6));              // '-' is not ('-' dropped: not in vocab)
}

TEST(TokenizerAdded, LeftmostThenLongest) {
  json j = Base({"a", "b", "c", "d", "abc", "bcd", "ab"});
  j["added_tokens"] = {Added(4, "abc", false), Added(5, "bcd", false), Added(6, "ab", false)};
  auto t = Make(j);
  EXPECT_THAT(Ids(*t, "abcd"), ElementsAre(4, 3));
  EXPECT_THAT(Ids(*t, "abd"), ElementsAre(6, 3));
  EXPECT_THAT(Ids(*t, "xbcd"), ElementsAre(5));  // 'x' not in vocab: dropped
}

TEST(TokenizerAdded, NormalizedTokensMatchTheNormalizedText) {
  json j = Base({"x", "\u2581", "w", "\u2581w"});
  j["normalizer"] = SpaceNormalizer();
  j["added_tokens"] = {Added(3, " w", false, {{"normalized", true}})};
  j["model"]["vocab"].erase("\u2581w");
  j["model"]["vocab"]["z"] = 3;
  j["added_tokens"][0]["id"] = 4;
  auto t = Make(j);
  EXPECT_THAT(Ids(*t, "x w"), ElementsAre(0, 4));
  // A raw (normalized: false) " w" would not match: the raw text has a space, the model "▁".
  j["added_tokens"][0]["normalized"] = false;
  EXPECT_THAT(Ids(*Make(j), "x\u2581w"), ElementsAre(0, 1, 2));
}

TEST(TokenizerAdded, SpecialTokenTextIsMatchedWithOrWithoutAddSpecialTokens) {
  json j = Base({"<bos>", "a"});
  j["added_tokens"] = {Added(0, "<bos>", true)};
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"pair", json::array()},
      {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", {0}}, {"tokens", {"<bos>"}}}}}}};
  auto t = Make(j);
  EXPECT_THAT(Ids(*t, "a<bos>a", true), ElementsAre(0, 1, 0, 1));
  EXPECT_THAT(Ids(*t, "a<bos>a", false), ElementsAre(1, 0, 1));
  EXPECT_THAT(Ids(*t, "", true), ElementsAre(0));
  EXPECT_THAT(Ids(*t, "", false), IsEmpty());
  EXPECT_TRUE(t->IsSpecial(0));
  EXPECT_FALSE(t->IsSpecial(1));
}

TEST(TokenizerAdded, AddedTokenOutsideTheModelGetsTheNextId) {
  json j = Base({"a"});
  j["added_tokens"] = {Added(1, "<x>", true), Added(2, "<y>", false)};
  auto t = Make(j);
  EXPECT_EQ(t->vocab_size(), 3);
  EXPECT_THAT(Ids(*t, "<y>a<x>"), ElementsAre(2, 0, 1));
  EXPECT_EQ(t->TokenToId("<y>"), 2);
  EXPECT_EQ(t->IdToToken(1), "<x>");
  EXPECT_EQ(t->IdToToken(3), std::nullopt);
}

// --- Decoder ------------------------------------------------------------------------------------

json DecodeTokenizer() {
  json j = Base(WithBytes({"<bos>", "\u2581hello", "\u2581world", "x"}));
  j["added_tokens"] = {Added(0, "<bos>", true)};
  j["decoder"] = GemmaDecoder();
  return j;
}
int32_t Byte(int b) { return 4 + b; }

TEST(TokenizerDecode, ReplaceByteFallbackFuse) {
  auto t = Make(DecodeTokenizer());
  EXPECT_EQ(Text(*t, {0, 1, 2}), "<bos> hello world");
  EXPECT_EQ(Text(*t, {0, 1, 2}, /*skip=*/true), " hello world");
  EXPECT_EQ(Text(*t, {3, Byte(0xC3), Byte(0xA9), 3}), "x\u00e9x");
}

TEST(TokenizerDecode, InvalidByteRunIsOneReplacementCharacterPerByte) {
  auto t = Make(DecodeTokenizer());
  // A valid character followed by a stray continuation byte: the whole run is invalid.
  EXPECT_EQ(Text(*t, {Byte(0xC3), Byte(0xA9), Byte(0xA9), 3}),
            "\ufffd\ufffd\ufffdx");
  EXPECT_EQ(Text(*t, {Byte(0xE4)}), "\ufffd");
}

TEST(TokenizerDecode, WithoutDecoderTokensAreJoinedWithSpaces) {
  auto t = Make(Base({"a", "b"}));
  EXPECT_EQ(Text(*t, {0, 1, 0}), "a b a");
}

TEST(TokenizerDecode, StripAfterFuse) {
  json j = DecodeTokenizer();
  j["decoder"]["decoders"].push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}});
  auto t = Make(j);
  EXPECT_EQ(Text(*t, {1, 2, Byte(0x20), Byte(0x20)}), "hello world ");
}

TEST(TokenizerDecode, UnknownIdIsAnError) {
  auto t = Make(DecodeTokenizer());
  auto text = t->Decode({1, 999999}, false);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), HasSubstr("cannot decode id 999999 (position 1)"));
  EXPECT_FALSE(t->Decode({-1}, false).ok());
}

// --- Streaming ----------------------------------------------------------------------------------

std::vector<std::string> Stream(const Tokenizer& t, const std::vector<int32_t>& ids, bool skip) {
  StreamingDetokenizer stream(t, skip);
  std::vector<std::string> pieces;
  for (int32_t id : ids) {
    auto piece = stream.Push(id);
    EXPECT_TRUE(piece.ok()) << piece.status();
    pieces.push_back(piece.ok() ? *piece : "<error>");
  }
  pieces.push_back(stream.Finish());
  return pieces;
}

TEST(TokenizerStream, HoldsByteRunsUntilTheyEnd) {
  auto t = Make(DecodeTokenizer());
  EXPECT_THAT(Stream(*t, {1, Byte(0xC3), Byte(0xA9), 2}, false),
              ElementsAre(" hello", "", "", "\u00e9 world", ""));
  EXPECT_THAT(Stream(*t, {1, Byte(0xF0), Byte(0x9F)}, false),
              ElementsAre(" hello", "", "", "\ufffd\ufffd"));
  EXPECT_THAT(Stream(*t, {0, 1}, true), ElementsAre("", " hello", ""));
}

TEST(TokenizerStream, FinalStripDropsLeadingAndHoldsTrailing) {
  json j = DecodeTokenizer();
  j["decoder"]["decoders"].push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 2}});
  auto t = Make(j);
  std::vector<int32_t> ids = {1, Byte(0x20), Byte(0x20), Byte(0x20), 2, Byte(0x20), Byte(0x20), Byte(0x20)};
  std::vector<std::string> pieces = Stream(*t, ids, false);
  std::string joined;
  for (const std::string& piece : pieces) joined += piece;
  EXPECT_EQ(joined, Text(*t, ids));
  EXPECT_EQ(pieces[0], "hello");
}

TEST(TokenizerStream, UnknownIdIsAnError) {
  auto t = Make(DecodeTokenizer());
  StreamingDetokenizer stream(*t, false);
  auto piece = stream.Push(123456);
  ASSERT_FALSE(piece.ok());
  EXPECT_THAT(piece.status().message(), HasSubstr("cannot decode id 123456"));
}

// --- Encode errors ------------------------------------------------------------------------------

TEST(TokenizerEncode, InvalidUtf8IsAnError) {
  auto t = Make(Base({"a"}));
  for (const char* bad : {"a\xff", "a\xc3", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    auto ids = t->Encode(bad, true);
    ASSERT_FALSE(ids.ok()) << bad;
    EXPECT_THAT(ids.status().message(), HasSubstr("not valid UTF-8"));
  }
  EXPECT_EQ(InvalidUtf8Offset("ab\xff"), 2u);
  EXPECT_EQ(InvalidUtf8Offset("\xf0\x9f\x98\x80"), std::nullopt);
}

TEST(TokenizerEncode, NulIsAnOrdinaryCharacter) {
  auto t = Make(Base({std::string(1, '\0'), "a"}));
  EXPECT_THAT(Ids(*t, std::string("a\0a", 3)), ElementsAre(1, 0, 1));
}

// --- Load errors: one per message ---------------------------------------------------------------

TEST(TokenizerLoad, MalformedJsonNamesLineAndColumn) {
  auto t = Tokenizer::FromJson("{\n  \"model\": [1,\n}", "bad.json");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("bad.json: line 3, column 1: malformed JSON"));
  EXPECT_THAT(std::string(Tokenizer::FromJson("[]", "x.json").status().message()),
              HasSubstr("x.json: top level: expected an object, got an array"));
  EXPECT_THAT(std::string(Tokenizer::FromJson("{}", "x.json").status().message()),
              HasSubstr("missing \"model\""));
  EXPECT_THAT(std::string(Tokenizer::FromJson("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"\xff\":0}}}",
                                              "x.json").status().message()),
              HasSubstr("malformed JSON"));
}

TEST(TokenizerLoad, RefusesOtherComponents) {
  json j = Base({"a"});
  j["model"]["type"] = "WordPiece";
  EXPECT_THAT(LoadError(j), HasSubstr("test.json: model: model type \"WordPiece\" is not supported"));
  j = Base({"a"});
  j["normalizer"] = {{"type", "NFKC"}};
  EXPECT_THAT(LoadError(j), HasSubstr("normalizer: normalizer type \"NFKC\" is not supported"));
  j = Base({"a"});
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  EXPECT_THAT(LoadError(j), HasSubstr("pre_tokenizer: pre-tokenizer type \"ByteLevel\""));
  j = Base({"a"});
  j["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "WordPiece"}}}}};
  EXPECT_THAT(LoadError(j), HasSubstr("decoder.decoders[0]: decoder type \"WordPiece\""));
  j = Base({"a"});
  j["post_processor"] = {{"type", "ByteLevel"}};
  EXPECT_THAT(LoadError(j), HasSubstr("post_processor: post-processor type \"ByteLevel\""));
  j = Base({"a"});
  j["padding"] = {{"strategy", "BatchLongest"}};
  EXPECT_THAT(LoadError(j), HasSubstr("padding: a non-null value is not supported"));
  j = Base({"a"});
  j["truncation"] = {{"max_length", 5}};
  EXPECT_THAT(LoadError(j), HasSubstr("truncation: a non-null value"));
}

TEST(TokenizerLoad, RefusesUnsupportedOptions) {
  json j = Base({"a"});
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}};
  EXPECT_THAT(LoadError(j), HasSubstr("normalizer.pattern: a Regex pattern is not supported"));
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", ""}}}, {"content", " "}};
  EXPECT_THAT(LoadError(j), HasSubstr("an empty String pattern is not supported"));
  j = Base({"a"});
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"},
                        {"invert", false}};
  EXPECT_THAT(LoadError(j), HasSubstr("pre_tokenizer.behavior: unknown behavior \"Sideways\""));
  j = Base({"a"});
  j["model"]["dropout"] = 0.1;
  EXPECT_THAT(LoadError(j), HasSubstr("model.dropout: a dropout other than null or 0"));
  j = Base({"a"});
  j["model"]["continuing_subword_prefix"] = "##";
  EXPECT_THAT(LoadError(j), HasSubstr("model.continuing_subword_prefix: a non-empty value"));
  j = Base({"a"});
  j["model"]["end_of_word_suffix"] = "</w>";
  EXPECT_THAT(LoadError(j), HasSubstr("model.end_of_word_suffix: a non-empty value"));
  j = Base({"a"});
  j["model"]["cache_capacity"] = 10;
  EXPECT_THAT(LoadError(j), HasSubstr("model: option \"cache_capacity\" is not supported"));
  j = Base({"a"});
  j["decoder"] = {{"type", "Strip"}, {"content", "ab"}, {"start", 1}, {"stop", 0}};
  EXPECT_THAT(LoadError(j), HasSubstr("decoder.content: expected exactly one character"));
}

TEST(TokenizerLoad, RefusesBadVocabularyAndMerges) {
  json j = Base({"a"});
  j["model"]["vocab"]["b"] = "1";
  EXPECT_THAT(LoadError(j), HasSubstr("model.vocab[\"b\"]: expected an id in [0, 2^31), got a string"));
  j = Base({"a"});
  j["model"]["vocab"]["b"] = -1;
  EXPECT_THAT(LoadError(j), HasSubstr("got a number out of range"));
  j = Base({"a"});
  j["model"]["vocab"]["b"] = 0;
  EXPECT_THAT(LoadError(j), HasSubstr("model.vocab: id 0 is given to both"));
  // Duplicate keys cannot be written with nlohmann::json: the raw text.
  auto dup = Tokenizer::FromJson(
      R"({"model":{"type":"BPE","vocab":{"a":0,"a":1},"merges":[]}})", "dup.json");
  EXPECT_THAT(std::string(dup.status().message()), HasSubstr("token \"a\" appears twice"));
  j = Base({"a"});
  j["model"]["vocab"]["b"] = 100000000;
  EXPECT_THAT(LoadError(j), HasSubstr("ids are sparse"));
  j = Base({"a", "b"}, {"a c"});
  EXPECT_THAT(LoadError(j), HasSubstr("model.merges[0]: token \"c\" is not in the vocabulary"));
  j = Base({"a", "b"}, {"a b"});
  EXPECT_THAT(LoadError(j), HasSubstr("model.merges[0]: token \"ab\" is not in the vocabulary"));
  j = Base({"a", "b", "ab"}, {"a b c"});
  EXPECT_THAT(LoadError(j), HasSubstr("is not two tokens separated by one space"));
  j = Base({"a"});
  j["model"]["merges"] = json::array({1});
  EXPECT_THAT(LoadError(j), HasSubstr("expected a string \"a b\" or an array of two strings"));
  j = Base({"a"});
  j["model"]["unk_token"] = "<unk>";
  EXPECT_THAT(LoadError(j), HasSubstr("model.unk_token: \"<unk>\" is not in the vocabulary"));
  j = Base({"a"});
  j["model"]["vocab"] = json::array();
  EXPECT_THAT(LoadError(j), HasSubstr("model.vocab: expected an object, got an array"));
}

TEST(TokenizerLoad, RefusesBadAddedTokens) {
  json j = Base({"a"});
  j["added_tokens"] = {Added(5, "<x>", true)};
  EXPECT_THAT(LoadError(j),
              HasSubstr("added_tokens[0]: token \"<x>\" has id 5 but HF tokenizers would give it id 1"));
  j["added_tokens"] = {Added(1, "a", false)};
  EXPECT_THAT(LoadError(j), HasSubstr("has id 1 but HF tokenizers would give it id 0"));
  j["added_tokens"] = {Added(0, "a", false), Added(0, "a", true)};
  EXPECT_THAT(LoadError(j), HasSubstr("added_tokens[1]: token \"a\" is added twice"));
  j["added_tokens"] = {{{"id", 0}, {"content", "a"}, {"special", "yes"}}};
  EXPECT_THAT(LoadError(j), HasSubstr("added_tokens[0].special: expected a boolean, got a string"));
  j["added_tokens"] = {{{"id", 0}}};
  EXPECT_THAT(LoadError(j), HasSubstr("added_tokens[0]: missing \"content\""));
}

TEST(TokenizerLoad, RefusesBadPostProcessor) {
  json j = Base({"<bos>"});
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<cls>"}, {"type_id", 0}}}}}},
      {"pair", json::array()},
      {"special_tokens", json::object()}};
  EXPECT_THAT(LoadError(j), HasSubstr("special token \"<cls>\" is not in special_tokens"));
  j["post_processor"]["single"] = {{{"Sequence", {{"id", "B"}, {"type_id", 0}}}}};
  EXPECT_THAT(LoadError(j), HasSubstr("the single template can only use sequence A"));
  j["post_processor"]["single"] = json::array();
  j["post_processor"]["special_tokens"] = {{"<bos>", {{"id", "<bos>"}, {"ids", {7}}, {"tokens", {"<bos>"}}}}};
  EXPECT_THAT(LoadError(j), HasSubstr("expected the id of a token in the vocabulary"));
}

TEST(TokenizerLoad, HostileNestingIsAnErrorNotAStackOverflow) {
  std::string deep = "{\"junk\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  auto t = Tokenizer::FromJson(deep, "deep.json");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("option \"junk\" is not supported"));
  json normalizer = SpaceNormalizer();
  for (int i = 0; i < 40; ++i) {
    normalizer = {{"type", "Sequence"}, {"normalizers", {normalizer}}};
  }
  json j = Base({"a"});
  j["normalizer"] = normalizer;
  EXPECT_THAT(LoadError(j), HasSubstr("Sequence nested too deep"));
}

TEST(TokenizerLoad, FileAndDirectoryErrors) {
  auto missing = Tokenizer::Load("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/tokenizer.json"));
  auto dir = Tokenizer::Load(SPARK_TEST_SOURCE_DIR "/data/tokenizer");
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(std::string(dir.status().message()), HasSubstr("directory has no tokenizer.json"));
  auto tiny = Tokenizer::Load(SPARK_TEST_SOURCE_DIR "/data/models/tokenizers/tiny");
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_EQ((*tiny)->vocab_size(), 512);
  EXPECT_EQ((*tiny)->TokenToId("<turn|>"), 106);
  EXPECT_EQ((*tiny)->TokenToId("<|turn>"), 105);
  EXPECT_TRUE((*tiny)->IsSpecial(509));
}

}  // namespace
}  // namespace rt
}  // namespace spark

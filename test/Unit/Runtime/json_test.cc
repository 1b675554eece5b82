#include "spark/runtime/json.h"

#include <string>

#include "gtest/gtest.h"
#include "loader_test_util.h"

namespace spark {
namespace rt {
namespace {

using test::StatusIs;

absl::Status ParseError(absl::string_view text, int max_depth = Json::kDefaultMaxDepth) {
  return Json::Parse(text, max_depth).status();
}

TEST(JsonTest, ParsesScalars) {
  EXPECT_TRUE(Json::Parse("null")->is_null());
  EXPECT_TRUE(Json::Parse("true")->as_bool());
  EXPECT_FALSE(Json::Parse("false")->as_bool());
  EXPECT_EQ(Json::Parse("\"hi\"")->as_string(), "hi");
  EXPECT_EQ(Json::Parse(" \t\r\n 7 \n")->as_int(), 7);
}

TEST(JsonTest, KeepsIntegersExact) {
  const absl::StatusOr<Json> big = Json::Parse("9007199254740993");  // 2^53 + 1
  ASSERT_TRUE(big.ok());
  EXPECT_TRUE(big->is_int());
  EXPECT_EQ(big->as_int(), 9007199254740993);
  EXPECT_EQ(Json::Parse("-9223372036854775808")->as_int(), INT64_MIN);
  EXPECT_TRUE(Json::Parse("-0")->is_int());
}

TEST(JsonTest, NumbersWithFractionOrExponentOrOverflowAreDoubles) {
  EXPECT_FALSE(Json::Parse("1.0")->is_int());
  EXPECT_DOUBLE_EQ(Json::Parse("1.5")->as_double(), 1.5);
  EXPECT_DOUBLE_EQ(Json::Parse("1e-06")->as_double(), 1e-6);
  EXPECT_DOUBLE_EQ(Json::Parse("-2.5E+3")->as_double(), -2500.0);
  const absl::StatusOr<Json> huge = Json::Parse("18446744073709551616");
  ASSERT_TRUE(huge.ok());
  EXPECT_FALSE(huge->is_int());
  EXPECT_DOUBLE_EQ(huge->as_double(), 18446744073709551616.0);
}

TEST(JsonTest, ObjectsKeepKeyOrder) {
  const absl::StatusOr<Json> json = Json::Parse(R"({"z": 1, "a": [true, null], "m": {}})");
  ASSERT_TRUE(json.ok()) << json.status();
  ASSERT_EQ(json->as_object().size(), 3u);
  EXPECT_EQ(json->as_object()[0].first, "z");
  EXPECT_EQ(json->as_object()[1].first, "a");
  EXPECT_EQ(json->as_object()[2].first, "m");
  EXPECT_EQ(json->Find("a")->as_array().size(), 2u);
  EXPECT_EQ(json->Find("missing"), nullptr);
}

TEST(JsonTest, DecodesEscapesAndUnicode) {
  const absl::StatusOr<Json> json =
      Json::Parse(R"("a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00")");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->as_string(), "a\"b\\c/d\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(Json::Parse("\"\xc3\xa9\"")->as_string(), "\xc3\xa9");  // raw UTF-8
}

TEST(JsonTest, SerializeRoundTrips) {
  const std::string text =
      R"({"s":"q\"\\\n\u0001é","i":-42,"d":1.0,"e":1e-06,"p":0.1,"a":[null,true,false,[]],"o":{}})";
  const absl::StatusOr<Json> json = Json::Parse(text);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->Serialize(), text);
  EXPECT_EQ(*Json::Parse(json->Serialize()), *json);
}

TEST(JsonTest, SerializesDoublesShortestAndAsDoubles) {
  EXPECT_EQ(Json::Double(3.0).Serialize(), "3.0");
  EXPECT_EQ(Json::Double(0.1).Serialize(), "0.1");
  EXPECT_EQ(Json::Double(1.0 / 3.0).Serialize(), "0.3333333333333333");
  EXPECT_EQ(Json::Double(1e300).Serialize(), "1e+300");
  EXPECT_EQ(Json::Double(std::numeric_limits<double>::infinity()).Serialize(), "null");
  EXPECT_EQ(Json::Int(3).Serialize(), "3");
}

TEST(JsonTest, BuildsValues) {
  Json object = Json::MakeObject();
  object.Add("k", Json::Int(1)).Add("l", Json::MakeArray().Append(Json::String("x")));
  EXPECT_EQ(object.Serialize(), R"({"k":1,"l":["x"]})");
  EXPECT_NE(Json::Int(1), Json::Double(1.0));
}

TEST(JsonTest, RejectsTrailingGarbage) {
  EXPECT_TRUE(StatusIs(ParseError("{} x"), absl::StatusCode::kInvalidArgument,
                       "JSON error at byte 3: unexpected 'x' after the JSON value"));
}

TEST(JsonTest, RejectsBadEscape) {
  EXPECT_TRUE(StatusIs(ParseError(R"("ab\q")"), absl::StatusCode::kInvalidArgument,
                       "JSON error at byte 3: invalid escape \\'q' in string"));
}

TEST(JsonTest, RejectsBadUnicodeEscapes) {
  EXPECT_TRUE(StatusIs(ParseError(R"("\u12G4")"), absl::StatusCode::kInvalidArgument,
                       "expected 4 hex digits after \\u, found 'G'"));
  EXPECT_TRUE(StatusIs(ParseError(R"("\ud83d")"), absl::StatusCode::kInvalidArgument,
                       "high surrogate in \\u escape is not followed by a low surrogate"));
  EXPECT_TRUE(StatusIs(ParseError(R"("\ude00")"), absl::StatusCode::kInvalidArgument,
                       "unpaired low surrogate in \\u escape"));
}

TEST(JsonTest, RejectsUnterminatedString) {
  EXPECT_TRUE(StatusIs(ParseError(R"({"key": "abc)"), absl::StatusCode::kInvalidArgument,
                       "JSON error at byte 8: unterminated string"));
}

TEST(JsonTest, RejectsControlCharacterAndInvalidUtf8InString) {
  EXPECT_TRUE(StatusIs(ParseError("\"a\nb\""), absl::StatusCode::kInvalidArgument,
                       "control character 0x0a in string (escape it)"));
  EXPECT_TRUE(StatusIs(ParseError("\"\xc3\""), absl::StatusCode::kInvalidArgument,
                       "JSON error at byte 1: invalid UTF-8 in string"));
  EXPECT_TRUE(StatusIs(ParseError("\"\xed\xa0\x80\""), absl::StatusCode::kInvalidArgument,
                       "invalid UTF-8 in string"));  // an encoded surrogate
}

TEST(JsonTest, RejectsDepthOverLimit) {
  EXPECT_TRUE(Json::Parse("[[[1]]]", 3).ok());
  EXPECT_TRUE(StatusIs(ParseError("[[[[1]]]]", 3), absl::StatusCode::kInvalidArgument,
                       "JSON error at byte 3: nesting is deeper than the limit of 3"));
  EXPECT_TRUE(StatusIs(ParseError(std::string(100000, '[')), absl::StatusCode::kInvalidArgument,
                       "nesting is deeper than the limit of 64"));
}

TEST(JsonTest, RejectsDuplicateKeysNamingTheKey) {
  EXPECT_TRUE(StatusIs(ParseError(R"({"a": 1, "b": 2, "a": 3})"),
                       absl::StatusCode::kInvalidArgument,
                       "JSON error at byte 17: duplicate key \"a\" in object"));
}

TEST(JsonTest, RejectsMalformedNumbers) {
  EXPECT_TRUE(StatusIs(ParseError("01"), absl::StatusCode::kInvalidArgument,
                       "unexpected '1' after the JSON value"));
  EXPECT_TRUE(StatusIs(ParseError("1."), absl::StatusCode::kInvalidArgument,
                       "expected a digit after '.', found the end of the input"));
  EXPECT_TRUE(StatusIs(ParseError("1e+"), absl::StatusCode::kInvalidArgument,
                       "expected a digit in the exponent"));
  EXPECT_TRUE(StatusIs(ParseError("-x"), absl::StatusCode::kInvalidArgument,
                       "expected a digit, found 'x'"));
  EXPECT_TRUE(StatusIs(ParseError("1e999"), absl::StatusCode::kInvalidArgument,
                       "number 1e999 is out of the range of a double"));
}

TEST(JsonTest, RejectsStructuralErrors) {
  EXPECT_TRUE(StatusIs(ParseError(""), absl::StatusCode::kInvalidArgument,
                       "JSON error at byte 0: expected a JSON value, found the end of the input"));
  EXPECT_TRUE(StatusIs(ParseError("[1,]"), absl::StatusCode::kInvalidArgument,
                       "expected a JSON value, found ']'"));
  EXPECT_TRUE(StatusIs(ParseError("[1 2]"), absl::StatusCode::kInvalidArgument,
                       "expected ',' or ']' in array, found '2'"));
  EXPECT_TRUE(StatusIs(ParseError("{1: 2}"), absl::StatusCode::kInvalidArgument,
                       "expected a string key in object, found '1'"));
  EXPECT_TRUE(StatusIs(ParseError(R"({"a" 2})"), absl::StatusCode::kInvalidArgument,
                       "expected ':' after object key, found '2'"));
  EXPECT_TRUE(StatusIs(ParseError(R"({"a": 2 "b": 3})"), absl::StatusCode::kInvalidArgument,
                       "expected ',' or '}' in object, found '\"'"));
  EXPECT_TRUE(StatusIs(ParseError("nul"), absl::StatusCode::kInvalidArgument,
                       "expected a JSON value, found 'n'"));
  EXPECT_TRUE(StatusIs(ParseError("NaN"), absl::StatusCode::kInvalidArgument,
                       "expected a JSON value, found 'N'"));
  EXPECT_TRUE(StatusIs(ParseError(std::string("\x01", 1)), absl::StatusCode::kInvalidArgument,
                       "found byte 0x01"));
}

}  // namespace
}  // namespace rt
}  // namespace spark

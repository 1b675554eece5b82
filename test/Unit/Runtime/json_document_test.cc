// The runtime's JSON policy over nlohmann-json (json_document.h): what untrusted plan documents,
// safetensors headers and checkpoint indexes may not contain, and exact round trips.
#include "json_document.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "loader_test_util.h"

namespace spark {
namespace rt {
namespace {

using test::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

TEST(JsonDocumentTest, ParsesAndKeepsDocumentOrder) {
  absl::StatusOr<Json> json = ParseJson(R"({"b": 1, "a": [true, null, "x", 2.5]})");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->begin().key(), "b");
  EXPECT_EQ(SerializeJson(*json), R"({"b":1,"a":[true,null,"x",2.5]})");
  EXPECT_EQ(JsonTypeName((*json)["a"]), "an array");
  EXPECT_EQ(JsonTypeName((*json)["b"]), "an integer");
  EXPECT_EQ(JsonTypeName((*json)["a"][3]), "a number");
  EXPECT_EQ(FindMember(*json, "c"), nullptr);
  EXPECT_EQ(FindMember((*json)["a"], "b"), nullptr);  // not an object
  ASSERT_NE(FindMember(*json, "b"), nullptr);
}

TEST(JsonDocumentTest, RejectsDuplicateKeysNamingThemAndTheirPosition) {
  EXPECT_TRUE(StatusIs(ParseJson(R"({"w": 1, "w": 2})").status(), kInvalid,
                       "JSON error at byte 11: duplicate key \"w\" in object"));
  // Nested objects have their own keys: the same key in two objects is fine.
  EXPECT_TRUE(ParseJson(R"({"a": {"w": 1}, "b": {"w": 2}, "c": [{"w": 3}, {"w": 4}]})").ok());
  EXPECT_TRUE(StatusIs(ParseJson(R"({"a": [{"w": 1, "w": 2}]})").status(), kInvalid,
                       "duplicate key \"w\" in object"));
}

TEST(JsonDocumentTest, RejectsDeepNesting) {
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_TRUE(StatusIs(ParseJson(deep).status(), kInvalid, "nesting deeper than 64 levels"));
  const std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(ParseJson(ok).ok());
  EXPECT_TRUE(StatusIs(ParseJson("[[[1]]]", /*max_depth=*/2).status(), kInvalid,
                       "JSON error at byte 2: nesting deeper than 2 levels"));
  // A million brackets: refused at once, no recursion.
  EXPECT_FALSE(ParseJson(std::string(1000000, '[')).ok());
}

TEST(JsonDocumentTest, RejectsWhatRfc8259Does) {
  for (const char* text : {"", "{", "[1,]", "{\"a\":1,}", "// c\n{}", "/* c */ {}", "NaN",
                           "[Infinity]", "{} {}", "'a'", "[01]", "\"\x01\"", "\"\xff\""}) {
    EXPECT_TRUE(StatusIs(ParseJson(text).status(), kInvalid, "JSON error at byte ")) << text;
  }
  EXPECT_TRUE(StatusIs(ParseJson("{\"target\": }").status(), kInvalid,
                       "JSON error at byte 11: syntax error while parsing value"));
}

TEST(JsonDocumentTest, IntegersAreExactInt64) {
  absl::StatusOr<Json> json =
      ParseJson("[9223372036854775807, -9223372036854775808, 9223372036854775808, 1.0, 7]");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_TRUE(IsJsonInt((*json)[0]));
  EXPECT_EQ(JsonInt((*json)[0]), INT64_MAX);
  EXPECT_TRUE(IsJsonInt((*json)[1]));
  EXPECT_EQ(JsonInt((*json)[1]), INT64_MIN);
  EXPECT_FALSE(IsJsonInt((*json)[2]));  // above int64
  EXPECT_EQ(JsonInt((*json)[2]), 0);
  EXPECT_FALSE(IsJsonInt((*json)[3]));  // a double, even if integral
  EXPECT_EQ(JsonInt((*json)[4]), 7);
}

TEST(JsonDocumentTest, DoublesRoundTripInTheirShortestForm) {
  for (const double value : {0.1, 1e-6, 3.0, -2.5e300, 1.0 / 3.0}) {
    const std::string text = SerializeJson(Json(value));
    absl::StatusOr<Json> back = ParseJson(text);
    ASSERT_TRUE(back.ok()) << text;
    EXPECT_EQ(back->get<double>(), value) << text;
    EXPECT_TRUE(back->is_number_float()) << text;  // a '.' or an exponent: stays a double
  }
  EXPECT_EQ(SerializeJson(Json(0.1)), "0.1");
  EXPECT_EQ(SerializeJson(Json(3.0)), "3.0");
}

TEST(JsonDocumentTest, SerializingBytesThatAreNotUtf8ReplacesThem) {
  Json json = Json::object();
  AddMember(json, "name", Json(std::string("a\xff" "b")));
  AddMember(json, "n", JsonInteger(-3));
  EXPECT_EQ(SerializeJson(json), "{\"name\":\"a\xef\xbf\xbd" "b\",\"n\":-3}");
}

}  // namespace
}  // namespace rt
}  // namespace spark

// Unit tests of the chat-template interpreter: one case per construct of the Jinja subset
// (test/data/chat_templates/constructs.json, expected output rendered by Python jinja2 into
// goldens/constructs.json), and one test per error Spark itself reports (unsupported constructs
// with their line, unterminated tags and strings, raise_exception, limits, type errors), Load's
// file lookup and the special tokens.
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "chat_template_test_util.h"
#include "spark/runtime/chat_template.h"

namespace spark::rt {
namespace {

using ::testing::HasSubstr;

const std::string kDataDir = std::string(SPARK_TEST_SOURCE_DIR) + "/data/chat_templates";

nlohmann::ordered_json ReadJson(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return nlohmann::ordered_json();
  return nlohmann::ordered_json::parse(*text);
}

// The construct cases of both fixtures: {"file", "name", "template", "context"} each.
const nlohmann::ordered_json& Constructs() {
  static const nlohmann::ordered_json* const kConstructs = [] {
    auto* all = new nlohmann::ordered_json(nlohmann::ordered_json::array());
    for (const char* file : {"constructs.json", "constructs_random.json"}) {
      nlohmann::ordered_json fixture = ReadJson(kDataDir + "/" + file);
      nlohmann::ordered_json shared;  // {"context": ..., "cases": [...]}: one context for all
      if (fixture.is_object()) {
        shared = fixture["context"];
        fixture = fixture["cases"];
      }
      for (auto c : fixture) {
        c["file"] = file;
        if (!shared.is_null()) c["context"] = shared;
        all->push_back(std::move(c));
      }
    }
    return all;
  }();
  return *kConstructs;
}

const nlohmann::ordered_json& ConstructGolden(const std::string& file, const std::string& name) {
  static const nlohmann::ordered_json* const kGoldens = [] {
    auto* all = new nlohmann::ordered_json(nlohmann::ordered_json::object());
    for (const char* file : {"constructs.json", "constructs_random.json"}) {
      (*all)[file] = ReadJson(kDataDir + "/goldens/" + file);
    }
    return all;
  }();
  static const nlohmann::ordered_json* const kMissing = new nlohmann::ordered_json();
  const auto& goldens = (*kGoldens)[file];
  return goldens.contains(name) ? goldens[name] : *kMissing;
}

std::vector<std::string> ConstructNames() {
  std::vector<std::string> names;
  for (const auto& c : Constructs()) names.push_back(c["name"].get<std::string>());
  return names;
}

using testing_util::FixedNow;

absl::StatusOr<std::string> RenderText(const std::string& source,
                                       nlohmann::ordered_json context = nlohmann::ordered_json{}) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(source, "t.jinja");
  if (!t.ok()) return t.status();
  t->set_clock(FixedNow);
  if (!context.contains("messages")) context["messages"] = nlohmann::ordered_json::array();
  return t->Render(context);
}

class ConstructTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConstructTest, MatchesJinja2) {
  const nlohmann::ordered_json* construct = nullptr;
  for (const auto& c : Constructs()) {
    if (c["name"] == GetParam()) construct = &c;
  }
  ASSERT_NE(construct, nullptr);
  SCOPED_TRACE("template: " + (*construct)["template"].get<std::string>());
  const auto& golden = ConstructGolden((*construct)["file"].get<std::string>(), GetParam());
  ASSERT_TRUE(golden.is_object()) << "stale goldens: rerun the script";
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = nlohmann::ordered_json::array();
  for (const auto& [k, v] : (*construct)["context"].items()) context[k] = v;
  absl::StatusOr<std::string> text =
      RenderText((*construct)["template"].get<std::string>(), context);
  if (golden.contains("text")) {
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, golden["text"].get<std::string>());
    return;
  }
  ASSERT_FALSE(text.ok()) << "jinja2: " << golden["error"] << "; Spark rendered: " << *text;
  if (golden["error_type"] == "TemplateError") {
    const auto raised = text.status().GetPayload(ChatTemplateRaisedPayload());
    ASSERT_TRUE(raised.has_value()) << text.status();
    EXPECT_EQ(std::string(*raised), golden["error"].get<std::string>());
  } else if (golden["error_type"] != "TemplateSyntaxError") {
    EXPECT_TRUE(absl::EndsWith(text.status().message(),
                               ": " + golden["error"].get<std::string>()))
        << text.status().message() << "\n vs jinja2: " << golden["error"];
  }
}

INSTANTIATE_TEST_SUITE_P(Jinja2, ConstructTest, ::testing::ValuesIn(ConstructNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(ConstructTest, FixturesAreComplete) {
  EXPECT_GE(Constructs().size(), 500u);
  for (const auto& c : Constructs()) {
    EXPECT_TRUE(ConstructGolden(c["file"].get<std::string>(), c["name"].get<std::string>())
                    .is_object())
        << c["name"];
  }
}

// --- Errors Spark reports itself (jinja2's wording differs or it has no such limit). ---

void ExpectError(const absl::StatusOr<std::string>& result, const std::string& fragment) {
  ASSERT_FALSE(result.ok()) << "rendered: " << *result;
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(fragment));
}

TEST(ChatTemplateErrorTest, UnsupportedTagNamesItAndItsLine) {
  ExpectError(RenderText("a\nb\n{% include 'x.jinja' %}"), "t.jinja:3: unsupported tag 'include'");
  ExpectError(RenderText("{% do x.append(1) %}"), "t.jinja:1: unsupported tag 'do'");
  ExpectError(RenderText("{% for x in y recursive %}{% endfor %}"), "unsupported: recursive");
}

TEST(ChatTemplateErrorTest, UnsupportedFilterAndTestAtParseTime) {
  // Parse fails even though the expression is never evaluated.
  ExpectError(RenderText("{% if false %}\n{{ x | wordwrap }}{% endif %}"),
              "t.jinja:2: unsupported filter 'wordwrap'");
  ExpectError(RenderText("\n\n{{ x is escaped }}"), "t.jinja:3: unsupported test 'escaped'");
  ExpectError(RenderText("{{ xs | map('nosuch') | list }}", {{"xs", {1}}}),
              "unsupported filter 'nosuch' (in map)");
  ExpectError(RenderText("{{ xs | select('nosuch') | list }}", {{"xs", {1}}}),
              "unsupported test 'nosuch' (in select)");
}

TEST(ChatTemplateErrorTest, UnsupportedMethodNamesItAndItsLine) {
  ExpectError(RenderText("\n{{ 'abc'.zfill(5) }}"),
              "t.jinja:2: unsupported method (or no such attribute): 'str object' has no "
              "attribute 'zfill'");
}

TEST(ChatTemplateErrorTest, UnterminatedConstructs) {
  ExpectError(RenderText("x\n{% if true "), "t.jinja:2: unterminated tag");
  ExpectError(RenderText("{{ 'abc }}"), "t.jinja:1: unterminated string literal");
  ExpectError(RenderText("{{ x "), "unterminated expression");
  ExpectError(RenderText("{# note"), "unterminated comment");
  ExpectError(RenderText("{% if true %}\nx"), "expected {% elif");
  ExpectError(RenderText("{% for x in y %}"), "expected {% else");
  ExpectError(RenderText("{% endif %}"), "t.jinja:1: unexpected {% endif %}");
  ExpectError(RenderText("{% macro m( %}{% endmacro %}"), "expected a name");
}

TEST(ChatTemplateErrorTest, SyntaxErrors) {
  ExpectError(RenderText("{{ 1 + }}"), "expected an expression, found '}}'");
  ExpectError(RenderText("{{ a b }}"), "expected '}}', found 'b'");
  ExpectError(RenderText("{% break %}"), "'break' outside a for loop");
  ExpectError(RenderText("{{ x @ y }}"), "unexpected character '@'");
  ExpectError(RenderText("{{ 99999999999999999999 }}"), "out of range");
  ExpectError(RenderText(std::string("{{ '\xff' }}")), "not valid UTF-8");
}

TEST(ChatTemplateErrorTest, RaiseExceptionCarriesTheMessageAndLine) {
  absl::StatusOr<std::string> result =
      RenderText("line one\n{{ raise_exception('Roles must alternate') }}");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "t.jinja:2: raise_exception: Roles must alternate");
  const auto raised = result.status().GetPayload(ChatTemplateRaisedPayload());
  ASSERT_TRUE(raised.has_value());
  EXPECT_EQ(std::string(*raised), "Roles must alternate");
}

TEST(ChatTemplateErrorTest, RuntimeTypeErrorsNameTheLine) {
  ExpectError(RenderText("\n\n{{ 'a' + 1 }}"),
              "t.jinja:3: can only concatenate str (not \"int\") to str");
  ExpectError(RenderText("\n{{ d.a.b }}", {{"d", nlohmann::ordered_json::object()}}),
              "t.jinja:2: 'dict object' has no attribute 'a'");
  ExpectError(RenderText("{{ 5 | length }}"), "t.jinja:1: object of type 'int' has no len()");
  ExpectError(RenderText("{{ 1 // 0 }}"), "integer division or modulo by zero");
  ExpectError(RenderText("{{ 9223372036854775807 + 1 }}"), "integer overflow");
  ExpectError(RenderText("{% set x = 1 %}{% set x.a = 2 %}"),
              "cannot assign attribute on non-namespace object 'x'");
}

TEST(ChatTemplateErrorTest, OutputLimit) {
  absl::StatusOr<ChatTemplate> t =
      ChatTemplate::Parse("{% for i in range(100) %}0123456789{% endfor %}", "t.jinja");
  ASSERT_TRUE(t.ok());
  ChatTemplate::Limits limits;
  limits.max_output_bytes = 500;
  t->set_limits(limits);
  ExpectError(t->Render({{"messages", nlohmann::ordered_json::array()}}), "exceeds 500 bytes");
  limits.max_output_bytes = 1000;
  t->set_limits(limits);
  absl::StatusOr<std::string> ok = t->Render({{"messages", nlohmann::ordered_json::array()}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 1000u);
}

TEST(ChatTemplateErrorTest, StringRepetitionIsBounded) {
  ExpectError(RenderText("{{ 'x' * 100000000000 }}"), "exceeds");
  ExpectError(RenderText("{% set s = 'ab' * 5000000 %}{{ (s ~ s ~ s ~ s) | length }}"),
              "exceeds");
}

TEST(ChatTemplateErrorTest, RecursionLimit) {
  ExpectError(RenderText("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}"),
              "macro calls nested deeper than 100");
}

TEST(ChatTemplateErrorTest, StepLimitStopsLongLoops) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(
      "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
      "t.jinja");
  ASSERT_TRUE(t.ok());
  ChatTemplate::Limits limits;
  limits.max_steps = 100000;
  t->set_limits(limits);
  ExpectError(t->Render({{"messages", nlohmann::ordered_json::array()}}),
              "more than 100000 evaluation steps");
}

TEST(ChatTemplateErrorTest, DeepNestingIsAnErrorNotACrash) {
  ExpectError(RenderText("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"),
              "nested deeper than");
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  ExpectError(RenderText(ifs), "nested deeper than");
  ExpectError(RenderText("{{ " + std::string(5000, '-') + "1 }}"), "nested deeper than");
  ExpectError(RenderText("{{ x" + std::string(3000, '.') + " }}"), "expected an attribute name");
}

TEST(ChatTemplateErrorTest, DeepValuesAreRefused) {
  // Printing, comparing or freeing a 100000-deep list would recurse 100000 times.
  ExpectError(RenderText("{% set ns = namespace(v=[]) %}{% for i in range(100000) %}"
                         "{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}"),
              "nested deeper than 256 levels");
  nlohmann::ordered_json deep = nlohmann::ordered_json::array();
  for (int i = 0; i < 1000; ++i) deep = nlohmann::ordered_json::array({deep});
  ExpectError(RenderText("x", {{"messages", deep}}), "deeper than 200 levels");
}

TEST(ChatTemplateErrorTest, NamespacesCannotContainNamespaces) {
  // A namespace holding itself would be a reference cycle (and endless printing).
  ExpectError(RenderText("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}"),
              "storing a namespace inside a namespace");
  ExpectError(RenderText("{% set ns = namespace(a=1) %}{% set ns.l = [1, [ns]] %}"),
              "storing a namespace inside a namespace");
}

TEST(ChatTemplateErrorTest, QuadraticBuildingIsBounded) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(
      "{% set ns = namespace(s='') %}{% for i in range(100000) %}"
      "{% set ns.s = ns.s ~ '0123456789' %}{% endfor %}{{ ns.s | length }}",
      "t.jinja");
  ASSERT_TRUE(t.ok());
  // 100000 appends to a string growing to 1 MB copy about 50 GB: stopped by the budget.
  ExpectError(t->Render({{"messages", nlohmann::ordered_json::array()}}),
              "bytes of strings and lists");
  ExpectError(RenderText("{% set ns = namespace(v=[]) %}{% for i in range(100000) %}"
                         "{% set ns.v = ns.v + [i] %}{% endfor %}"),
              "bytes of strings and lists");
}

TEST(ChatTemplateErrorTest, ContextMustHaveMessages) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse("x", "t.jinja");
  ASSERT_TRUE(t.ok());
  ExpectError(t->Render(nlohmann::ordered_json::object()), "no \"messages\"");
  ExpectError(t->Render(nlohmann::ordered_json::array()), "must be a JSON object");
}

TEST(ChatTemplateTest, GenerationTagRendersItsBody) {
  // transformers' AssistantTracker adds {% generation %}; outside training it only marks text.
  absl::StatusOr<std::string> text =
      RenderText("{% for m in messages %}{% generation %}[{{ m }}]{% endgeneration %}{% endfor %}",
                 {{"messages", {"a", "b"}}});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "[a][b]");
}

TEST(ChatTemplateTest, StrftimeNowUsesTheClock) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse("{{ strftime_now('%Y-%m-%d') }}", "t");
  ASSERT_TRUE(t.ok());
  t->set_clock([] {
    std::tm tm{};
    tm.tm_year = 99;
    tm.tm_mon = 11;
    tm.tm_mday = 31;
    return tm;
  });
  absl::StatusOr<std::string> text = t->Render({{"messages", nlohmann::ordered_json::array()}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "1999-12-31");
}

// --- Load: the checkpoint directory's files. ---

class LoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/spark_chat_template_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (const char* f : {"chat_template.jinja", "chat_template.json", "tokenizer_config.json"}) {
      std::remove((dir_ + "/" + f).c_str());
    }
    rmdir(dir_.c_str());
  }
  void Write(const std::string& name, const std::string& text) {
    ASSERT_TRUE(WriteStringToFile(dir_ + "/" + name, text).ok());
  }
  std::string dir_;
};

TEST_F(LoadTest, PrefersChatTemplateJinjaAndReadsSpecialTokens) {
  Write("chat_template.jinja", "{{ bos_token }}[{{ messages[0].content }}]{{ eos_token }}");
  Write("tokenizer_config.json",
        R"({"chat_template": "from config", "bos_token": "<bos>",
            "eos_token": {"content": "<eos>", "lstrip": false}})");
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Load(dir_);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->bos_token(), "<bos>");
  EXPECT_EQ(t->eos_token(), "<eos>");
  absl::StatusOr<std::string> text =
      t->Render({{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<bos>[hi]<eos>");
  // The context's own tokens win.
  text = t->Render({{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"bos_token", "B"}});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "B[hi]<eos>");
}

TEST_F(LoadTest, FallsBackToTokenizerConfigString) {
  Write("tokenizer_config.json", R"({"chat_template": "cfg:{{ messages | length }}"})");
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Load(dir_);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->bos_token().has_value());
  absl::StatusOr<std::string> text = t->Render({{"messages", {1, 2}}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "cfg:2");
}

TEST_F(LoadTest, ProcessorChatTemplateJsonComesBeforeTokenizerConfig) {
  Write("chat_template.json", R"({"chat_template": "processor {{ bos_token }}"})");
  Write("tokenizer_config.json", R"({"chat_template": "tokenizer", "bos_token": "<bos>"})");
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Load(dir_);
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<std::string> text = t->Render({{"messages", nlohmann::ordered_json::array()}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "processor <bos>");
  Write("chat_template.json", R"({"template": "x"})");
  t = ChatTemplate::Load(dir_);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("chat_template.json: expected"));
}

TEST_F(LoadTest, TokenizerConfigListTakesDefault) {
  Write("tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "tools"},
                              {"name": "default", "template": "default"}]})");
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Load(dir_);
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<std::string> text = t->Render({{"messages", nlohmann::ordered_json::array()}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "default");
  Write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "x"}]})");
  absl::StatusOr<ChatTemplate> missing = ChatTemplate::Load(dir_);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("\"name\": \"default\""));
}

TEST_F(LoadTest, MissingTemplateNamesWhatWasLookedFor) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Load(dir_);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("chat_template.jinja"));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("chat_template.json"));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("tokenizer_config.json"));
  Write("tokenizer_config.json", R"({"bos_token": "<bos>"})");
  t = ChatTemplate::Load(dir_);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("\"chat_template\" key"));
}

TEST_F(LoadTest, MalformedConfigAndTemplateErrorsNameTheFile) {
  Write("tokenizer_config.json", "{not json");
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Load(dir_);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("tokenizer_config.json: not a JSON"));
  Write("tokenizer_config.json", "{}");
  Write("chat_template.jinja", "ok\n{% frobnicate %}");
  t = ChatTemplate::Load(dir_);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("chat_template.jinja:2: unsupported tag 'frobnicate'"));
}

TEST_F(LoadTest, RealGemma4TemplateFromDirectory) {
  absl::StatusOr<std::string> source =
      ReadFileToString(kDataDir + "/ollama-gemma4_e2b_chat_template.jinja");
  ASSERT_TRUE(source.ok());
  Write("chat_template.jinja", *source);
  Write("tokenizer_config.json", R"({"bos_token": "<bos>", "eos_token": "<eos>"})");
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Load(dir_);
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<std::string> text = t->Render(
      {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"add_generation_prompt", true}});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<bos><|turn>user\nHi<turn|>\n<|turn>model\n");
}

}  // namespace
}  // namespace spark::rt

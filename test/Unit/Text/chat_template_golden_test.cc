// Parity with Python jinja2: renders every (template, conversation) of test/data/chat_templates/
// and compares the text byte for byte with the goldens tools/reference/render_chat_template.py
// wrote (test/tools/chat-template/jinja2-goldens.test re-renders them with jinja2, so they are
// what jinja2 renders today). A golden error must be an error here too; a raise_exception error
// must carry the same message.
#include <ctime>
#include <string>

#include "absl/strings/cord.h"
#include "file_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "chat_template_test_util.h"
#include "spark/runtime/chat_template.h"

namespace spark::rt {
namespace {

const std::string kDataDir = std::string(SPARK_TEST_SOURCE_DIR) + "/data/chat_templates";

nlohmann::ordered_json ReadJson(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return nlohmann::ordered_json::parse(text.ok() ? *text : "null");
}

using testing_util::FixedNow;

TEST(ChatTemplateGoldenTest, EveryTemplateAndConversationMatchesJinja2) {
  const nlohmann::ordered_json templates = ReadJson(kDataDir + "/templates.json");
  const nlohmann::ordered_json conversations = ReadJson(kDataDir + "/conversations.json");
  ASSERT_GE(templates.size(), 4u);
  ASSERT_GE(conversations.size(), 20u);
  int compared = 0, matched = 0;
  for (const auto& [file, tokens] : templates.items()) {
    SCOPED_TRACE(file);
    absl::StatusOr<std::string> source = ReadFileToString(kDataDir + "/" + file);
    ASSERT_TRUE(source.ok()) << source.status();
    absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::Parse(*source, file);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    tmpl->set_clock(FixedNow);
    tmpl->set_bos_token(tokens.contains("bos_token")
                            ? std::optional<std::string>(tokens["bos_token"].get<std::string>())
                            : std::nullopt);
    tmpl->set_eos_token(tokens.contains("eos_token")
                            ? std::optional<std::string>(tokens["eos_token"].get<std::string>())
                            : std::nullopt);
    const std::string stem = file.substr(0, file.rfind('.'));
    const nlohmann::ordered_json goldens = ReadJson(kDataDir + "/goldens/" + stem + ".json");
    ASSERT_EQ(goldens.size(), conversations.size()) << "stale goldens: rerun the script";
    for (const auto& conversation : conversations) {
      const std::string name = conversation["name"].get<std::string>();
      SCOPED_TRACE(name);
      ASSERT_TRUE(goldens.contains(name));
      const auto& golden = goldens[name];
      nlohmann::ordered_json context = conversation;
      context.erase("name");
      absl::StatusOr<std::string> text = tmpl->Render(context);
      ++compared;
      if (golden.contains("text")) {
        ASSERT_TRUE(text.ok()) << text.status();
        EXPECT_EQ(*text, golden["text"].get<std::string>());
        matched += *text == golden["text"].get<std::string>();
        continue;
      }
      ASSERT_FALSE(text.ok()) << "jinja2 failed with: " << golden["error"] << "; got:\n" << *text;
      if (golden["error_type"] == "TemplateError") {
        const auto raised =
            text.status().GetPayload(ChatTemplateRaisedPayload());
        ASSERT_TRUE(raised.has_value()) << text.status();
        EXPECT_EQ(std::string(*raised), golden["error"].get<std::string>());
        matched += std::string(*raised) == golden["error"].get<std::string>();
      } else {
        // jinja2's own errors (UndefinedError, TypeError): the message after "ORIGIN:LINE: ".
        const std::string expected = ": " + golden["error"].get<std::string>();
        const std::string got(text.status().message());
        EXPECT_TRUE(got.size() >= expected.size() &&
                    got.compare(got.size() - expected.size(), expected.size(), expected) == 0)
            << got << "\n does not end in\n" << expected;
        matched += got.size() >= expected.size() &&
                   got.compare(got.size() - expected.size(), expected.size(), expected) == 0;
      }
    }
  }
  std::printf("chat template goldens: %d of %d (template, conversation) pairs match\n", matched,
              compared);
  EXPECT_EQ(matched, compared);
}

}  // namespace
}  // namespace spark::rt

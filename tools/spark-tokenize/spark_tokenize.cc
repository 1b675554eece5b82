// spark-tokenize: text <-> token ids with a checkpoint's tokenizer.json, as HF tokenizers gives
// them (docs/cli.md). A thin main over spark_text: every failure is an absl::Status, printed
// with ToString() on stderr, exit code 1. Flags are parsed with CLI11, JSON lines with nlohmann-json
// (the small inputs here; tokenizer.json itself is read with RapidJSON in spark_text).
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "spark/runtime/chat_template.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/tokenizer.h"

namespace spark {
namespace {

using rt::PrintableText;
using rt::Tokenizer;

struct Options {
  std::string tokenizer;
  bool no_special = false;
  bool jsonl = false;
  bool decode = false;
  bool skip_special = false;
  // --apply-chat-template: the messages file, and what the template is given with them.
  std::string messages_file;
  std::string tools_file;
  bool add_generation_prompt = false;
  bool enable_thinking = false;
};

std::string ReadStdin() {
  std::string data;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), stdin)) > 0) data.append(buffer, n);
  return data;
}

void Write(absl::string_view text) { std::fwrite(text.data(), 1, text.size(), stdout); }

absl::Status LineError(size_t line, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("stdin line ", line, ": ", message));
}

// The lines of `input` (split at '\n'; a final '\n' ends the last line rather than starting one).
std::vector<absl::string_view> Lines(absl::string_view input) {
  std::vector<absl::string_view> lines = absl::StrSplit(input, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

absl::Status CheckUtf8(absl::string_view text, size_t line) {
  if (auto bad = rt::InvalidUtf8Offset(text)) {
    return LineError(line, absl::StrCat("invalid UTF-8 at byte ", *bad + 1, " of the line"));
  }
  return absl::OkStatus();
}

std::string IdsText(const std::vector<int32_t>& ids, absl::string_view separator) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out.append(separator.data(), separator.size());
    absl::StrAppend(&out, ids[i]);
  }
  return out;
}

absl::StatusOr<nlohmann::json> ParseLine(absl::string_view line, size_t line_number) {
  if (line.find_first_not_of(" \t\r") == absl::string_view::npos) {
    return LineError(line_number, "empty line (expected one JSON value per line)");
  }
  try {
    return nlohmann::json::parse(line.begin(), line.end());
  } catch (const nlohmann::json::exception& error) {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column C: ...".
    absl::string_view what = error.what();
    size_t bracket = what.find("] ");
    if (bracket != absl::string_view::npos) what.remove_prefix(bracket + 2);
    return LineError(line_number, absl::StrCat("malformed JSON: ", what));
  }
}

// stdin: text; stdout: ids, space-separated, then a newline.
absl::Status EncodeText(const Tokenizer& tokenizer, const Options& options) {
  std::string input = ReadStdin();
  if (auto bad = rt::InvalidUtf8Offset(input)) {
    size_t line = 1 + std::count(input.begin(), input.begin() + *bad, '\n');
    return absl::InvalidArgumentError(
        absl::StrCat("stdin line ", line, ": invalid UTF-8 at byte offset ", *bad, " of the input"));
  }
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(input, !options.no_special);
  if (!ids.ok()) return ids.status();
  Write(IdsText(*ids, " "));
  Write("\n");
  return absl::OkStatus();
}

// stdin: one JSON string per line; stdout: one JSON array of ids per line.
// Calls `handle` with each line of stdin read as one JSON value (UTF-8 checked first) and its line
// number, stopping at the first error.
absl::Status ForEachJsonLine(
    const std::function<absl::Status(const nlohmann::json&, size_t)>& handle) {
  std::string input = ReadStdin();
  std::vector<absl::string_view> lines = Lines(input);
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::Status utf8 = CheckUtf8(lines[i], i + 1);
    if (!utf8.ok()) return utf8;
    absl::StatusOr<nlohmann::json> doc = ParseLine(lines[i], i + 1);
    if (!doc.ok()) return doc.status();
    absl::Status handled = handle(*doc, i + 1);
    if (!handled.ok()) return handled;
  }
  return absl::OkStatus();
}

absl::Status EncodeJsonl(const Tokenizer& tokenizer, const Options& options) {
  return ForEachJsonLine([&](const nlohmann::json& doc, size_t line) -> absl::Status {
    if (!doc.is_string()) return LineError(line, "expected a JSON string");
    absl::StatusOr<std::vector<int32_t>> ids =
        tokenizer.Encode(doc.get_ref<const std::string&>(), !options.no_special);
    if (!ids.ok()) return LineError(line, ids.status().message());
    Write(absl::StrCat("[", IdsText(*ids, ", "), "]\n"));
    return absl::OkStatus();
  });
}

absl::Status CheckIds(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, size_t line) {
  for (size_t k = 0; k < ids.size(); ++k) {
    if (!tokenizer.IdToToken(ids[k]).has_value()) {
      return LineError(line, absl::StrCat("id ", ids[k], " (item ", k + 1,
                                          ") is not in the vocabulary (", tokenizer.vocab_size(),
                                          " ids)"));
    }
  }
  return absl::OkStatus();
}

// stdin: one JSON array of ids per line; stdout: one JSON string per line.
absl::Status DecodeJsonl(const Tokenizer& tokenizer, const Options& options) {
  return ForEachJsonLine([&](const nlohmann::json& doc, size_t line) -> absl::Status {
    if (!doc.is_array()) return LineError(line, "expected a JSON array of token ids");
    std::vector<int32_t> ids;
    for (size_t k = 0; k < doc.size(); ++k) {
      const nlohmann::json& id = doc[k];
      if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN || id.get<int64_t>() > INT32_MAX ||
          (id.is_number_unsigned() && id.get<uint64_t>() > INT32_MAX)) {
        return LineError(line, absl::StrCat("item ", k + 1, " is not an integer token id"));
      }
      ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    absl::Status known = CheckIds(tokenizer, ids, line);
    if (!known.ok()) return known;
    absl::StatusOr<std::string> text = tokenizer.Decode(ids, options.skip_special);
    if (!text.ok()) return LineError(line, text.status().message());
    Write(nlohmann::json(*text).dump());  // valid UTF-8 (Decode never gives anything else)
    Write("\n");
    return absl::OkStatus();
  });
}

// stdin: ids separated by white space; stdout: the text, exactly (nothing added).
absl::Status DecodeText(const Tokenizer& tokenizer, const Options& options) {
  std::string input = ReadStdin();
  std::vector<absl::string_view> lines = absl::StrSplit(input, '\n');
  std::vector<int32_t> ids;
  for (size_t i = 0; i < lines.size(); ++i) {
    for (absl::string_view word : absl::StrSplit(lines[i], absl::ByAnyChar(" \t\r"), absl::SkipEmpty())) {
      int32_t id;
      if (!absl::SimpleAtoi(word, &id)) {
        return LineError(i + 1, absl::StrCat("\"", PrintableText(word), "\" is not a token id"));
      }
      ids.push_back(id);
      absl::Status known = CheckIds(tokenizer, {id}, i + 1);
      if (!known.ok()) return known;
    }
  }
  absl::StatusOr<std::string> text = tokenizer.Decode(ids, options.skip_special);
  if (!text.ok()) return text.status();
  Write(*text);
  return absl::OkStatus();
}

// A JSON file read in document order (a template sees the order of keys: tojson, items()).
absl::StatusOr<nlohmann::ordered_json> ReadJsonFile(const std::string& path, const char* what) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(PrintableText(absl::StrCat("cannot open the ", what, " file ", path)));
  }
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  std::fclose(file);
  nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(
        PrintableText(absl::StrCat(path, ": the ", what, " file is not valid JSON")));
  }
  return json;
}

// The directory of the template: PATH itself, or the directory of a tokenizer.json file.
std::string TemplateDirectory(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return path;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

// --apply-chat-template: prints the rendered prompt exactly, nothing added.
absl::Status ApplyChatTemplate(const Options& options) {
  absl::StatusOr<rt::ChatTemplate> chat = rt::ChatTemplate::Load(TemplateDirectory(options.tokenizer));
  if (!chat.ok()) return chat.status();
  absl::StatusOr<nlohmann::ordered_json> messages = ReadJsonFile(options.messages_file, "messages");
  if (!messages.ok()) return messages.status();
  if (!messages->is_array()) {
    return absl::InvalidArgumentError(PrintableText(absl::StrCat(
        options.messages_file, ": expected a JSON array of messages ({\"role\": ..., "
                               "\"content\": ...})")));
  }
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = std::move(*messages);
  if (!options.tools_file.empty()) {
    absl::StatusOr<nlohmann::ordered_json> tools = ReadJsonFile(options.tools_file, "tools");
    if (!tools.ok()) return tools.status();
    if (!tools->is_array()) {
      return absl::InvalidArgumentError(PrintableText(absl::StrCat(
          options.tools_file, ": expected a JSON array of tool declarations")));
    }
    context["tools"] = std::move(*tools);
  }
  context["add_generation_prompt"] = options.add_generation_prompt;
  context["enable_thinking"] = options.enable_thinking;
  absl::StatusOr<std::string> prompt = chat->Render(context);
  if (!prompt.ok()) return prompt.status();
  Write(*prompt);
  return absl::OkStatus();
}

absl::Status Run(const Options& options) {
  if (!options.messages_file.empty()) return ApplyChatTemplate(options);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Load(options.tokenizer);
  if (!tokenizer.ok()) return tokenizer.status();
  if (options.decode) {
    return options.jsonl ? DecodeJsonl(**tokenizer, options) : DecodeText(**tokenizer, options);
  }
  return options.jsonl ? EncodeJsonl(**tokenizer, options) : EncodeText(**tokenizer, options);
}

}  // namespace
}  // namespace spark

int main(int argc, char** argv) {
  spark::Options options;
  CLI::App app{
      "spark-tokenize: text to token ids and back with a checkpoint's tokenizer.json, exactly as "
      "HF tokenizers gives them.\n"
      "  spark-tokenize --tokenizer PATH [--no-special]          stdin: text; stdout: ids, space-separated\n"
      "  spark-tokenize --tokenizer PATH --jsonl [--no-special]  stdin: one JSON string per line; stdout: one JSON array of ids per line\n"
      "  spark-tokenize --tokenizer PATH --decode --jsonl        stdin: one JSON array of ids per line; stdout: one JSON string per line\n"
      "  spark-tokenize --tokenizer PATH --decode                stdin: ids separated by white space; stdout: the text\n"
      "  spark-tokenize --tokenizer PATH --apply-chat-template MESSAGES.json [--add-generation-prompt]\n"
      "                 [--enable-thinking] [--tools TOOLS.json]  stdout: the rendered prompt, exactly",
      "spark-tokenize"};
  app.add_option("--tokenizer", options.tokenizer,
                 "a tokenizer.json file, or a directory holding one")
      ->required();
  CLI::Option* no_special = app.add_flag(
      "--no-special", options.no_special,
      "encode without the post-processor's special tokens (HF add_special_tokens=False: no "
      "<bos>); special-token text in the input is still matched");
  app.add_flag("--jsonl", options.jsonl,
               "one JSON value per line: strings to encode, or (with --decode) arrays of ids");
  CLI::Option* decode = app.add_flag("--decode", options.decode,
                                     "decode ids to text (special tokens kept) instead of encoding");
  CLI::Option* skip = app.add_flag("--skip-special", options.skip_special,
                                   "with --decode: drop special tokens (HF skip_special_tokens=True)");
  CLI::Option* chat = app.add_option(
      "--apply-chat-template", options.messages_file,
      "render the checkpoint's chat template (chat_template.jinja, else tokenizer_config.json's "
      "chat_template, in PATH or the directory of PATH) over the messages of this JSON file (an "
      "array of OpenAI-style messages) and print the prompt exactly, nothing added");
  CLI::Option* generation = app.add_flag(
      "--add-generation-prompt", options.add_generation_prompt,
      "with --apply-chat-template: end with the start of the model's turn");
  CLI::Option* thinking = app.add_flag("--enable-thinking", options.enable_thinking,
                                       "with --apply-chat-template: enable_thinking = true");
  CLI::Option* tools = app.add_option(
      "--tools", options.tools_file,
      "with --apply-chat-template: a JSON file with an array of tool declarations");
  generation->needs(chat);
  thinking->needs(chat);
  tools->needs(chat);
  chat->excludes(decode);
  decode->excludes(no_special);
  skip->needs(decode);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help prints the usage and exits 0; a usage error prints why and exits 1.
    return app.exit(error) == 0 ? 0 : 1;
  }
  absl::Status status = spark::Run(options);
  std::fflush(stdout);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

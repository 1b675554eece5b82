// Python's str.upper() / str.lower() for the scripts chat-template inputs commonly hold: ASCII,
// Latin-1, Latin Extended-A and Additional, Greek (with final sigma), Cyrillic, Armenian and
// fullwidth Latin, with Python's one-to-many mappings there (ß -> SS, ŉ -> ʼN, İ -> i̇). Letters
// of other scripts are left as they are (docs/chat-templates.md lists this as a known difference).
#include <string>
#include <vector>

#include "jinja_value.h"
#include "utf8.h"

namespace spark::rt::jinja {
namespace {

char32_t Decode(const std::string& cp) {
  const auto b = [&](size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(cp[i])); };
  switch (cp.size()) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}


bool InPairs(char32_t c, char32_t lo, char32_t hi) { return c >= lo && c <= hi; }

// The simple upper-case partner of c, or c.
char32_t ToUpperOne(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 0x20;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  const auto pair_upper = [&](char32_t lo, char32_t hi, bool even_upper) -> char32_t {
    if (!InPairs(c, lo, hi)) return 0;  // pairs: (upper, lower), upper even iff even_upper
    const bool is_upper = ((c & 1) == 0) == even_upper;
    return is_upper ? c : c - 1;
  };
  if (char32_t u = pair_upper(0x100, 0x12F, true)) return u;
  if (c == 0x131) return 'I';
  if (char32_t u = pair_upper(0x132, 0x137, true)) return u;
  if (char32_t u = pair_upper(0x139, 0x148, false)) return u;
  if (char32_t u = pair_upper(0x14A, 0x177, true)) return u;
  if (char32_t u = pair_upper(0x179, 0x17E, false)) return u;
  if (c == 0x17F) return 'S';
  if (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) return c - 0x20;
  if (c == 0x3C2) return 0x3A3;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 0x25;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 0x3F;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  if (char32_t u = pair_upper(0x460, 0x481, true)) return u;
  if (char32_t u = pair_upper(0x48A, 0x4BF, true)) return u;
  if (c == 0x4CF) return 0x4C0;
  if (char32_t u = pair_upper(0x4C1, 0x4CE, false)) return u;
  if (char32_t u = pair_upper(0x4D0, 0x52F, true)) return u;
  if (c >= 0x561 && c <= 0x586) return c - 0x30;
  if (char32_t u = pair_upper(0x1E00, 0x1E95, true)) return u;
  if (char32_t u = pair_upper(0x1EA0, 0x1EFF, true)) return u;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 0x20;
  return c;
}

// The simple lower-case partner of c, or c.
char32_t ToLowerOne(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 0x20;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  const auto pair_lower = [&](char32_t lo, char32_t hi, bool even_upper) -> char32_t {
    if (!InPairs(c, lo, hi)) return 0;  // pairs: (upper, lower), upper even iff even_upper
    const bool is_upper = ((c & 1) == 0) == even_upper;
    return is_upper ? c + 1 : c;
  };
  if (char32_t l = pair_lower(0x100, 0x12F, true)) return l;
  if (char32_t l = pair_lower(0x132, 0x137, true)) return l;
  if (char32_t l = pair_lower(0x139, 0x148, false)) return l;
  if (char32_t l = pair_lower(0x14A, 0x177, true)) return l;
  if (char32_t l = pair_lower(0x179, 0x17E, false)) return l;
  if ((c >= 0x391 && c <= 0x3A1) || (c >= 0x3A3 && c <= 0x3AB)) return c + 0x20;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 0x25;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 0x3F;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  if (char32_t l = pair_lower(0x460, 0x481, true)) return l;
  if (char32_t l = pair_lower(0x48A, 0x4BF, true)) return l;
  if (c == 0x4C0) return 0x4CF;
  if (char32_t l = pair_lower(0x4C1, 0x4CE, false)) return l;
  if (char32_t l = pair_lower(0x4D0, 0x52F, true)) return l;
  if (c >= 0x531 && c <= 0x556) return c + 0x30;
  if (c == 0x1E9E) return 0xDF;
  if (char32_t l = pair_lower(0x1E00, 0x1E95, true)) return l;
  if (char32_t l = pair_lower(0x1EA0, 0x1EFF, true)) return l;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 0x20;
  return c;
}

bool IsCased(char32_t c) { return ToUpperOne(c) != c || ToLowerOne(c) != c || c == 0xDF; }

}  // namespace

std::string PyUpper(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const std::string& cp : SplitCodePoints(text)) {
    const char32_t c = Decode(cp);
    if (c == 0xDF) {
      out += "SS";
    } else if (c == 0x149) {
      out += "\xCA\xBCN";  // ʼN
    } else {
      ::spark::rt::AppendUtf8(ToUpperOne(c), &out);
    }
  }
  return out;
}

std::string PyLower(absl::string_view text) {
  const std::vector<std::string> cps = SplitCodePoints(text);
  std::vector<char32_t> cs;
  cs.reserve(cps.size());
  for (const std::string& cp : cps) cs.push_back(Decode(cp));
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < cs.size(); ++i) {
    const char32_t c = cs[i];
    if (c == 0x130) {
      out += "i\xCC\x87";  // i + combining dot above
    } else if (c == 0x3A3) {
      // Final sigma: after a cased letter and not before one.
      const bool after_cased = i > 0 && IsCased(cs[i - 1]);
      const bool before_cased = i + 1 < cs.size() && IsCased(cs[i + 1]);
      ::spark::rt::AppendUtf8(after_cased && !before_cased ? 0x3C2 : 0x3C3, &out);
    } else {
      ::spark::rt::AppendUtf8(ToLowerOne(c), &out);
    }
  }
  return out;
}

}  // namespace spark::rt::jinja

#!/usr/bin/env python3
"""Writes test/data/tokenizer/corpus.jsonl: the texts whose HF tokenizers ids are the goldens.

One JSON string per line. Scripts and languages, emoji (skin tones, ZWJ sequences, flags),
combining marks, whitespace runs, tabs/CR/LF, code, URLs, numbers, literal special-token text,
very long words, the empty string, NUL, private-use and unassigned code points. (Lone surrogates
cannot reach HF: a Rust &str never holds one.) Deterministic: no randomness without a seed.
"""
import argparse
import json
import random

BASE = [
    "",
    " ",
    "  ",
    "Hello, world!",
    "Hello world",
    " Hello world",
    "Hello  world   with    runs     of      spaces",
    "   leading and trailing   ",
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog.",
    "I can't believe it's not butter! \"Quoted\" and 'single' — em dash – en dash … ellipsis",
    "line one\nline two\n\nline four\n\n\n\nafter four newlines",
    "tabs\tand\t\ttabs\t\t\t\tx",
    "windows\r\nline\r\nendings\r\n",
    "lone\rcarriage\rreturns",
    "\n",
    "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
    "\t",
    " \t \n \r\n \u00a0 \u2003 \u3000 mixed whitespace",
    "Numbers: 0 1 12 123 1234 12345 123456 1234567 3.14159 -42 1e10 0x1F 1,000,000 ½ ² ③",
    "2026-12-01T12:05:00Z and 12:05 UTC, $1,234.56, 99.9%, #1, @user",
    "https://example.com/path/to/page?query=value&other=1#fragment",
    "email: someone@example.org, ftp://files.example.net/a/b.tar.gz",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (let i = 0; i < 10; i++) { console.log(`i=${i}`); } // comment",
    "<html><body><div class=\"x\">text</div></body></html>",
    "SELECT * FROM users WHERE id = 1 AND name LIKE '%a%';",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "Español: ¿Dónde está la biblioteca? Él comió ñandú.",
    "Français : « Ça va ? » — l'œuvre d'Æsop, naïve café.",
    "Deutsch: Straße, Größe, Übermäßig, Fußgängerübergänge.",
    "Português: ação, informação, coração, São Paulo.",
    "Polski: Zażółć gęślą jaźń. Čeština: Příliš žluťoučký kůň.",
    "Türkçe: İstanbul, ığdır, şişe, çiçek, ğ.",
    "Русский: Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Українська: Їжак, ґанок, є, і. Български: Щастие.",
    "Ελληνικά: Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. ς σ Σ",
    "中文：我爱自然语言处理。你好，世界！这是一个测试。",
    "繁體中文：臺灣、龜、鬱、體。",
    "日本語：いろはにほへと ちりぬるを カタカナ 漢字 ｶﾀｶﾅ（半角）",
    "한국어: 다람쥐 헌 쳇바퀴에 타고파. 한글 자모 ㄱㄴㄷ",
    "العربية: مرحبا بالعالم. هذا اختبار للنص العربي مع التشكيل: مُحَمَّد",
    "עברית: שלום עולם, זהו מבחן. בְּרֵאשִׁית",
    "فارسی: سلام دنیا. اردو: ہیلو دنیا",
    "हिन्दी: नमस्ते दुनिया। यह एक परीक्षण है। क्षत्रिय",
    "বাংলা: আমার সোনার বাংলা। தமிழ்: வணக்கம் உலகம்। తెలుగు: నమస్కారం",
    "ไทย: สวัสดีชาวโลก นี่คือการทดสอบภาษาไทยที่ไม่มีช่องว่าง",
    "ລາວ: ສະບາຍດີ. ខ្មែរ: សួស្តី. မြန်မာ: မင်္ဂလာပါ",
    "Tiếng Việt: Xin chào thế giới, đây là một bài kiểm tra.",
    "ქართული: გამარჯობა. Հայերեն: Բարեւ. አማርኛ: ሰላም",
    "Emoji: 😀 😃 😄 😁 😆 🥹 🤖 🚀 ❤️ ✨ 🎉",
    "Skin tones: 👍 👍🏻 👍🏼 👍🏽 👍🏾 👍🏿 👋🏽",
    "ZWJ: 👨‍👩‍👧‍👦 👩‍💻 🏳️‍🌈 🧑🏽‍🚀 👁️‍🗨️",
    "Flags: 🇺🇸 🇫🇷 🇯🇵 🇩🇪 🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "Keycaps: 1️⃣ #️⃣ *️⃣ and variation selectors ☺︎ ☺️",
    "Combining: e\u0301 a\u0300 o\u0308 n\u0303 Z\u0351\u0352\u0353\u0354\u0355 q\u0307\u0323",
    "Zalgo: Z̴̡̢̛̗̘̙̜̝̞̟̠̀́̂̃̄̅̆̇̈̉̊̋̌̍̎̏̐̑̒̓̔̕ả̶̧̨̛̹̺̻̼͇͈͉͍͎̽̾̿̀́͂̓̈́͆͊͋͌͐͑͒͗͛l̷g̸o̵",
    "NFC vs NFD: \u00e9 e\u0301 \u00c5 A\u030a \u1e9b\u0323",
    "Zero width: a\u200bb\u200cc\u200dd\ufeffe\u2060f",
    "Bidi: \u202eabc\u202c \u2066x\u2069 \u200fR\u200eL",
    "NUL: a\u0000b\u0000\u0000c",
    "Controls: \u0001\u0002\u0007\u001b[31mred\u001b[0m\u007f\u0085\u009f",
    "Private use: \ue000 \uf8ff \U000f0000 \U0010fffd",
    "Unassigned: \u0378 \u0379 \U000e0080 \U0002fffe \U0010ffff \ufffe \uffff",
    "Replacement char: \ufffd and BOM \ufeff",
    "Math: ∀x∈ℝ, ∃y: x² + y² = z² ∑∫∂∇ ≤ ≥ ≠ ≈ ∞ 𝔸𝔹ℂ 𝒳 𝟘𝟙",
    "Ancient: 𓀀𓀁 𐎀𐎁 𒀀 𝄞 ᚠᚢᚦ",
    "Special tokens: <bos>hello<eos>",
    "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
    "<bos><bos><pad><unk><mask><eos>",
    "partial <start_of_turn without end and <end_of_turn> mid<unused0>text<unused99>",
    "<start_of_image> <end_of_image> <image_soft_token> [multimodal]",
    "nested <<bos>> and <b<eos>os> and < bos >",
    "Gemma 4 names: <|turn>user\nHi<turn|> <|channel>thought<channel|> <|tool_call> <|\"|> <|think|> <|image|>",
    "<0x41> <0xFF> literal byte token text",
    "\u2581 literal lower-one-eighth block \u2581\u2581 and ▁word",
    "repeated: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "abababababababababababababababababababababababababababababab",
    "!!!!!!!!!!!!????????........,,,,,,,,;;;;;;;;::::::::------========",
    "=" * 200,
    "-" * 300,
    " " * 64,
    "\u2581" * 40,
]


def long_texts(rng):
    out = []
    out.append("a" * 5000)
    out.append("x" * 5000 + " " + "y" * 5000)
    out.append("supercalifragilisticexpialidocious" * 150)
    out.append("".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(3000)))
    out.append("".join(chr(rng.randrange(0x1F300, 0x1FAFF)) for _ in range(1500)))
    out.append(" ".join("word%d" % i for i in range(2000)))
    return out


def random_texts(rng, count):
    # Random mixtures of pieces of the base texts and random code points (no surrogates).
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randrange(1, 6)):
            kind = rng.randrange(4)
            if kind == 0:
                parts.append(rng.choice(BASE))
            elif kind == 1:
                cp = rng.randrange(0x20, 0x3000)
                parts.append("".join(chr(cp + rng.randrange(64)) for _ in range(rng.randrange(1, 20))))
            elif kind == 2:
                cps = []
                while len(cps) < rng.randrange(1, 10):
                    cp = rng.randrange(0, 0x110000)
                    if 0xD800 <= cp <= 0xDFFF:
                        continue
                    cps.append(chr(cp))
                parts.append("".join(cps))
            else:
                parts.append(rng.choice([" ", "  ", "\n", "\t", "<bos>", "<start_of_turn>", "▁", "\r\n"]))
        out.append("".join(parts))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--random", type=int, default=150)
    args = parser.parse_args()
    rng = random.Random(19)
    texts = BASE + long_texts(rng) + random_texts(rng, args.random)
    with open(args.out, "w", encoding="utf-8") as f:
        for text in texts:
            f.write(json.dumps(text, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

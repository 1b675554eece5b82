#!/usr/bin/env python3
"""Writes DIR/{tokenizer.json,tokenizer_config.json}: a tokenizer of --vocab-size ids (512 or
1024) with Gemma's pipeline (BPE + byte fallback, Replace(" ", "▁") normalizer, Split(" ")
pre-tokenizer, Replace/ByteFallback/Fuse decoder, <bos> TemplateProcessing) for the tiny test
models (tiny-dense and tiny-vision: 512 ids; tiny-e2b and tiny-moe: 1024; bos 2, eos [1, 106],
image/audio/video the last three ids).

Ids: 0..4 <pad> <eos> <bos> <unk> <mask>; Gemma 4's control tokens at their ids (46..52, 98,
100, 101, 105, 106) and the soft tokens at the last three ids; 107 "\n"; 108..363 the byte tokens
<0x00>..<0xFF>; every other id an ordinary piece: single characters, then BPE merges learned
(pure Python, deterministic) from the English text below. Run:
  python3 tools/reference/make_tiny_tokenizer.py --out test/data/models/tokenizers/tiny
  python3 tools/reference/make_tiny_tokenizer.py --vocab-size 1024 \
      --out test/data/models/tokenizers/tiny-1024
"""
import argparse
import collections
import json
import os

SPECIAL = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>"}
ADDED_NON_SPECIAL = {4: "<mask>"}
CONTROL = {46: "<|tool>", 47: "<tool|>", 48: "<|tool_call>", 49: "<tool_call|>",
           50: "<|tool_response>", 51: "<tool_response|>", 52: "<|\"|>", 98: "<|think|>",
           100: "<|channel>", 101: "<channel|>", 105: "<|turn>", 106: "<turn|>"}
SOFT = ("<|image|>", "<|audio|>", "<|video|>")  # the last three ids
NEWLINE_ID = 107
BYTE_BASE = 108

TEXT = """
The quick brown fox jumps over the lazy dog. A tiny model can still say hello to the world.
Once upon a time there was a little robot who liked to read books and write short stories.
Every morning the robot walked to the library, said good morning to the people there, and
read until the sun went down. It learned the names of the stars, the rivers and the mountains.
What is the capital of France? The capital of France is Paris. What is two plus two? Four.
Please answer the question in one sentence. Thank you very much for your help today.
You are a helpful assistant. The user asks a question and the model gives an answer.
Hello! How are you? I am fine, thank you. Tell me a story about a cat and a dog.
"""

CHARS = (" abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
         ".,!?;:'\"-()[]{}<>/\\@#$%&*+=_|~`^\t")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--vocab-size", type=int, default=512, choices=[512, 1024])
    args = parser.parse_args()
    vocab_size = args.vocab_size
    control = dict(CONTROL)
    for k, token in enumerate(SOFT):
        control[vocab_size - len(SOFT) + k] = token

    fixed = {}
    fixed.update(SPECIAL)
    fixed.update(ADDED_NON_SPECIAL)
    fixed.update(control)
    fixed[NEWLINE_ID] = "\n"
    for b in range(256):
        fixed[BYTE_BASE + b] = "<0x%02X>" % b
    free_ids = [i for i in range(vocab_size) if i not in fixed]

    pieces = []
    for c in CHARS:
        pieces.append("\u2581" if c == " " else c)
    # Learn merges over words "▁word" (SentencePiece style) until the free ids are used.
    words = collections.Counter()
    for line in TEXT.split("\n"):
        for w in line.split(" "):
            if w:
                words[tuple("\u2581" + w)] += 1
    merges = []
    known = set(pieces) | set(fixed.values())
    while len(pieces) < len(free_ids):
        pairs = collections.Counter()
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                if a in known and b in known:
                    pairs[(a, b)] += n
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append([a, b])
        new = a + b
        if new not in known:
            pieces.append(new)
            known.add(new)
        merged = collections.Counter()
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged

    vocab = dict((tok, i) for i, tok in fixed.items())
    for i, tok in zip(free_ids, pieces):
        vocab[tok] = i
    # Unused free ids (if the text ran out of merges) get placeholder pieces.
    for i in free_ids[len(pieces):]:
        vocab["<unused%d>" % i] = i
    vocab = dict(sorted(vocab.items(), key=lambda kv: kv[1]))

    def added(i, content, special):
        return {"id": i, "content": content, "single_word": False, "lstrip": False,
                "rstrip": False, "normalized": False, "special": special}

    added_tokens = [added(i, t, True) for i, t in sorted(SPECIAL.items())]
    added_tokens += [added(i, t, False) for i, t in sorted(ADDED_NON_SPECIAL.items())]
    added_tokens += [added(i, t, True) for i, t in sorted(control.items())]
    added_tokens.sort(key=lambda t: t["id"])

    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "},
                          "behavior": "MergedWithPrevious", "invert": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<bos>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    config = {
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "eos_token": "<eos>",
        "pad_token": "<pad>", "unk_token": "<unk>", "mask_token": "<mask>",
        "clean_up_tokenization_spaces": False, "model_max_length": 1024, "padding_side": "left",
        "spaces_between_special_tokens": False, "tokenizer_class": "GemmaTokenizer",
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"}
                                 for t in added_tokens},
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print("vocab %d ids, %d merges, %d pieces" % (len(vocab), len(merges), len(pieces)))


if __name__ == "__main__":
    main()

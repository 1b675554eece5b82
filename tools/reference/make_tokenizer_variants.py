#!/usr/bin/env python3
"""Variants of the tiny tokenizer that exercise each option Spark's tokenizer reads (Split
behaviours and invert, added tokens with lstrip/rstrip/single_word/normalized, Strip decoders,
unk without byte fallback, fuse_unk off, ignore_merges, legacy "a b" merges, no components), and
their HF tokenizers goldens.

  python3 make_tokenizer_variants.py --tiny test/data/models/tokenizers/tiny/tokenizer.json \
      --out test/data/tokenizer/variants            # writes the variant tokenizer.json files
  python3 make_tokenizer_variants.py --goldens --out DIR/variants --corpus variants_corpus.jsonl \
      --goldens-out DIR/goldens-variants.jsonl      # HF ids/texts for every variant (GPU machine)
"""
import argparse
import copy
import glob
import json
import os

CORPUS = [
    "", " ", "hello world", " hello  world ", "hello world hello", "the  cat sat   on the mat",
    "a b c d e f", "eee ee e", "Once upon a time there was a little robot.",
    "x<lst>y", "x <lst> y", "x   <lst>   y", "<lst>", "  <lst>", "x<rst>y", "x <rst>  y",
    "x  <both>  y", "<both><both>", " <both> <both> ", "hello", "hellohello", "hello!", "say hello",
    "_hello_", "héllo hello", "1hello", "hello\tworld", "\nhello\n", "new world", "a world",
    " world", "world", "ab", "abab", "a b", "cab", "<bos>hello<eos>", "<|turn>user\nhi<turn|>",
    "Zoë naïve café 中文 😀", "\u00e9\u00e9\u00e9", "x\u0301", "tab\there", "  leading", "trailing  ",
    "<lst><rst><both>hello world<lst>", "e e  e   e", "\u2581 \u2581\u2581",
    "!!! ??? ... ,,,", "hello  world  hello  world  hello  world",
]


def variants(tiny):
    out = {}

    def v(name):
        t = copy.deepcopy(tiny)
        out[name] = t
        return t

    for behavior in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
        for invert in [False, True]:
            t = v("split-%s%s" % (behavior.lower(), "-invert" if invert else ""))
            t["pre_tokenizer"] = {"type": "Split", "pattern": {"String": "\u2581"},
                                  "behavior": behavior, "invert": invert}
    t = v("split-sequence")
    t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": "\u2581"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"String": "e"}, "behavior": "MergedWithNext", "invert": False}]}
    t = v("split-multichar")
    t["pre_tokenizer"] = {"type": "Split", "pattern": {"String": "ll"},
                          "behavior": "Contiguous", "invert": False}

    t = v("added-options")
    nid = len(t["model"]["vocab"])

    def add(content, special=False, **kw):
        nonlocal nid
        tok = {"id": nid, "content": content, "single_word": False, "lstrip": False,
               "rstrip": False, "normalized": False, "special": special}
        tok.update(kw)
        t["added_tokens"].append(tok)
        nid += 1
    add("<lst>", True, lstrip=True)
    add("<rst>", True, rstrip=True)
    add("<both>", False, lstrip=True, rstrip=True)
    add("hello", False, single_word=True)
    add(" world", False, normalized=True)
    add("ab", True, normalized=True)

    t = v("decoder-strip-after-fuse")
    t["decoder"]["decoders"].append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    t = v("decoder-strip-stop")
    t["decoder"]["decoders"].append({"type": "Strip", "content": " ", "start": 0, "stop": 2})
    t = v("decoder-strip-per-token")
    t["decoder"]["decoders"].insert(1, {"type": "Strip", "content": " ", "start": 1, "stop": 1})
    t = v("decoder-replace-after-fuse")
    t["decoder"]["decoders"].append({"type": "Replace", "pattern": {"String": "o w"}, "content": "0W"})

    t = v("unk-fused")
    t["model"]["byte_fallback"] = False
    t = v("unk-not-fused")
    t["model"]["byte_fallback"] = False
    t["model"]["fuse_unk"] = False
    t = v("ignore-merges")
    t["model"]["ignore_merges"] = True
    t = v("legacy-merges")
    t["model"]["merges"] = ["%s %s" % (a, b) for a, b in t["model"]["merges"]]
    t = v("bare")
    for key in ["normalizer", "pre_tokenizer", "decoder", "post_processor"]:
        t[key] = None
    t = v("normalizer-sequence")
    t["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        {"type": "Replace", "pattern": {"String": "e"}, "content": "E"}]}
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiny")
    parser.add_argument("--out", required=True)
    parser.add_argument("--goldens", action="store_true")
    parser.add_argument("--corpus")
    parser.add_argument("--goldens-out")
    args = parser.parse_args()
    if not args.goldens:
        with open(args.tiny, encoding="utf-8") as f:
            tiny = json.load(f)
        os.makedirs(args.out, exist_ok=True)
        for name, t in variants(tiny).items():
            with open(os.path.join(args.out, name + ".json"), "w", encoding="utf-8") as f:
                json.dump(t, f, ensure_ascii=False)
                f.write("\n")
        with open(os.path.join(args.out, "corpus.jsonl"), "w", encoding="utf-8") as f:
            for text in CORPUS:
                f.write(json.dumps(text, ensure_ascii=False) + "\n")
        return
    import tokenizers
    from tokenizers import Tokenizer
    with open(args.corpus, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    with open(args.goldens_out, "w", encoding="utf-8") as out:
        out.write(json.dumps({"meta": {"tokenizers": tokenizers.__version__}}) + "\n")
        for path in sorted(glob.glob(os.path.join(args.out, "*.json"))):
            name = os.path.basename(path)[:-5]
            tok = Tokenizer.from_file(path)
            for text in texts:
                ids = tok.encode(text, add_special_tokens=True).ids
                row = {"variant": name, "text": text, "ids": ids,
                       "ids_no_special": tok.encode(text, add_special_tokens=False).ids}
                # HF's Strip decoder panics when its cuts cross (a short token): no golden then.
                try:
                    row["decode"] = tok.decode(ids, skip_special_tokens=False)
                    row["decode_skip"] = tok.decode(ids, skip_special_tokens=True)
                except BaseException:  # pyo3_runtime.PanicException derives from BaseException
                    row["decode_panics"] = True
                out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

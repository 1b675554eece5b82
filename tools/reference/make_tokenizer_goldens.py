#!/usr/bin/env python3
"""Reference ids and texts from HF tokenizers (Rust) for Spark's tokenizer parity tests.

Runs where the `tokenizers` package is installed (the GPU machine):
  python3 make_tokenizer_goldens.py --tokenizer tokenizer.json --corpus corpus.jsonl \
      --out DIR --name gemma3
writes DIR/goldens-NAME.jsonl, one object per corpus line:
  {"text", "ids" (add_special_tokens=True), "ids_no_special" (False),
   "decode" (decode(ids, skip_special_tokens=False)), "decode_skip" (... True)}
and DIR/goldens-NAME-random.jsonl: random id sequences (ordinary, special and byte-fallback ids,
incl. broken UTF-8 byte runs) with "decode" and "decode_skip". The first line of each file is
{"meta": {...}} with the tokenizers version.
"""
import argparse
import json
import os
import random

import tokenizers
from tokenizers import Tokenizer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--random", type=int, default=400)
    args = parser.parse_args()
    tok = Tokenizer.from_file(args.tokenizer)
    meta = {"meta": {"tokenizers": tokenizers.__version__, "tokenizer": os.path.basename(args.tokenizer),
                     "vocab_size": tok.get_vocab_size(with_added_tokens=True)}}
    os.makedirs(args.out, exist_ok=True)
    with open(args.corpus, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(args.out, "goldens-%s.jsonl" % args.name), "w", encoding="utf-8") as out:
        out.write(json.dumps(meta) + "\n")
        for text in texts:
            ids = tok.encode(text, add_special_tokens=True).ids
            ids_no = tok.encode(text, add_special_tokens=False).ids
            row = {"text": text, "ids": ids, "ids_no_special": ids_no,
                   "decode": tok.decode(ids, skip_special_tokens=False),
                   "decode_skip": tok.decode(ids, skip_special_tokens=True)}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")

    rng = random.Random(1919)
    vocab = tok.get_vocab(with_added_tokens=True)
    size = tok.get_vocab_size(with_added_tokens=True)
    byte_ids = [vocab["<0x%02X>" % b] for b in range(256) if "<0x%02X>" % b in vocab]
    special = [t.id if hasattr(t, "id") else i for i, t in tok.get_added_tokens_decoder().items()
               if getattr(t, "special", False)] if hasattr(tok, "get_added_tokens_decoder") else []
    special = sorted(special)
    with open(os.path.join(args.out, "goldens-%s-random.jsonl" % args.name), "w", encoding="utf-8") as out:
        out.write(json.dumps(meta) + "\n")
        for _ in range(args.random):
            ids = []
            for _ in range(rng.randrange(1, 24)):
                kind = rng.randrange(6)
                if kind <= 1:
                    ids.append(rng.randrange(size))
                elif kind == 2 and special:
                    ids.append(rng.choice(special))
                elif byte_ids:
                    ids.append(rng.choice(byte_ids))
            # Some valid multi-byte characters spelled as byte tokens.
            if byte_ids and len(byte_ids) == 256 and rng.randrange(3) == 0:
                ch = chr(rng.choice([0xE9, 0x4E2D, 0x1F600, 0x10FFFD, 0x800]))
                pos = rng.randrange(len(ids) + 1)
                ids[pos:pos] = [vocab["<0x%02X>" % b] for b in ch.encode("utf-8")]
            row = {"ids": ids, "decode": tok.decode(ids, skip_special_tokens=False),
                   "decode_skip": tok.decode(ids, skip_special_tokens=True)}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

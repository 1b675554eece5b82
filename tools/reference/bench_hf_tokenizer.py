#!/usr/bin/env python3
"""HF tokenizers' load time and single-thread encode throughput on a corpus (the figures that
bench/tokenizer_bench compares against). Set RAYON_NUM_THREADS=1 before Python starts:
  RAYON_NUM_THREADS=1 python3 bench_hf_tokenizer.py --tokenizer tokenizer.json --corpus corpus.jsonl
The corpus (one JSON string per line) is encoded --repeat times, line by line
(add_special_tokens=False), in a Python loop and with encode_batch.
"""
import argparse
import json
import os
import time

import tokenizers
from tokenizers import Tokenizer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    t0 = time.perf_counter()
    tok = Tokenizer.from_file(args.tokenizer)
    load = time.perf_counter() - t0
    with open(args.corpus, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    nbytes = sum(len(t.encode("utf-8")) for t in texts) * args.repeat
    tok.encode_batch(texts[:10], add_special_tokens=False)  # warm up
    encoded = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    best_loop = best_batch = best_decode = None
    for _ in range(3):
        t0 = time.perf_counter()
        ntok = 0
        for _ in range(args.repeat):
            for t in texts:
                ntok += len(tok.encode(t, add_special_tokens=False).ids)
        dt = time.perf_counter() - t0
        best_loop = dt if best_loop is None else min(best_loop, dt)
        t0 = time.perf_counter()
        nb = 0
        for _ in range(args.repeat):
            nb += sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))
        dt = time.perf_counter() - t0
        best_batch = dt if best_batch is None else min(best_batch, dt)
        t0 = time.perf_counter()
        for _ in range(args.repeat):
            for ids in encoded:
                tok.decode(ids, skip_special_tokens=False)
        dt = time.perf_counter() - t0
        best_decode = dt if best_decode is None else min(best_decode, dt)
    print(json.dumps({"tokenizers": tokenizers.__version__,
                      "rayon_threads": os.environ.get("RAYON_NUM_THREADS"),
                      "load_s": round(load, 4), "bytes": nbytes, "tokens": ntok,
                      "loop_MBps": round(nbytes / best_loop / 1e6, 3),
                      "loop_tokens_per_s": round(ntok / best_loop),
                      "batch_MBps": round(nbytes / best_batch / 1e6, 3),
                      "batch_tokens_per_s": round(nb / best_batch),
                      "decode_loop_MBps": round(nbytes / best_decode / 1e6, 3)}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Prompts of the benchmarks: N random token ids in [3, 250000) (below Gemma 4's image/audio
placeholder ids) from seed SEED. bench/run_bench.sh passes round r's prompt to spark-run with
seed r; bench/pytorch_llm.py takes its k-th prompt of a length from seed k, so the decode rounds
of both engines see the same ids.

    python3 bench/prompt_ids.py N [SEED]      # prints the ids, comma-separated
"""
import random
import sys


def prompt_ids(n, seed=0):
    rng = random.Random(seed)
    return [rng.randrange(3, 250000) for _ in range(n)]


if __name__ == "__main__":
    count = int(sys.argv[1])
    print(",".join(str(i) for i in prompt_ids(count, int(sys.argv[2]) if len(sys.argv) > 2 else 0)))

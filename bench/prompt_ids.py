#!/usr/bin/env python3
"""Prints N random token ids in [3, 250000), comma-separated, from seed SEED: the prompts of the
benchmarks (bench/run_bench.sh for Spark; bench/pytorch_llm.py draws its own prompts with
torch's generator, equally random, so the two see the same lengths, not the same ids; with
random weights only the lengths matter).

    python3 bench/prompt_ids.py N [SEED]
"""
import random
import sys

n = int(sys.argv[1])
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
rng = random.Random(seed)
print(",".join(str(rng.randrange(3, 250000)) for _ in range(n)))

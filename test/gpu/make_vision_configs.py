#!/usr/bin/env python3
"""Writes the configs of the full-size vision-tower timing (test/gpu/run_vision.sh): a released
model's vision_config beside the tiny multimodal models' text model, into OUT/vision-31b and
OUT/vision-e2b (config.json only; tools/reference/time_vision_tower.py writes the random weights
on the GPU machine, from the same config, so that spark-import here and transformers there agree).

  make_vision_configs.py MODELS_DIR OUT
"""
import json
import os
import sys

TOWERS = {
    # Gemma 4 31B and 26B-A4B (gemma4-ecosystem.md section 5).
    "vision-31b": ("tiny-mm-dense", dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27,
                                         num_attention_heads=16, num_key_value_heads=16, head_dim=72,
                                         standardize=True, use_clipped_linears=False)),
    # Gemma 4 E2B and E4B.
    "vision-e2b": ("tiny-mm-e2b", dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=16,
                                       num_attention_heads=12, num_key_value_heads=12, head_dim=64,
                                       standardize=False, use_clipped_linears=True)),
}


def main():
    models, out = sys.argv[1:3]
    for name, (base, sizes) in TOWERS.items():
        with open(os.path.join(models, base, "config.json")) as f:
            config = json.load(f)
        config["vision_config"].update(sizes)
        os.makedirs(os.path.join(out, name), exist_ok=True)
        with open(os.path.join(out, name, "config.json"), "w") as f:
            json.dump(config, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

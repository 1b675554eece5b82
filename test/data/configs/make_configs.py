#!/usr/bin/env python3
"""Writes the config.json fixtures of the four released Gemma 4 models, in the hub's layout
(Gemma4ForConditionalGeneration, fields under text_config, as transformers 5.5 wrote them), from
the tables of gemma4-architecture.md section 1.1. Vision/audio sub-configs are omitted: the text
model is all Spark imports. Run: python3 test/data/configs/make_configs.py"""
import json
import os

COMMON = {
    "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 2, "dtype": "bfloat16",
    "eos_token_id": 1, "final_logit_softcapping": 30.0, "global_head_dim": 512, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "initializer_range": 0.02,
    "model_type": "gemma4_text", "pad_token_id": 0, "rms_norm_eps": 1e-06,
    "rope_parameters": {
        "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                           "rope_type": "proportional"},
        "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
    },
    "tie_word_embeddings": True, "use_cache": True, "vocab_size": 262144,
    "vocab_size_per_layer_input": 262144,
}

def layer_types(n, period):
    types = ["full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(n)]
    types[-1] = "full_attention"
    return types

MODELS = {
    "gemma-4-26b-a4b": dict(
        attention_k_eq_v=True, enable_moe_block=True, expert_intermediate_size=704,
        hidden_size=2816, hidden_size_per_layer_input=0, intermediate_size=2112,
        layer_types=layer_types(30, 6), max_position_embeddings=262144,
        num_attention_heads=16, num_experts=128, num_global_key_value_heads=2,
        num_hidden_layers=30, num_key_value_heads=8, num_kv_shared_layers=0,
        sliding_window=1024, top_k_experts=8, use_bidirectional_attention="vision",
        use_double_wide_mlp=False),
    "gemma-4-31b": dict(
        attention_k_eq_v=True, enable_moe_block=False, expert_intermediate_size=None,
        hidden_size=5376, hidden_size_per_layer_input=0, intermediate_size=21504,
        layer_types=layer_types(60, 6), max_position_embeddings=262144,
        num_attention_heads=32, num_experts=None, num_global_key_value_heads=4,
        num_hidden_layers=60, num_key_value_heads=16, num_kv_shared_layers=0,
        sliding_window=1024, top_k_experts=None, use_bidirectional_attention="vision",
        use_double_wide_mlp=False),
    "gemma-4-e4b": dict(
        attention_k_eq_v=False, enable_moe_block=False, expert_intermediate_size=None,
        hidden_size=2560, hidden_size_per_layer_input=256, intermediate_size=10240,
        layer_types=layer_types(42, 6), max_position_embeddings=131072,
        num_attention_heads=8, num_experts=None, num_global_key_value_heads=None,
        num_hidden_layers=42, num_key_value_heads=2, num_kv_shared_layers=18,
        sliding_window=512, top_k_experts=None, use_bidirectional_attention=None,
        use_double_wide_mlp=False),
    "gemma-4-e2b": dict(
        attention_k_eq_v=False, enable_moe_block=False, expert_intermediate_size=None,
        hidden_size=1536, hidden_size_per_layer_input=256, intermediate_size=6144,
        layer_types=layer_types(35, 5), max_position_embeddings=131072,
        num_attention_heads=8, num_experts=None, num_global_key_value_heads=None,
        num_hidden_layers=35, num_key_value_heads=1, num_kv_shared_layers=20,
        sliding_window=512, top_k_experts=None, use_bidirectional_attention=None,
        use_double_wide_mlp=True),
}

for name, fields in MODELS.items():
    text = dict(COMMON)
    text.update(fields)
    config = {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "audio_token_id": 258881, "boa_token_id": 256000, "boi_token_id": 255999,
        "dtype": "bfloat16", "eoa_token_id": 258883, "eoi_token_id": 258882,
        "eos_token_id": [1, 106], "image_token_id": 258880, "initializer_range": 0.02,
        "model_type": "gemma4", "text_config": dict(sorted(text.items())),
        "tie_word_embeddings": True, "transformers_version": "5.5.0.dev0",
        "video_token_id": 258884, "vision_soft_tokens_per_image": 280,
    }
    os.makedirs(os.path.join(os.path.dirname(__file__), name), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), name, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")

#!/usr/bin/env python3
"""Checks gemma4_spec's config parsing and tensor tables against the numbers stated in
docs/gemma4-architecture.md (sections 1 and 11). Pure Python: runs without torch.

    python3 tools/reference/test_gemma4_spec.py
"""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemma4_spec as spec  # noqa: E402
from make_full_size import FULL_SIZE_TEXT_CONFIGS  # noqa: E402

S, F = spec.SLIDING, spec.FULL

E2B_HUB_STYLE = {  # spec 1.1 / S3, in the hub (5.5.0.dev0) serialisation
    "hidden_size": 1536, "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 1,
    "head_dim": 256, "global_head_dim": 512, "num_global_key_value_heads": None,
    "attention_k_eq_v": False, "intermediate_size": 6144, "vocab_size": 262144,
    "sliding_window": 512, "hidden_size_per_layer_input": 256, "vocab_size_per_layer_input": 262144,
    "num_kv_shared_layers": 20, "use_double_wide_mlp": True, "final_logit_softcapping": 30.0,
    "layer_types": [F if (i + 1) % 5 == 0 else S for i in range(35)],
}


class GeometryTest(unittest.TestCase):
    def test_26b_tensor_table(self):
        geom = spec.derive_geometry(FULL_SIZE_TEXT_CONFIGS["26b-a4b"])
        self.assertEqual([lg.index for lg in geom.layers if lg.type == F], [5, 11, 17, 23, 29])
        shapes = spec.expected_tensor_shapes(geom, "model.language_model.", include_lm_head=True)
        self.assertEqual(len(shapes), 658)  # spec 11.1
        P = "model.language_model.layers."
        self.assertEqual(shapes[P + "0.self_attn.q_proj.weight"], (4096, 2816))
        self.assertEqual(shapes[P + "5.self_attn.q_proj.weight"], (8192, 2816))
        self.assertEqual(shapes[P + "5.self_attn.k_proj.weight"], (1024, 2816))
        self.assertNotIn(P + "5.self_attn.v_proj.weight", shapes)
        self.assertEqual(shapes[P + "0.self_attn.v_proj.weight"], (2048, 2816))
        self.assertEqual(shapes[P + "3.experts.gate_up_proj"], (128, 1408, 2816))
        self.assertEqual(shapes[P + "3.experts.down_proj"], (128, 2816, 704))
        self.assertEqual(shapes[P + "3.mlp.gate_proj.weight"], (2112, 2816))
        params = spec.count_parameters(spec.expected_tensor_shapes(geom, "model.language_model."))
        self.assertAlmostEqual(params / 1e9, 25.23, delta=0.01)

    def test_31b_tensor_table(self):
        geom = spec.derive_geometry(FULL_SIZE_TEXT_CONFIGS["31b"])
        shapes = spec.expected_tensor_shapes(geom, "model.language_model.", include_lm_head=True)
        self.assertEqual(len(shapes), 833)  # spec 11.2
        P = "model.language_model.layers."
        self.assertEqual(shapes[P + "59.self_attn.q_proj.weight"], (16384, 5376))
        self.assertEqual(shapes[P + "59.self_attn.k_proj.weight"], (2048, 5376))
        self.assertEqual(shapes[P + "58.self_attn.v_proj.weight"], (4096, 5376))
        self.assertEqual(shapes[P + "0.mlp.down_proj.weight"], (5376, 21504))
        params = spec.count_parameters(spec.expected_tensor_shapes(geom, "model.language_model."))
        self.assertAlmostEqual(params / 1e9, 30.70, delta=0.01)

    def test_per_layer_config_form_equals_global_head_dim_form(self):
        # transformers 5.17 serialises per_layer_config instead of global_head_dim (spec 1.2(3)).
        hub = dict(FULL_SIZE_TEXT_CONFIGS["31b"])
        new = {k: v for k, v in hub.items() if k not in ("global_head_dim", "num_global_key_value_heads")}
        new["per_layer_config"] = {f"{i:02d}": {"head_dim": 512, "num_key_value_heads": 4}
                                   for i in range(5, 60, 6)}
        self.assertEqual(spec.derive_geometry(hub).layers, spec.derive_geometry(new).layers)

    def test_e2b_sharing_and_double_wide(self):
        geom = spec.derive_geometry(E2B_HUB_STYLE)
        shared = [lg.index for lg in geom.layers if lg.kv_shared]
        self.assertEqual(shared, list(range(15, 35)))
        self.assertEqual({lg.kv_source for lg in geom.layers if lg.kv_shared and lg.type == S}, {13})
        self.assertEqual({lg.kv_source for lg in geom.layers if lg.kv_shared and lg.type == F}, {14})
        self.assertEqual([lg.index for lg in geom.layers if lg.stores_shared_kv], [13, 14])
        self.assertEqual({lg.intermediate_size for lg in geom.layers[:15]}, {6144})
        self.assertEqual({lg.intermediate_size for lg in geom.layers[15:]}, {12288})
        full = geom.layers[4]
        self.assertEqual((full.head_dim, full.num_kv_heads, full.k_eq_v), (512, 1, False))
        shapes = spec.expected_tensor_shapes(geom, "model.language_model.")
        P = "model.language_model."
        self.assertEqual(shapes[P + "embed_tokens_per_layer.weight"], (262144, 8960))
        self.assertEqual(shapes[P + "layers.4.self_attn.k_proj.weight"], (512, 1536))
        self.assertNotIn(P + "layers.15.self_attn.k_proj.weight", shapes)
        self.assertEqual(shapes[P + "layers.15.mlp.gate_proj.weight"], (12288, 1536))

    def test_last_layer_forced_full(self):
        geom = spec.derive_geometry({"num_hidden_layers": 3, "layer_types": [S, S, S]})
        self.assertEqual(geom.layer_types, [S, S, F])

    def test_init_rules_cover_every_tensor(self):
        for cfg in (FULL_SIZE_TEXT_CONFIGS["26b-a4b"], E2B_HUB_STYLE):
            geom = spec.derive_geometry(cfg)
            for name, shape in spec.expected_tensor_shapes(geom, "model.", include_lm_head=True).items():
                spec.init_rule(name, shape, geom)


if __name__ == "__main__":
    unittest.main()

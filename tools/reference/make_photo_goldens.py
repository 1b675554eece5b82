#!/usr/bin/env python3
"""transformers goldens for real photographs through the PIL-backend processor, for the tiny
multimodal checkpoints of make_vision_models.py: what Spark computes from a PNG / JPEG file end to
end (decoding, resize, patches, vision tower, prompt) is compared with it (test/e2e/tiny-mm-photo.test).

  python3 tools/reference/make_photo_goldens.py [--data test/data]

Images: test/data/images/chelsea.png (451x300, CC0) and rocket.jpg (640x427, public domain),
scikit-image's (SOURCES.md). Processor: transformers' Gemma4ImageProcessorPil at 70 soft tokens
(load_image: Image.open + exif_transpose + convert("RGB")). For each model, the prompt of its
golden_image_one / golden_image_two with chelsea (one) and chelsea + rocket (two) in the images'
places. f32 (from_pretrained(dtype=float32)), eager attention, CPU. Writes
models/<model>/golden_photo_{one,two}.safetensors:
  prompt_ids [P] i64 (expanded), placeholder_ids [Q] i64 (one image_token_id per image),
  mm_token_type_ids [P], logits [P, V], greedy_ids [8], greedy_logits [8, V] (row i: the
  distribution greedy_ids[i] was taken from), num_soft_tokens [k], per image i: pixel_values_i
  [n_i, 768] f32 (the processor's, real patches), soft_tokens_i [s_i, Ht].
Prints one line per golden.
"""
import argparse
import json
import sys
from pathlib import Path

PHOTOS = {"one": ["chelsea.png"], "two": ["chelsea.png", "rocket.jpg"]}
BUDGET = 70


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("test/data"))
    args = ap.parse_args()

    import torch
    from PIL import Image, ImageOps
    from safetensors.torch import save_file
    from transformers import Gemma4ForConditionalGeneration
    try:
        from transformers import Gemma4ImageProcessorPil as Processor
    except ImportError:
        from transformers.models.gemma4.image_processing_gemma4 import Gemma4ImageProcessorPil as Processor

    processor = Processor(max_soft_tokens=BUDGET)

    def patches(name):
        image = ImageOps.exif_transpose(Image.open(args.data / "images" / name)).convert("RGB")
        out = processor(images=[image], return_tensors="pt")
        pv, pos = out["pixel_values"][0], out["image_position_ids"][0]
        real = pos[:, 0] >= 0
        return pv[real].float().contiguous(), pos[real].long().contiguous()

    for model_name in ("tiny-mm-dense", "tiny-mm-e2b"):
        root = args.data / "models" / model_name
        info = json.loads((root / "golden_info.json").read_text())
        t = info["token_ids"]
        model = Gemma4ForConditionalGeneration.from_pretrained(str(root), dtype=torch.float32,
                                                               attn_implementation="eager").eval()
        for kind, files in PHOTOS.items():
            ids = info["goldens"][kind]["prompt_ids"]
            placeholders, i = [], 0  # the golden's prompt with each image collapsed to its placeholder
            while i < len(ids):
                if ids[i] == t["boi_token_id"]:
                    placeholders.append(t["image_token_id"])
                    i = ids.index(t["eoi_token_id"], i) + 1
                else:
                    placeholders.append(ids[i])
                    i += 1
            images = [patches(f) for f in files]
            with torch.no_grad():
                soft = [model.model.get_image_features(pixel_values=pv[None], image_position_ids=pos[None],
                                                       return_dict=True).pooler_output for pv, pos in images]
            soft = [s[0] if isinstance(s, (tuple, list)) else s for s in soft]
            soft = [s.reshape(-1, s.shape[-1]) for s in soft]
            counts = [s.shape[0] for s in soft]
            expanded, k = [], 0
            for tok in placeholders:
                if tok == t["image_token_id"]:
                    expanded += [t["boi_token_id"]] + [t["image_token_id"]] * counts[k] + [t["eoi_token_id"]]
                    k += 1
                else:
                    expanded.append(tok)
            prompt = torch.tensor(expanded, dtype=torch.long)
            pv = torch.cat([pv for pv, _ in images])[None] if len(images) == 1 else \
                torch.nn.utils.rnn.pad_sequence([pv for pv, _ in images], batch_first=True)
            pos = torch.cat([p for _, p in images])[None] if len(images) == 1 else \
                torch.nn.utils.rnn.pad_sequence([p for _, p in images], batch_first=True, padding_value=-1)

            def forward(seq):
                types = (seq == t["image_token_id"]).long()
                return model(input_ids=seq[None], pixel_values=pv, image_position_ids=pos,
                             mm_token_type_ids=types[None], use_cache=False).logits[0].float()

            with torch.no_grad():
                seq = prompt.clone()
                greedy = []
                for _ in range(8):
                    nxt = int(torch.argmax(forward(seq)[-1]))
                    greedy.append(nxt)
                    seq = torch.cat([seq, torch.tensor([nxt])])
                full = forward(seq[:-1])
            P = prompt.numel()
            tensors = {"prompt_ids": prompt, "placeholder_ids": torch.tensor(placeholders, dtype=torch.long),
                       "mm_token_type_ids": (prompt == t["image_token_id"]).long(),
                       "logits": full[:P].clone(), "greedy_ids": torch.tensor(greedy, dtype=torch.long),
                       "greedy_logits": full[P - 1:P + 7].clone(),
                       "num_soft_tokens": torch.tensor(counts, dtype=torch.long)}
            for n, ((px, _), s) in enumerate(zip(images, soft)):
                tensors[f"pixel_values_{n}"] = px.clone()
                tensors[f"soft_tokens_{n}"] = s.float().clone()
            save_file(tensors, str(root / f"golden_photo_{kind}.safetensors"))
            print(f"{model_name} {kind}: {'+'.join(files)}: {counts} soft tokens, P = {P}, "
                  f"placeholders {','.join(map(str, placeholders))}, greedy {greedy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

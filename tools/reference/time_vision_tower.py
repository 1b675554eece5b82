#!/usr/bin/env python3
"""Full-size Gemma 4 vision towers with random weights, timed in transformers on the GPU, for the
comparison with Spark's compiled encoder (test/gpu/run_vision.sh).

  python3 tools/reference/time_vision_tower.py CHECKPOINT_DIR IMAGE [--budget 280]

CHECKPOINT_DIR holds a config.json (a Gemma4ForConditionalGeneration: test/gpu/run_vision.sh
writes one with a released model's vision_config -- 31B / 26B-A4B: hidden 1152, 27 layers, 16
heads x 72, MLP 4304, standardize; E2B: 768, 16 layers, 12 x 64, MLP 3072, clipped linears --
beside a tiny text model, as the time of an image is the tower's and the embedder's). This script
writes model.safetensors there (random weights in bf16, transformers' own state dict, so the
names are the released checkpoints'), preprocesses IMAGE with
transformers' processor (PIL backend, what Spark reproduces) at the budget, and times
get_image_features (the tower and the embedder) in bf16 and f32, eager and sdpa attention: 3
warm-up runs, then the median of 10, with torch.cuda.synchronize. Prints one line per setting;
writes CHECKPOINT_DIR/patches.safetensors (pixel_values and image_position_ids without padding,
what spark-run --image reads) and CHECKPOINT_DIR/reference.safetensors (the f32 soft tokens).
"""
import argparse
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("image")
    ap.add_argument("--budget", type=int, default=280)
    args = ap.parse_args()

    import torch
    from PIL import Image
    from safetensors.torch import save_file
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration
    try:
        from transformers import Gemma4ImageProcessorPil as Processor
    except ImportError:
        from transformers.models.gemma4.image_processing_gemma4 import Gemma4ImageProcessorPil as Processor

    cfg = Gemma4Config.from_pretrained(args.checkpoint)
    torch.manual_seed(0)
    model = Gemma4ForConditionalGeneration(cfg).to(torch.bfloat16).eval()
    with torch.no_grad():  # clip bounds wide enough to clip rarely, std_scale near 1
        for name, p in model.named_parameters():
            if name.endswith(("input_min", "output_min")):
                p.fill_(-8.0)
            elif name.endswith(("input_max", "output_max")):
                p.fill_(8.0)
            elif name.endswith("std_scale"):
                p.uniform_(0.5, 1.5)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, f"{args.checkpoint}/model.safetensors", metadata={"format": "pt"})

    image = Image.open(args.image).convert("RGB")
    processed = Processor(max_soft_tokens=args.budget)(images=[image], return_tensors="pt")
    pv, pos = processed["pixel_values"][0], processed["image_position_ids"][0]
    real = (pos[:, 0] >= 0)
    pv, pos = pv[real].contiguous(), pos[real].contiguous()
    save_file({"pixel_values": pv.float(), "image_position_ids": pos.long()}, f"{args.checkpoint}/patches.safetensors")
    patches = pv.shape[0]
    print(f"image {args.image}: {patches} patches, {patches // 9} soft tokens (budget {args.budget})")

    model = model.cuda()
    for dtype in (torch.bfloat16, torch.float32):
        model = model.to(dtype)
        for impl in ("eager", "sdpa"):
            try:
                model.set_attn_implementation(impl)
            except Exception as e:  # noqa: BLE001
                print(f"transformers {impl}: {e}")
                continue
            x, p = pv[None].cuda().to(dtype), pos[None].cuda()
            times = []
            with torch.no_grad():
                for i in range(13):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    out = model.model.get_image_features(pixel_values=x, image_position_ids=p, return_dict=True)
                    torch.cuda.synchronize()
                    if i >= 3:
                        times.append(time.perf_counter() - t0)
            soft = out.pooler_output
            soft = soft[0] if isinstance(soft, (tuple, list)) else soft
            print(f"transformers {str(dtype).replace('torch.', '')} {impl}: "
                  f"{statistics.median(times) * 1e3:.2f} ms per image (median of 10), soft tokens {tuple(soft.shape)}")
            if dtype == torch.bfloat16 and impl == "eager":
                pass
            if dtype == torch.float32 and impl == "eager":
                save_file({"soft_tokens": soft.reshape(-1, soft.shape[-1]).float().cpu().contiguous()},
                          f"{args.checkpoint}/reference.safetensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""transformers' answer to one chat turn of a tiny model, as text: the golden of
test/e2e/tiny-dense-chat.test (spark-run --chat, text in and text out).

    python3 tools/reference/make_chat_golden.py --model test/data/models/tiny-dense \
        --tokenizer test/data/models/tokenizers/tiny --out test/data/models/tiny-dense/golden_chat.json

Needs torch, transformers (written against 5.17.0), tokenizers. CPU, a few seconds.

The prompt is what transformers' apply_chat_template makes of the messages (the tokenizer
directory's chat_template.jinja rendered by jinja2, tokenized without added special tokens), the
answer a greedy f32 generation (a full forward per step, as the other goldens: run_reference.py)
until an id of generation_config.json's eos_token_id or --max-new-tokens, and the text
tokenizer.decode(answer without the stopping id, skip_special_tokens=True).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run_reference  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--system", default="You are a helpful assistant.")
    parser.add_argument("--message", default="Hello! Who are you?")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    args = parser.parse_args()

    import torch
    import transformers
    from transformers import PreTrainedTokenizerFast

    tokenizer_dir = Path(args.tokenizer)
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_dir / "tokenizer.json"),
                                        bos_token=config.get("bos_token"),
                                        eos_token=config.get("eos_token"))
    tokenizer.chat_template = (tokenizer_dir / "chat_template.jinja").read_text()
    messages = [{"role": "system", "content": args.system}, {"role": "user", "content": args.message}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt = tokenizer(rendered, add_special_tokens=False)["input_ids"]

    generation = json.loads((Path(args.model) / "generation_config.json").read_text())
    eos = generation["eos_token_id"]
    eos = set(eos if isinstance(eos, list) else [eos])

    model, geom, _ = run_reference.load_model(args.model)
    ids = list(prompt)
    answer = []
    with torch.no_grad():
        for _ in range(args.max_new_tokens):
            logits = run_reference.forward(model, geom, ids).logits[0, -1].float()
            token = int(torch.argmax(logits))
            answer.append(token)
            ids.append(token)
            if token in eos:
                break
    shown = answer[:-1] if answer and answer[-1] in eos else answer
    golden = {
        "messages": messages,
        "rendered": rendered,
        "prompt_ids": prompt,
        "ids": answer,
        "text": tokenizer.decode(shown, skip_special_tokens=True),
        "stopped_at_eos": bool(answer and answer[-1] in eos),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }
    Path(args.out).write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(golden, ensure_ascii=False)[:400])


if __name__ == "__main__":
    main()

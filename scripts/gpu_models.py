"""Build the GPU check's two models with random weights, from configs: nothing is downloaded.

    python scripts/gpu_models.py TOKENIZER_DIR OUT_DIR [--scale full|tiny] [--device cuda|cpu]

writes OUT_DIR/large and OUT_DIR/small, each a transformers model folder (config.json, random
safetensors, the tokenizer files of TOKENIZER_DIR), which a spec names as `model = "OUT_DIR/large"`.

- ``full``: ``large`` has Llama-3.2-1B's layer shapes (16 layers, hidden 2048, MLP 8192, 32 query and
  8 KV heads of 64) over SmolLM2's 49,152-token vocabulary with tied embeddings: 1.07 B parameters,
  2.1 GB in bfloat16. ``small`` is SmolLM2-135M's shape (the demo model's config): 135 M parameters.
  Both use the demo tokenizer, so ``small`` can draft for ``large``.
- ``tiny``: the same two-model layout, a few MB each, for the CPU dry run (a few tokens).

Why random weights are enough for speed: a decode step reads every weight once and a prefill
multiplies them by the prompt's activations; the time and memory of both depend on the shapes, the
dtype and the kernels, not on the values. What does depend on the values is everything about
*which* tokens come out: speculative decoding's and prompt lookup's acceptance (a random 135M draft
agrees with a random 1B target about as often as chance), and whether a model would stop early
(the check sets ``ignore_eos`` so every variant generates exactly ``max_new_tokens``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
VOCAB = 49152  # SmolLM2's tokenizer (the demo model's)

SHAPES = {
    "full": {
        # Llama-3.2-1B's layers on SmolLM2's vocabulary
        "large": dict(
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=16,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=64,
            rope_theta=500000.0,
        ),
        # SmolLM2-135M (the demo model's config.json)
        "small": dict(
            hidden_size=576,
            intermediate_size=1536,
            num_hidden_layers=30,
            num_attention_heads=9,
            num_key_value_heads=3,
            head_dim=64,
            rope_theta=100000.0,
        ),
    },
    "tiny": {
        "large": dict(
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=32,
            rope_theta=100000.0,
        ),
        "small": dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rope_theta=100000.0,
        ),
    },
}


def make_config(shape: dict):
    """A llama config of ``shape`` on the demo tokenizer's vocabulary (ids 1/2 = its bos/eos)."""
    from transformers import LlamaConfig

    shape = dict(shape)
    rope_theta = shape.pop("rope_theta")
    return LlamaConfig(
        vocab_size=VOCAB,
        max_position_embeddings=8192,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        **shape,
    )


def build(tokenizer_dir: Path, folder: Path, shape: dict, *, device: str, dtype: str, seed: int) -> int:
    import torch
    from transformers import GenerationConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(make_config(shape))  # transformers' init: normal(0, initializer_range)
    model = model.to(getattr(torch, dtype)).eval()
    model.config.dtype = dtype
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=2)
    if folder.exists():
        shutil.rmtree(folder)
    model.save_pretrained(folder, safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).exists():
            shutil.copy2(tokenizer_dir / name, folder / name)
    (folder / "RANDOM-WEIGHTS.txt").write_text(
        "Random weights (scripts/gpu_models.py): realistic shapes for timing, meaningless outputs.\n"
    )
    params = sum(p.numel() for p in model.parameters())
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return params


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tokenizer_dir", type=Path, help="folder with tokenizer.json (the demo model's)")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--scale", choices=sorted(SHAPES), default="full")
    ap.add_argument("--device", default="cuda", help="where the random weights are made (cuda is fast)")
    ap.add_argument("--dtype", default=None, help="stored dtype (default: bfloat16 full, float32 tiny)")
    args = ap.parse_args(argv)
    if not (args.tokenizer_dir / "tokenizer.json").exists():
        ap.error(f"{args.tokenizer_dir} has no tokenizer.json")
    dtype = args.dtype or ("bfloat16" if args.scale == "full" else "float32")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    summary = {}
    for seed, (name, shape) in enumerate(SHAPES[args.scale].items()):
        t0 = time.perf_counter()
        params = build(
            args.tokenizer_dir, args.out_dir / name, shape, device=args.device, dtype=dtype, seed=seed
        )
        summary[name] = {"params": params, "dtype": dtype, **shape}
        print(
            f"gpu_models: {name}: {params / 1e6:.1f} M parameters, {dtype}, random weights, "
            f"built in {time.perf_counter() - t0:.1f} s -> {args.out_dir / name}",
            flush=True,
        )
    (args.out_dir / "models.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

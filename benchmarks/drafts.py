"""Which draft model pays on this machine? Candidate drafts for the demo model, measured in one process.

What is measured
    The target is ``demo:smollm2-135m`` in float32 on the CPU, as the demo runs it (with the CPU
    kernels of ``workbench_strategies._cpu``). For a prompt (the first ``summarise`` document, 1,246 tokens,
    and the first ``code`` prompt) the target prefills once and greedily writes ``--tokens`` tokens;
    then, per candidate draft, starting from the target's prefill cache (as ``draft_prefill =
    "from-target"`` does):

    step      the median time of one draft decoding step (one token in, next-token logits out), as
              a multiple of the target's own one-token step (``T1``, interleaved rounds, so the
              machine's drift hits every candidate alike)
    agree     top-1 agreement with the target along the target's own continuation (teacher forced):
              the chance that a drafted token is accepted under greedy decoding
    verify    the target's pass over ``k + 1`` tokens (``V``), as a multiple of ``T1``
    speed-up  what that predicts for decoding with ``k`` draft tokens per step:
              E / (k * step + V), with E = (1 - a^(k+1)) / (1 - a) tokens per step for agreement a
              (the standard expectation, Leviathan et al. 2023)

Candidates: the target's weights in bf16 / fp16 with attention in the draft's dtype or in float32
(``draft_kv_dtype``), torchao int8 weight-only and int8 dynamic copies, and copies truncated to their
first N layers (self-speculative "early exit" without training), in fp16 with fp32 attention.

    python benchmarks/drafts.py                   # ~3 min on a 2-core CPU
    python benchmarks/drafts.py -k 4 --tokens 48

No pass/fail: it prints the table the demo's draft was chosen from (docs/strategies.md).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import harness
from harness import DEMO_MODEL, summary


def build_candidates(target: Any) -> dict[str, Callable[[], tuple[Any, Any]]]:
    """name -> a function building (model, kv dtype or None for the model's own)."""
    import torch
    from workbench_strategies._cpu import use_cpu_kernels

    def cast(dtype: torch.dtype, kv: torch.dtype | None, layers: int | None = None) -> Callable:
        def build() -> tuple[Any, Any]:
            model = copy.deepcopy(target).to(dtype)
            if layers is not None:
                model.model.layers = model.model.layers[:layers]
                model.config.num_hidden_layers = layers
            use_cpu_kernels(model)
            return model, kv

        return build

    def torchao(method: str) -> Callable:
        def build() -> tuple[Any, Any]:
            from torchao.quantization import (
                Int8DynamicActivationInt8WeightConfig,
                Int8WeightOnlyConfig,
                quantize_,
            )

            model = copy.deepcopy(target)
            head = model.get_output_embeddings()
            config = Int8WeightOnlyConfig() if method == "wo" else Int8DynamicActivationInt8WeightConfig()
            quantize_(model, config, filter_fn=lambda m, _: isinstance(m, torch.nn.Linear) and m is not head)
            return model, None

        return build

    fp32 = torch.float32
    n = target.config.num_hidden_layers
    return {
        "bf16": cast(torch.bfloat16, None),
        "bf16 + fp32 attention": cast(torch.bfloat16, fp32),
        "fp16": cast(torch.float16, None),
        "fp16 + fp32 attention": cast(torch.float16, fp32),
        "int8 weight-only": torchao("wo"),
        "int8 dynamic": torchao("dyn"),
        **{
            f"first {m}/{n} layers (fp16)": cast(torch.float16, fp32, layers=m)
            for m in (n // 3, n // 2, 2 * n // 3, 5 * n // 6)
        },
    }


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    parser = harness.parser(summary(__doc__), show_defaults=True)
    parser.add_argument("--num-draft-tokens", "-k", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=32, help="target continuation length for agreement")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--only", help="comma-separated candidate names (default: all)")
    return parser.parse_args(argv), parser


def timed(fn: Callable[[], None]) -> float:
    """``fn``'s time (ms): the mean of 3 calls after one that warms up."""
    fn()
    t0 = time.perf_counter()
    for _ in range(3):
        fn()
    return (time.perf_counter() - t0) / 3 * 1e3


def target_follow(target: Any, ids: Any, tokens: int) -> tuple[Any, list[int]]:
    """The target's prefill cache of ``ids`` and its greedy continuation of ``tokens`` tokens (the
    cache holds the prompt only)."""
    import torch
    from transformers import DynamicCache

    cache = DynamicCache(config=target.config)
    logits = target(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits
    follow = [int(logits[0, -1].argmax())]
    walk = copy.deepcopy(cache)
    for _ in range(tokens - 1):
        step = target(input_ids=torch.tensor([[follow[-1]]]), cache=walk, use_cache=True, logits_to_keep=1)
        follow.append(int(step.logits[0, -1].argmax()))
    del walk
    return cache, follow


def drafts_from_target(
    candidates: dict[str, Callable[[], tuple[Any, Any]]], cache: Any, follow: list[int]
) -> tuple[dict[str, tuple[Any, Any]], dict[str, float]]:
    """Each candidate built, with its cache filled from the target's (``from-target``), and its top-1
    agreement with the target along ``follow`` (teacher forced)."""
    import torch
    from workbench_strategies._cpu import GrowingCache

    drafts: dict[str, tuple[Any, Any]] = {}
    agreement: dict[str, float] = {}
    for name, build in candidates.items():
        model, kv = build()
        draft_cache = GrowingCache(model.config, dtype=kv or model.dtype)
        for idx, layer in enumerate(cache.layers[: model.config.num_hidden_layers]):
            draft_cache.update(layer.keys, layer.values, idx)
        forced = model(input_ids=torch.tensor([follow[:-1]]), cache=draft_cache, use_cache=True).logits[0]
        agreement[name] = sum(a == b for a, b in zip(forced.argmax(-1).tolist(), follow[1:], strict=True)) / (
            len(follow) - 1
        )
        draft_cache.crop(-(len(follow) - 1))
        drafts[name] = (model, draft_cache)
    return drafts, agreement


def step_times(
    target: Any, cache: Any, follow: list[int], drafts: dict[str, tuple[Any, Any]], k: int, rounds: int
) -> dict[str, list[float]]:
    """Per round: the target's one-token step (``T1``), its verify pass of ``k + 1`` tokens (``V``) and
    each draft's one-token step (ms), interleaved."""
    import torch

    def target_step() -> None:
        target(input_ids=torch.tensor([[follow[0]]]), cache=cache, use_cache=True, logits_to_keep=1)
        cache.crop(-1)

    def verify() -> None:
        target(input_ids=torch.tensor([follow[: k + 1]]), cache=cache, use_cache=True)
        cache.crop(-(k + 1))

    times: dict[str, list[float]] = {"T1": [], "V": [], **{name: [] for name in drafts}}
    for _ in range(rounds):
        times["T1"].append(timed(target_step))
        times["V"].append(timed(verify))
        for name, (model, draft_cache) in drafts.items():

            def draft_step(model: Any = model, draft_cache: Any = draft_cache) -> None:
                model(
                    input_ids=torch.tensor([[follow[0]]]),
                    cache=draft_cache,
                    use_cache=True,
                    logits_to_keep=1,
                )
                draft_cache.crop(-1)

            times[name].append(timed(draft_step))
    return times


def print_workload(
    workload: str, prompt_tokens: int, times: dict[str, list[float]], agreement: dict[str, float], k: int
) -> None:
    """The table of one prompt: each draft's step, agreement and predicted speed-up."""
    t1 = statistics.median(times["T1"])
    v = statistics.median(times["V"]) / t1
    print(
        f"{workload}: {prompt_tokens} prompt tokens; target step T1 {t1:.1f} ms, "
        f"verify of {k + 1} tokens {v:.2f} T1"
    )
    print(f"  {'draft':<28} {'step':>9} {'agree':>6} {'predicted speed-up':>19}")
    for name in agreement:
        d = statistics.median(times[name]) / t1
        a = min(agreement[name], 0.999)
        expected = (1 - a ** (k + 1)) / (1 - a)
        print(f"  {name:<28} {d:>7.2f} T1 {agreement[name]:>6.0%} {expected / (k * d + v):>18.2f}x")
    print()


def main(argv: list[str] | None = None) -> int:
    args, parser = parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from workbench_strategies._hf import wrap_hf_model

    from workbench.core.device import Device
    from workbench.sources import materialize, parse_source
    from workbench.spec.workloads import builtin_workload

    torch.set_grad_enabled(False)
    where = materialize(parse_source(DEMO_MODEL))
    tok = AutoTokenizer.from_pretrained(where.location)
    target = AutoModelForCausalLM.from_pretrained(where.location, dtype=torch.float32)
    hf = wrap_hf_model(target, tok, Device("cpu"), torch.float32)  # the CPU kernels, as the demo loads it
    k = args.num_draft_tokens
    prompts = {
        name: torch.tensor([hf.encode(builtin_workload(name).items[0].prompt)])
        for name in ("summarise", "code")
    }
    candidates = build_candidates(target)
    if args.only:
        wanted = [name.strip() for name in args.only.split(",")]
        unknown = [name for name in wanted if name not in candidates]
        if unknown:
            parser.error(f"unknown candidate(s) {unknown}; choose from {list(candidates)}")
        candidates = {name: candidates[name] for name in wanted}

    print(f"{DEMO_MODEL} float32 target on {torch.get_num_threads()} CPU threads; k = {k}\n")
    for workload, ids in prompts.items():
        cache, follow = target_follow(target, ids, args.tokens)
        drafts, agreement = drafts_from_target(candidates, cache, follow)
        times = step_times(target, cache, follow, drafts, k, args.rounds)
        print_workload(workload, ids.shape[1], times, agreement, k)
        del drafts
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One plain sentence per term, shown as tooltips on column headers, form fields and charts.

The definitions follow docs/metrics.md (vLLM's); keep them in step.
"""

from __future__ import annotations

__all__ = ["TERMS", "explain"]

TERMS: dict[str, str] = {
    "TTFT": "Time to first token: how long the model reads the prompt (prefill) before the first new "
    "token is ready.",
    "prefill tok/s": "Prompt tokens read per second during prefill (input tokens ÷ TTFT).",
    "TPOT": "Time per output token: decode time divided by the tokens after the first; lower means "
    "faster writing.",
    "decode tok/s": "Tokens written per second after the first one (the inverse of TPOT).",
    "ITL": "Inter-token latency: the gap between two deliveries of tokens; a speculative step delivers "
    "several tokens at once, so its gaps are fewer and longer.",
    "e2e": "End to end: the whole request, prefill plus decode.",
    "peak memory": "Most memory the variant held during a trial: the CUDA allocator's peak on a GPU, "
    "the worker process's resident memory on a CPU.",
    "acceptance": "Share of the drafted tokens that the target model accepted; higher means more tokens "
    "per expensive target step.",
    "accepted length": "Tokens a speculative step delivers on average: 1 from the target plus the "
    "accepted draft tokens.",
    "speed-up": "How much faster than the baseline: the geometric mean of the ratios of pairs of trials "
    "of the same prompt in the same round (decode: this variant's tok/s over the baseline's), with a "
    "95 % bootstrap interval; * marks an interval that excludes 1.",
    "MDE": "Minimum detectable effect: the smallest real e2e speed-up this run's noise would show as "
    "significant 4 times in 5. A smaller true difference usually goes unseen; add repetitions "
    "(`workbench noise` says how many).",
    "disturbed": "Trials during which the machine was busy with something else (the worker waited for "
    "a CPU longer than 10 % of its compute, or the GPU clock dropped); left out of the statistics "
    "when they are few (at most a quarter, and not most of one variant's).",
    "match": "Share of greedy outputs identical to the baseline's; in brackets the share of equal "
    "tokens when some differ (quantization and other dtypes drift, speculative decoding must not).",
    "KLD": "How far this variant's predictions are from the baseline's: the mean, over the tokens of "
    "the baseline's own outputs, of KL(P_baseline ‖ P_variant) in nats. 0 = the same predictions; "
    "llama.cpp's q8_0 is ~0.001, q4_K_M ~0.03 on LLaMA-3-8B. 'lossless': the same tokens by "
    "construction; ≥: a server's top log-probabilities only (a lower bound).",
    "same top": "Share of those tokens where this variant ranks the same token first as the baseline.",
    "prefill share": "Share of the end-to-end time spent before the first token: high means the input "
    "dominates (prefill-heavy), low means the output does (decode-heavy).",
    "phase": "Which phase dominates the time: prefill-heavy when reading the prompt takes at least 60 % "
    "of it, decode-heavy when writing the answer leaves it at most 40 %, balanced in between. In the "
    "results table: the row's own, from its prefill share; a workload's phase (the advice, the "
    "headline chart) is the baseline's.",
    "targets": "The workload's experience targets (TTFT, TPOT, ITL, e2e, decode tok/s at a percentile): "
    "which ones this variant met at that percentile, and its goodput — the share of its requests that "
    "met every target.",
    "goodput": "Share of the requests that met every target of the workload (failed requests count as "
    "missing them).",
    "repetitions": "Measured trials per prompt; more repetitions give tighter confidence intervals. "
    '"auto" (the lowest value) adds rounds until every speed-up is known to ±3 % (at most 20).',
    "order": "How the variants' trials are ordered in time. interleaved (default): all loaded at once, "
    "each prompt run by every variant seconds apart, so the machine's drift touches them alike. "
    "blocks: one variant loaded at a time, A B B A (when they do not fit in memory together). "
    "sequential: each variant in one go (drift lands on whichever ran then).",
    "warm-up": "Trials per workload run first and left out of the statistics (caches, lazy "
    "initialisation, clocks ramping up).",
    "max new tokens": "Output budget for every prompt; 'per workload' keeps each workload's own setting.",
    "limit": "Use only the first N prompts of each workload (quick looks); 'all' runs every prompt.",
}


def explain(term: str) -> str:
    """The sentence for ``term`` (case-insensitive), or an empty string."""
    lowered = {k.lower(): v for k, v in TERMS.items()}
    return lowered.get(term.lower(), "")

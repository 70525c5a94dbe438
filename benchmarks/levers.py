"""The prefill lever (KV-cache reuse) and the batching lever on the demo model.

What is measured
    One run (``RunExecutor`` → one worker per variant → store) on ``demo:smollm2-135m``, float32, greedy:

    chat       baseline vs prefix-cache over the 6 turns of the built-in ``chat`` workload (each turn
               resends the growing history); TTFT per turn, and whether outputs are identical
    batching   baseline at batch_size 1 vs 4 on 4 ``code`` prompts with exactly ``--max-new-tokens``
               tokens each (ignore_eos): aggregate decode tokens/s = decode tokens of all requests /
               (last token of the batch - first token of the batch); for batch size 1 the sum of the
               requests' decode tokens over the sum of their decode times. Also the time of one
               decode step at each batch size, which says whether the CPU is memory-bound (a step
               costs about the same at batch 4: weights are read once) or compute-bound (it costs
               about 4x).

Pass criteria (exit 0; exit 1 otherwise):
    prefix-cache TTFT at the last chat turn <= 0.5x the baseline's, outputs identical on every turn;
    batch size 4 aggregate decode tok/s >= 2.0x batch size 1 (reported with the step-time ratio that
    explains it when it is not).

    python benchmarks/levers.py            # ~5 min on a 2-core CPU
"""

from __future__ import annotations

import itertools
import statistics
import sys

import harness
from harness import add_db, result_db, summary, verdict

SPEC = """
name = "benchmark: levers"
repetitions = 1
warmup = 1
warmup_max_new_tokens = 2

[[variants]]
name = "baseline"
model = "demo:smollm2-135m"
dtype = "float32"

[[variants]]
name = "prefix-cache"
model = "demo:smollm2-135m"
strategy = "prefix-cache"
dtype = "float32"

[[variants]]
name = "batch-4"
model = "demo:smollm2-135m"
dtype = "float32"
batch_size = 4

[[workloads]]
name = "chat"
max_new_tokens = {chat_tokens}

[[workloads]]
name = "code"
limit = 4
max_new_tokens = {n}
ignore_eos = true
"""


def _decode_rate(trials: list[dict], steps_of) -> tuple[float, float]:
    """(aggregate decode tok/s, median decode step ms) over ``trials`` run together or one by one."""
    spans, tokens, gaps = [], 0, []
    for t in trials:
        steps = steps_of(t.id)
        tokens += t.output_tokens - 1
        spans.append((steps[0]["t_ms"], steps[-1]["t_ms"]))
        gaps += [b["t_ms"] - a["t_ms"] for a, b in itertools.pairwise(steps)]
    if all((t.batch_size or 1) == 1 for t in trials):
        elapsed = sum(end - start for start, end in spans)  # one after the other
    else:
        elapsed = max(e for _, e in spans) - min(s for s, _ in spans)  # together, from one t0
    return tokens / elapsed * 1e3, statistics.median(gaps)


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(summary(__doc__), show_defaults=True)
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens per code prompt (batching)")
    parser.add_argument("--chat-tokens", type=int, default=8, help="tokens per chat turn")
    add_db(parser)
    args = parser.parse_args(argv)

    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import parse_spec
    from workbench.store import Store

    db = result_db(args.db, "levers.db")
    store = Store(db)
    spec = parse_spec(SPEC.format(n=args.max_new_tokens, chat_tokens=args.chat_tokens))
    result = RunExecutor(spec, store).run()
    trials = [t for t in store.trials(result.run_id) if t.status == "ok"]
    failures = []

    chat = {
        v: {t.prompt_id: t for t in trials if t.variant == v and t.workload == "chat"}
        for v in ("baseline", "prefix-cache")
    }
    print(
        f"{'turn':8s} {'in tok':>7s} {'cached':>7s} {'baseline TTFT':>14s} {'prefix-cache TTFT':>18s}  same"
    )
    identical = True
    for pid in sorted(chat["baseline"]):
        b, p = chat["baseline"][pid], chat["prefix-cache"].get(pid)
        if p is None:
            failures.append(f"prefix-cache has no result for {pid}")
            continue
        same = b.output_token_ids == p.output_token_ids
        identical &= same
        print(
            f"{pid:8s} {b.input_tokens:7d} {p.cached_tokens:7d} {b.ttft_ms:12.0f} ms "
            f"{p.ttft_ms:16.0f} ms  {same}"
        )
    last = sorted(chat["baseline"])[-1]
    ratio = chat["prefix-cache"][last].ttft_ms / chat["baseline"][last].ttft_ms
    print(f"last turn: prefix-cache TTFT / baseline TTFT = {ratio:.2f} (target <= 0.50)")
    if ratio > 0.5:
        failures.append(f"prefix-cache TTFT at the last turn is {ratio:.2f}x the baseline's (> 0.5)")
    if not identical:
        failures.append("prefix-cache output differs from the baseline's")

    code = [t for t in trials if t.workload == "code"]
    one_rate, one_step = _decode_rate([t for t in code if t.variant == "baseline"], store.steps)
    four_rate, four_step = _decode_rate([t for t in code if t.variant == "batch-4"], store.steps)
    gain = four_rate / one_rate
    print(f"batch 1: {one_rate:.1f} tok/s aggregate decode, {one_step:.1f} ms per step")
    print(f"batch 4: {four_rate:.1f} tok/s aggregate decode, {four_step:.1f} ms per step (4 tokens)")
    print(
        f"aggregate decode gain {gain:.2f}x (target >= 2.0); a batch-4 step costs {four_step / one_step:.2f}x a "
        "single one (1.0x = memory-bound, ideal batching; 4.0x = compute-bound, no gain)"
    )
    if gain < 2.0:
        failures.append(
            f"batch 4 gives {gain:.2f}x aggregate decode tok/s (< 2.0): a step costs {four_step / one_step:.2f}x "
            "the single-request step on this machine"
        )
    print(f"database: {db}")
    return verdict(failures, inline=True)


if __name__ == "__main__":
    sys.exit(main())

"""Client-side fidelity of the ``endpoint`` strategy, and whether N parallel streams stay parallel.

What is measured
    ``workbench.testing.fake_server.FakeOpenAIServer`` (stdlib HTTP on 127.0.0.1, chunked SSE like vLLM's)
    waits known amounts of time: ``prefill_ms`` before the first token, then ``decode_ms_per_token``
    per token, ``tokens_per_chunk`` tokens per event; parallel requests do not slow each other (ideal
    batching). A spec with endpoint variants is run through the real path — ``RunExecutor`` → a worker
    process per variant → ``TrialRunner`` (threads for parallel streams) → SQLite — and read back:

    1. Fidelity (sequential): per variant, the median client TTFT minus the truth is the client's
       overhead (HTTP, JSON, loopback); the median TPOT must match ``decode_ms_per_token``; the
       server's own TTFT (its /metrics window) must be at or below the client's.
    2. Concurrency: the same workload at ``concurrency`` 1, 4 and 16; aggregate output tokens/s must
       grow with N (the server batches ideally, so only the client could make it not).

Pass criterion (exit 0; exit 1 otherwise)
    - every sequential variant: median client TTFT - truth within [0, --ttft-overhead-ms] (default
      5 ms), |median TPOT - truth| <= max(3 %, 0.5 ms), every trial ok with the planned tokens;
    - aggregate tokens/s at N >= 0.8 x N x the figure at N = 1, for N = 4 and 16.

Runs in about a minute on a 2-core CPU; run it on an otherwise idle machine.

    python benchmarks/endpoint.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import harness
from harness import verdict

from workbench.analysis.summary import summarize
from workbench.run.execute import RunExecutor
from workbench.spec.parse import parse_spec
from workbench.store import Store
from workbench.testing.fake_server import FakeOpenAIServer

PREFILL_MS = 40.0
DECODE_MS = 8.0


def spec_text(base_url: str, args: argparse.Namespace) -> str:
    variants = [("seq-1tok", 1), ("seq-4tok", 1)] + [(f"conc-{n}", n) for n in (1, 4, 16)]
    body = [f'name = "endpoint benchmark"\nrepetitions = {args.repetitions}\nwarmup = 1\n']
    for name, concurrency in variants:
        body.append(
            f'[[variants]]\nname = "{name}"\nstrategy = "endpoint"\nbase_url = "{base_url}"\n'
            f"concurrency = {concurrency}\n"
        )
    body.append(f'[[workloads]]\nname = "code"\nmax_new_tokens = {args.max_new_tokens}\nignore_eos = true\n')
    return "\n".join(body)


def main() -> int:
    parser = harness.parser(__doc__.split("\n")[0])
    parser.add_argument("--repetitions", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--ttft-overhead-ms", type=float, default=5.0)
    args = parser.parse_args()
    failures: list[str] = []
    with FakeOpenAIServer(prefill_ms=PREFILL_MS, decode_ms_per_token=DECODE_MS) as server:
        spec = parse_spec(spec_text(server.base_url, args))
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "bench.db")
            # the 4-tokens-per-chunk variant: switch the server while its worker runs
            executor = RunExecutor(spec, store, on_progress=lambda p: _switch(server, p.variant))
            result = executor.run()
            loaded = store.load_run(result.run_id)
            trials, windows = list(loaded.trials), loaded.server_windows
    summaries = {s.variant: s for s in summarize(trials, None, windows)}
    print(f"{'variant':<10} {'TTFT ms':>8} {'overhead':>9} {'srv TTFT':>9} {'TPOT ms':>8} {'agg tok/s':>10}")
    for name, s in summaries.items():
        ok = [t for t in trials if t.variant == name and t.status == "ok"]
        if s.n_failed or any(t.output_tokens != args.max_new_tokens for t in ok):
            failures.append(f"{name}: {s.n_failed} failed trials or wrong token counts")
        ttft = statistics.median(t.ttft_ms for t in ok)
        tpot = statistics.median(t.tpot_ms for t in ok)
        server_ttft = s.server.ttft_ms if s.server else None
        print(
            f"{name:<10} {ttft:8.2f} {ttft - PREFILL_MS:9.2f} {server_ttft or float('nan'):9.2f} {tpot:8.3f} "
            f"{s.throughput_tokens_per_s or 0:10.1f}"
        )
        if name.startswith("seq"):
            if not 0 <= ttft - PREFILL_MS <= args.ttft_overhead_ms:
                failures.append(f"{name}: client TTFT overhead {ttft - PREFILL_MS:.2f} ms")
            if abs(tpot - DECODE_MS) > max(0.03 * DECODE_MS, 0.5):
                failures.append(f"{name}: TPOT {tpot:.3f} ms vs {DECODE_MS} ms")
            if server_ttft is None or server_ttft > ttft:
                failures.append(f"{name}: server TTFT {server_ttft} not at or below the client's {ttft:.2f}")
    one = summaries["conc-1"].throughput_tokens_per_s or 0
    for n in (4, 16):
        got = summaries[f"conc-{n}"].throughput_tokens_per_s or 0
        print(f"concurrency {n}: {got / one:.2f}x the tokens/s of one stream (ideal {n}x)")
        if got < 0.8 * n * one:
            failures.append(f"concurrency {n}: {got / one:.2f}x < {0.8 * n:.1f}x")
    return verdict(failures, bullet="  ")


def _switch(server: FakeOpenAIServer, variant: str) -> None:
    server.tokens_per_chunk = 4 if variant == "seq-4tok" else 1


if __name__ == "__main__":
    sys.exit(main())

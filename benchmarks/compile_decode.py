"""Compiled vs eager decoding on the demo model: does ``compile = true`` pay on this machine?

What is measured
    ``demo:smollm2-135m`` in float32 on the CPU, one fixed prompt (the built-in ``code`` workload's
    first), exactly N greedy tokens, two sessions of the ``baseline`` strategy in this process:

    eager     the baseline as every run decodes it (a dynamic KV cache, eager PyTorch);
    compiled  the same model with ``compile = <mode>`` (strategies/_compiled.py): a static KV cache
              sized to the prompt + N, the prefill eager, the decode step ``torch.compile``'d in
              ``Session.prepare`` before any measured trial, as the worker does.

    The two alternate (eager, compiled, compiled, eager, ...) for ``--rounds`` rounds. Per trial:
    TTFT (call -> first token) and decode tok/s = (N - 1) / (last token - first token); medians and
    the ratio compiled / eager. Also: the compile time (``prepare``), the graphs torch.compile
    compiled during the measured trials (dynamo's ``unique_graphs`` counter: a recompile per cache
    position would show here), and with ``--profile`` where the time goes: the top operators of a
    short eager and a short compiled generation from ``torch.profiler``.

Pass criterion (exit 0; exit 1 otherwise)
    identical greedy tokens, and no graph compiled during a measured trial. The speed-up is reported,
    not judged: on a GPU the compiled step removes the kernel launches that bound a small model's
    eager decode; on a CPU there are no launches to remove (see docs/strategies.md, "Compiled
    decoding").

    python benchmarks/compile_decode.py                      # 48 tokens, 3 rounds
    python benchmarks/compile_decode.py --tokens 16 --rounds 1   # a quick check
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import check_verdict, parser, summary


class TimedProbe:
    """Keeps each step's tokens and the time they arrived."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.times: list[float] = []

    def step(self, token_ids: Any = (), **_: Any) -> None:
        self.times.append(time.perf_counter())
        self.tokens.extend(token_ids)


def _session(compile_mode: str | None) -> Any:
    from workbench.core import registry
    from workbench.core.device import resolve_device
    from workbench.spec import parse_spec

    keys = f'compile = "{compile_mode}"\n' if compile_mode else ""
    spec = parse_spec(
        '[[variants]]\nname = "v"\nmodel = "demo:smollm2-135m"\ndtype = "float32"\ndevice = "cpu"\n'
        f'{keys}[[workloads]]\nname = "code"\n'
    )
    variant = spec.variants[0]
    return registry.get(variant.strategy)().load(variant, resolve_device("cpu"))


def _trial(session: Any, request: Any) -> tuple[list[int], float, float]:
    probe = TimedProbe()
    t0 = time.perf_counter()
    session.generate(request, probe)
    ttft = (probe.times[0] - t0) * 1000
    decode = (len(probe.times) - 1) / (probe.times[-1] - probe.times[0])
    return probe.tokens, ttft, decode


def main() -> int:
    args = parser(summary(__doc__), show_defaults=True)
    args.add_argument("--tokens", type=int, default=48, help="new tokens per trial")
    args.add_argument("--rounds", type=int, default=3, help="rounds (each: eager, compiled, compiled, eager)")
    args.add_argument("--mode", default="default", help="torch.compile mode (default, max-autotune, ...)")
    args.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args.add_argument("--profile", action="store_true", help="print the top operators of one step each")
    opts = args.parse_args()

    import torch

    if opts.threads:
        torch.set_num_threads(opts.threads)
    from torch._dynamo.utils import counters

    from workbench.core.strategy import Request
    from workbench.spec.workloads import builtin_workload

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}, load {os.getloadavg()[0]:.1f}"
    )
    eager = _session(None)
    compiled = _session(opts.mode)
    prompt = builtin_workload("code").items[0].prompt
    ids = tuple(eager.encode(prompt))
    request = Request(prompt=prompt, input_ids=ids, max_new_tokens=opts.tokens, ignore_eos=True)
    t0 = time.perf_counter()
    compiled.prepare([len(ids)], opts.tokens)
    compile_s = time.perf_counter() - t0
    warm_graphs = int(counters["stats"]["unique_graphs"])
    print(
        f"prompt {len(ids)} tokens, {opts.tokens} new; compiled ({opts.mode}) in {compile_s:.1f} s, {warm_graphs} graph(s)"
    )
    _trial(eager, request)  # eager's own warm-up (allocator, first-call costs)
    results: dict[str, list[tuple[float, float]]] = {"eager": [], "compiled": []}
    outputs: dict[str, list[int]] = {}
    for _ in range(opts.rounds):
        for name in ("eager", "compiled", "compiled", "eager"):
            session = eager if name == "eager" else compiled
            tokens, ttft, decode = _trial(session, request)
            outputs.setdefault(name, tokens)
            if tokens != outputs[name]:
                outputs[name + " (varied)"] = tokens
            results[name].append((ttft, decode))
    recompiles = int(counters["stats"]["unique_graphs"]) - warm_graphs
    print(f"\n{'':10} {'TTFT ms':>9} {'decode tok/s':>13}")
    med = {}
    for name, rows in results.items():
        med[name] = (statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows))
        print(f"{name:10} {med[name][0]:9.0f} {med[name][1]:13.2f}")
    ratio = med["compiled"][1] / med["eager"][1]
    print(f"compiled / eager decode: {ratio:.2f}x; TTFT {med['compiled'][0] / med['eager'][0]:.2f}x")
    if opts.profile:
        from torch.profiler import ProfilerActivity, profile

        for name, session in (("eager", eager), ("compiled", compiled)):
            short = Request(prompt=prompt, input_ids=ids, max_new_tokens=4, ignore_eos=True)
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                session.generate(short, TimedProbe())
            print(f"\n{name}: top operators over a 4-token generation")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))
    identical = outputs["eager"] == outputs["compiled"] and not any("varied" in k for k in outputs)
    return check_verdict(
        [
            (f"greedy tokens identical ({len(outputs['eager'])} tokens, every trial)", identical),
            (f"no graph compiled during the measured trials ({recompiles})", recompiles == 0),
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())

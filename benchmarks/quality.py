"""The quality figures of the workbench against llama.cpp's own: the ``llama-cpp`` strategy's
``Session.score`` and the quality pass's per-position figures, beside ``llama-perplexity --kl-divergence`` on the same text,
context and GGUF pair.

What is measured
    The demo model (``demo:smollm2-135m``). The base is its as-shipped Q4_1 GGUF re-written as F32 by
    llama.cpp (``gguf_type = "F32"``: the Q4_1 values, the transformers baseline's weights). The
    compared GGUFs: the base itself, loaded a second time (A/A), the Q4_1 file as shipped (the
    same weights, quantized kernels) and the Q4_1 file
    re-quantized by the strategy's ``gguf_type`` (Q8_0, Q6_K, Q4_K_M, Q2_K; cached as a run caches
    them). The text (``--text``, default ``resources/workloads/sweep_base.txt``, ~3,700 tokens) is cut
    into chunks of ``--ctx`` tokens (512); as llama.cpp does, each chunk starts with BOS where the
    vocabulary adds one, and only its second half is scored (the tokens at ``ctx/2 + 1 .. ctx - 1``,
    each with at least half a context of history).

    1. llama.cpp: ``llama-perplexity -m F32.gguf -f TEXT -c CTX -b CTX --kl-divergence-base
       base.kld`` once, then ``llama-perplexity -m Q.gguf -c CTX -b CTX --kl-divergence-base
       base.kld --kl-divergence`` per GGUF; its "Mean KLD", "Same top p" and PPL ratio are read
       from its output. The binary is built once from the installed llama-cpp-python's vendored
       llama.cpp (``benchmarks/llama_perplexity.py``; several minutes on 2 cores).
    2. The workbench: the same tokens (read back from ``base.kld``, so both see one stream) scored
       by the ``llama-cpp`` strategy's sessions (``n_ctx = CTX``), base and compared GGUF, and
       :func:`position_figures` per scored position (the quality pass's own code,
       ``workbench.analysis.quality``): KL(P_base || P_q) = sum p_base (lp_base - lp_q),
       same top-1, delta_p = p_q(token) - p_base(token), NLL = -lp(token); means over all scored
       positions.

Pass criterion (exit 0; exit 1 otherwise)
    - for every re-quantized type: mean KLD within ``--kld-tolerance`` (5 %) relative of
      llama-perplexity's, same-top within ``--top-tolerance`` (1 point);
    - the KLD order Q8_0 < Q6_K < Q4_K_M < Q2_K and same-top the reverse, in both measurements;
    - A/A (the base against a second session of itself): our mean KLD < 1e-6, same-top 100 %.
    (The as-shipped Q4_1 row is shown, not judged: its KLD is kernel arithmetic, near llama.cpp's
    16-bit storage of the base log-probabilities.)

    python benchmarks/quality.py [--threads 2] [--chunks N] [--ctx 512] [--text FILE]
"""

from __future__ import annotations

import argparse
import itertools
import re
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import harness
import numpy as np
from harness import DEMO_MODEL, summary, verdict

ROOT = Path(__file__).resolve().parent.parent
DEMO = DEMO_MODEL
#: (label, the llama-cpp strategy's gguf_type); the first is the as-shipped file, not judged
COMPARED = [("F32 (A/A)", "F32"), ("Q4_1 as shipped", "as-is"), ("Q8_0", "Q8_0"), ("Q6_K", "Q6_K"),
            ("Q4_K_M", "Q4_K_M"), ("Q2_K", "Q2_K")]  # fmt: skip
AA = "F32 (A/A)"
JUDGED = ["Q8_0", "Q6_K", "Q4_K_M", "Q2_K"]


# --- the figures (per scored position; the quality pass's definitions) -----------------------------


def position_figures(base: Any, quant: Any, targets: Any) -> dict[str, np.ndarray]:
    """Per scored position, the quality pass's own figures (``workbench.analysis.quality.
    position_figures``: ``kld`` = KL(P_base || P_q), ``same_top``, ``delta_p`` = p_q(token) −
    p_base(token), ``nll_base`` / ``nll``) from the two models' log-probability rows (``[n, vocab]``
    each, ``TokenScores.logprobs``) and the given tokens: what is validated is the product's code."""
    from workbench.analysis.quality import position_figures as quality_figures

    figures = quality_figures({"logprobs": base}, {"logprobs": quant}, np.asarray(targets))
    return {key: np.asarray(value) for key, value in figures.items() if key in _FIGURES}


_FIGURES = ("kld", "same_top", "delta_p", "nll_base", "nll")


def summarize(figures: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """Means over every scored position (llama-perplexity's figures)."""
    joined = {key: np.concatenate([f[key] for f in figures]) for key in figures[0]}
    kld = joined["kld"]
    return {
        "positions": float(len(kld)),
        "mean_kld": float(kld.mean()),
        "median_kld": float(np.median(kld)),
        "p99_kld": float(np.quantile(kld, 0.99)),
        "max_kld": float(kld.max()),
        "same_top_pct": 100.0 * float(joined["same_top"].mean()),
        "rms_delta_p_pct": 100.0 * float(np.sqrt((joined["delta_p"] ** 2).mean())),
        "ppl_ratio": float(np.exp(joined["nll"].mean() - joined["nll_base"].mean())),
    }


# --- llama.cpp's own ---------------------------------------------------------------------------------


def run_llama_perplexity(binary: Path, args: list[str]) -> str:
    proc = subprocess.run([str(binary), *args], capture_output=True, text=True, check=False)
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        sys.exit(f"llama-perplexity failed ({proc.returncode}): {' '.join(args)}\n{output[-3000:]}")
    return output


def parse_kld_output(output: str) -> dict[str, float]:
    def number(pattern: str) -> float:
        match = re.search(pattern, output)
        if not match:
            sys.exit(f"llama-perplexity printed no {pattern!r}:\n{output[-3000:]}")
        return float(match.group(1))

    return {
        "mean_kld": number(r"Mean\s+KLD:\s+(-?[\d.]+)"),
        "same_top_pct": number(r"Same top p:\s+([\d.]+)"),
        "ppl_ratio": number(r"Mean PPL\(Q\)/PPL\(base\)\s*:\s+([\d.]+)"),
    }


def read_base_tokens(path: Path) -> tuple[int, int, np.ndarray]:
    """``n_ctx``, ``n_chunk`` and the token stream llama-perplexity stored in its base file."""
    with open(path, "rb") as f:
        if f.read(8) != b"_logits_":
            sys.exit(f"{path} is no llama-perplexity base file")
        n_ctx, _n_vocab, n_chunk = struct.unpack("<Iii", f.read(12))
        tokens = np.frombuffer(f.read(4 * n_ctx * n_chunk), dtype=np.int32)
    return n_ctx, n_chunk, tokens


# --- the run ------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = harness.parser(summary(__doc__))
    parser.add_argument("--text", type=Path, default=ROOT / "resources" / "workloads" / "sweep_base.txt")
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--chunks", type=int, default=0, help="at most this many chunks (0: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--kld-tolerance", type=float, default=0.05, help="relative, on mean KLD")
    parser.add_argument("--top-tolerance", type=float, default=1.0, help="points of same-top %%")
    return parser.parse_args(argv)


def llama_perplexity_figures(
    binary: Path, base: Any, sessions: dict[str, Any], args: argparse.Namespace
) -> tuple[dict[str, dict[str, float]], float, int, int, np.ndarray]:
    """llama-perplexity's own figures of every compared GGUF against the base; returns them, the time
    they took (s) and the base file's context, chunk count and token stream."""
    common = ["-c", str(args.ctx), "-b", str(args.ctx), "-t", str(args.threads)]
    if args.chunks:
        common += ["--chunks", str(args.chunks)]
    theirs: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="workbench-quality-") as tmp:
        base_file = Path(tmp) / "base.kld"
        t0 = time.perf_counter()
        cmd = ["-m", str(base.path), "-f", str(args.text), *common, "--kl-divergence-base", str(base_file)]
        print(f"$ llama-perplexity {' '.join(cmd)}", flush=True)
        run_llama_perplexity(binary, cmd)
        for label, _ in COMPARED:
            cmd = ["-m", str(sessions[label].path), *common, "--kl-divergence-base", str(base_file),
                   "--kl-divergence"]  # fmt: skip
            print(f"$ llama-perplexity {' '.join(cmd)}", flush=True)
            theirs[label] = parse_kld_output(run_llama_perplexity(binary, cmd))
        t_theirs = time.perf_counter() - t0

        n_ctx, n_chunk, tokens = read_base_tokens(base_file)
    return theirs, t_theirs, n_ctx, n_chunk, tokens


def score_hook_figures(
    base: Any, sessions: dict[str, Any], tokens: np.ndarray, n_ctx: int, n_chunk: int, bos: int | None
) -> tuple[dict[str, dict[str, float]], float]:
    """The same figures from the strategy's ``Session.score`` on the same chunks (the second half of
    each scored); returns them and the time they took (s)."""
    first = n_ctx // 2
    t0 = time.perf_counter()
    figures: dict[str, list[dict[str, np.ndarray]]] = {label: [] for label, _ in COMPARED}
    for c in range(n_chunk):
        chunk = tokens[c * n_ctx : (c + 1) * n_ctx].tolist()
        if bos is not None:
            chunk[0] = bos
        targets = np.asarray(chunk[first + 1 :])
        reference = base.score(chunk, first + 1).logprobs
        for label, _ in COMPARED:
            scored = sessions[label].score(chunk, first + 1).logprobs
            figures[label].append(position_figures(reference, scored, targets))
    t_ours = time.perf_counter() - t0
    return {label: summarize(figures[label]) for label, _ in COMPARED}, t_ours


def compare(
    theirs: dict[str, dict[str, float]], ours: dict[str, dict[str, float]], args: argparse.Namespace
) -> list[str]:
    """Print the table of both sides' figures per GGUF; returns the failed criteria."""
    header = (f"{'GGUF':<16} {'KLD llama.cpp':>13} {'KLD ours':>10} {'rel':>7} {'same-top lc':>11} "
              f"{'same-top ours':>13} {'diff':>6} {'PPL ratio lc':>12} {'ours':>7} {'median KLD':>10} "
              f"{'p99 KLD':>8} {'max KLD':>8}")  # fmt: skip
    print(header)
    failures: list[str] = []
    for label, _ in COMPARED:
        a, b = theirs[label], ours[label]
        rel = (b["mean_kld"] - a["mean_kld"]) / a["mean_kld"] if a["mean_kld"] else float("nan")
        top = b["same_top_pct"] - a["same_top_pct"]
        print(f"{label:<16} {a['mean_kld']:>13.4g} {b['mean_kld']:>10.4g} {100 * rel:>6.1f}% "
              f"{a['same_top_pct']:>10.2f}% {b['same_top_pct']:>12.2f}% {top:>+6.2f} {a['ppl_ratio']:>12.4f} "
              f"{b['ppl_ratio']:>7.4f} {b['median_kld']:>10.4g} {b['p99_kld']:>8.4f} {b['max_kld']:>8.4f}")  # fmt: skip
        if label in JUDGED:
            if not abs(rel) <= args.kld_tolerance:
                failures.append(f"{label}: mean KLD {b['mean_kld']:.6f} vs llama.cpp {a['mean_kld']:.6f}")
            if not abs(top) <= args.top_tolerance:
                failures.append(f"{label}: same-top {b['same_top_pct']:.2f} % vs {a['same_top_pct']:.2f} %")
    if not (ours[AA]["mean_kld"] < 1e-6 and ours[AA]["same_top_pct"] == 100.0):
        failures.append(f"A/A: KLD {ours[AA]['mean_kld']:.2e}, same-top {ours[AA]['same_top_pct']:.2f} %")
    for name, figs in (("llama.cpp", theirs), ("ours", ours)):
        klds = [figs[label]["mean_kld"] for label in JUDGED]
        tops = [figs[label]["same_top_pct"] for label in JUDGED]
        if not all(x < y for x, y in itertools.pairwise(klds)):
            failures.append(f"{name}: KLD not in the order {' < '.join(JUDGED)}: {klds}")
        if not all(x > y for x, y in itertools.pairwise(tops)):
            failures.append(f"{name}: same-top not in the reverse order: {tops}")
    return failures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import llama_cpp
    from llama_perplexity import ensure_llama_perplexity

    from workbench.testing.helpers import load_session

    binary = ensure_llama_perplexity(log=lambda m: print(m, flush=True))

    def session(gguf_type: str) -> Any:
        return load_session(
            DEMO, "llama-cpp", dtype="auto", gguf_type=gguf_type, n_ctx=args.ctx, n_batch=args.ctx,
            threads=args.threads,
        )  # fmt: skip

    base = session("F32")
    sessions = {label: session(gguf_type) for label, gguf_type in COMPARED}
    theirs, t_theirs, n_ctx, n_chunk, tokens = llama_perplexity_figures(binary, base, sessions, args)
    assert n_ctx == args.ctx
    vocab = llama_cpp.llama_model_get_vocab(base.llm.model)
    bos = int(base.llm.token_bos()) if llama_cpp.llama_vocab_get_add_bos(vocab) else None
    own = base.llm.tokenize(args.text.read_bytes(), add_bos=True, special=False)
    same_stream = list(own[: len(tokens)]) == tokens.tolist()
    ours, t_ours = score_hook_figures(base, sessions, tokens, n_ctx, n_chunk, bos)

    print()
    print(f"text: {args.text.relative_to(ROOT) if args.text.is_relative_to(ROOT) else args.text}, "
          f"{len(own)} tokens; ctx {n_ctx}, {n_chunk} chunks, {int(ours[COMPARED[0][0]]['positions'])} scored "
          f"positions; BOS per chunk: {bos is not None}; token stream identical to the strategy's "
          f"tokenizer: {same_stream}")  # fmt: skip
    print(f"base: {base.path.name}; threads {args.threads}; llama-perplexity {t_theirs:.0f} s, "
          f"score hook {t_ours:.0f} s")  # fmt: skip
    print()
    failures = compare(theirs, ours, args)
    for s in (base, *sessions.values()):
        s.close()
    print()
    return verdict(failures, bullet="  ")


if __name__ == "__main__":
    sys.exit(main())

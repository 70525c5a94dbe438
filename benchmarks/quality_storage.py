"""What the quality pass stores: the bytes its tables take in the results database.

What is measured
    A real run (``RunExecutor`` → worker processes → SQLite) of a tiny random llama (built in
    milliseconds; its vocabulary is small, but the stored reference is the baseline's top 32 per
    position whatever the vocabulary, so the bytes per position are a real model's) with
    ``--prompts`` prompts × ``--tokens`` output tokens (greedy, ``ignore_eos``): the fp32 baseline and
    ``--lossy`` lossy variants (bf16 copies), quality pass on. The size of each quality table (pages,
    from SQLite's ``dbstat``; its indexes included) is read from the file.

Pass criterion (exit 0; exit 1 otherwise)
    - the baseline's reference (``quality_reference`` with its index) stays under 5 MB for 10 prompts
      × 256 tokens, and every quality table together under 5 MB per lossy variant + 5 MB;
    - every output token of the baseline was scored by every lossy variant.

    python benchmarks/quality_storage.py
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--lossy", type=int, default=2, help="lossy variants (bf16 copies)")
    args = parser.parse_args()

    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import parse_spec
    from workbench.store import Store
    from workbench.testing.helpers import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "tiny"
        build_tiny_model(model)
        config = json.loads((model / "config.json").read_text())
        config["max_position_embeddings"] = 64 + args.tokens + 64
        (model / "config.json").write_text(json.dumps(config))
        prompts = ", ".join(f'"w{i} w{i + 1} w{i + 2} the a of w{i + 3}"' for i in range(args.prompts))
        lossy = "".join(
            f'[[variants]]\nname = "bf16-{n}"\nmodel = "{model}"\ndtype = "bfloat16"\n'
            for n in range(args.lossy)
        )
        spec = parse_spec(
            f'name = "quality storage"\nrepetitions = 1\nwarmup = 0\n'
            f'[[variants]]\nname = "baseline"\nmodel = "{model}"\ndtype = "float32"\n{lossy}'
            f'[[workloads]]\nname = "code"\nmax_new_tokens = {args.tokens}\nignore_eos = true\n'
            f"prompts = [{prompts}]\n"
        )
        db = Path(tmp) / "results.db"
        t0 = time.perf_counter()
        with Store(db) as store:
            result = RunExecutor(spec, store).run()
            sizes = {
                row["name"]: row["bytes"]
                for row in store.query("select name, sum(pgsize) as bytes from dbstat group by name")
            }
            counts = {
                row["variant"]: row["n"]
                for row in store.query(
                    "select variant, count(*) as n from quality_positions group by variant"
                )
            }
            reference = store.query("select count(*) as n from quality_reference")[0]["n"]
        took = time.perf_counter() - t0
    print(
        f"run {result.status} in {took:.0f} s: {args.prompts} prompts × {args.tokens} tokens, {args.lossy} lossy variants"
    )

    def size(*names: str) -> int:
        return sum(v for k, v in sizes.items() if any(k == n or k.startswith(f"idx_{n}") for n in names))

    ref = size("quality_reference")
    total = size("quality_reference", "quality_positions", "quality_variants")
    print(
        f"quality_reference: {reference} positions, {ref / 2**20:.2f} MB ({ref / max(reference, 1):.0f} B per position)"
    )
    for name, n in counts.items():
        print(f"quality_positions, {name}: {n} positions")
    pos = size("quality_positions")
    print(f"quality_positions: {pos / 2**20:.2f} MB; every quality table: {total / 2**20:.2f} MB")
    expected = args.prompts * args.tokens
    ok = result.status == "ok" and reference == expected and all(n == expected for n in counts.values())
    ok = ok and len(counts) == args.lossy
    limit_ref = 5 * 2**20 * (args.prompts * args.tokens) / 2560
    ok = ok and ref < limit_ref and total < 5 * 2**20 * (args.lossy + 1)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Database schema, created and changed only through sqlite-utils migrations.

Table and column names are a contract (DESIGN.md §3): analysts' SQL and exports depend on them. Add
columns in a new migration; never rename one without a migration that keeps the old data readable.
"""

from __future__ import annotations

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

migrations = Migrations("workbench")


@migrations()
def m001_initial(db: Database) -> None:
    db["runs"].create(
        {
            "id": int,
            "name": str,
            "started_at": str,  # ISO 8601, UTC
            "finished_at": str,
            "status": str,  # running | ok | partial | failed | cancelled
            "spec": str,  # the spec TOML as written
            "environment": str,  # JSON
            "baseline": str,  # variant speed-ups are measured against
            "pid": int,  # of the process that owns a running run (to spot runs whose owner died)
            "host": str,
            "workbench_version": str,
        },
        pk="id",
    )
    db["variants"].create(
        {
            "id": int,
            "run_id": int,
            "name": str,
            "strategy": str,
            "model": str,
            "dtype": str,  # as resolved ("auto" -> "float32" ...)
            "device": str,  # as resolved ("auto" -> "cuda:0" ...)
            "params": str,  # JSON of the strategy parameters
            "status": str,  # pending | loaded | ok | failed | cancelled
            "error": str,
            "load_ms": float,
            "weights_mb": float,
            "context_length": int,
            "memory_kind": str,  # cuda_allocator_peak | process_rss_peak
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    db["variants"].create_index(["run_id", "name"], unique=True)
    db["trials"].create(
        {
            "id": int,
            "run_id": int,
            "variant": str,
            "strategy": str,
            "model": str,
            "workload": str,
            "prompt_id": str,
            "repetition": int,
            "warmup": int,
            "status": str,  # ok | failed | cancelled
            "error": str,
            "input_tokens": int,
            "output_tokens": int,
            "ttft_ms": float,
            "prefill_tokens_per_s": float,
            "decode_ms": float,
            "tpot_ms": float,
            "decode_tokens_per_s": float,
            "e2e_ms": float,
            "peak_memory_mb": float,
            "draft_tokens_proposed": int,
            "draft_tokens_accepted": int,
            "output_text": str,
            "matches_baseline": int,  # 1/0 when compared with the baseline's greedy output, else NULL
            # additions beyond DESIGN.md
            "itl_p50_ms": float,
            "itl_p90_ms": float,
            "itl_p99_ms": float,
            "max_new_tokens": int,
            "finish_reason": str,  # eos | length | stop
            "seed": int,
            "temperature": float,  # 0 = greedy
            "started_at": str,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    db["trials"].create_index(["run_id", "variant", "workload"])
    db["steps"].create(
        {
            "trial_id": int,
            "idx": int,
            "t_ms": float,  # since trial start
            "n_tokens": int,
            "draft_proposed": int,
            "draft_accepted": int,
            "draft_ms": float,
            "verify_ms": float,
        },
        pk=("trial_id", "idx"),
        foreign_keys=[("trial_id", "trials", "id")],
    )


@migrations()
def m002_output_tokens_and_divergence(db: Database) -> None:
    """Token-level comparison with the baseline: the quality side of a speed-up."""
    trials = db["trials"]
    trials.add_column("output_token_ids", str)  # JSON list of the generated token ids
    trials.add_column("first_divergence", int)  # index of the first token that differs from the baseline's
    trials.add_column("match_fraction", float)  # share of positions equal to the baseline's output


@migrations()
def m003_draft_steps(db: Database) -> None:
    """Steps that verified a draft: the denominator of the mean accepted length."""
    db["trials"].add_column("draft_steps", int)


@migrations()
def m004_prompt_reuse_and_trim(db: Database) -> None:
    """The prefill levers: prompt tokens served from a KV cache, and prompt tokens trimmed away."""
    trials = db["trials"]
    trials.add_column("cached_tokens", int)
    trials.add_column("trimmed_tokens", int)


@migrations()
def m005_variant_sweeps(db: Database) -> None:
    """Variants expanded from a spec ``sweep``: the swept key and the value (JSON) of each."""
    variants = db["variants"]
    variants.add_column("sweep_param", str)
    variants.add_column("sweep_value", str)


@migrations()
def m006_roofline(db: Database) -> None:
    """What the decode roofline needs, recorded where the run happens (the viewer has no torch)."""
    variants = db["variants"]
    variants.add_column("memory_bandwidth_gbs", float)  # measured copy bandwidth of the variant's device
    variants.add_column("kv_bytes_per_token", float)  # KV-cache bytes one token adds (all resident models)
    variants.add_column("model_shape", str)  # JSON: layers, kv_heads, head_dim, bytes_per_element

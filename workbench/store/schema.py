"""Database schema, created and changed only through sqlite-utils migrations.

Table and column names are a contract (docs/metrics.md): analysts' SQL and exports depend on them. Add
columns in a new migration; never rename one without a migration that keeps the old data readable.
"""

from __future__ import annotations

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

migrations = Migrations("workbench")


@migrations()
def m001_initial(db: Database) -> None:
    db.table("runs").create(
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
    db.table("variants").create(
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
    db.table("variants").create_index(["run_id", "name"], unique=True)
    db.table("trials").create(
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
            # additions beyond the first schema
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
    db.table("trials").create_index(["run_id", "variant", "workload"])
    db.table("steps").create(
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
    trials = db.table("trials")
    trials.add_column("output_token_ids", str)  # JSON list of the generated token ids
    trials.add_column("first_divergence", int)  # index of the first token that differs from the baseline's
    trials.add_column("match_fraction", float)  # share of positions equal to the baseline's output


@migrations()
def m003_draft_steps(db: Database) -> None:
    """Steps that verified a draft: the denominator of the mean accepted length."""
    db.table("trials").add_column("draft_steps", int)


@migrations()
def m004_prompt_reuse_and_trim(db: Database) -> None:
    """The prefill levers: prompt tokens served from a KV cache, and prompt tokens trimmed away."""
    trials = db.table("trials")
    trials.add_column("cached_tokens", int)
    trials.add_column("trimmed_tokens", int)


@migrations()
def m005_variant_sweeps(db: Database) -> None:
    """Variants expanded from a spec ``sweep``: the swept key and the value (JSON) of each."""
    variants = db.table("variants")
    variants.add_column("sweep_param", str)
    variants.add_column("sweep_value", str)


@migrations()
def m006_roofline(db: Database) -> None:
    """What the decode roofline needs, recorded where the run happens (the viewer has no torch)."""
    variants = db.table("variants")
    variants.add_column("memory_bandwidth_gbs", float)  # measured copy bandwidth of the variant's device
    variants.add_column("kv_bytes_per_token", float)  # KV-cache bytes one token adds (all resident models)
    variants.add_column("model_shape", str)  # JSON: layers, kv_heads, head_dim, bytes_per_element


@migrations()
def m007_endpoints_and_concurrency(db: Database) -> None:
    """Served models (the ``endpoint`` strategy) and parallel streams (``concurrency``)."""
    trials = db.table("trials")
    trials.add_column("timing_scope", str)  # in-process | client (client: includes network + queueing)
    trials.add_column("token_count_source", str)  # how a server's tokens were counted (docs/metrics.md)
    trials.add_column("concurrency", int)  # parallel streams the trial ran among (1 = sequential)
    trials.add_column("concurrent_group", int)  # which group of parallel streams (NULL when sequential)
    trials.add_column("group_offset_ms", float)  # trial start after its group's start
    variants = db.table("variants")
    variants.add_column("concurrency", int)
    variants.add_column("server", str)  # JSON: what the server said about itself (never a secret)
    # The server's own figures (e.g. vLLM's Prometheus /metrics) over a window of trials: one trial
    # when sequential (trial_id set), one group of parallel streams otherwise. Means are the deltas
    # of the server's histograms (sum / count) over the window; counts are counter deltas.
    db.table("server_metrics").create(
        {
            "id": int,
            "run_id": int,
            "variant": str,
            "workload": str,
            "warmup": int,
            "trials": int,  # client trials in the window
            "trial_id": int,  # the trial, when the window is exactly one
            "source": str,  # the metrics URL
            "requests": int,  # requests the server finished in the window (> trials: it had other clients)
            "ttft_ms": float,  # server TTFT: arrival (or scheduling) → first token, mean over the window
            "ttft_count": int,
            "itl_ms": float,  # mean inter-token latency (per engine step that emitted tokens)
            "tpot_ms": float,  # mean per-request time per output token
            "e2e_ms": float,  # mean server end-to-end request latency
            "queue_ms": float,  # mean time waiting to be scheduled
            "prefill_ms": float,  # mean prefill time
            "decode_ms": float,  # mean decode time
            "prompt_tokens": int,
            "generation_tokens": int,
            "spec_drafts": int,  # speculative decoding: draft rounds
            "spec_draft_tokens": int,  # tokens proposed
            "spec_accepted_tokens": int,  # tokens accepted
            "spec_accepted_per_pos": str,  # JSON list: accepted tokens at each draft position
            "extra": str,  # JSON: every other counter/histogram delta the server reported
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("server_metrics").create_index(["run_id", "variant", "workload"])


@migrations()
def m008_batching(db: Database) -> None:
    """Batched local decoding (a variant's ``batch_size``): how many requests shared each forward pass."""
    db.table("trials").add_column("batch_size", int)
    db.table("variants").add_column("batch_size", int)


@migrations()
def m009_threads(db: Database) -> None:
    """A variant's ``threads`` (CPU threads for its compute; null = the library's default)."""
    db.table("variants").add_column("threads", int)


@migrations()
def m010_design_and_disturbance(db: Database) -> None:
    """The run's design (how trials were ordered in time) and what the machine did during each trial
    (docs/analysis.md "How trials are ordered", "Disturbed trials")."""
    runs = db.table("runs")
    runs.add_column("trial_order", str)  # interleaved | blocks | sequential: what ran
    runs.add_column("trial_order_note", str)  # why it differs from the spec's order, or how auto ended
    runs.add_column("repetitions", int)  # measured repetitions that ran (repetitions = "auto": fewer)
    trials = db.table("trials")
    trials.add_column("round", int)  # one (repetition, workload, prompt), run once by every variant
    trials.add_column("round_position", int)  # 0 = first of its round
    trials.add_column("cpu_ms", float)  # the worker's CPU time during the trial (all its threads)
    trials.add_column("cpu_wait_ms", float)  # its threads' time runnable but waiting for a CPU (Linux)
    trials.add_column("load_avg", float)  # the machine's 1-minute load average at the trial's end
    trials.add_column("gpu_clock_mhz", int)  # CUDA: the SM clock (m016 on: read after the unit)
    trials.add_column("gpu_temp_c", int)  # CUDA: the GPU's temperature at the trial's end
    trials.add_column("disturbed", int)  # 1: the trial's figures were disturbed (see `disturbance`)
    trials.add_column("disturbance", str)  # why, in one line


@migrations()
def m011_step_indexes(db: Database) -> None:
    """Partial indexes on the few steps the analysis aggregates (sub-timed and drafted ones), so a
    10,000-trial run's 2.5 million steps are not scanned for them on every `show`."""
    db.execute(
        "create index if not exists idx_steps_timed on steps (trial_id) "
        "where draft_ms is not null or verify_ms is not null"
    )
    db.execute("create index if not exists idx_steps_drafted on steps (trial_id) where draft_proposed > 0")


@migrations()
def m012_worker_process(db: Database) -> None:
    """Which worker process of its variant ran each trial (0 = the first loaded; a new one for every
    repetition with ``workers = "per-repetition"``, and for every block): the paired statistics treat
    trials of one process pair as a cluster (docs/analysis.md "Processes")."""
    db.table("trials").add_column("worker", int)
    db.table("runs").add_column("workers", str)  # per-repetition | one: what the run used


@migrations()
def m013_python(db: Database) -> None:
    """A variant's worker may run in another Python environment (``python`` in the spec): which
    interpreter, and the library versions every variant's worker had (docs/runtimes.md)."""
    variants = db.table("variants")
    variants.add_column("python", str)  # the interpreter its worker ran with; NULL = the workbench's own
    # JSON {name: version} of its worker's libraries (torch, transformers...)
    variants.add_column("packages", str)


@migrations()
def m014_quality(db: Database) -> None:
    """The quality pass (docs/metrics.md "Quality"): after the timed trials, the baseline scores a
    reference stream per prompt (its own greedy output, and chunks of a corpus when the spec names one)
    and every lossy variant scores the same tokens; the figures per scored position are kept, so every
    quality metric can be recomputed from the file."""
    # One row per variant of the run: scored or why not.
    db.table("quality_variants").create(
        {
            "id": int,
            "run_id": int,
            "variant": str,
            "status": str,  # reference | scored | lossless | not scored | failed
            "reason": str,  # why not scored / failed; NULL when scored
            "method": str,  # full (whole distributions) | top-k (a server's top logprobs: bounds)
            "positions": int,  # scored positions
            "score_ms": float,  # wall time of its scoring (untimed work, for the record)
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    # The baseline's reference, one row per scored position: the token, its log-probability and the
    # baseline's top-k (ids int32, log-probabilities float32, little-endian, best first).
    db.table("quality_reference").create(
        {
            "id": int,
            "run_id": int,
            "source": str,  # output (a prompt + the baseline's greedy output) | text (a corpus chunk)
            "workload": str,  # the prompt's workload; the corpus file's name for source = text
            "prompt_id": str,  # the prompt; "chunk N" for source = text
            "position": int,  # index of the token in its stream (prompt tokens first)
            "token_id": int,
            "logprob": float,  # log p_baseline(token | the tokens before it)
            "top_ids": bytes,
            "top_logprobs": bytes,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("quality_reference").create_index(["run_id", "source", "workload", "prompt_id"])
    # One row per variant × scored position: the per-token figures (natural logs).
    db.table("quality_positions").create(
        {
            "id": int,
            "run_id": int,
            "variant": str,
            "source": str,
            "workload": str,
            "prompt_id": str,
            "position": int,
            "token_id": int,
            "nll_base": float,  # −log p_baseline(token)
            "nll": float,  # −log p_variant(token)
            "kld": float,  # KL(P_baseline ‖ P_variant) over the vocabulary
            "delta_p": float,  # p_variant(token) − p_baseline(token)
            "same_top": int,  # 1: both put the same token first
            "top_id": int,  # the variant's most likely token
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("quality_positions").create_index(["run_id", "variant"])


@migrations()
def m015_run_error(db: Database) -> None:
    """Why a run failed as a whole (docs/architecture.md "What a run's status promises"): a result
    that could not be stored, an unexpected error, or its process ending without closing the record.
    NULL for a run that ended as planned (its trials' failures are in ``trials.error``)."""
    db.table("runs").add_column("error", str)


@migrations()
def m016_gpu_placement(db: Database) -> None:
    """Where a variant computed, as its runtime reported it (``llama.cpp GPU offload on cuda:0 (all
    layers)``, ``llama.cpp CPU (CPU-only build)``...; NULL when the device column says it all), and
    what held a CUDA trial's GPU clocks down, per NVML's clock-event reasons and violation counters
    (docs/analysis.md "Disturbed trials"; "" nothing, NULL unknown)."""
    db.table("variants").add_column("backend", str)
    db.table("trials").add_column("gpu_throttle", str)


@migrations()
def m017_prompt_compression(db: Database) -> None:
    """Prompt compression, a prefill lever: the compression's time inside the TTFT and the share of
    the prompt it was asked to keep (what it kept: ``1 - trimmed_tokens / input_tokens``)."""
    trials = db.table("trials")
    trials.add_column("compress_ms", float)
    trials.add_column("compress_rate", float)


@migrations()
def m018_conversations(db: Database) -> None:
    """Conversation workloads: each trial's turn and the prompt tokens of its history, and the
    baseline's answers every variant's turns were given as history (one row per turn)."""
    trials = db.table("trials")
    trials.add_column("turn", int)
    trials.add_column("history_tokens", int)
    db.table("conversation_turns").create(
        {
            "id": int,
            "run_id": int,
            "workload": str,
            "conversation": str,
            "turn": int,  # 1-based
            "answer": str,  # the baseline's greedy answer to this turn
            "history_tokens": int,  # the prompt tokens before this turn's user message
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("conversation_turns").create_index(["run_id", "workload", "conversation", "turn"], unique=True)


@migrations()
def m019_equivalence(db: Database) -> None:
    """The quality pass's equivalence check of lossless variants (docs/metrics.md "Equivalence"):
    the A/A numerical floor — the baseline's own tokens re-scored by the baseline through other shapes
    of forward passes — per shape × scored position, and the shape each lossless variant was scored in."""
    db.table("quality_floor").create(
        {
            "id": int,
            "run_id": int,
            "shape": str,  # ScoreShape.label: "one token per pass", "chunks of 6", "cached prefix, ..."
            "workload": str,
            "prompt_id": str,
            "position": int,  # index of the token in its stream (as quality_reference)
            "kld": float,  # KL(P_reference ‖ P_shape): the reference is the one-pass scoring
            # the largest |Δ log p| of the reference's two most likely tokens between the two shapes
            "top_shift": float,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("quality_floor").create_index(["run_id", "shape"])
    db.table("quality_variants").add_column("shape", str)  # a lossless variant's ScoreShape.label


@migrations()
def m020_compile(db: Database) -> None:
    """``compile`` (docs/strategies.md "Compiled decoding"): the variant's torch.compile mode, the time
    its worker spent compiling before the first trial (beside ``load_ms``, not in it), and per trial the
    graphs compiled while it ran (a recompile inside a measured trial: the trial is disturbed)."""
    variants = db.table("variants")
    variants.add_column("compile", str)  # default | max-autotune | reduce-overhead; NULL = eager
    variants.add_column("compile_ms", float)  # the worker's compiling and warm-up of the graphs
    db.table("trials").add_column("recompiles", int)  # graphs compiled during it; NULL = not compiled


@migrations()
def m021_equivalence_replay(db: Database) -> None:
    """The equivalence check through each lossless variant's own code path (docs/metrics.md
    "Equivalence"): per variant × prompt × output × judged position, the variant's token judged
    against the baseline's one-pass argmax on the variant's own prefix, against that position's
    floor (the baseline through the passes the variant ran), and the variant's own log-probabilities
    against the baseline's through the same passes. ``quality_variants.checked``: how the variant was
    checked (``replay``; NULL: before this check, or not checked); ``.unchecked``: what was not."""
    db.table("equivalence_positions").create(
        {
            "id": int,
            "run_id": int,
            "variant": str,
            "workload": str,
            "prompt_id": str,
            "source": str,  # replay (the traced replay's output) | trial (a timed output that differs)
            "output": int,  # which distinct output of the prompt (0: the replay's)
            "position": int,  # index of the token in prompt + output
            "token_id": int,  # the variant's token
            "pass_start": int,  # the variant's pass that emitted it: its first position,
            "pass_tokens": int,  # its input tokens (rejected drafts included),
            "cached": int,  # the reused prefix it read (prefix cache); NULL for a timed output
            "base_top_id": int,  # the baseline's one-pass argmax there (on the variant's prefix)
            "gap": float,  # log p_base(base_top) − log p_base(token): 0 when the token is the argmax
            "floor_shift": float,  # that position's floor: |Δ log p| of those two tokens, one pass vs shape
            "floor_kld": float,  # KL(one pass ‖ the baseline through the shape) there
            "own_top_id": int,  # the argmax of the variant's own pass there (NULL: a timed output)
            "own_gap": float,  # log p_own(own_top) − log p_own(token): > 0 = not its own argmax
            "own_shift": float,  # |Δ log p| of the two tokens, the variant's own pass vs the baseline's
            "own_kld": float,  # KL(the baseline through the shape ‖ the variant's own pass)
            "verdict": str,  # argmax | near-tie | unexplained | not-own-argmax
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("equivalence_positions").create_index(["run_id", "variant"])
    db.table("quality_variants").add_column("checked", str)  # replay; NULL: the old check, or none
    # JSON list: what of the variant the replay could not check, a line each (a prompt not replayed...)
    db.table("quality_variants").add_column("unchecked", str)


@migrations()
def m022_compile_truth(db: Database) -> None:
    """Compiled variants (docs/strategies.md "Compiled decoding"): ``compile_ms`` is the variant's
    first worker's (cold) compile; a fresh worker's (``workers = "per-repetition"``, inductor's cache
    warm by then) is recorded apart. Per trial, what else of torch.compile can disturb it: a fallback
    to eager (its recompile limit hit) and a CUDA graph recorded while it ran."""
    db.table("variants").add_column("recompile_ms", float)  # the later workers' compile (median)
    trials = db.table("trials")
    trials.add_column("eager_fallbacks", int)  # frames run eagerly since the limit, in its process
    trials.add_column("cudagraph_records", int)  # CUDA graphs recorded during it


@migrations()
def m023_kv_held(db: Database) -> None:
    """The KV cache a variant's session held at the end of each trial (docs/metrics.md ``kv_held_tokens``):
    its working cache and every copy it keeps for later requests (a prefix cache's kept prompts), as the
    strategy reported it; NULL when its runtime cannot tell (llama.cpp, ONNX Runtime, an endpoint)."""
    trials = db.table("trials")
    trials.add_column("kv_held_tokens", int)
    trials.add_column("kv_held_bytes", int)


@migrations()
def m024_compress_protected(db: Database) -> None:
    """Prompt compression: the prompt tokens it could not drop, per part of the prompt, as JSON
    (``{"template": 9, "instruction": 12, "question": 520}``; NULL when the prompt was within the
    budget): what the report names when the kept share stays above the one asked."""
    db.table("trials").add_column("compress_protected", str)

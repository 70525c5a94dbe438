"""The parameters of ``speculative`` (its ``Config``) and what they resolve to. Imports no torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from workbench.strategy import Dtype, field_help, model_field

from ..llama_cpp.config import GgufType

__all__ = ["SpeculativeConfig"]


@dataclass
class SpeculativeConfig:
    draft: str = model_field(
        "draft model source (demo:..., a Hugging Face id, a folder or a .gguf file); "
        "must use the target's tokenizer",
        default="",
    )
    draft_runtime: Literal["auto", "transformers", "llama-cpp", "onnxruntime-genai"] = field_help(
        "what runs the draft: transformers (in this process, like the target), llama-cpp (a GGUF: the "
        "file, the demo model's own Q4_1, or a model converted to GGUF) or onnxruntime-genai (a model its "
        "builder makes once at draft_precision); auto = transformers (a .gguf draft de-quantized, as "
        "before this key existed)",
        default="auto",
    )
    draft_dtype: Dtype = field_help(  # noqa: RUF009 (a variant's dtype choices: workbench.strategy.Dtype)
        "dtype of a transformers draft; auto = the target's", default="auto"
    )
    draft_gguf_type: GgufType = field_help(  # noqa: RUF009 (the llama-cpp strategy's gguf_type choices)
        "llama-cpp draft: its weights as llama.cpp stores them (as-is = the GGUF as given, the demo "
        "model's Q4_1; a type re-quantizes it once, cached; the llama-cpp strategy's gguf_type)",
        default="as-is",
    )
    draft_precision: Literal["int4", "int8", "fp16", "bf16", "fp32"] = field_help(
        "onnxruntime-genai draft: the weights its model builder writes (the onnxruntime-genai "
        "strategy's precision; int8 agrees with an fp32 target more often than int4)",
        default="int4",
    )
    draft_threads: int = field_help(
        "threads of a llama-cpp / onnxruntime-genai draft; 0 = the variant's threads (llama.cpp: of its "
        "draft steps; its prefill keeps the variant's threads, all cores by default)",
        default=0,
    )
    num_draft_tokens: int = field_help(
        "tokens the draft model proposes per step (the most, under the adaptive schedule)", default=5
    )
    draft_prefill: Literal["auto", "own", "from-target", "catch-up"] = field_help(
        "how the draft gets the prompt into its KV cache: own = it prefills the prompt itself (prefill "
        "work: before the first token, in the TTFT); from-target = the target's prefill cache copied into "
        "the draft's (cast to its dtype; after the first token, no second prefill: the TTFT is the "
        "baseline's; for a draft that is the target's own model at another precision, in transformers or "
        "ONNX Runtime GenAI on a cpu); catch-up = the draft prefills after the first token, "
        "draft_prefill_chunk tokens between the target's first plain steps, and drafts once it has read "
        "the prompt (it gives up, decoding plainly, when the rest of its prefill cannot pay back in the "
        "tokens left); auto = from-target when the draft is the same model source as the target (and "
        "its runtime can take the target's cache), else own",
        default="auto",
    )
    draft_prefill_chunk: int = field_help(
        "draft_prefill = catch-up: prompt tokens the draft reads between two target steps", default=128
    )
    draft_context: int = field_help(
        "prompt tokens the draft reads at most (with own / catch-up prefill): the first draft_sinks "
        "tokens and the most recent rest (attention sinks + a recent window, StreamingLLM), so its "
        "prefill costs the same whatever the prompt's length; 0 = the whole prompt. Lossless either "
        "way: the target verifies every token with the whole prompt",
        default=0,
    )
    draft_sinks: int = field_help(
        "draft_context: the prompt's first tokens the draft always keeps (attention sinks)", default=4
    )
    draft_vocab: int = field_help(
        "draft only from the N most frequent token ids (BPE ids are ranked by merge order) plus the "
        "prompt's tokens: a smaller output layer makes each draft step cheaper (FR-Spec); 0 = the full "
        "vocabulary. Lossless either way: the target verifies every token",
        default=0,
    )
    draft_kv_dtype: Literal["auto", "model", "float32"] = field_help(
        "dtype of the draft's KV cache and attention: model = the draft's own dtype; auto = float32 for a "
        "bfloat16/float16 draft on a CPU (CPUs without native half-precision arithmetic run attention ~4x "
        "slower in it, while half-precision weights halve the matmul time), else the draft's dtype",
        default="auto",
    )
    schedule: Literal["auto", "adaptive", "fixed", "heuristic"] = field_help(
        "draft tokens per step: adaptive = as many as the measured acceptance and step costs say pay, "
        "0 (plain decoding) when drafting does not (num_draft_tokens at most); fixed = always "
        "num_draft_tokens; heuristic = +2 after a fully accepted draft, -1 otherwise (1 to 2 x "
        "num_draft_tokens); auto = adaptive, or fixed with adaptive = false",
        default="auto",
    )
    adaptive: bool = field_help(
        "false: a fixed draft length (schedule = fixed); true: the schedule key decides", default=True
    )

    def __post_init__(self) -> None:
        if not self.draft:
            raise ValueError("needs a 'draft' model (a smaller model with the same tokenizer as the target)")
        if self.num_draft_tokens < 1:
            raise ValueError(f"num_draft_tokens must be at least 1, got {self.num_draft_tokens}")
        if self.draft_vocab < 0:
            raise ValueError(f"draft_vocab must be 0 (full vocabulary) or more, got {self.draft_vocab}")
        if not self.adaptive and self.schedule not in ("auto", "fixed"):
            raise ValueError(f"adaptive = false contradicts schedule = {self.schedule!r}; set one of them")
        if self.draft_prefill_chunk < 1:
            raise ValueError(f"draft_prefill_chunk must be at least 1, got {self.draft_prefill_chunk}")
        if self.draft_context < 0 or self.draft_sinks < 0:
            raise ValueError("draft_context and draft_sinks must be 0 or more")
        if self.draft_context and self.draft_sinks >= self.draft_context:
            raise ValueError(
                f"draft_sinks ({self.draft_sinks}) must be fewer than draft_context ({self.draft_context})"
            )
        if self.draft_context and self.draft_prefill == "from-target":
            raise ValueError(
                "draft_context bounds a draft's own prefill; draft_prefill = 'from-target' copies the "
                "target's whole cache (use draft_prefill = 'own' or 'catch-up')"
            )
        if self.draft_threads < 0:
            raise ValueError(f"draft_threads must be 0 (the variant's) or more, got {self.draft_threads}")
        runtime = self.runtime
        if runtime == "transformers":
            for key, default in (
                ("draft_gguf_type", "as-is"),
                ("draft_precision", "int4"),
                ("draft_threads", 0),
            ):
                if getattr(self, key) != default:
                    raise ValueError(
                        f"{key} applies to a llama-cpp / onnxruntime-genai draft, not a transformers one"
                    )
            return
        for key, default in (("draft_dtype", "auto"), ("draft_vocab", 0), ("draft_kv_dtype", "auto")):
            if getattr(self, key) != default:
                raise ValueError(f"{key} applies to a transformers draft, not a {runtime} one")
        if self.draft_prefill == "from-target" and runtime == "llama-cpp":
            raise ValueError(
                "draft_prefill = 'from-target' needs a transformers or onnxruntime-genai draft; a llama-cpp "
                "draft prefills itself (own or catch-up)"
            )
        if runtime == "llama-cpp" and self.draft_precision != "int4":
            raise ValueError(
                "draft_precision applies to an onnxruntime-genai draft; a llama-cpp one has draft_gguf_type"
            )
        if runtime == "onnxruntime-genai" and self.draft_gguf_type != "as-is":
            raise ValueError(
                "draft_gguf_type applies to a llama-cpp draft; an onnxruntime-genai one has draft_precision"
            )

    @property
    def draft_schedule(self) -> Literal["adaptive", "fixed", "heuristic"]:
        if self.schedule == "auto":
            return "adaptive" if self.adaptive else "fixed"
        return self.schedule

    def prefill_mode(
        self, same_model: bool, can_copy: bool = True
    ) -> Literal["own", "from-target", "catch-up"]:
        """``draft_prefill`` with ``auto`` resolved: ``same_model``, the draft is the target's model source;
        ``can_copy``, its runtime can take the target's cache here (transformers; ONNX Runtime GenAI on
        a cpu)."""
        if self.draft_prefill != "auto":
            return self.draft_prefill
        if same_model and can_copy and self.runtime != "llama-cpp" and not self.draft_context:
            return "from-target"
        return "own"

    @property
    def runtime(self) -> str:
        """``draft_runtime`` with ``auto`` resolved (transformers)."""
        return "transformers" if self.draft_runtime == "auto" else self.draft_runtime

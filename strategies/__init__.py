"""Built-in strategies. Registered through the ``workbench.strategies`` entry-point group exactly like
third-party plugins (see pyproject.toml); the ``workbench`` package never imports this one directly.

One module per strategy, or a folder where it has parts (its ``__init__`` holds the strategy class):
``baseline``, ``quantized/`` (``gptq``), ``speculative/`` (``config``, ``schedule``, ``loop``,
``draft_model``, ``runtime_drafts``), ``prompt_lookup``, ``hf_assisted``, ``prefix_cache``,
``context_trim``, ``llama_cpp/`` (``config``, ``gguf``), ``ort_genai``, ``endpoint/``. Shared:
``hf_session`` (the transformers session, torch-free), ``_hf`` (loading, sampling; torch), ``_cpu``
(CPU kernels), ``_text`` (prompts and stop rules). The index with each strategy's lever is at the top
of docs/strategies.md.
"""

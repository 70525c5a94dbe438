"""workbench_strategies._cpu: the in-place KV cache and the CPU attention every CPU model is switched to
(masked grouped-query attention without copying the cache; attention in the cache's dtype)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


def test_growing_cache_keeps_what_dynamic_cache_keeps_through_updates_crops_and_growth(tiny):
    from transformers import DynamicCache
    from workbench_strategies._cpu import GrowingCache

    grow, ref = GrowingCache(tiny.config), DynamicCache(config=tiny.config)
    gen = torch.Generator().manual_seed(0)
    for new, crop in [(70, 0), (1, 0), (5, -3), (1, -1), (100, -40), (3, 0), (0, -2)]:  # past 64, past 128
        if new:
            k, v = torch.randn(1, 2, new, 8, generator=gen), torch.randn(1, 2, new, 8, generator=gen)
            for idx in range(tiny.config.num_hidden_layers):
                got = grow.update(k, v, idx)
                want = ref.update(k, v, idx)
                assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        grow.crop(crop)
        ref.crop(crop)
        assert grow.get_seq_length() == ref.get_seq_length()
        for a, b in zip(grow.layers, ref.layers, strict=True):
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def test_growing_cache_repeats_and_selects_batch_rows_like_dynamic_cache(tiny):
    from transformers import DynamicCache
    from workbench_strategies._cpu import GrowingCache

    grow, ref = GrowingCache(tiny.config), DynamicCache(config=tiny.config)
    k = torch.randn(2, 2, 5, 8, generator=torch.Generator().manual_seed(4))
    for cache in (grow, ref):
        cache.update(k, -k, 0)
        cache.batch_repeat_interleave(3)
        cache.batch_select_indices(torch.tensor([0, 4, 5]))
    assert torch.equal(grow.layers[0].keys, ref.layers[0].keys)
    assert torch.equal(grow.layers[0].values, ref.layers[0].values)
    keys, _ = grow.update(k[:1].expand(3, -1, -1, -1), k[:1].expand(3, -1, -1, -1), 0)  # still grows
    assert keys.shape == (3, 2, 10, 8)


def test_growing_cache_stores_in_its_own_dtype(tiny):
    from workbench_strategies._cpu import GrowingCache

    cache = GrowingCache(tiny.config, dtype=torch.float32)
    k = torch.randn(1, 2, 4, 8, dtype=torch.bfloat16)
    keys, values = cache.update(k, k, 0)
    assert keys.dtype == values.dtype == torch.float32
    assert torch.equal(keys, k.float())
    with pytest.raises(ValueError, match="negative"):
        cache.crop(2)


def test_workbench_sdpa_gives_sdpa_logits_with_a_mask_prefill_and_one_token(tiny):
    """A verify-shaped pass (4 tokens after a cached prompt: a causal mask over the cache) through
    masked GQA equals transformers' repeat-the-heads path; so do prefill and one-token steps."""
    import copy

    from transformers import DynamicCache
    from workbench_strategies._cpu import use_workbench_attention

    assert tiny.config.num_key_value_heads < tiny.config.num_attention_heads  # grouped-query
    ours = copy.deepcopy(tiny)
    assert use_workbench_attention(ours)
    assert ours.config._attn_implementation == "workbench_sdpa"
    assert use_workbench_attention(ours)  # already switched: still true
    prompt = torch.randint(5, 200, (1, 30), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        caches = [DynamicCache(config=tiny.config), DynamicCache(config=tiny.config)]
        for step in (prompt, prompt[:, :4], prompt[:, :1]):  # prefill, verify of 4, one token
            a = tiny(input_ids=step, cache=caches[0], use_cache=True).logits
            b = ours(input_ids=step, cache=caches[1], use_cache=True).logits
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)


def test_a_half_precision_model_attends_in_float32_over_a_float32_cache(tiny):
    import copy

    from workbench_strategies._cpu import GrowingCache, use_workbench_attention

    half = copy.deepcopy(tiny).to(torch.bfloat16)
    use_workbench_attention(half)
    prompt = torch.randint(5, 200, (1, 20), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        cache = GrowingCache(half.config, dtype=torch.float32)
        logits = half(input_ids=prompt, cache=cache, use_cache=True).logits
        step = half(input_ids=prompt[:, :3], cache=cache, use_cache=True).logits
        reference = tiny(input_ids=torch.cat([prompt, prompt[:, :3]], dim=1)).logits  # all float32
    assert logits.dtype == step.dtype == torch.bfloat16
    assert cache.layers[0].keys.dtype == torch.float32 and cache.get_seq_length() == 23
    # bf16 weights: close to the float32 model, not equal
    torch.testing.assert_close(step.float(), reference[:, -3:], rtol=0.05, atol=0.05)


def test_the_few_row_output_layer_computes_the_same_logits(tiny):
    import copy

    from workbench_strategies._cpu import use_few_row_head

    ours = copy.deepcopy(tiny)
    assert use_few_row_head(ours)
    head = ours.get_output_embeddings()
    gen = torch.Generator().manual_seed(3)
    with torch.inference_mode():
        for rows in (1, 2, 5, 32, 33):
            x = torch.randn(1, rows, tiny.config.hidden_size, generator=gen)
            got, want = head(x), torch.nn.functional.linear(x, head.weight)  # same weight tensor:
            # another copy of it may differ in the last bit (alignment picks the kernel's code path)
            assert got.shape == want.shape == (1, rows, tiny.config.vocab_size)
            if rows == 1 or rows > 32:  # outside 2-32 rows: linear itself
                assert torch.equal(got, want)
            else:
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        half = head.to(torch.bfloat16)  # dtypes that differ from the weight's: linear decides
        x = torch.randn(1, 3, tiny.config.hidden_size, generator=gen, dtype=torch.bfloat16)
        assert torch.equal(half(x), torch.nn.functional.linear(x, half.weight))


def test_models_whose_output_layer_is_not_a_plain_linear_keep_it():
    from workbench_strategies._cpu import use_few_row_head

    class Scaled(torch.nn.Linear):
        pass

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = Scaled(4, 8)

        def get_output_embeddings(self):
            return self.head

    assert not use_few_row_head(Model())
    assert not use_few_row_head(torch.nn.Linear(2, 2))  # no get_output_embeddings at all

"""Prefix KV reuse: the cache's bookkeeping, and that generation with it is the generation without
it (same tokens, logprobs to float noise) while the shared prefix is not computed again."""
import pytest
import torch

from agents.factory import model_path
from agents.serving.prefix_cache import PrefixCache, common_prefix_len
from agents.serving.transformers_policy import SamplingConfig, TransformersPolicy
from nextstate.config import ModelConfig, typed


def _kv(ids, layers=2):
    """Fake per-layer KV whose value at a position is its token id: slices are checkable."""
    t = torch.tensor(ids, dtype=torch.float32)[None, :, None].expand(1, len(ids), 2)
    return [(t.clone(), -t.clone()) for _ in range(layers)]


def test_common_prefix_len():
    t = torch.tensor
    assert common_prefix_len(t([1, 2, 3]), t([1, 2, 4])) == 2
    assert common_prefix_len(t([1, 2]), t([1, 2, 3])) == 2
    assert common_prefix_len(t([5]), t([1])) == 0
    assert common_prefix_len(t([]), t([1])) == 0


def test_match_takes_the_longest_prefix_and_always_leaves_the_last_token():
    c = PrefixCache(max_tokens=100)
    c.put([1, 2, 3, 4], _kv([1, 2, 3, 4]))
    c.put([1, 2, 9, 9, 9], _kv([1, 2, 9, 9, 9]))
    n, kv = c.match([1, 2, 3, 4, 5, 6])
    assert n == 4 and kv[0][0][0, :, 0].tolist() == [1, 2, 3, 4]
    n, kv = c.match([1, 2, 9, 7])  # a prefix of a longer entry is usable too
    assert n == 3 and kv[1][1][0, :, 0].tolist() == [-1, -2, -9]
    n, _ = c.match([1, 2, 3, 4])  # the whole prompt is held, but its last token's logits are needed
    assert n == 3
    assert c.match([7, 1, 2]) == (0, None)
    assert [1, 2, 3, 4] in c and [1, 2, 3] not in c


def test_least_recently_used_entries_go_first_within_the_token_budget():
    c = PrefixCache(max_tokens=10)
    c.put([1] * 4, _kv([1] * 4))
    c.put([2] * 4, _kv([2] * 4))
    c.match([1, 1, 1, 1, 5])  # touches the first entry
    c.put([3] * 4, _kv([3] * 4))  # 12 tokens > 10: the least recently used ([2]*4) is dropped
    assert [1] * 4 in c and [3] * 4 in c and [2] * 4 not in c and c.tokens == 8
    c.put(list(range(11)), _kv(list(range(11))))  # larger than the whole budget: not stored
    assert list(range(11)) not in c
    c.clear()
    assert len(c) == 0 and c.tokens == 0


def test_an_entry_covered_by_a_longer_prompt_is_dropped():
    c = PrefixCache(max_tokens=100)
    c.put([1, 2, 3], _kv([1, 2, 3]))  # step 1 of an episode
    c.put([1, 2, 3, 4, 5], _kv([1, 2, 3, 4, 5]))  # step 2 extends it: step 1's KV is inside
    assert [1, 2, 3] not in c and len(c) == 1 and c.tokens == 5
    assert c.match([1, 2, 3, 7], limit=2)[0] == 2  # a caller can cap the reuse


@pytest.fixture(scope="module")
def policy(cfg):
    m = typed(cfg.model, ModelConfig)
    return TransformersPolicy.load(model_path(m, cfg.paths.cache_dir), SamplingConfig(8, 0.0, 1.0, 4096),
                                   model_name=m.name)


def _same(a, b):
    for (ta, la, fa), (tb, lb, fb) in zip(a, b, strict=True):
        assert ta == tb and fa == fb
        assert max((abs(x - y) for x, y in zip(la, lb)), default=0.0) < 1e-3


@pytest.mark.model
@pytest.mark.slow  # ~2 min: many generations each way
def test_generation_with_the_cache_equals_generation_without_it(policy):
    tok = policy.tokenizer
    shared = tok.encode("You are a careful assistant who answers in one short sentence. " * 6)
    prompts = [shared + tok.encode("What is the capital of Italy?"), shared + tok.encode("Name a fruit."),
               tok.encode("Unrelated short prompt")]
    policy.enable_prefix_cache(0)
    plain = policy.sample_ids(prompts)
    policy.enable_prefix_cache(100_000)
    try:
        _same(plain, policy.sample_ids(prompts))  # cold: the shared prefix is computed and stored
        assert policy.prefix_cache.hit_tokens == 0 and len(policy.prefix_cache) == 3
        # the next step of an episode extends its prompt; a group repeats one; one row has no match
        turn2 = prompts[0] + plain[0][0] + tok.encode(" Why?")
        mixed = [turn2, prompts[1], prompts[1], tok.encode("Another unrelated prompt here")]
        policy.enable_prefix_cache(0)
        plain2 = policy.sample_ids(mixed)
        policy.enable_prefix_cache(100_000)
        policy.sample_ids(prompts)
        hits_before = policy.prefix_cache.hit_tokens
        _same(plain2, policy.sample_ids(mixed))
        reused = policy.prefix_cache.hit_tokens - hits_before
        assert reused >= len(prompts[0]) + len(prompts[1]) - 1  # the repeated prompt is prefilled once
    finally:
        policy.enable_prefix_cache(0)


@pytest.mark.model
def test_new_weights_empty_the_cache(policy, tmp_path):
    from safetensors.torch import save_file

    policy.enable_prefix_cache(100_000)
    try:
        policy.sample_ids([policy.tokenizer.encode("hello there, how are you")])
        assert len(policy.prefix_cache) == 1
        state = {k: v.contiguous() for k, v in policy.model.state_dict().items() if k != "lm_head.weight"}
        save_file(state, str(tmp_path / "model.safetensors"))
        policy.load_weights(tmp_path)
        assert len(policy.prefix_cache) == 0  # KV of the old weights must not be reused
    finally:
        policy.enable_prefix_cache(0)


@pytest.mark.model
def test_scoring_with_a_cached_prefix_equals_scoring_without(policy):
    """A teacher prompt shares the rollout prompt up to the hint: that part comes from the cache."""
    tok = policy.tokenizer
    prompt = tok.encode("List the files in the current directory, please. " * 5)
    response = tok.encode(" ls -la")
    hinted = prompt + tok.encode(" Hint: use ls.")
    seqs, starts = [hinted + response, prompt + response, prompt[:5]], [len(hinted), len(prompt), 0]
    policy.enable_prefix_cache(0)
    plain = policy.input_logprobs(seqs, starts, top_k=3)
    policy.enable_prefix_cache(100_000)
    try:
        policy.sample_ids([prompt])  # the rollout stored its prompt
        hits = policy.prefix_cache.hit_tokens
        cached = policy.input_logprobs(seqs, starts, top_k=3)
        assert policy.prefix_cache.hit_tokens - hits >= 2 * (len(prompt) - 1)
        for (la, ta), (lb, tb) in zip(plain, cached, strict=True):
            assert la[0] is lb[0] is None or abs(la[0] - lb[0]) < 1e-3
            assert max(abs(x - y) for x, y in zip(la[1:], lb[1:])) < 1e-3 if len(la) > 1 else True
            assert [[k for _, k in row] for row in ta] == [[k for _, k in row] for row in tb]
    finally:
        policy.enable_prefix_cache(0)


@pytest.mark.model
def test_a_batch_too_big_for_one_lm_head_is_scored_row_by_row_to_the_same_logprobs(policy, monkeypatch):
    """Long multi-step episodes (the KL reference's rows) take the LM head row by row on the positions
    read, not a [batch, width, vocabulary] log-softmax; the logprobs and top-k are those of one batch."""
    import agents.serving.transformers_policy as tp

    tok = policy.tokenizer
    prompt = tok.encode("Count the lines of notes.txt and write the number to count.txt. " * 3)
    seqs = [prompt + tok.encode(" wc -l < notes.txt > count.txt"), prompt[:9] + tok.encode(" DONE"), prompt[:4]]
    starts = [len(prompt), 9, 0]
    for cache in (0, 100_000):
        policy.enable_prefix_cache(cache)
        try:
            if cache:
                policy.sample_ids([prompt])  # the rollout stored its prompt: the rows start after it
            batched = policy.input_logprobs(seqs, starts, top_k=3)
            monkeypatch.setattr(tp, "LOGITS_BATCH_BYTES", 0)
            by_row = policy.input_logprobs(seqs, starts, top_k=3)
            monkeypatch.undo()
        finally:
            policy.enable_prefix_cache(0)
        for (la, ta), (lb, tb) in zip(batched, by_row, strict=True):
            assert len(la) == len(lb) and [x is None for x in la] == [x is None for x in lb]
            assert max((abs(x - y) for x, y in zip(la, lb) if x is not None), default=0.0) < 1e-4
            assert [[k for _, k in row] for row in ta] == [[k for _, k in row] for row in tb]

"""The PPO update reads every step of a multi-step episode from one forward pass of its last step
(`share_prefixes`): the logprobs and their gradients must be those of one row per step."""
from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from nextstate.types import Sample
from trainers.update import sequence_logprobs, shared_rows


def test_a_step_that_starts_a_longer_sequence_is_read_from_that_one():
    seqs = [[1, 2, 3], [1, 2, 3, 4, 5], [9, 9], [1, 2, 3, 4, 5], [1, 2]]
    # the two equal episodes keep their own rows; [1, 2] and [1, 2, 3] are read from the first of them
    assert shared_rows(seqs) == [1, 1, 2, 3, 1]


def _episode() -> list[Sample]:
    """Three steps of one episode and one unrelated sample: each step's prompt is the last one's
    prompt + reply + the next state's tokens."""
    p0, r0 = [5, 6, 7, 8], [20, 21, 22]
    p1 = p0 + r0 + [30, 31]
    r1 = [23, 24]
    p2 = p1 + r1 + [32, 33, 34]
    r2 = [25, 26, 27, 28]
    return [Sample(p1, r1, [], []), Sample(p0, r0, [], []), Sample([40, 41, 42], [43, 44], [], []),
            Sample(p2, r2, [], [])]


def _assert_same_logprobs_and_gradients(model, samples, plain: dict, shared: dict) -> None:
    """`sequence_logprobs` with the keyword arguments `plain` and with `shared` gives the same
    logprobs, mask and gradient of their sum (to float rounding)."""
    results = []
    for kwargs in (plain, shared):
        model.zero_grad()
        lp, mask = sequence_logprobs(model, samples, **kwargs)
        (lp * mask).sum().backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        results.append((lp.detach(), mask, grads))
    (lp_a, mask_a, g_a), (lp_b, mask_b, g_b) = results
    assert torch.equal(mask_a, mask_b)
    assert torch.allclose(lp_a[mask_a], lp_b[mask_b], atol=1e-5)
    assert torch.allclose(g_a, g_b, atol=1e-5)


def test_shared_rows_give_the_same_logprobs_and_gradients_as_one_row_per_step():
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2))
    _assert_same_logprobs_and_gradients(model, _episode(), dict(share_prefixes=False), dict(share_prefixes=True))


class _RowScorer:
    """Scores (prompt, reply) pairs as the frozen server does, one row each, with a tiny model; it
    keeps the pairs it was sent."""

    def __init__(self, model):
        self.model, self.sent = model, []

    def score_many(self, pairs):
        self.sent += pairs
        out = []
        for p, r in pairs:
            lp, _ = sequence_logprobs(self.model, [Sample(list(p), list(r), [], [])])
            out.append((lp[0].tolist(), None))
        return out


def test_the_kl_reference_scores_an_episode_once_and_gives_each_steps_logprobs():
    from trainers.judged import reference_logprobs

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2))
    samples = _episode()
    with torch.no_grad():
        alone = [_RowScorer(model).score_many([(s.prompt_ids, s.response_ids)])[0][0] for s in samples]
        scorer = _RowScorer(model)
        shared = reference_logprobs(scorer, samples)
    assert [len(x) for x in shared] == [len(s.response_ids) for s in samples]
    for a, b in zip(alone, shared):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-5)
    # the episode's last step from its first reply on (3 + 2 + 2 + 3 + 4 tokens), and the other sample
    assert sorted(len(r) for _, r in scorer.sent) == [2, 14]


def test_a_head_shared_by_every_row_runs_once_with_the_same_logprobs_and_gradients():
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2))
    system = [1, 2, 3, 4, 5, 6]
    samples = [Sample(system + s.prompt_ids, s.response_ids, [], []) for s in _episode()]
    _assert_same_logprobs_and_gradients(model, samples, dict(share_prefixes=True),
                                        dict(share_prefixes=True, share_head=True))


def test_the_shared_head_stops_before_the_shortest_prompts_last_token():
    from trainers.update import common_head

    seqs = [[1, 2, 3, 4, 9], [1, 2, 3, 4, 5, 6], [1, 2, 3, 7]]
    # every row starts 1 2 3; a prompt of p tokens reads its first response logit at position p - 1,
    # which must come after the head
    assert common_head(seqs, [0, 1, 2], [4, 5, 4]) == 3
    assert common_head(seqs, [0, 1, 2], [4, 5, 3]) == 2
    assert common_head(seqs, [0, 1, 2], [4, 5, 1]) == 0
    assert common_head(seqs, [0, 1], [5, 5]) == 4


def test_with_gradient_checkpointing_the_head_is_not_shared_and_the_update_still_runs():
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2))
    model.gradient_checkpointing_enable()
    model.train()
    samples = [Sample([1, 2, 3, 4, 5, 6, 7], [8, 9], [], []), Sample([1, 2, 3, 4, 5, 10, 11], [12], [], [])]
    plain, _ = sequence_logprobs(model, samples, share_prefixes=True)
    shared, _ = sequence_logprobs(model, samples, share_prefixes=True, share_head=True)
    shared.sum().backward()
    assert torch.equal(plain, shared)

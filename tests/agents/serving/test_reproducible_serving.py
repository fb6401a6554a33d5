"""`backend=embedded_reproducible`: a seeded reply is the same to the last bit of every logprob
whatever else the server is doing when it arrives: alone, beside longer and shorter prompts, after a
prompt that shares its prefix, behind a long reply. That is what lets a multi-step run (whose episodes
reach the server at times the machine's load decides) repeat its rollouts. The real model behind the
real server, over HTTP."""
import threading

import pytest
import requests

from agents.factory import serve_policy
from agents.serving.backend import BackendConfig
from nextstate.config import ModelConfig, compose, typed

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def served():
    cfg = compose(["backend=embedded_reproducible"])
    with serve_policy(typed(cfg.model, ModelConfig), typed(cfg.backend, BackendConfig), cfg.paths.cache_dir) as policy:
        yield policy


def _generate(policy, prompt: list[int], seed: int, max_new_tokens: int = 24) -> tuple[list[int], list[float]]:
    r = requests.post(policy.url + "/generate", headers=policy.headers, timeout=300, json={
        "input_ids": prompt, "return_logprob": True,
        "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 1.0, "seed": seed}})
    r.raise_for_status()
    lps = r.json()["meta_info"]["output_token_logprobs"]
    return [t for _, t, _ in lps], [lp for lp, _, _ in lps]


def test_the_reproducible_backend_serves_each_reply_alone_uncached_and_unpreempted():
    backend = typed(compose(["backend=embedded_reproducible"]).backend, BackendConfig)
    assert backend.name == "embedded"  # the same server, so every other setting is the embedded one's
    assert (backend.max_batch, backend.prefix_cache_tokens, backend.preempt_after_s) == (1, 0, None)
    assert backend.request_deadline_s is None  # a queue of replies served one by one must not cut them


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_seeded_reply_is_bit_identical_whatever_shares_the_server_with_it(served):
    task = [{"role": "user", "content": "List the files in /tmp, then count the lines of notes.txt."}]
    prompt = served.prompt_ids(task)
    alone = _generate(served, prompt, seed=7)
    assert alone[0] and len(alone[0]) == len(alone[1])

    others = [served.prompt_ids([{"role": "user", "content": text}]) for text in (
        "Hi.",
        "Write a long story about a lighthouse keeper and the ships she watched for forty years.",
        task[0]["content"] + " Then print the first line.",  # shares the target's prefix
    )]
    busy: list[tuple[list[int], list[float]]] = []

    def crowd():
        threads = [threading.Thread(target=_generate, args=(served, p, 100 + i, 64)) for i, p in enumerate(others)]
        for t in threads:
            t.start()
        threads.append(threading.Thread(target=lambda: busy.append(_generate(served, prompt, seed=7))))
        threads[-1].start()
        for t in threads:
            t.join()

    crowd()
    crowd()
    assert busy == [alone, alone]  # tokens and logprobs, exactly
    assert _generate(served, prompt, seed=8) != alone  # the seed is what decides it

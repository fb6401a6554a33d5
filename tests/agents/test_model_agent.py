"""The default policy: the real SmolLM2-135M-Instruct, loaded from the local cache."""
import os
import subprocess
import sys

import pytest

from agents.factory import model_path, sampling_of
from agents.serving.transformers_policy import TransformersPolicy
from nextstate.config import ModelConfig, typed
from nextstate.leaderboard import read_rows
from tests.paths import ROOT

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def policy(cfg):
    m = typed(cfg.model, ModelConfig)
    return TransformersPolicy.load(model_path(m, cfg.paths.cache_dir), sampling_of(m), model_name=m.name)


@pytest.mark.slow
def test_generation_keeps_tokens_and_logprobs_aligned_with_scoring(policy):
    msgs = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Name a color."}]
    policy.sampling = type(policy.sampling)(24, 1.0, 1.0, 2048)
    gens = policy.generate([msgs, msgs])
    for g in gens:
        assert len(g.token_ids) == len(g.logprobs) > 0
        assert g.prompt_token_ids and g.text == policy.tokenizer.decode(g.token_ids, skip_special_tokens=True)
        scored = policy.score(g.prompt_token_ids, g.token_ids)  # same ids, no re-tokenization
        assert max(abs(a - b) for a, b in zip(scored, g.logprobs)) < 1e-3


def test_a_reply_that_stops_keeps_its_stop_token_as_sglang_does_so_the_stop_is_trained(policy):
    # the trainer learns from the reply's token ids: without the stop token, an empty reply has no token
    # and no gradient, and a negative advantage elsewhere can only push mass onto stopping
    msgs = [{"role": "user", "content": "Say hello."}]
    policy.sampling = type(policy.sampling)(64, 0.0, 1.0, 2048)
    g, = policy.generate([msgs])
    assert g.finish_reason == "stop" and g.token_ids[-1] in policy.stop_ids
    assert not any(t in policy.stop_ids for t in g.token_ids[:-1])
    assert len(g.logprobs) == len(g.token_ids)
    assert g.text == policy.tokenizer.decode(g.token_ids[:-1]) and "<|im_end|>" not in g.text
    scored = policy.score(g.prompt_token_ids, g.token_ids)
    assert abs(scored[-1] - g.logprobs[-1]) < 1e-3


@pytest.mark.slow
def test_greedy_is_deterministic(policy):
    msgs = [{"role": "user", "content": "Say hello."}]
    policy.sampling = type(policy.sampling)(12, 0.0, 1.0, 2048)
    a, b = policy.generate([msgs]), policy.generate([msgs])
    assert a[0].token_ids == b[0].token_ids


@pytest.mark.slow
@pytest.mark.docker
def test_model_agent_eval_writes_a_leaderboard_row(tmp_path):
    env = dict(os.environ, NEXTSTATE_RESULTS=str(tmp_path))
    p = subprocess.run([sys.executable, "-m", "harness.run", "progress=false", "agent=model", "limit=1",
                        "env.max_steps=2", "model.max_new_tokens=32"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    _, rows = read_rows(tmp_path / "leaderboard.csv")
    assert rows[0]["agent"] == "model" and rows[0]["model"] == "smollm2-135m-instruct"
    assert int(rows[0]["tokens"]) > 0 and rows[0]["infra_failures"] == "0"


def test_replay_agent_sends_its_replies_then_the_fallback():
    from agents.base import ReplayAgent

    a = ReplayAgent(["one", "two"], then="DONE")
    assert [a.act([]).text for _ in range(4)] == ["one", "two", "DONE", "DONE"]
    with pytest.raises(IndexError):
        ReplayAgent([]).act([])

"""The before-training evaluation cache: a second run of the same weights, env, tasks and sampling
reads the first one's summary and gets its episodes file too (reports read replies and per-preference
rates from it); anything that changes the result changes the key."""
import dataclasses
import json
from types import SimpleNamespace

from trainers.eval_cache import EvalCache


@dataclasses.dataclass
class _Cfg:
    persona: str = "brief"


def _cache(tmp_path, weights, **kw):
    args = {"env_cfg": _Cfg(), "tasks": [SimpleNamespace(task_id="brief-test-000")], "sampling": _Cfg("greedy"),
            "seed": None, **kw}
    return EvalCache(tmp_path / "evals", weights, **args)


def test_a_hit_restores_the_summary_and_the_episodes(tmp_path):
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"x")
    first_run, second_run = tmp_path / "run1", tmp_path / "run2"
    first_run.mkdir()
    second_run.mkdir()
    episodes = first_run / "eval_before.jsonl"
    episode = {"task_id": "brief-test-000", "info": {"first_reply_wants": {"max_words": True}}}
    episodes.write_text(json.dumps(episode) + "\n")
    assert _cache(tmp_path, weights).get(episodes_to=second_run / "eval_before.jsonl") is None
    _cache(tmp_path, weights).put({"success_rate": 0.1}, episodes=episodes)

    assert _cache(tmp_path, weights).get(episodes_to=second_run / "eval_before.jsonl") == {"success_rate": 0.1}
    assert (second_run / "eval_before.jsonl").read_text() == episodes.read_text()
    assert not list(second_run.glob("*.tmp"))


def test_another_persona_or_seed_misses(tmp_path):
    weights = tmp_path / "w"
    weights.mkdir()
    _cache(tmp_path, weights).put({"success_rate": 0.1})
    assert _cache(tmp_path, weights).get() == {"success_rate": 0.1}
    assert _cache(tmp_path, weights, env_cfg=_Cfg("casual")).get() is None
    assert _cache(tmp_path, weights, seed=1).get() is None


def test_a_summary_cached_without_episodes_is_still_a_hit(tmp_path):
    weights = tmp_path / "w"
    weights.mkdir()
    _cache(tmp_path, weights).put({"success_rate": 0.2})
    out = tmp_path / "eval_before.jsonl"
    assert _cache(tmp_path, weights).get(episodes_to=out) == {"success_rate": 0.2}
    assert not out.exists()

"""The before-training evaluation cache: a second run of the same weights, env, tasks and sampling
reads the first one's summary and gets its episodes file too (reports read replies and per-preference
rates from it); anything that changes the result changes the key."""
import dataclasses
import json

from nextstate.types import Task
from trainers.eval_cache import EvalCache


@dataclasses.dataclass
class _Cfg:
    persona: str = "brief"


def _cache(tmp_path, weights, **kw):
    task = Task("brief-test-000", "nextstate/Chat-v0", "How do I cool a hot room?", "test",
                data={"persona_version": 2, "wants": {"contains_any": ["fan", "window"]}})
    args = {"env_cfg": _Cfg(), "tasks": [task], "sampling": _Cfg("greedy"),
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


def test_a_new_version_of_the_same_task_ids_misses(tmp_path):
    """Persona v2 kept v1's task ids (brief-test-000 ...) with new requests and answer keys; a key of ids
    alone handed v2 runs v1's before-score (0.10 where v2's own is 0.03)."""
    weights = tmp_path / "w"
    weights.mkdir()
    v1 = Task("brief-test-000", "nextstate/Chat-v0", "How do I cool a hot room?", "test",
              data={"persona_version": 1, "wants": {"contains_any": ["room", "cool"]}})
    v2 = dataclasses.replace(v1, instruction="How do I keep my plants alive while I travel?",
                             data={"persona_version": 2, "wants": {"contains_any": ["water", "wick"]}})
    _cache(tmp_path, weights, tasks=[v1]).put({"success_rate": 0.1})
    assert _cache(tmp_path, weights, tasks=[v1]).get() == {"success_rate": 0.1}
    assert _cache(tmp_path, weights, tasks=[v2]).get() is None
    assert _cache(tmp_path, weights, tasks=[dataclasses.replace(v1, data=v2.data)]).get() is None

"""`nextstate/Chat-v0`: the simulated user's replies as next states. Fast: nothing here needs Docker."""

import pytest

from agents.base import NoopAgent, OracleAgent
from agents.rollout import run_episode
from envs.chat.env import ChatEnv, ChatEnvConfig
from envs.chat.user import GIVE_UP, NO_ANSWER, THANKS, load_task
from envs.task_formats import TaskFormatError
from nextstate.leaderboard import read_rows


@pytest.fixture(scope="module")
def config(env_config) -> ChatEnvConfig:
    return env_config("chat")


@pytest.fixture(scope="module")
def env(config):
    e = ChatEnv(config, split="all")
    yield e
    e.close()


SUITE = ChatEnv(split="all").tasks  # (collected before any fixture: the config of conf/env/chat.yaml)


def test_the_suite_is_split_and_sized():
    assert len(SUITE) >= 30 and {t.split for t in SUITE} == {"train", "test"}
    assert sum(t.split == "test" for t in SUITE) >= 10
    assert any(len(t.data["requests"]) > 1 for t in SUITE)


@pytest.mark.parametrize("task", SUITE, ids=lambda t: t.task_id)
def test_oracle_satisfies_every_request_and_noop_none(env, config, task):
    traj = run_episode(env, OracleAgent(), task, config.system_prompt)
    n = len(task.data["requests"])
    assert traj.success and traj.outcome == 1.0 and traj.terminated and len(traj.steps) == n
    assert all(s.next_state.kind == "user" and s.info["step_label"] == {"satisfied": True} for s in traj.steps)
    traj = run_episode(env, NoopAgent(), task, config.system_prompt)
    assert not traj.success and traj.outcome == 0.0 and traj.terminated
    assert len(traj.steps) == n * config.patience
    assert all(s.info["step_label"] == {"satisfied": False} for s in traj.steps)


def _two_turn_task(tmp_path):
    path = tmp_path / "t-two.yaml"
    path.write_text("""
id: t-two
split: test
persona: tester
turns:
  - request: Name a fruit.
    wants:
      - {contains_any: [apple, pear], complaint: "I meant an apple or a pear."}
      - {max_words: 3, complaint: "Shorter, please."}
    reference: Apple.
  - request: Now a colour.
    wants:
      - {contains_all: [red], complaint: "Red, please."}
    thanks: Perfect.
    reference: Red.
""")
    return load_task(path)


def test_the_user_complains_then_thanks_then_moves_on(config, tmp_path):
    task = _two_turn_task(tmp_path)
    env = ChatEnv(config, tasks=[task])
    obs, info = env.reset(options={"task_id": "t-two"})
    assert obs == "Name a fruit." and info["persona"] == "tester"
    obs, reward, term, trunc, info = env.step("A banana.")
    assert obs == "I meant an apple or a pear." and (reward, term) == (0.0, False)
    assert info["step_label"] == {"satisfied": False} and info["next_state"].fields["unmet"] == "contains_any"
    obs, reward, term, _, info = env.step("<think>they want an apple</think>An apple, of course, always.")
    assert obs == "Shorter, please. " + GIVE_UP + "\n\nNow a colour."  # patience 2: the user moves on
    assert info["next_state"].fields == {"turn": 0, "satisfied": False, "unmet": "max_words", "wish": "",
                                         "named_wish": ""}
    obs, reward, term, _, info = env.step("Red.")
    assert obs == "Perfect." and term and info["step_label"] == {"satisfied": True}
    assert (reward, info["success"], info["requests_met"], info["met_first_try"]) == (0.5, False, 1, 1)
    assert env.step("more")[2] and env.finalize() == (0.0, {})  # the session is over


def test_an_empty_reply_repeats_the_request_and_reasoning_is_not_shown(config, tmp_path):
    env = ChatEnv(config, tasks=[_two_turn_task(tmp_path)])
    env.reset(options={"task_id": "t-two"})
    assert env.step("   ")[0] == f"{NO_ANSWER} Name a fruit."
    env.reset(options={"task_id": "t-two"})
    assert env.step("<think>Apple.</think>")[0].startswith(NO_ANSWER)
    obs = env.step("<think>hmm</think> Pear")[0]
    assert obs == f"{THANKS}\n\nNow a colour."


def test_a_cut_session_counts_what_it_met(config, tmp_path):
    env = ChatEnv(config, tasks=[_two_turn_task(tmp_path)])
    env.reset(options={"task_id": "t-two"})
    env.step("Apple")
    assert env.finalize() == (0.5, {"outcome": 0.5, "success": False, "requests_met": 1, "requests": 2,
                                    "met_first_try": 1})


@pytest.mark.parametrize("turn,reason", [
    ("{request: Hi, wants: [{max_words: 2, complaint: Short.}], reference: one two three}", "misses its own want"),
    ("{request: Hi, wants: [{max_wordz: 2, complaint: Short.}], reference: hi}", "a want is one of"),
    ("{request: Hi, wants: [{max_words: two, complaint: Short.}], reference: hi}", "takes a int"),
    ("{request: Hi, wants: [{max_words: 2}], reference: hi}", "with a complaint"),
    ("{request: Hi, wants: [{matches: '(', complaint: x}], reference: hi}", "bad pattern"),
    ("{request: Hi, wants: []}", "needs request, wants and reference"),
])
def test_bad_task_files_are_clear_errors(tmp_path, turn, reason):
    path = tmp_path / "t-bad.yaml"
    path.write_text(f"id: t-bad\nsplit: train\nturns:\n  - {turn}\n")
    with pytest.raises(TaskFormatError, match=reason):
        load_task(path)


def test_the_cli_writes_runs_and_rows(tmp_path, harness_run):
    for agent in ("oracle", "noop"):
        p = harness_run(tmp_path, "env=chat", f"agent={agent}", timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
    _, rows = read_rows(tmp_path / "leaderboard.csv")
    n_test = str(sum(t.split == "test" for t in SUITE))
    assert [(r["env"], r["agent"], r["n_tasks"], float(r["success_rate"])) for r in rows] == \
           [("chat", "oracle", n_test, 1.0), ("chat", "noop", n_test, 0.0)]


def test_an_unknown_task_id_is_a_clear_error_and_a_seed_picks_the_same_task(config):
    env = ChatEnv(config, split="test")
    with pytest.raises(KeyError, match="unknown chat task 'nope'"):
        env.reset(options={"task_id": "nope"})
    assert env.reset(seed=3)[0] == env.reset(seed=3)[0]

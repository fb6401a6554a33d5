"""The steps a judge is trained and measured on (mode=sft_judge): per request the reference, the
default model's greedy reply and its sampled ones, in that order, each with the user's own verdict and
the wish the complaint names; the sampled replies reproducible from the seed."""
from dataclasses import replace

import pytest

from envs.chat.env import ChatEnv
from envs.chat.user import reply_text
from trainers.feedback.judge_accuracy import judged_steps

SYSTEM = "You are a helpful personal assistant."


@pytest.fixture
def policy(served):
    served.sampling = replace(served.sampling, max_new_tokens=32)
    return served


@pytest.mark.slow
@pytest.mark.model
def test_reference_greedy_then_sampled_replies_with_the_users_verdicts(env_config, policy):
    env = ChatEnv(env_config("chat", "env.persona=brief"), split="test")
    tasks = env.tasks[:2]
    steps = judged_steps(env, policy, tasks, SYSTEM, sampled=2, seed=3)
    assert len(steps) == 2 * (1 + 1 + 2)
    greedy = policy.generate([[{"role": "system", "content": SYSTEM}, {"role": "user", "content": t.instruction}]
                              for t in tasks])
    for k, task in enumerate(tasks):
        ref, own_greedy = steps[4 * k], steps[4 * k + 1]
        assert ref.action_text == env.reference_actions(task)[0] and ref.info["step_label"]["satisfied"]
        assert own_greedy.action_text == greedy[k].text
    for step, task in zip(steps, [t for t in tasks for _ in range(4)]):
        unmet = task.data["requests"][0].first_unmet(reply_text(step.action_text))
        assert step.info["step_label"]["satisfied"] == (unmet is None)
        # the wish the complaint names is the first unmet one's, not every unmet one's
        assert step.next_state.fields["named_wish"] == (unmet.instruction if unmet else "")
    sampled = [s.action_text for i, s in enumerate(steps) if i % 4 >= 2]
    again = judged_steps(env, policy, tasks, SYSTEM, sampled=2, seed=3)
    assert [s.action_text for i, s in enumerate(again) if i % 4 >= 2] == sampled  # the seed fixes them
    other = judged_steps(env, policy, tasks, SYSTEM, sampled=2, seed=4)
    assert [s.action_text for i, s in enumerate(other) if i % 4 >= 2] != sampled
    assert len(judged_steps(env, policy, tasks, SYSTEM)) == 4  # default: reference and greedy only

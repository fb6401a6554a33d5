"""The steps a judge is trained and measured on: per request the reference, the greedy reply and the
sampled ones, in that order, each with the user's own verdict and the wish the complaint names. The
policy here is a scripted stand-in that records what it was asked; the real policy's path is
`mode=sft_judge`."""
from dataclasses import dataclass

from agents.serving.transformers_policy import SamplingConfig
from envs.chat.env import ChatEnv
from trainers.feedback.judge_accuracy import judged_steps


@dataclass
class _Gen:
    text: str


class _ScriptedPolicy:
    """Greedy: a long list; sampled at T 1: a short reply with a question."""

    sampling = SamplingConfig(48, 0.0, 1.0, 512)

    def __init__(self):
        self.calls = []

    def generate(self, convs, sampling=None, seeds=None):
        self.calls.append((len(convs), sampling, seeds))
        if sampling is None:
            return [_Gen("Here is how:\n1. one\n2. two\n3. " + "word " * 30) for _ in convs]
        return [_Gen("Do you have a fan?") for _ in convs]


def test_reference_greedy_then_sampled_replies_with_the_users_verdicts(env_config):
    env = ChatEnv(env_config("chat", "env.persona=brief"), split="test")
    tasks, policy = env.tasks[:2], _ScriptedPolicy()
    steps = judged_steps(env, policy, tasks, "be helpful", sampled=2, seed=3)
    assert len(steps) == 2 * (1 + 1 + 2)
    assert [s.info["step_label"]["satisfied"] for s in steps[:4]] == [True, False, False, False]
    assert steps[0].action_text == env.reference_actions(tasks[0])[0]
    n, hot, seeds = policy.calls[1]
    assert n == 4 and hot.temperature == 1.0 and len(set(seeds)) == 4  # each sampled reply its own seed
    # the named wish is the first unmet want's (the one the complaint is about), not every unmet one
    first = tasks[0].data["requests"][0].first_unmet("Do you have a fan?")
    assert steps[2].next_state.fields["named_wish"] == first.instruction
    assert first.complaint in steps[2].next_state.text and steps[0].next_state.fields["named_wish"] == ""
    assert len(judged_steps(env, _ScriptedPolicy(), tasks, "be helpful")) == 4  # default: reference and greedy

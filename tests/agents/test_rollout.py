"""One episode (agents.rollout.run_episode) against a real env: what the agent sends that no env,
tokenizer or JSON writer can encode is made safe before it reaches them."""
import json

import gymnasium as gym

import nextstate  # noqa: F401  (registers the envs)
from agents.base import ReplayAgent
from agents.rollout import run_episode
from envs.toolcall.env import ToolCallEnvConfig
from nextstate.config import conf_defaults


class EchoingAgent(ReplayAgent):
    """Replays its replies and keeps every prompt it was shown."""

    def __init__(self, replies):
        super().__init__(replies)
        self.seen = []

    def act(self, messages, tools=None):
        self.seen.append([dict(m) for m in messages])
        return super().act(messages, tools)


def test_a_lone_surrogate_in_a_reply_is_an_ordinary_bad_step_not_an_infra_failure():
    cfg = conf_defaults("env", "toolcall", ToolCallEnvConfig)
    env = gym.make("nextstate/ToolCall-v0", config=cfg)
    task = env.unwrapped.tasks[0]
    agent = EchoingAgent(['<tool_call>{"name": "nope\ud800", "arguments": {}}</tool_call>', "I give up \udfff"])
    traj = run_episode(env, agent, task, "")
    env.close()
    assert not traj.infra_failure, traj.infra_reason
    assert "\ufffd" in traj.steps[0].action_text and "\ud800" not in traj.steps[0].action_text
    json.dumps(traj.to_dict(), ensure_ascii=False).encode("utf-8")  # writable as the trajectories file is
    assert all("\ud800" not in m["content"] for m in agent.seen[-1])  # nothing unencodable went back to it


class BrokenPolicyAgent(ReplayAgent):
    def act(self, messages, tools=None):
        raise TypeError("the tokenizer choked on the prompt")


def test_a_policy_that_raises_files_an_infra_episode_and_the_caller_goes_on():
    cfg = conf_defaults("env", "toolcall", ToolCallEnvConfig)
    env = gym.make("nextstate/ToolCall-v0", config=cfg)
    traj = run_episode(env, BrokenPolicyAgent([]), env.unwrapped.tasks[0], "")
    env.close()
    assert traj.infra_failure and traj.infra_reason == "agent: TypeError: the tokenizer choked on the prompt"
    assert "TypeError" in traj.info["infra_traceback"]


def test_the_summary_counts_tampered_timed_out_and_suspicious_episodes_apart():
    from agents.pool import summarize
    from nextstate.types import Trajectory

    trajs = [Trajectory("a", "e", outcome=1.0, success=True),
             Trajectory("b", "e", info={"tampered": ["changed /usr/bin/python3"]}),
             Trajectory("c", "e", info={"verifier_timed_out": True, "test_exit_code": 137}),
             Trajectory("d", "e", info={"suspicious": ["imports _pytest"]}),
             Trajectory("f", "e", infra_failure=True, info={"verifier_timed_out": True})]
    m = summarize(trajs)
    assert (m["n_graded"], m["success_rate"], m["infra_failures"]) == (4, 0.25, 1)
    assert (m["tampered"], m["verifier_timeouts"], m["suspicious"]) == (1, 1, 1)  # infra ones are not counted

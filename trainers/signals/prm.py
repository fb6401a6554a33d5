"""prm: binary RL from a process reward model. Step reward R_t = outcome + step score (the judge's mean
valid vote), standardized per (task group, step index), constant buckets dropped.

`baseline: none` is the paper's personal-agent variant (a conversation has no group of rollouts to
compare): the step score itself is the advantage, no outcome is added, and steps scored 0 are
masked out. Pair it with `judge.aggregate=majority` (conf/experiment/personal_chat.yaml).

`baseline: batch` centres those scores on the update's mean score: where most rollouts fail, the
uncentred votes are mostly -1 and an update is mostly pushes down on what the policy just sampled (on
the terminal suite such updates moved the mass to unrelated commands); centred, the few right steps
weigh as much as the many wrong ones.

`baseline: grpo` adds the step's score to its episode's outcome advantage, normalized in its task group
(GRPO), with no step-wise standardization: the paper's outcome + process reward where every rollout of a
task takes the same steps (stepwise buckets constant, so dropped). A solved episode among failed ones
raises every step of it, a second command included; a group that all failed still pushes its wrong
steps down by their votes.
"""
from __future__ import annotations

import torch

from nextstate.types import Sample, Trajectory
from trainers.advantages import stepwise_standardize
from trainers.signals.config import SignalConfig
from trainers.signals.registry import register
from trainers.signals.steps import JudgedStep, episode_advantages, group_ids
from trainers.signals.token_advantages import step_sample


def prm_step_advantages(steps: list[JudgedStep], trajs: list[Trajectory], baseline: str) -> list[float | None]:
    """Each step's score advantage, None where it is dropped (a constant bucket; with `baseline="none"`
    or `"batch"`, a score of 0, and with `"batch"` a score equal to the mean; with `"grpo"`, a sum of 0)."""
    if not steps:
        return []
    if baseline == "none":
        return [st.score if st.score != 0.0 else None for st in steps]
    if baseline == "batch":
        scored = [st.score for st in steps if st.score != 0.0]
        mean = sum(scored) / len(scored) if scored else 0.0
        return [st.score - mean if st.score != 0.0 and st.score != mean else None for st in steps]
    if baseline == "grpo":
        episode = episode_advantages(trajs)
        sums = [episode[st.traj_index] + st.score for st in steps]
        return [a if a != 0.0 else None for a in sums]
    rewards = torch.tensor([st.outcome + st.score for st in steps])
    adv, keep = stepwise_standardize(rewards, group_ids([st.group for st in steps]),
                                     torch.tensor([st.step_index for st in steps]))
    return [a if k else None for a, k in zip(adv.tolist(), keep.tolist())]


@register("prm", needs_judge=True, needs_hints=False)
def prm_samples(cfg: SignalConfig, steps: list[JudgedStep], trajs: list[Trajectory]) -> list[Sample]:
    advs = prm_step_advantages(steps, trajs, cfg.baseline)
    samples = (step_sample(cfg, st, a, hinted=False) for st, a in zip(steps, advs))
    return [s for s in samples if s is not None]

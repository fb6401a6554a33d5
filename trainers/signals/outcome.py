"""outcome: GRPO, the usual agentic RL baseline. One outcome per trajectory, normalized within its task
group, on every step of it; no judge, no hint."""
from __future__ import annotations

from nextstate.types import Sample, Trajectory
from trainers.signals.config import SignalConfig
from trainers.signals.registry import register
from trainers.signals.steps import JudgedStep, episode_advantages, to_sample


@register("outcome", needs_judge=False, needs_hints=False)
def outcome_samples(cfg: SignalConfig, steps: list[JudgedStep], trajs: list[Trajectory]) -> list[Sample]:
    by_traj = episode_advantages(trajs)
    return [to_sample(st, [by_traj[st.traj_index]] * len(st.response_ids))
            for st in steps if by_traj.get(st.traj_index, 0.0) != 0.0]

"""outcome: GRPO, the usual agentic RL baseline. One outcome per trajectory, normalized within its task
group, on every step of it; no judge, no hint."""
from __future__ import annotations

import torch

from nextstate.types import Sample, Trajectory
from trainers.advantages import grpo_outcome_advantages
from trainers.signals.config import SignalConfig
from trainers.signals.registry import register
from trainers.signals.steps import JudgedStep, group_ids, to_sample


@register("outcome", needs_judge=False, needs_hints=False)
def outcome_samples(cfg: SignalConfig, steps: list[JudgedStep], trajs: list[Trajectory]) -> list[Sample]:
    kept = [i for i, t in enumerate(trajs) if not t.infra_failure]
    if not kept:
        return []
    adv = grpo_outcome_advantages(torch.tensor([trajs[i].outcome for i in kept], dtype=torch.float32),
                                  group_ids([trajs[i].task_id for i in kept]))
    by_traj = dict(zip(kept, adv.tolist()))
    return [to_sample(st, [by_traj[st.traj_index]] * len(st.response_ids))
            for st in steps if by_traj.get(st.traj_index, 0.0) != 0.0]

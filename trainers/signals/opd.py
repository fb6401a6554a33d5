"""opd: hindsight-guided on-policy distillation. A_t = log p_teacher(a_t | s + hint) - log p_old(a_t | s);
steps without a hint are dropped.

`opd_topk: K` is the paper's top-K variant: a hinted sample carries the teacher's K most likely tokens
at each position, and the update adds w_opd times the reverse KL to that distribution (top-1 can only
push a sampled token up or down; top-K pulls the student toward what the hinted teacher would have
said). `opd_positions: N` keeps the OPD term on the reply's first N tokens only, for a hint that says
how a reply should open.
"""
from __future__ import annotations

from nextstate.types import Sample, Trajectory
from trainers.signals.config import SignalConfig
from trainers.signals.registry import register
from trainers.signals.steps import JudgedStep
from trainers.signals.token_advantages import step_sample


@register("opd", needs_judge=False, needs_hints=True)
def opd_samples(cfg: SignalConfig, steps: list[JudgedStep], trajs: list[Trajectory]) -> list[Sample]:
    samples = (step_sample(cfg, st, None, hinted=True) for st in steps)
    return [s for s in samples if s is not None]

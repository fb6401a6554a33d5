"""prm_opd: both signals, the paper's best. A = w_rl * (prm's step advantage) + w_opd * (log p_T - log p_old);
a step with a hint only is OPD only, with a score only RL only, with neither dropped."""
from __future__ import annotations

from nextstate.types import Sample, Trajectory
from trainers.signals.config import SignalConfig
from trainers.signals.prm import prm_step_advantages
from trainers.signals.registry import register
from trainers.signals.steps import JudgedStep
from trainers.signals.token_advantages import step_sample


@register("prm_opd", needs_judge=True, needs_hints=True)
def prm_opd_samples(cfg: SignalConfig, steps: list[JudgedStep], trajs: list[Trajectory]) -> list[Sample]:
    advs = prm_step_advantages(steps, trajs, cfg.baseline)
    samples = (step_sample(cfg, st, a, hinted=True) for st, a in zip(steps, advs))
    return [s for s in samples if s is not None]

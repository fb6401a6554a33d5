"""prm_peered: prm with every step advantage measured against peers. As prm (R_t = outcome + step
score, z-scored per (task group, step index)), except that a step no other rollout of its task reached
(a bucket of one) is dropped instead of kept raw.

Why a variant: the paper keeps single buckets raw, so a long episode's deep steps carry uncentred
rewards in [-1, 2] while every other step's advantages sum to 0 in their bucket. On the templated
tool-call suite most deep steps are calls, and prm drifts toward calling again where it should answer
(results/general/README.md); this signal tests whether the uncentred part is what moves it.
"""
from __future__ import annotations

from collections import Counter

from nextstate.types import Sample, Trajectory
from trainers.signals.config import SignalConfig
from trainers.signals.prm import prm_step_advantages
from trainers.signals.registry import register
from trainers.signals.steps import JudgedStep
from trainers.signals.token_advantages import step_sample


@register("prm_peered", needs_judge=True, needs_hints=False)
def prm_peered_samples(cfg: SignalConfig, steps: list[JudgedStep], trajs: list[Trajectory]) -> list[Sample]:
    peers = Counter((st.group, st.step_index) for st in steps)
    advs = prm_step_advantages(steps, trajs, cfg.baseline)
    samples = (step_sample(cfg, st, a if peers[st.group, st.step_index] > 1 else None, hinted=False)
               for st, a in zip(steps, advs))
    return [s for s in samples if s is not None]

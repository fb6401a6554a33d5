"""The typed `signal` config (conf/signal/, defaults in _base.yaml). Its name picks the registered
signal; the other fields are that signal's weights and variants."""
from __future__ import annotations

from dataclasses import dataclass

from nextstate.types import Sample, Trajectory
from trainers.signals.registry import Signal, get_signal
from trainers.signals.steps import JudgedStep


@dataclass
class SignalConfig:
    name: str  # a registered signal: outcome | prm | opd | prm_opd | ...
    w_rl: float  # weight of the step score's advantage
    w_opd: float  # weight of the OPD term
    baseline: str  # stepwise (general agents) | none (personal agents) | batch | grpo: conf/signal/_base.yaml
    opd_topk: int  # 0: top-1 OPD (the sampled token's log p_T - log p_old); K: reverse KL to the teacher's top K
    opd_positions: int = 0  # N > 0: the OPD term on the reply's first N tokens only; 0: on every token

    def __post_init__(self):
        get_signal(self.name)  # an unknown name is refused here, before a run starts
        if self.baseline not in ("stepwise", "none", "batch", "grpo"):
            raise ValueError(f"signal.baseline must be stepwise, none, batch or grpo, got {self.baseline!r}")
        if self.opd_topk < 0:
            raise ValueError(f"signal.opd_topk must be 0 (top-1 OPD) or a K > 0, got {self.opd_topk}")
        if self.opd_positions < 0:
            raise ValueError(f"signal.opd_positions must be 0 (every token) or an N > 0, got {self.opd_positions}")

    @property
    def signal(self) -> Signal:
        return get_signal(self.name)

    @property
    def needs_judge(self) -> bool:
        return self.signal.needs_judge

    @property
    def needs_hints(self) -> bool:
        return self.signal.needs_hints


def build_samples(cfg: SignalConfig, steps: list[JudgedStep], trajs: list[Trajectory]) -> list[Sample]:
    """The training samples of a batch under the configured signal."""
    return cfg.signal.build(cfg, steps, trajs)

"""The learning signals: registered plain functions that turn judged trajectories into `Sample`s with
per-token advantages (registry.py). They read only the types (`Trajectory`, `Step`, `Judgement`),
never an env. outcome.py, prm.py, opd.py and prm_opd.py are the paper's four."""
from trainers.signals.config import SignalConfig, build_samples
from trainers.signals.registry import Signal, get_signal, register, signals
from trainers.signals.steps import JudgedStep, collect_steps

__all__ = ["JudgedStep", "Signal", "SignalConfig", "build_samples", "collect_steps", "get_signal", "register",
           "signals"]

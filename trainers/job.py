"""A run's whole config, typed: what every mode and every Ray role reads. The app builds it once from
the composed Hydra config (harness/job.py), each section validated into its own class; below the app
nothing reads a config node. Plain and picklable, so a Ray actor is built from it as the driver is."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents.serving.backend import BackendConfig
from envs.sandbox import SandboxConfig
from nextstate.config import EnvConfig, ModelConfig, PathsConfig

if TYPE_CHECKING:  # the training sections' classes pull in torch and Ray: not for mode=eval
    from trainers.feedback.model_judge import HintConfig, JudgeConfig, NextStateHintConfig
    from trainers.feedback.oracle_judge import GivenHintConfig, OracleJudgeConfig
    from trainers.ray_runtime import RayConfig
    from trainers.signals import SignalConfig


@dataclass(frozen=True)
class Job:
    seed: int
    parallel: int  # episodes at a time, each its own sandbox
    progress: bool
    split: str  # mode=eval's split: train | test | all
    limit: int | None  # mode=eval's first N tasks
    exclude_tags: list[str] | None  # tasks with any of these tags are dropped from every split
    paths: PathsConfig
    env: EnvConfig  # the env kind's own class (envs.ENVS)
    sandbox: SandboxConfig
    agent: dict  # conf/agent/<name>.yaml resolved: its `_target_` builds the agent (agents/factory.py)
    model: ModelConfig
    backend: BackendConfig
    mode: Any  # the mode's own class (TrainConfig, AsyncTrainConfig, ProxyConfig, SFTConfig, ...)
    # the training sections; None for mode=eval
    signal: SignalConfig | None = None
    judge: JudgeConfig | OracleJudgeConfig | None = None  # the judge kind's own class (trainers.feedback.registry)
    hints: HintConfig | NextStateHintConfig | GivenHintConfig | None = None
    ray: RayConfig | None = None

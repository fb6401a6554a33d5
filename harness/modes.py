"""What each `mode=<name>` runs (harness/run.py's table): its main, the class its config section is
typed into, and what the app does around it."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from trainers.job import Job


@dataclass(frozen=True)
class Mode:
    """What `mode=<name>` runs: `main(job, run_dir) -> metrics` and the class its `mode:` section is
    typed into, both imported when the mode runs (training pulls in torch), and what the app does
    around it."""

    main: str  # "module:function"
    config: str  # "module:Class" of conf/mode/<name>.yaml
    finishes: bool  # writes metrics.json at the end: a finished run dir is returned as it is
    sweep_plot: bool  # a point of a Hydra sweep's success-vs-samples plot
    trains: bool = True  # reads the signal, judge, hints and Ray sections

    def load(self) -> tuple[Callable[[Job, Path], dict], type]:
        (module, name), (config_module, config_name) = self.main.split(":"), self.config.split(":")
        return (getattr(importlib.import_module(module), name),
                getattr(importlib.import_module(config_module), config_name))


MODES = {
    "eval": Mode("harness.eval_run:eval_main", "harness.eval_run:EvalConfig", finishes=True, sweep_plot=False,
                 trains=False),
    "train": Mode("trainers.sync:train_main", "trainers.setup:TrainConfig", finishes=True, sweep_plot=True),
    "async": Mode("trainers.async_train:async_main", "trainers.async_train:AsyncTrainConfig", finishes=True,
                  sweep_plot=True),
    "proxy": Mode("trainers.proxy.run:proxy_main", "trainers.proxy.server:ProxyConfig", finishes=False,
                  sweep_plot=False),
    "sft": Mode("trainers.sft_run:sft_main", "trainers.sft:SFTConfig", finishes=False, sweep_plot=False),
    "sft_judge": Mode("trainers.sft_judge:sft_judge_main", "trainers.sft_judge:SFTJudgeConfig", finishes=False,
                      sweep_plot=False),
}

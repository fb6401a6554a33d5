"""`python -m harness.run`: the Hydra entry point. Public keys: env=, agent=, split=, limit=, seed=,
mode=eval|train|async|proxy|sft, resume=<run_dir>, parallel=N."""
from __future__ import annotations

import os
import shutil
import signal
import sys
import traceback
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

import envs  # noqa: F401  (registers the environments)
from envs.sandbox import docker_client, reap_orphans
from harness.job import job_of
from harness.modes import MODES
from harness.reports.plots import write_sweep_plot
from harness.resume import (
    already_finished,
    check_resumable,
    masked,
    recorded_config,
    redact_secrets,
    refuse_pickled_secrets,
    resume_command,
    secrets_of,
)
from harness.run_log import tee_output
from nextstate.atomic import write_text_atomic
from nextstate.config import REPO_ROOT, ConfigError, run_config, typed, unknown_root_keys
from nextstate.leaderboard import file_pending_row
from trainers.infra_guard import InfrastructureDown


def _terminate_cleanly(signum, frame):  # SIGTERM -> the same cleanup path as Ctrl-C
    raise KeyboardInterrupt(f"signal {signum}")


def run_dir_of(cfg: DictConfig) -> Path:
    """The run's dir: the one being resumed, or Hydra's new one."""
    return Path(cfg.get("resume") or HydraConfig.get().runtime.output_dir)


def _plotting_sweep(metrics: dict) -> dict:
    """In a Hydra multirun, redraw the sweep's success-vs-samples plot from every finished job."""
    try:
        hc = HydraConfig.get()
    except ValueError:
        return metrics
    if hc.mode is not None and hc.mode.name == "MULTIRUN":
        path = write_sweep_plot(Path(hc.sweep.dir))
        print(f"[nextstate] sweep plot: {path}")
    return metrics


def hide_library_bars() -> None:
    """`progress=false` hides the libraries' own bars (transformers' "Loading weights") as well, here and in
    the servers this run starts (they inherit the environment): a run's log keeps its own lines only."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when transformers is imported
    if "transformers" in sys.modules:
        from transformers.utils import logging

        logging.disable_progress_bar()


def main(cfg: DictConfig) -> dict:
    signal.signal(signal.SIGTERM, _terminate_cleanly)
    redact_secrets(cfg, run_dir_of(cfg))  # first: Hydra wrote the command's record, mode.api_key=<key> and all
    unknown = unknown_root_keys(list(HydraConfig.get().overrides.task))
    if unknown:
        raise SystemExit(f"+{unknown[0]}: no such key (the top-level keys are those of conf/config.yaml and "
                         f"the config groups, the dirs of conf/)")
    if not run_config(cfg).progress:
        hide_library_bars()
    from omegaconf.errors import ConfigKeyError

    from trainers.signals import SignalConfig, signals

    try:  # the name picks what a run trains with and how it is filed: nothing may make them disagree
        typed(cfg.signal, SignalConfig)
    except ConfigKeyError as e:
        raise SystemExit(f"signal.{e.key}: no such setting (conf/signal/_base.yaml lists them; the signal's name "
                         f"picks what it trains with: signal={'|'.join(signals())})") from None
    except ValueError as e:
        raise SystemExit(str(e).splitlines()[0]) from None
    mode = MODES.get(cfg.mode.name)
    if mode is None:
        raise SystemExit(f"mode={cfg.mode.name} is not available ({' | '.join(MODES)})")
    if cfg.limit is not None and cfg.mode.name != "eval":  # training reads its own eval_limit
        raise SystemExit(f"limit={cfg.limit} selects the tasks of mode=eval; use mode.eval_limit={cfg.limit}")
    run_dir = run_dir_of(cfg)
    check_resumable(cfg, run_dir)
    if "_target_" not in cfg.agent:
        raise SystemExit(f"agent={cfg.agent.name} names no `_target_` class (conf/agent/ has one per agent)")
    try:
        removed = reap_orphans(docker_client())
    except Exception as e:  # Docker-free envs can run without a daemon
        removed = []
        print(f"[nextstate] Docker not reachable ({e}); containers cannot be reaped", file=sys.stderr)
    if removed:
        print(f"[nextstate] removed {len(removed)} container(s) left by dead runs: {sorted(set(removed))}")
    if file_pending_row(run_dir):  # a run killed between its metrics.json and its leaderboard row
        print(f"[nextstate] {run_dir}: filed the leaderboard row the earlier run left pending")
    done = already_finished(cfg, run_dir) if mode.finishes else None
    if done is not None:
        print(f"[nextstate] {run_dir} already finished (delete its metrics.json to run it again)")
        return done
    write_text_atomic(run_dir / "config.yaml", OmegaConf.to_yaml(recorded_config(cfg)))
    with tee_output(run_dir / "run.log"):
        print(f"[nextstate] mode={cfg.mode.name} env={cfg.env.name} agent={cfg.agent.name} seed={cfg.seed}: "
              f"{run_dir}", flush=True)  # the first line, before the model or the sandboxes start
        main_of_mode, mode_config = mode.load()
        metrics = main_of_mode(job_of(cfg, mode_config, trains=mode.trains), run_dir)
    return _plotting_sweep(metrics) if mode.sweep_plot else metrics


def _drop_unstarted_run_dir(cfg: DictConfig, unstarted: set[str]) -> None:
    """A run refused before it started leaves no run dir behind: only the `unstarted` files are there
    (Hydra's record, the resolved config), no episode. A run stopped after its start (a taken port)
    keeps its dir, and a resumed run's dir is never touched."""
    if cfg.get("resume"):
        return
    run_dir = run_dir_of(cfg)
    if run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= unstarted:
        shutil.rmtree(run_dir, ignore_errors=True)


@hydra.main(config_path=str(REPO_ROOT / "conf"), config_name="config", version_base=None)
def cli(cfg: DictConfig) -> None:
    try:
        main(cfg)
    except ConfigError as e:  # a value that names nothing: the run never had anything to start on
        _drop_unstarted_run_dir(cfg, {".hydra", "run.log", "config.yaml"})
        sys.exit(f"[nextstate] {e}")
    except InfrastructureDown as e:  # its checkpoint stays before the batch that never ran: resuming redoes it
        command = resume_command(HydraConfig.get().overrides.task, run_dir_of(cfg))
        sys.exit(f"{e.code}\n[nextstate] once it is back, resume with: {command}")
    except SystemExit:  # refused by main's own checks (no config.yaml yet), or stopped later (kept: its record)
        _drop_unstarted_run_dir(cfg, {".hydra", "run.log"})
        raise
    except KeyboardInterrupt:
        command = resume_command(HydraConfig.get().overrides.task, run_dir_of(cfg))
        print(f"\n[nextstate] interrupted: containers removed; resume with: {command}", file=sys.stderr)
        sys.exit(130)
    except Exception:
        if not secrets_of(cfg):
            raise  # Hydra reports it
        print(masked(traceback.format_exc(), cfg), file=sys.stderr)  # Hydra's report quotes mode.api_key=<key>
        sys.exit(1)


if __name__ == "__main__":
    refuse_pickled_secrets(sys.argv[1:])
    cli()

"""A run's training curves (trainers/train_plot.py): drawn from its train_log.jsonl, with the panels
its mode logs (async and proxy runs add staleness and waiting), redrawn as the log grows."""
import json
import subprocess
import sys
from pathlib import Path

from PIL import Image

from tests.paths import ROOT
from trainers.train_plot import panels_for, write_train_plot

SYNC = [{"iteration": i, "loss": 0.5 - 0.1 * i, "pg_loss": 0.4, "kl": 0.0, "samples": 8, "hints_accepted": 3,
         "judge_votes": 24, "rollout_success": 0.25 * i, "clip_fraction": 0.1, "approx_kl": 0.01} for i in range(3)]
ASYNC = [{**r, "staleness_mean": 0.5, "staleness_max": 1, "dropped_stale": 0, "trainer_wait_s": 3.0, "update_s": 9.0,
          "publish_s": 0.4} for r in SYNC]


def _log(run_dir: Path, records) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_each_mode_gets_the_panels_it_logs():
    assert [t for t, _ in panels_for(SYNC)] == ["loss", "success", "per update", "PPO health"]
    assert [t for t, _ in panels_for(ASYNC)] == ["loss", "success", "per update", "PPO health", "async", "seconds"]
    proxy = [{k: v for k, v in r.items() if k != "rollout_success"} for r in ASYNC]  # no env, no success
    assert "success" not in [t for t, _ in panels_for(proxy)]
    assert dict(panels_for([{"iteration": 0, "loss": 0.1, "eval_success": None}]))["loss"] == ["loss"]


def test_the_plot_is_written_and_grows_with_the_log(tmp_path):
    assert write_train_plot(tmp_path / "empty") is None  # nothing to draw before the first update
    _log(tmp_path / "sync", SYNC)
    small = Image.open(write_train_plot(tmp_path / "sync"))
    _log(tmp_path / "async", ASYNC)
    tall = Image.open(write_train_plot(tmp_path / "async"))
    assert small.size[0] == tall.size[0] and tall.size[1] > small.size[1]  # a third row of panels
    assert not list((tmp_path / "async").glob(".*tmp*"))  # written atomically
    p = subprocess.run([sys.executable, "-m", "trainers.train_plot", str(tmp_path / "sync")], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip().endswith("train_curves.png")

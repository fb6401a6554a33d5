"""`python -m harness.regress`: tolerance semantics, baselines on disk, and the CLI end to end on a
small real config (oracle and noop as a Hydra joblib multirun against real Docker): it records
baselines with --update, passes against them, fails with a readable table when one moves, and refuses
to record a violated validity expectation."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.regress.baselines import Tolerance, compare, read_baselines, tolerance_for, write_baselines
from harness.regress.checks import CheckRun, loss_drop
from nextstate.leaderboard import read_rows
from tests.paths import ROOT


def test_tolerance_kinds_and_not_available_values():
    exact, band, equals, above = (Tolerance.parse(s, "t")
                                  for s in ("exact", {"band": 0.25}, {"equals": 1}, {"above": 0}))
    assert exact.holds(2.0, 2.0) and not exact.holds(2.0, 2.5)
    assert band.holds(0.5, 0.75) and band.holds(0.5, 0.25) and not band.holds(0.5, 0.8)
    assert equals.holds(None, 1.0) and equals.holds(0.0, 1.0) and not equals.holds(1.0, 0.75)
    assert above.holds(None, 0.01) and not above.holds(0.5, 0.0) and not above.holds(0.5, -0.1)
    assert not band.holds(None, 0.5)  # a number where the baseline had none: no baseline to compare with
    assert band.holds(None, None) and above.holds(None, None)  # N/A then and now (e.g. no update happened)
    assert not above.holds(0.1, None) and not exact.holds(3.0, None)  # lost a value
    assert not equals.holds(None, None)
    # what --update insists on, whatever the old baseline: absolute expectations only
    assert above.holds_regardless(None) and not above.holds_regardless(-0.1) and not equals.holds_regardless(None)
    assert not band.holds_regardless(0.5)
    with pytest.raises(ValueError, match="tolerance"):
        Tolerance.parse({"within": 1}, "t")


def _cfg(**env_tol):
    return {"envs": {"terminal": {"tolerances": env_tol}},
            "tolerances": {"train_smoke": {"train_samples": {"band": 1}, "loss_drop": {"above": 0}},
                           "validity": {"oracle.success_rate": {"equals": 1}}}}


def test_tolerance_lookup_env_first_then_full_name_then_suffix():
    assert tolerance_for(_cfg(), "terminal", "train_smoke", "prm.train_samples") == Tolerance("band", 1)
    cfg = _cfg(train_smoke={"prm.train_samples": {"band": 3}, "train_samples": {"band": 2}})
    assert tolerance_for(cfg, "terminal", "train_smoke", "prm.train_samples") == Tolerance("band", 3)
    assert tolerance_for(cfg, "terminal", "train_smoke", "opd.train_samples") == Tolerance("band", 2)
    assert tolerance_for(_cfg(), "terminal", "validity", "noop.success_rate") is None


def test_baselines_round_trip_keep_other_checks_and_list_every_value(tmp_path):
    path = tmp_path / "terminal.csv"
    runs = [CheckRun("terminal", "train_smoke", ["a=1"], {"prm.train_samples": s, "prm.loss_drop": d}, 1.0)
            for s, d in ((4, 0.5), (6, None))]
    old = {("validity", "oracle.n_tasks"): {"check": "validity", "metric": "oracle.n_tasks", "baseline": "8"}}
    write_baselines(path, {"train_smoke": runs}, old)
    got = read_baselines(path)
    assert got[("validity", "oracle.n_tasks")]["value"] == 8.0  # a check not run this time is kept
    assert got[("train_smoke", "prm.train_samples")]["value"] == 5.0
    assert got[("train_smoke", "prm.train_samples")]["values"] == "4;6"
    assert got[("train_smoke", "prm.loss_drop")]["value"] is None  # N/A in one run: no mean
    assert got[("train_smoke", "prm.loss_drop")]["overrides"] == "a=1"


def test_compare_names_what_is_wrong():
    cfg = _cfg()
    base = {("train_smoke", "prm.train_samples"): {"value": 4.0, "overrides": "a=1"},
            ("train_smoke", "prm.loss_drop"): {"value": 0.2, "overrides": "a=1"}}
    def check(overrides, values, error=None):
        return compare(cfg, CheckRun("terminal", "train_smoke", overrides, values, 1, error=error), base, Path("b.csv"))

    ok = check(["a=1"], {"prm.train_samples": 5, "prm.loss_drop": 0.1})
    assert all(r.ok for r in ok)
    bad = check(["a=1"], {"prm.train_samples": 6, "prm.loss_drop": -0.01})
    assert [r.ok for r in bad] == [False, False]
    moved = check(["a=2"], {"prm.train_samples": 4, "prm.loss_drop": 0.1})
    assert not moved[0].ok and "other settings" in moved[0].note
    new = check(["a=1"], {"opd.train_samples": 4})
    assert not new[0].ok and "--update" in new[0].note
    failed = check(["a=1"], {}, error="exit 1; log: x")
    assert len(failed) == 1 and not failed[0].ok and failed[0].metric == "(run)"


def test_loss_drop_is_the_smallest_drop_over_the_updates():
    log = [{"updates": 1, "loss_first_epoch": 0.1, "loss_last_epoch": -0.2},
           {"updates": 0, "loss": 0.0},
           {"updates": 2, "loss_first_epoch": 0.0, "loss_last_epoch": -0.05}]
    assert loss_drop(log) == pytest.approx(0.05)
    assert loss_drop([{"updates": 0, "loss": 0.0}]) is None


def test_the_package_runs_as_a_module():
    p = subprocess.run([sys.executable, "-m", "harness.regress", "--repeat", "2"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and "--repeat goes with --update" in p.stderr and "python -m harness.regress" in p.stderr


def _regress(tmp_path, cfg: dict, *args):
    conf = tmp_path / "regress.yaml"
    conf.write_text(yaml.safe_dump(cfg))
    return subprocess.run([sys.executable, "-m", "harness.regress", "--config", str(conf),
                           "--workdir", str(tmp_path / f"work{len(list(tmp_path.glob('work*')))}"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, COLUMNS="200"))


@pytest.mark.slow
@pytest.mark.docker
def test_cli_update_pass_regression_and_refusal(tmp_path):
    cfg = yaml.safe_load((ROOT / "conf/regress/default.yaml").read_text())
    cfg["baselines_dir"] = str(tmp_path / "baselines")
    cfg["envs"] = {"terminal": {"validity": {"overrides": ["split=test", "limit=2"]}}}
    p = _regress(tmp_path, cfg, "--update")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    base = read_baselines(tmp_path / "baselines" / "terminal.csv")
    assert base[("validity", "oracle.success_rate")]["value"] == 1.0
    assert base[("validity", "noop.success_rate")]["value"] == 0.0
    assert base[("validity", "oracle.n_tasks")]["value"] == 2.0
    # the two jobs of the joblib multirun appended to one leaderboard: both rows landed
    _, rows = read_rows(tmp_path / "work0" / "terminal" / "validity" / "leaderboard.csv")
    assert sorted(r["agent"] for r in rows) == ["noop", "oracle"]

    csv_path = tmp_path / "baselines" / "terminal.csv"
    csv_path.write_text(csv_path.read_text().replace("validity,oracle.n_tasks,2,", "validity,oracle.n_tasks,3,"))
    p = _regress(tmp_path, cfg)
    assert p.returncode == 1, p.stdout[-3000:]
    line = next(ln for ln in p.stdout.splitlines() if "oracle.n_tasks" in ln)
    assert "3" in line and "2" in line and "exact" in line and "REGRESSION" in line
    assert "noop.success_rate" in p.stdout and p.stdout.count("REGRESSION") == 1

    before = csv_path.read_text()
    cfg["tolerances"]["validity"]["noop.success_rate"] = {"equals": 1.0}  # an expectation noop violates
    p = _regress(tmp_path, cfg, "--update")
    assert p.returncode == 1 and "NOT updating" in p.stdout and "noop.success_rate" in p.stdout
    assert csv_path.read_text() == before


@pytest.mark.slow
@pytest.mark.model
def test_update_reports_the_loss_of_its_own_batch_before_and_after(cfg):
    """What `loss_drop` reads: with 2 epochs of one minibatch, the first pass is at the rollout
    weights (ratio 1, loss = -mean advantage) and the last pass is after one AdamW step."""
    import torch
    from transformers import AutoModelForCausalLM

    from agents.factory import model_path
    from nextstate.config import ModelConfig, typed
    from nextstate.types import Sample
    from trainers.update import UpdateConfig, ppo_update, sequence_logprobs

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_path(typed(cfg.model, ModelConfig), cfg.paths.cache_dir))
    samples = [Sample([1, 2, 3, 4], [5, 6, 7], [], [1.0, 1.0, 1.0]), Sample([1, 9, 3], [8, 6], [], [-0.5, -0.5])]
    with torch.no_grad():
        lp, mask = sequence_logprobs(model, samples)
    for s, row, m in zip(samples, lp, mask):
        s.old_logprobs = row[m].tolist()  # on-policy: the logprobs the rollout would have recorded
    stats = ppo_update(model, torch.optim.AdamW(model.parameters(), lr=1e-5), samples,
                       UpdateConfig(1e-5, 0.0, 1.0, 2, 2, 0.2, 0.28, 0.0, 1.0))
    assert stats["updates"] == 2
    assert stats["loss_first_epoch"] == pytest.approx(-(1.0 - 0.5) / 2, abs=1e-4)
    assert stats["loss_last_epoch"] < stats["loss_first_epoch"] - 1e-4

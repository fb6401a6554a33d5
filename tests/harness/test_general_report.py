"""The general-agent report: scores.csv rows from terminal/GUI/tool-call training runs (persona runs
left out), the table per env with the Δ paired by seed against outcome, and the rows read back."""
import json
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from harness.reports.general import KL_ARM_LR, KL_ARM_UPDATE, collect, general_signal_name, main, write
from nextstate.config import compose


def _run(root: Path, name: str, env: str, signal: str, seed: int, scores: dict[int, float],
         mode: dict | None = None) -> Path:
    d = root / name
    (d / ".hydra").mkdir(parents=True)
    cfg = {"seed": seed, "env": {"name": env, "suite": "templated"}, "mode": {"name": "train", **(mode or {})},
           "signal": {"name": signal, "opd_topk": 0},
           "judge": {"name": "oracle"}, "hints": {"name": "oracle"}}
    (d / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    last = max(scores)
    log = [{"iteration": u - 1, "eval_success": s} for u, s in scores.items() if 0 < u < last]
    (d / "metrics.json").write_text(json.dumps({"iterations": last, "success_before": scores[0],
                                                "success_after": scores[last], "train_log": log}))
    return d


def test_rows_table_and_paired_delta(tmp_path):
    for seed, (out, prm) in enumerate([(0.30, 0.40), (0.20, 0.35), (0.25, 0.30)]):
        _run(tmp_path, f"o{seed}", "toolcall", "outcome", seed, {0: 0.2, 8: 0.2, 16: out})
        _run(tmp_path, f"p{seed}", "toolcall", "prm", seed, {0: 0.2, 8: 0.3, 16: prm})
    chat = _run(tmp_path, "chat", "chat", "prm", 0, {0: 0.0, 16: 1.0})
    yaml.safe_dump({"env": {"name": "chat", "persona": "brief"}}, (chat / ".hydra" / "config.yaml").open("w"))
    rows = collect([tmp_path])
    assert {r["env"] for r in rows} == {"toolcall"} and len(rows) == 18
    md = write(rows, tmp_path / "out")
    prm_row = next(line for line in md.splitlines() if line.startswith("| toolcall | prm |"))
    assert prm_row.endswith("| 0.10 ± 0.12 (n=3) |")  # Δ @16: mean of (0.10, 0.15, 0.05), its 95% CI
    assert (tmp_path / "out" / "curves.png").stat().st_size > 0
    again = collect([tmp_path / "out" / "scores.csv"])
    assert sorted((r["signal"], r["seed"], r["updates"], r["score"]) for r in again) == sorted(
        (r["signal"], r["seed"], r["updates"], r["score"]) for r in rows)
    both = collect([tmp_path, tmp_path / "out" / "scores.csv"])  # the dirs read again replace their rows
    assert sorted((r["signal"], r["seed"], r["updates"]) for r in both) == sorted(
        (r["signal"], r["seed"], r["updates"]) for r in rows)


def test_an_arm_is_paired_with_outcome_of_the_same_arm_where_one_ran(tmp_path):
    """prm+kl0.2 against outcome+kl0.2 (the same update, the signal alone differing), named in its cell;
    plain prm still against plain outcome; an arm without its own outcome against plain outcome."""
    kl = {"kl_coef": 0.2}
    for seed in (0, 1):
        _run(tmp_path, f"o{seed}", "toolcall", "outcome", seed, {0: 0.2, 16: 0.30})
        _run(tmp_path, f"p{seed}", "toolcall", "prm", seed, {0: 0.2, 16: 0.40})
        _run(tmp_path, f"ok{seed}", "toolcall", "outcome", seed, {0: 0.2, 16: 0.50}, kl)
        _run(tmp_path, f"pk{seed}", "toolcall", "prm", seed, {0: 0.2, 16: 0.45 + 0.1 * seed}, kl)
        _run(tmp_path, f"ps{seed}", "toolcall", "prm", seed, {0: 0.2, 16: 0.60}, {"train_stop_token": True})
    md = write(collect([tmp_path]), tmp_path / "out")
    rows = {line.split(" | ")[1]: line for line in md.splitlines() if line.startswith("| toolcall |")}
    assert rows["prm"].endswith("| 0.10 ± 0.00 (n=2) |")
    assert rows["prm+kl0.2"].endswith("| 0.00 ± 0.64 (n=2) vs outcome+kl0.2 |")  # (-0.05, +0.05)
    assert rows["prm+stop"].endswith("| 0.30 ± 0.00 (n=2) |")
    assert rows["outcome+kl0.2"].endswith("| - |")


def test_the_table_says_where_an_updates_seconds_go(tmp_path):
    from harness.reports.general import phase_table

    run = _run(tmp_path, "0", "toolcall", "prm", 0, {0: 0.5, 4: 0.6})
    log = [{"samples": 19, "rollout_s": r, "update_s": u, "teacher_s": 0.0, "publish_s": 1.0,
            "judge_s": 2.0, "signal_s": f}
           for r, u, f in [(20.0, 30.0, 2.5), (24.0, 10.0, 9.0), (100.0, 26.0, 5.0)]]
    log[1]["eval_s"] = 200.0
    (run / "train_log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in log))
    md = phase_table(collect([tmp_path]))
    # medians: rollout 24, judge 2, the rest of the feedback phase (KL reference) 3, update 26, publish 1
    # -> 56 s an update; eval 200 s
    assert "| toolcall | prm | oracle | 3 | 19 | 24.0 | 2.0 | 0.0 | 0.0 | 3.0 | 26.0 | 1.0 | 56.0 | 200 |" in md


def test_votes_as_the_advantage_is_its_own_arm(tmp_path):
    """prm with `baseline: none` (the vote is the advantage, no outcome term) is not the paper's prm:
    it is filed as `prm_votes` (centred on the batch: `prm_centered`; added to the episode's GRPO outcome
    advantage: `prm_grpo`), so it is never paired or averaged
    with stepwise prm runs."""
    stepwise = _run(tmp_path, "s", "terminal", "prm", 0, {0: 0.5, 16: 0.5})
    votes = _run(tmp_path, "v", "terminal", "prm", 0, {0: 0.5, 16: 0.7})
    centred = _run(tmp_path, "c", "terminal", "prm", 0, {0: 0.5, 16: 0.6})
    grpo = _run(tmp_path, "g", "terminal", "prm", 0, {0: 0.5, 16: 0.65})
    outcome = _run(tmp_path, "o", "terminal", "outcome", 0, {0: 0.5, 16: 0.5})
    for run, baseline in [(stepwise, "stepwise"), (votes, "none"), (centred, "batch"), (grpo, "grpo"),
                          (outcome, "none")]:
        cfg_file = run / ".hydra" / "config.yaml"
        cfg = yaml.safe_load(cfg_file.read_text())
        cfg["signal"]["baseline"] = baseline
        cfg_file.write_text(yaml.safe_dump(cfg))
    assert {(r["signal"], r["score"]) for r in collect([tmp_path]) if r["updates"] == 16} == {
        ("prm", 0.5), ("prm_votes", 0.7), ("prm_centered", 0.6), ("prm_grpo", 0.65), ("outcome", 0.5)}


def test_a_kl_term_to_the_start_is_its_own_arm(tmp_path):
    """A run with `mode.kl_coef` > 0 (a k3 penalty to the start's weights) is filed as `<signal>+kl<coef>`:
    the same signal and seed without it is another run, not an evaluation seen twice."""
    free = _run(tmp_path, "f", "terminal", "prm", 1, {0: 0.5, 8: 0.43})
    held = _run(tmp_path, "h", "terminal", "prm", 1, {0: 0.5, 8: 0.64})
    for run, kl in [(free, 0.0), (held, 0.2)]:
        cfg_file = run / ".hydra" / "config.yaml"
        cfg = yaml.safe_load(cfg_file.read_text())
        cfg["signal"]["baseline"] = "none"
        cfg["mode"]["kl_coef"] = kl
        cfg_file.write_text(yaml.safe_dump(cfg))
    assert {(r["signal"], r["score"]) for r in collect([tmp_path]) if r["updates"] == 8} == {
        ("prm_votes", 0.43), ("prm_votes+kl0.2", 0.64)}


def test_an_evaluation_with_infra_failures_is_named_beside_the_table(tmp_path):
    """A held-out evaluation whose episodes could not run (scored 0.0) is listed in table.md, so a
    score that fell for an infrastructure reason is not read as the policy's."""
    run = _run(tmp_path, "r", "terminal", "outcome", 0, {0: 0.5, 4: 0.0, 8: 0.5})
    ok = [{"success": True, "infra_failure": False}] * 3
    (run / "eval_before.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ok))
    broken = [{"success": False, "infra_failure": True}] * 2 + [{"success": False, "infra_failure": False}]
    (run / "eval_it4.jsonl").write_text("".join(json.dumps(e) + "\n" for e in broken))
    (run / "eval_after.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ok))
    md = write(collect([tmp_path]), tmp_path / "out")
    listed = [line for line in md.splitlines() if line.startswith("- ")]
    assert listed == [f"- {run} @4: 2 of 3"]


def test_the_kl_experiment_is_the_command_line_the_reported_runs_used():
    # results/general/terminal_8x4's `prm_votes+kl0.2` runs were launched with these overrides; the experiment
    # that `make general-kl` runs must compose to the same config, or its scores are another arm's
    named = compose(["+experiment=general_terminal_kl", "signal=prm_votes"])
    spelled = compose(["+experiment=general_terminal", "signal=prm_votes", "mode.kl_coef=0.2",
                       "mode.tasks_per_iter=8", "mode.micro_batch_tokens=2048"])
    assert OmegaConf.to_container(named) == OmegaConf.to_container(spelled)
    assert (named.mode.kl_coef, named.mode.tasks_per_iter, named.signal.baseline) == (0.2, 8, "none")
    # the `prm_grpo+kl0.2` runs of results/general/terminal_grpo: the same arm, the votes added to the outcome
    grpo = compose(["+experiment=general_terminal_kl", "signal=prm_grpo"])
    assert (grpo.signal.name, grpo.signal.baseline, grpo.mode.kl_coef) == ("prm", "grpo", 0.2)
    assert general_signal_name(OmegaConf.to_container(grpo)) == "prm_grpo+kl0.2"


def test_the_toolcall_kl_experiment_is_the_terminal_arms_update_on_the_toolcall_suite():
    # conf/experiment/general_toolcall_kl.yaml: the tool-call experiment with only the terminal arm's
    # update size, prompt parts and KL term changed, filed under the same arm name
    named = compose(["+experiment=general_toolcall_kl", "signal=prm_grpo"])
    spelled = compose(["+experiment=general_toolcall", "signal=prm_grpo", "mode.kl_coef=0.2",
                       "mode.tasks_per_iter=8", "mode.micro_batch_tokens=2048"])
    assert OmegaConf.to_container(named) == OmegaConf.to_container(spelled)
    assert (named.env.name, named.env.suite, named.parallel) == ("toolcall", "templated", 16)
    assert general_signal_name(OmegaConf.to_container(named)) == "prm_grpo+kl0.2"


def test_the_gui_kl_experiment_is_the_gui_grid_with_the_kl_term_of_the_other_arms():
    # conf/experiment/general_gui_kl.yaml: general_gui already updates 8 x 4 in parts of 2048 tokens; only
    # the KL term to the start is added, so its runs are filed beside the terminal and tool-call arms
    named = compose(["+experiment=general_gui_kl", "signal=prm_grpo"])
    spelled = compose(["+experiment=general_gui", "signal=prm_grpo", "mode.kl_coef=0.2"])
    assert OmegaConf.to_container(named) == OmegaConf.to_container(spelled)
    assert (named.env.name, named.mode.teacher) == ("gui", "frozen")  # the frozen start scores the KL term
    assert general_signal_name(OmegaConf.to_container(named)) == "prm_grpo+kl0.2"
    outcome = compose(["+experiment=general_gui_kl", "signal=outcome"])
    assert general_signal_name(OmegaConf.to_container(outcome)) == "outcome+kl0.2"


def test_the_committed_grids_leave_the_stop_token_out_and_a_run_that_trains_it_is_another_arm():
    # results/general was trained without the reply's stop token in the loss; `make general` must stay
    # that arm, and a run with `mode.train_stop_token=true` must not be filed beside it
    for experiment in ("general_toolcall_kl", "general_terminal_kl", "general_gui", "general_gui_kl",
                       "personalization"):
        assert compose([f"+experiment={experiment}"]).mode.train_stop_token is False
    assert compose(["mode=train"]).mode.train_stop_token is True  # a user's own run trains it
    stop = compose(["+experiment=general_toolcall_kl", "signal=prm_grpo", "mode.train_stop_token=true"])
    assert general_signal_name(OmegaConf.to_container(stop)) == "prm_grpo+kl0.2+stop"


def test_a_kl_arm_at_another_update_size_is_filed_as_its_own_arm():
    # the KL arms are 8 instances x 4 rollouts an update; a run of 12 x 4 must not land in their rows
    for experiment in ("general_toolcall_kl", "general_terminal_kl", "general_gui_kl"):
        mode = compose([f"+experiment={experiment}"]).mode
        assert (mode.tasks_per_iter, mode.group_size) == KL_ARM_UPDATE  # the report's constant is the conf's
    bigger = compose(["+experiment=general_toolcall_kl", "signal=prm_grpo", "mode.train_stop_token=true",
                      "mode.tasks_per_iter=12"])
    assert general_signal_name(OmegaConf.to_container(bigger)) == "prm_grpo+kl0.2+stop+12x4"
    wider = compose(["+experiment=general_terminal_kl", "signal=outcome", "mode.group_size=8"])
    assert general_signal_name(OmegaConf.to_container(wider)) == "outcome+kl0.2+8x8"
    # the plain arms keep their names whatever their size (the 2 x 4 grid is filed as `outcome`, `prm`)
    plain = compose(["+experiment=general_toolcall", "signal=outcome", "mode.tasks_per_iter=4"])
    assert general_signal_name(OmegaConf.to_container(plain)) == "outcome"


def test_a_kl_arm_at_another_learning_rate_or_with_a_warmup_is_filed_as_its_own_arm():
    # the KL arms update at lr 2e-5 (cosine, no warmup); a run at another rate must not land in their rows
    for experiment in ("general_toolcall_kl", "general_terminal_kl", "general_gui_kl"):
        assert compose([f"+experiment={experiment}"]).mode.lr == KL_ARM_LR  # the report's constant is the conf's
    faster = compose(["+experiment=general_toolcall_kl", "signal=prm_grpo", "mode.train_stop_token=true",
                      "mode.lr=4e-5"])
    assert general_signal_name(OmegaConf.to_container(faster)) == "prm_grpo+kl0.2+stop+lr4e-05"
    both = compose(["+experiment=general_toolcall_kl", "signal=outcome", "mode.lr=1e-5", "mode.tasks_per_iter=12"])
    assert general_signal_name(OmegaConf.to_container(both)) == "outcome+kl0.2+12x4+lr1e-05"
    warm = compose(["+experiment=general_toolcall_kl", "signal=prm_grpo", "mode.train_stop_token=true",
                    "mode.lr_warmup_steps=10"])
    assert general_signal_name(OmegaConf.to_container(warm)) == "prm_grpo+kl0.2+stop+warmup10"
    plain = compose(["+experiment=general_toolcall", "signal=outcome", "mode.lr=4e-5", "mode.lr_warmup_steps=10"])
    assert general_signal_name(OmegaConf.to_container(plain)) == "outcome"


def test_the_table_says_how_often_the_judges_minus_one_was_right(tmp_path):
    """Each judged run's negative votes against the step labels: a finished run's from metrics.json, a
    run still going from its checkpoint's (score, label) pairs; outcome reads no judge, no row."""
    done = _run(tmp_path, "done", "terminal", "prm", 0, {0: 0.5, 8: 0.6})
    cfg = yaml.safe_load((done / ".hydra" / "config.yaml").read_text())
    cfg["judge"] = {"name": "model_task", "model": "/runs/judge"}
    (done / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    metrics = json.loads((done / "metrics.json").read_text())
    metrics.update(judge_neg_precision=0.75, judge_neg_recall=0.6, judge_labeled_steps=40)
    (done / "metrics.json").write_text(json.dumps(metrics))
    going = _run(tmp_path, "going", "terminal", "prm", 1, {0: 0.5, 4: 0.55})
    (going / "metrics.json").unlink()
    (going / "checkpoint").mkdir()
    pairs = [[-1.0, {"ok": False}], [-0.3, {"ok": True}], [1.0, {"ok": False}], [1.0, {"ok": True}]]
    (going / "checkpoint" / "state.json").write_text(json.dumps({"iteration": 3, "success_before": 0.5,
                                                                "judge_pairs": pairs}))
    _run(tmp_path, "out0", "terminal", "outcome", 0, {0: 0.5, 8: 0.5})
    md = write(collect([tmp_path]), tmp_path / "out")
    judged = [line for line in md.splitlines() if line.startswith("| terminal | prm")]
    # the checkpoint: TP 1, FP 1, FN 1 -> precision 1/2, recall 1/2 over 4 labelled steps
    assert "| terminal | prm | model (sft) | 0 | 40 | 0.75 | 0.60 |" in judged
    assert "| terminal | prm | oracle | 1 | 4 | 0.50 | 0.50 |" in judged
    assert not [line for line in md.splitlines() if line.startswith("| terminal | outcome | - | 0 |")]


def test_a_report_rebuilt_from_its_scores_csv_keeps_its_seconds_and_judge_rows(tmp_path):
    """Run dirs do not outlive the machine they ran on; a report rebuilt from an earlier scores.csv (plus
    new runs) keeps the earlier runs' seconds by phase and judge accuracy, read from the files written
    beside that scores.csv."""
    runs = tmp_path / "runs"
    run = _run(runs, "0", "toolcall", "prm", 0, {0: 0.5, 4: 0.6})
    log = [{"iteration": i, "samples": 19, "rollout_s": r, "update_s": 30.0, "publish_s": 1.0, "judge_s": 2.0,
            "signal_s": 5.0, **({"eval_s": 200.0} if i == 1 else {})} for i, r in enumerate([20.0, 24.0, 100.0])]
    (run / "train_log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in log))
    metrics = json.loads((run / "metrics.json").read_text())
    metrics.update(judge_neg_precision=0.75, judge_neg_recall=0.6, judge_labeled_steps=40)
    (run / "metrics.json").write_text(json.dumps(metrics))
    first = write(collect([runs]), tmp_path / "first")
    phases = "| toolcall | prm | oracle | 3 | 19 | 24.0 | 2.0 | 0.0 | 0.0 | 3.0 | 30.0 | 1.0 | 60.0 | 200 |"
    judged = "| toolcall | prm | oracle | 0 | 40 | 0.75 | 0.60 |"
    assert phases in first and judged in first

    import shutil
    shutil.rmtree(runs)
    later = _run(tmp_path / "more", "1", "toolcall", "prm", 1, {0: 0.5, 4: 0.7})
    (later / "train_log.jsonl").write_text(json.dumps({"iteration": 0, "samples": 21, "rollout_s": 30.0,
                                                       "update_s": 40.0, "publish_s": 1.0}) + "\n")
    again = write(collect([tmp_path / "first" / "scores.csv", tmp_path / "more"]), tmp_path / "again")
    # the medians now run over the first run's three updates and the new run's one
    assert "| toolcall | prm | oracle | 4 | 19 | 27.0 | 2.0 | 0.0 | 0.0 | 3.0 | 30.0 | 1.0 | 63.0 | 200 |" in again
    assert judged in again
    rebuilt = write(collect([tmp_path / "first" / "scores.csv"]), tmp_path / "rebuilt")
    assert rebuilt == first


def test_a_run_read_again_replaces_its_rows_from_an_earlier_report(tmp_path, capsys):
    """A report committed while a run was going, rebuilt with that run's dir once it has gone further:
    the dir's evaluations replace the report's rows of the same run instead of counting twice. The same
    arm and seed rerun in another dir replaces them too, and says so; two run dirs read together with
    one evaluation in common are still an error."""
    runs = tmp_path / "runs"
    run = _run(runs, "0", "toolcall", "prm", 0, {0: 0.5, 4: 0.6})
    write(collect([runs]), tmp_path / "first")
    (run / "metrics.json").write_text(json.dumps({"iterations": 8, "success_before": 0.5, "success_after": 0.7,
                                                  "train_log": [{"iteration": 3, "eval_success": 0.6}]}))
    rows = collect([tmp_path / "first" / "scores.csv", runs])
    assert sorted((r["updates"], r["score"]) for r in rows) == [(0, 0.5), (4, 0.6), (8, 0.7)]
    _run(tmp_path / "other", "0", "toolcall", "prm", 0, {0: 0.5, 4: 0.55})
    _run(tmp_path / "other", "1", "toolcall", "outcome", 0, {0: 0.5, 4: 0.52})
    rows = collect([tmp_path / "first" / "scores.csv", tmp_path / "other"])
    assert sorted((r["signal"], r["updates"], r["score"]) for r in rows) == [
        ("outcome", 0, 0.5), ("outcome", 4, 0.52), ("prm", 0, 0.5), ("prm", 4, 0.55)]
    assert f"{run} (in an earlier report) is replaced by {tmp_path / 'other' / '0'}" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="is in both"):
        collect([runs, tmp_path / "other"])


def test_at_puts_the_columns_where_the_runs_have_their_pairs(tmp_path):
    """A pair whose outcome run stopped at 12 updates has its Δ at 12 only: `--at 12 16` shows it, with
    the runs that reached 16 beside it; the default stays the paper's 8 and 16."""
    _run(tmp_path, "o0", "gui", "outcome", 0, {0: 0.6, 8: 0.6, 12: 0.7})
    _run(tmp_path, "p0", "gui", "prm", 0, {0: 0.6, 8: 0.7, 12: 0.8, 16: 0.8})
    _run(tmp_path, "o1", "gui", "outcome", 1, {0: 0.6, 8: 0.6, 12: 0.6, 16: 0.7})
    _run(tmp_path, "p1", "gui", "prm", 1, {0: 0.6, 8: 0.6, 12: 0.8, 16: 0.7})
    assert main([str(tmp_path), "--out", str(tmp_path / "out"), "--at", "12", "16"]) == 0
    md = (tmp_path / "out" / "table.md").read_text()
    assert "| score @12 | score @16 | Δ vs outcome @12 | Δ vs outcome @16 |" in md
    prm = next(line for line in md.splitlines() if line.startswith("| gui | prm |"))
    assert prm.endswith("| 0.15 ± 0.64 (n=2) | 0.00 (n=1) |")  # @12: +0.10 and +0.20; @16: seed 1 alone
    main([str(tmp_path), "--out", str(tmp_path / "default")])
    assert "| score @8 | score @16 |" in (tmp_path / "default" / "table.md").read_text()
    with pytest.raises(SystemExit, match="--at 20: no run reached 20 updates"):
        main([str(tmp_path), "--out", str(tmp_path / "bad"), "--at", "20"])

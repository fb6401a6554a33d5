"""The signal comparison report: step-label rates read from eval files, and differences paired by
seed against outcome reward, checked against hand-computed numbers."""
import json

import pytest

from harness.reports.signal_comparison import label_rates, main, paired


def _run(sweep, name, signal, seed, judge, hints, episodes, before=None):
    d = sweep / name
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({
        "signal": signal, "seed": seed, "judge": judge, "hints": hints, "train_samples": 4, "cpu_s": 60.0,
        "wall_s": 40.0, "judge_votes": 0, "hints_accepted": 0}))
    for fname, eps in (("eval_after.jsonl", episodes), ("eval_before.jsonl", before)):
        if eps is not None:
            (d / fname).write_text("".join(json.dumps({"success": ok, "steps": [
                {"info": {"step_label": {"well_formed": True, "executed_ok": e, "matches_reference": m}}}
                for e, m in steps]}) + "\n" for ok, steps in eps))


def test_label_rates_and_pairing_by_seed(tmp_path):
    sweep = tmp_path / "sweep"
    # outcome: seed 0 -> 1 of 2 tasks, 1 of 3 steps matching; seed 1 -> 0 tasks, 0 of 2 matching
    _run(sweep, "0", "outcome", 0, "-", "-", [(True, [(True, True), (True, False)]), (False, [(False, False)])],
         before=[(False, [(True, False)])])
    _run(sweep, "1", "outcome", 1, "-", "-", [(False, [(True, False)]), (False, [(False, False)])])
    # prm with the oracle judge: seed 0 -> 2 of 2 tasks, 2 of 2 matching; seed 1 -> 1 of 2 tasks, 1 of 2 matching
    _run(sweep, "2", "prm", 0, "oracle", "-", [(True, [(True, True)]), (True, [(True, True)])])
    _run(sweep, "3", "prm", 1, "oracle", "-", [(True, [(True, True)]), (False, [(True, False)])])
    r = label_rates(sweep / "0" / "eval_after.jsonl")
    assert r["success"] == 0.5 and r["matches_reference"] == pytest.approx(1 / 3)
    assert r["executed_ok"] == pytest.approx(2 / 3)
    from harness.reports.signal_comparison import load_runs

    runs, before = load_runs([sweep])
    assert before["success"] == 0.0 and before["executed_ok"] == 1.0
    d = paired(runs)[("prm", "oracle")]
    assert d["success"] == [0.5, 0.5]
    assert d["matches_reference"] == pytest.approx([1 - 1 / 3, 0.5])
    assert main([str(sweep), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "signal_comparison.md").read_text()
    assert "| prm | oracle | +0.500 ± 0.000 (+0.50, +0.50) | " in md
    # the 95% t-interval over 2 seeds: mean (2/3 + 1/2)/2, half-width t(0.975, 1) * sd / sqrt(2) = 12.706 * 1/12
    assert "+0.583 ± 1.059 (+0.67, +0.50)" in md
    assert (tmp_path / "out" / "signal_comparison.png").stat().st_size > 1000

    # a later session's sweep joins the earlier report's CSV (whose run dirs may be gone)
    later = tmp_path / "later"
    _run(later, "0", "outcome", 2, "-", "-", [(False, [(True, False)])])
    _run(later, "1", "prm", 2, "oracle", "-", [(False, [(True, True)])])
    runs, _ = load_runs([tmp_path / "out" / "signal_comparison.csv", later])
    assert len(runs) == 6
    assert paired(runs)[("prm", "oracle")]["matches_reference"] == pytest.approx([1 - 1 / 3, 0.5, 1.0])
    with pytest.raises(SystemExit, match="appears twice"):
        load_runs([tmp_path / "out" / "signal_comparison.csv", sweep])


def test_no_finished_runs_is_a_clear_error(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "no finished training runs" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no such sweep dir"):
        main([str(tmp_path / "typo")])


def test_an_async_run_in_the_sweep_is_refused_not_mixed_in(tmp_path):
    from harness.reports.signal_comparison import load_runs

    sweep = tmp_path / "sweep"
    _run(sweep, "0", "outcome", 0, "-", "-", [(True, [(True, True)])])
    _run(sweep, "1", "prm", 0, "oracle", "-", [(True, [(True, True)])])
    m = json.loads((sweep / "1" / "metrics.json").read_text())
    (sweep / "1" / "metrics.json").write_text(json.dumps({**m, "mode": "async"}))
    with pytest.raises(SystemExit, match="mode=async run"):
        load_runs([sweep])

"""`python -m harness.compare <sweep_dir>`: one row per signal over a sweep's finished runs (means
over seeds), async runs kept apart from synchronous ones, and the success-vs-episodes plot."""
import json

from harness.reports.plots import load_curves, write_sweep_plot
from harness.reports.sweep import compare
from tests.paths import ROOT


def _run(root, name, signal, before, after, mode=None):
    d = root / name
    d.mkdir(parents=True)
    m = {"signal": signal, "success_before": before, "success_after": after, "delta": after - before,
         "train_samples": 10, "wall_s": 60.0, "curve": [[0, before], [8, after]]}
    if mode:
        m["mode"] = mode
    (d / "metrics.json").write_text(json.dumps(m))


def test_compare_averages_seeds_per_signal_and_keeps_async_apart(tmp_path):
    _run(tmp_path, "0_prm_0", "prm", 0.25, 0.5)
    _run(tmp_path, "1_prm_1", "prm", 0.25, 1.0)
    _run(tmp_path, "2_out_0", "outcome", 0.25, 0.25)
    _run(tmp_path, "3_prm_async", "prm", 0.25, 0.0, mode="async")
    (tmp_path / "4_unfinished").mkdir()  # a killed job: no metrics.json, left out
    table = compare(tmp_path)
    rows = list(zip(*[c._cells for c in table.columns]))
    assert [(r[0], r[1], r[3]) for r in rows] == [("outcome", "1", "0.250"), ("prm", "2", "0.750"),
                                                  ("prm (mode=async)", "1", "0.000")]
    assert sorted(load_curves(tmp_path)) == ["outcome", "prm", "prm (mode=async)"]
    assert write_sweep_plot(tmp_path).stat().st_size > 1000


def test_piped_into_a_log_the_table_keeps_every_cell_whole(tmp_path):
    import subprocess
    import sys

    _run(tmp_path, "0_prm_opd_0", "prm_opd", 0.25, 0.5)
    p = subprocess.run([sys.executable, "-m", "harness.compare", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)  # stdout is a pipe, as in CI or `> log`
    assert p.returncode == 0, p.stderr
    assert "prm_opd" in p.stdout and "success before" in p.stdout and "…" not in p.stdout


def test_a_sweep_names_its_methods_by_what_differs_between_them():
    from harness.reports.aggregate import Method, feedback, labels

    outcome, prm = Method("outcome"), Method("prm", judge="oracle")
    opd = Method("opd", hints="oracle", teacher="frozen")
    assert labels([outcome, prm, opd]) == {outcome: "outcome", prm: "prm", opd: "opd"}  # a sweep over signals
    model = Method("prm", judge="model")
    assert labels([outcome, prm, model])[model] == "prm (judge=model)"  # two judges are two rows, named
    asyn = Method("prm", judge="oracle", mode="async")
    assert labels([prm, asyn]) == {prm: "prm", asyn: "prm (mode=async)"}
    assert asyn.label == "prm (judge=oracle, mode=async)"  # the leaderboard's full name
    assert [feedback(j, h) for j, h in (("-", "-"), ("oracle", "-"), ("oracle", "model"), ("-", "next_state"))] \
        == ["-", "oracle", "model", "oracle"]


def test_an_eval_sweep_is_compared_by_agent_and_help_is_help(tmp_path):
    import subprocess
    import sys

    for i, (agent, rate) in enumerate([("oracle", 1.0), ("noop", 0.0), ("oracle", 0.5)]):
        d = tmp_path / f"{i}__terminal__{agent}__{i}"
        d.mkdir()
        row = {"env": "terminal", "suite": "bundled", "agent": agent, "model": "-", "seed": i,
               "success_rate": rate, "infra_failures": 0}
        (d / "metrics.json").write_text(json.dumps({"success_rate": rate, "leaderboard_row": {"row": row}}))
    rows = list(zip(*[c._cells for c in compare(tmp_path).columns]))
    assert [(r[2], r[4], r[5]) for r in rows] == [("noop", "1", "0.000"), ("oracle", "2", "0.750")]
    p = subprocess.run([sys.executable, "-m", "harness.compare", "--help"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and "usage: python -m harness.compare" in p.stdout

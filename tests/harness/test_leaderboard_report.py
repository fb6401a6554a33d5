"""`python -m harness.leaderboard`: means and 95% CIs over seeds, paired deltas against outcome, the
per-env and overall CSVs with N/A cells, malformed leaderboards named by file and line with nothing
overwritten, and the HTML report rendered by real headless Chromium."""
import csv
import json
import math
import subprocess
import sys

import pytest

from harness.reports.aggregate import Stat, t95
from harness.reports.html_report import write_report
from harness.reports.leaderboard import aggregate, validate
from nextstate.leaderboard import COLUMNS, LeaderboardError, append_row
from tests.paths import ROOT

ENVS = {"terminal", "toolcall", "swe", "gui"}
OUTCOME = [0.25, 0.5, 0.75]
PRM = [0.5, 0.5, 1.0]


def _row(env="terminal", agent="model", signal="outcome", seed=0, success=0.0, **kw):
    row = {c: "" for c in COLUMNS} | {
        "timestamp": "2026-11-29T10:00:00", "env": env, "suite": "bundled", "split": "test", "agent": agent,
        "model": "smollm2" if agent == "model" else "-", "signal": signal, "seed": seed, "n_tasks": 4,
        "success_rate": success, "mean_steps": 2.0, "infra_failures": 0, "tokens": 100, "wall_s": 10.0,
        "run_dir": "/nonexistent", "git_commit": "abc"}
    if signal != "none":
        row |= {"train_episodes": 8, "success_before": 0.25, "judge": "oracle" if "prm" in signal else "-",
                "hints": "-", "teacher": "-"}
    return row | kw


@pytest.fixture
def leaderboard(tmp_path):
    path = tmp_path / "leaderboard.csv"
    runs = tmp_path / "runs"
    for seed, (o, p) in enumerate(zip(OUTCOME, PRM)):
        run_dir = runs / f"prm{seed}"
        run_dir.mkdir(parents=True)
        (run_dir / "metrics.json").write_text(json.dumps({"curve": [[0, 0.25], [4, (0.25 + p) / 2], [8, p]]}))
        append_row(path, _row(signal="outcome", seed=seed, success=o))  # no run dir: two-point curve
        append_row(path, _row(signal="prm", seed=seed, success=p, run_dir=str(run_dir)))
    append_row(path, _row(signal="prm", seed=3, success=0.0))  # seed 3 has no outcome run: not paired
    append_row(path, _row(agent="oracle", signal="none", seed=0, success=1.0))
    append_row(path, _row(agent="noop", signal="none", seed=0, success=0.0))
    append_row(path, _row(env="toolcall", agent="oracle", signal="none", seed=0, success=0.9))
    append_row(path, _row(env="toolcall", agent="oracle", signal="none", seed=0, success=1.0))  # a re-run: both count
    return path


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_t_interval_matches_hand_computation():
    s = Stat.of([0.25, 0.0, 0.25])
    sd = math.sqrt(((0.25 - 1 / 6) ** 2 * 2 + (1 / 6) ** 2) / 2)
    assert s.mean == pytest.approx(1 / 6) and s.half == pytest.approx(4.303 * sd / math.sqrt(3))
    assert Stat.of([0.5]).half is None
    assert t95(1) == 12.706 and t95(35) == 2.042 and t95(1000) == 1.980


def test_mean_ci_and_paired_delta_against_outcome(leaderboard):
    entries = {(e.context.env, e.context.agent, e.method.signal): e for e in aggregate(validate(leaderboard, ENVS))}
    prm = entries[("terminal", "model", "prm")]
    assert prm.success.n == 4 and prm.success.mean == pytest.approx((sum(PRM) + 0.0) / 4)
    deltas = [p - o for p, o in zip(PRM, OUTCOME)]  # seeds 0-2 only: seed 3 has no outcome partner
    assert prm.delta_vs_baseline.n == 3
    assert prm.delta_vs_baseline.mean == pytest.approx(sum(deltas) / 3)
    assert prm.delta_vs_baseline.half == pytest.approx(Stat.of(deltas).half)
    assert entries[("terminal", "model", "outcome")].delta_vs_baseline is None
    assert entries[("terminal", "oracle", "none")].delta_vs_baseline is None
    assert entries[("toolcall", "oracle", "none")].success.mean == pytest.approx(0.95)  # a re-run of seed 0: both kept
    assert entries[("toolcall", "oracle", "none")].runs == 2


def test_async_runs_are_their_own_entries_and_pair_with_async_outcome(leaderboard):
    for seed, (o, p) in enumerate([(0.0, 0.5), (0.25, 0.25)]):
        append_row(leaderboard, _row(signal="outcome", seed=seed, success=o, mode="async"))
        append_row(leaderboard, _row(signal="prm", seed=seed, success=p, mode="async"))
    entries = {(e.method.signal, e.method.mode): e for e in aggregate(validate(leaderboard, ENVS))
               if e.context.env == "terminal" and e.context.agent == "model"}
    sync, asyn = entries[("prm", "-")], entries[("prm", "async")]
    assert sync.success.n == 4 and asyn.success.n == 2 and asyn.success.mean == pytest.approx(0.375)
    assert asyn.delta_vs_baseline.mean == pytest.approx(((0.5 - 0.0) + (0.25 - 0.25)) / 2)  # async vs async
    assert sync.delta_vs_baseline.mean == pytest.approx(sum(p - o for p, o in zip(PRM, OUTCOME)) / 3)
    assert asyn.method.label == "prm (judge=oracle, mode=async)"


def test_per_env_and_overall_csvs_in_bfcl_style(leaderboard, tmp_path):
    out = tmp_path / "report"
    write_report(leaderboard, out, ENVS)
    term = _csv(out / "terminal.csv")
    assert [r["Rank"] for r in term] == ["1", "2", "3", "4"]
    assert [(r["Agent"], r["Signal"]) for r in term] == [("oracle", "N/A"), ("model", "outcome"),
                                                        ("model", "prm"), ("noop", "N/A")]
    prm = term[2]
    assert prm["Success"] == "50.00%" and prm["Seeds"] == "4" and prm["Δ vs Outcome"] == "+16.67%"
    assert prm["Δ 95% CI"] == f"±{Stat.of([p - o for p, o in zip(PRM, OUTCOME)]).half * 100:.2f}%"
    assert prm["Paired Seeds"] == "3" and prm["Judge"] == "oracle" and prm["Train Episodes"] == "8"
    oracle = term[0]
    assert oracle["95% CI"] == "N/A" and oracle["Δ vs Outcome"] == "N/A" and oracle["Train Episodes"] == "N/A"
    overall = _csv(out / "overall.csv")
    assert list(overall[0])[:6] == ["Rank", "Overall Acc (terminal)", "Envs", "Model", "Agent", "Method"]
    by_agent = {(r["Agent"], r["Method"]): r for r in overall}
    oracle = by_agent[("oracle", "N/A")]
    assert oracle["terminal"] == "100.00%" and oracle["toolcall"] == "95.00%" and oracle["Envs"] == "2/4"
    assert oracle["swe"] == "N/A" and oracle["gui"] == "N/A"  # not evaluated there
    assert by_agent[("model", "prm (judge=oracle)")]["toolcall"] == "N/A"
    assert overall[0]["Agent"] == "oracle"  # best on the env every entrant ran


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.replace(",terminal,", ",nosuchenv,", 1), r"line 2: unknown env 'nosuchenv'"),
    (lambda t: t[: len(t) - len(t.splitlines()[-1]) // 2 - 1], r"line 12: expected \d+ fields"),
    (lambda t: t.replace(",success_rate,", ",success,", 1), r"line 1: header lacks columns \['success_rate'\]"),
    (lambda t: t.replace(",0.25,", ",a quarter,", 1), r"line 2: column 'success_rate' is 'a quarter'"),
])
def test_malformed_leaderboard_is_named_by_file_and_line_and_nothing_is_overwritten(leaderboard, tmp_path, mutate,
                                                                                    message):
    out = tmp_path / "report"
    write_report(leaderboard, out, ENVS)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    text = leaderboard.read_text()
    bad = mutate(text)
    assert bad != text
    leaderboard.write_text(bad)
    with pytest.raises(LeaderboardError, match=rf"leaderboard\.csv: {message}"):
        write_report(leaderboard, out, ENVS)
    assert leaderboard.read_text() == bad
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_cli_exit_code_and_message_on_a_malformed_leaderboard(leaderboard, tmp_path):
    leaderboard.write_text(leaderboard.read_text().replace(",toolcall,", ",toolcal,", 1))
    p = subprocess.run([sys.executable, "-m", "harness.leaderboard", str(leaderboard), "--out", str(tmp_path / "r")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "unknown env 'toolcal'" in p.stderr and "leaderboard.csv: line " in p.stderr
    assert not (tmp_path / "r").exists()


def test_cli_writes_the_report(leaderboard, tmp_path):
    p = subprocess.run([sys.executable, "-m", "harness.leaderboard", str(leaderboard), "--out", str(tmp_path / "r")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    names = {f.name for f in (tmp_path / "r").iterdir()}
    assert {"index.html", "overall.csv", "terminal.csv", "toolcall.csv", "curves_terminal_1.png"} <= names


def test_html_report_renders_in_headless_chromium(leaderboard, tmp_path):
    from playwright.sync_api import sync_playwright

    out = tmp_path / "report"
    report = write_report(leaderboard, out, ENVS)
    assert report.curves["terminal"] and not report.curves.get("toolcall")  # toolcall has no training runs
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page()
            page.goto((out / "index.html").as_uri())
            page.wait_for_load_state("load")
            assert page.locator("table#overall tbody tr").count() == 4
            assert page.locator("table#env-terminal tbody tr").count() == 4
            assert page.locator("table#env-toolcall tbody tr").count() == 1
            cell = page.locator("table#env-terminal tbody tr").nth(2).locator("td").nth(5)
            assert cell.inner_text() == "+16.67%"
            # at 1400 px the wide per-env table scrolls inside its own box, and the page does not
            page.set_viewport_size({"width": 1400, "height": 900})
            assert page.evaluate("document.documentElement.scrollWidth") <= 1400
            assert page.locator("table#env-terminal").bounding_box()["height"] > 50  # laid out, visible
            imgs = page.locator("img.curve")
            assert imgs.count() == 1
            dims = imgs.first.evaluate("i => [i.complete, i.naturalWidth, i.naturalHeight]")
            assert dims[0] and dims[1] > 100 and dims[2] > 100, dims
        finally:
            browser.close()


def test_overall_ranks_on_the_envs_every_entrant_ran(tmp_path):
    # noop ran all four envs at 0%, the model two at 50%: the model ranks first, on the envs both ran
    path = tmp_path / "leaderboard.csv"
    for env in sorted(ENVS):
        append_row(path, _row(env=env, agent="noop", signal="none", success=0.0))
    for env in ("terminal", "toolcall"):
        append_row(path, _row(env=env, agent="model", signal="none", success=0.5))
    write_report(path, tmp_path / "report", ENVS)
    overall = _csv(tmp_path / "report" / "overall.csv")
    assert [r["Agent"] for r in overall] == ["model", "noop"]
    assert list(overall[0])[1] == "Overall Acc (terminal, toolcall)"
    assert overall[0]["Overall Acc (terminal, toolcall)"] == "50.00%" and overall[1]["Envs"] == "4/4"
    html = (tmp_path / "report" / "index.html").read_text()
    assert html.count('<div class="scroll"><table') == 1 + len(ENVS)  # every table scrolls in its own box
    assert all((tmp_path / "report" / f"chart_{env}.png").stat().st_size > 1000 for env in ENVS)


def test_runs_on_two_task_dirs_are_two_suites(tmp_path):
    from nextstate.config import suite_of

    class Cfg:
        suite = "bundled"

    a, b = Cfg(), Cfg()
    a.tasks_dir, b.tasks_dir = str(tmp_path / "harbor-a"), str(tmp_path / "harbor-b")
    bundled = Cfg()
    bundled.tasks_dir = "envs/tasks/terminal"
    assert suite_of(bundled) == "bundled"
    assert suite_of(a) == f"dir:{tmp_path / 'harbor-a'}" and suite_of(a) != suite_of(b)
    path = tmp_path / "leaderboard.csv"
    append_row(path, _row(agent="oracle", signal="none", success=1.0, suite=suite_of(a), n_tasks=1))
    append_row(path, _row(agent="oracle", signal="none", success=0.0, suite=suite_of(b), n_tasks=1))
    entries = aggregate(validate(path, ENVS))
    assert sorted(e.success.mean for e in entries) == [0.0, 1.0]  # two entries: neither replaced the other

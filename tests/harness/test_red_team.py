"""Red team: no result is lost. `python -m harness.run` killed with SIGKILL at each
write point of an eval run (before metrics.json, before and after the leaderboard append, half-way
through a trajectory line), then resumed: exactly one leaderboard row and whole trajectories, and no
stray run dir. A malformed leaderboard: the run exits 0 with a warning and its row is kept, then filed
once. The same points in-process for the commit protocol every run (eval, training, SFT) shares.

The CLI kills use a shim (SHIM below) that runs `harness.run` as `python -m` does, after wrapping
`os.replace` (every atomic write ends in one) or `nextstate.atomic.append_jsonl` so that the process
SIGKILLs itself at the chosen point: a real kill -9, nothing cleaned up. The oracle on the bundled
tool-call tasks (`env=toolcall agent=oracle limit=2`) needs no model; the first runs of every attack
go concurrently, then the resumes, to keep the file well under three minutes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from nextstate import atomic
from nextstate.atomic import append_jsonl, drop_torn_tail, read_jsonl
from nextstate.leaderboard import (
    COLUMNS,
    LeaderboardError,
    append_row,
    commit_run,
    file_kept_rows,
    file_pending_row,
    file_row,
    pending_dir,
    read_rows,
)
from tests.paths import ROOT

pytestmark = pytest.mark.red_team

RUN = ["progress=false", "env=toolcall", "agent=oracle", "limit=2"]

SHIM = r"""
import json, os, runpy, signal, sys
from pathlib import Path

when, name, nth = os.environ["RED_TEAM_DIE"].split(":")
nth, seen = int(nth), {"n": 0}

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def hit(path):
    if Path(path).name != name:
        return False
    seen["n"] += 1
    return seen["n"] == nth

if when in ("before", "after"):
    real_replace = os.replace
    def replace(src, dst, *a, **k):
        now = hit(dst)
        if now and when == "before":
            die()
        real_replace(src, dst, *a, **k)
        if now:
            die()
    os.replace = replace
elif when == "torn":  # half of the nth record on disk, then the kill
    import nextstate.atomic as atomic
    real_append = atomic.append_jsonl
    def append_jsonl(path, obj):
        if hit(path):
            line = (json.dumps(obj, default=str) + "\n").encode()
            with open(path, "ab") as f:
                f.write(line[: len(line) // 2])
                f.flush()
                os.fsync(f.fileno())
            die()
        real_append(path, obj)
    atomic.append_jsonl = append_jsonl
runpy.run_module("harness.run", run_name="__main__", alter_sys=True)
"""

# attack -> where the run dies (RED_TEAM_DIE); None: no kill (the malformed-leaderboard attack)
KILLS = {
    "before metrics.json": "before:metrics.json:1",  # every episode on disk, nothing else
    "before the leaderboard append": "before:leaderboard.csv:1",  # metrics.json says: row not filed
    "after the append, before the filed mark": "after:leaderboard.csv:1",  # the row is in; a 2nd must not be
    "half-way through a trajectory line": "torn:trajectories.jsonl:2",  # a torn last line
}
TORN_LB = "torn leaderboard"


def _cli(results: Path, *overrides, die: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, NEXTSTATE_RESULTS=str(results))
    if die:
        env["RED_TEAM_DIE"] = die
        cmd = [sys.executable, "-c", SHIM, *overrides]
    else:
        cmd = [sys.executable, "-m", "harness.run", *overrides]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=150)


def _torn_leaderboard(path: Path) -> str:
    """A leaderboard whose last row was cut in half (a hand edit, a copy killed mid-way)."""
    append_row(path, {c: f"{c}0" for c in COLUMNS})
    append_row(path, {c: f"{c}1" for c in COLUMNS})
    text = path.read_text()
    path.write_text(text[: -len(text.splitlines()[-1]) // 2 - 1])
    return path.read_text()


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """Every attack's first run (killed, or on a torn leaderboard) at once, then every resume at
    once, then every second resume: {attack: (results dir, first run, resume, second resume,
    leaderboard text before)} (no resumes for the torn leaderboard)."""
    root = tmp_path_factory.mktemp("red_team")
    results = {name: root / f"r{i}" for i, name in enumerate([*KILLS, TORN_LB])}
    lb_before = _torn_leaderboard(results[TORN_LB] / "leaderboard.csv")
    with ThreadPoolExecutor(len(results)) as ex:
        first = {name: ex.submit(_cli, results[name], *RUN, die=KILLS.get(name)) for name in results}
        first = {name: f.result() for name, f in first.items()}
        resumes = {}
        for name in KILLS:
            runs = sorted((results[name] / "runs").iterdir())
            assert len(runs) == 1, (name, runs, first[name].stderr[-2000:])
            resumes[name] = ex.submit(_cli, results[name], *RUN, "parallel=1", f"resume={runs[0]}")
        resumes = {name: f.result() for name, f in resumes.items()}
        # resumed once more (the run is finished now): must file nothing
        again = {name: ex.submit(_cli, results[name], *RUN, f"resume={_one_run_dir(results[name])}") for name in KILLS}
        again = {name: f.result() for name, f in again.items()}
    return {name: (results[name], first[name], resumes.get(name), again.get(name), lb_before) for name in results}


def _one_run_dir(results: Path) -> Path:
    runs = sorted((results / "runs").iterdir())
    assert len(runs) == 1, f"a stray run dir: {runs}"  # resume= made no dir of its own
    return runs[0]


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(KILLS))
def test_kill_9_at_each_write_point_then_resume_files_exactly_one_row(attacked, attack):
    results, first, resume, again, _ = attacked[attack]
    assert first.returncode == -9, (first.returncode, first.stderr[-2000:])  # it really died there
    assert resume.returncode == 0, resume.stderr[-3000:]
    run_dir = _one_run_dir(results)
    _, rows = read_rows(results / "leaderboard.csv")
    assert len(rows) == 1 and rows[0]["n_tasks"] == "2" and float(rows[0]["success_rate"]) == 1.0, rows
    assert Path(rows[0]["run_dir"]).resolve() == run_dir.resolve()
    lines = (run_dir / "trajectories.jsonl").read_text().split("\n")
    assert lines[-1] == "" and all(json.loads(line) for line in lines[:-1])  # whole lines, nothing glued
    assert len({json.loads(line)["task_id"] for line in lines[:-1]}) == len(lines) - 1 == 2
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["leaderboard_row"]["filed"] is True and metrics["n_tasks"] == 2
    # Hydra's record of the command that started the run is the original's, not the resume's
    assert yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text()) == RUN
    assert (run_dir / "run.log").exists()  # Hydra's log of the resume is appended there, in no new dir
    assert again.returncode == 0 and "already finished" in again.stdout, again.stderr[-2000:]
    assert len(read_rows(results / "leaderboard.csv")[1]) == 1
    _one_run_dir(results)


@pytest.mark.slow  # the kill -9 runs of `attacked`
def test_a_torn_trajectory_line_is_dropped_with_a_warning_and_its_episode_run_again(attacked):
    _, _, resume, _, _ = attacked["half-way through a trajectory line"]
    assert "dropped a torn last line" in resume.stderr and "trajectories.jsonl" in resume.stderr


@pytest.mark.slow  # the kill -9 runs of `attacked`
def test_a_pending_row_is_named_when_filed_on_resume(attacked):
    for attack in ("before the leaderboard append", "after the append, before the filed mark"):
        _, _, resume, _, _ = attacked[attack]
        assert "filed the leaderboard row the earlier run left pending" in resume.stdout, resume.stdout[-2000:]
        assert "already finished" in resume.stdout


@pytest.mark.slow  # the kill -9 runs of `attacked`
def test_a_malformed_leaderboard_keeps_the_runs_row_and_files_it_once_repaired(attacked):
    results, first, _, _, lb_before = attacked[TORN_LB]
    lb = results / "leaderboard.csv"
    assert first.returncode == 0, first.stderr[-3000:]
    assert "leaderboard is malformed" in first.stderr and "leaderboard.csv: line 3" in first.stderr
    assert f"python -m nextstate.leaderboard file-pending {lb}" in first.stderr and "Traceback" not in first.stderr
    assert lb.read_text() == lb_before  # the CSV is left as it was: which line is right is the user's call
    kept = list(pending_dir(lb).glob("*.json"))
    run_dir = _one_run_dir(results)
    assert len(kept) == 1 and json.loads(kept[0].read_text())["row"]["run_dir"] == str(run_dir)
    assert json.loads((run_dir / "metrics.json").read_text())["leaderboard_row"]["filed"] is False
    # still torn: the command refuses, naming the line, and keeps the row
    p = subprocess.run([sys.executable, "-m", "nextstate.leaderboard", "file-pending", str(lb)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "line 3" in p.stderr and kept[0].exists()
    lb.write_text("".join(lb_before.splitlines(keepends=True)[:2]))  # the repair: the torn row removed
    p = subprocess.run([sys.executable, "-m", "nextstate.leaderboard", "file-pending", str(lb)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "1 kept row(s) filed" in p.stdout, p.stderr
    assert not kept[0].exists()
    assert file_pending_row(run_dir) is True  # what resume= does: finds it there, marks it, adds none
    assert file_pending_row(run_dir) is None
    _, rows = read_rows(lb)
    assert [r["run_dir"] for r in rows] == ["run_dir0", str(run_dir)]


# --- the same points in-process: the commit protocol of eval, training and SFT ---------------------

class Killed(BaseException):
    """The process dying at a point (raised instead of SIGKILL, so the test goes on)."""


def _dying_at(monkeypatch, when: str, name: str, nth: int = 1):
    real, seen = os.replace, {"n": 0}

    def replace(src, dst, *a, **k):
        now = Path(dst).name == name and (seen.__setitem__("n", seen["n"] + 1) or seen["n"] == nth)
        if now and when == "before":
            raise Killed
        real(src, dst, *a, **k)
        if now:
            raise Killed

    monkeypatch.setattr(os, "replace", replace)


POINTS = [("before", "metrics.json", 1), ("after", "metrics.json", 1), ("before", "leaderboard.csv", 1),
          ("after", "leaderboard.csv", 1), ("before", "metrics.json", 2), ("after", "metrics.json", 2)]


@pytest.mark.parametrize("when, name, nth", POINTS)
def test_commit_run_killed_at_any_point_leaves_both_or_a_row_filed_once(tmp_path, monkeypatch, when, name, nth):
    lb, run_dir = tmp_path / "leaderboard.csv", tmp_path / "run"
    row = {c: f"{c}0" for c in COLUMNS} | {"run_dir": str(run_dir), "timestamp": "2026-01-01T00:00:00"}
    with monkeypatch.context() as m:
        _dying_at(m, when, name, nth)
        with pytest.raises(Killed):
            commit_run(run_dir, {"success_rate": 1.0}, lb, row)
    if not (run_dir / "metrics.json").exists():  # killed before anything was committed: a run resume= finishes
        assert not lb.exists()
        commit_run(run_dir, {"success_rate": 1.0}, lb, row)
    else:
        file_pending_row(run_dir)  # what resume= does first
        file_pending_row(run_dir)  # and again: a second resume files nothing more
    assert len(read_rows(lb)[1]) == 1
    assert json.loads((run_dir / "metrics.json").read_text())["leaderboard_row"]["filed"] is True


def test_file_row_on_a_malformed_leaderboard_warns_keeps_the_row_and_never_raises(tmp_path, capsys):
    lb = tmp_path / "leaderboard.csv"
    before = _torn_leaderboard(lb)
    row = {c: f"{c}9" for c in COLUMNS}
    assert file_row(lb, row) is False and lb.read_text() == before
    assert "line 3" in capsys.readouterr().err
    with pytest.raises(LeaderboardError):
        append_row(lb, row)  # the plain append still refuses, and leaves the file untouched
    lb.write_text("".join(before.splitlines(keepends=True)[:2]))
    assert file_kept_rows(lb) == (1, 0) and file_kept_rows(lb) == (0, 0)
    assert file_row(lb, row) is True and len(read_rows(lb)[1]) == 2  # filed once, however often asked


def test_append_after_a_torn_line_never_glues_onto_it(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    path.write_text('{"task_id": "a"}\n{"task_id": "b", "st')  # killed mid-write
    assert read_jsonl(path) == [{"task_id": "a"}]  # readers skip it quietly and leave the file alone
    assert path.read_text().endswith('"st')
    append_jsonl(path, {"task_id": "c"})
    assert "dropped a torn last line" in capsys.readouterr().err
    assert path.read_text() == '{"task_id": "a"}\n{"task_id": "c"}\n'
    path.write_text('{"task_id": "a"}\n{"task_id": "b"}')  # a whole record that lost only its newline: kept
    assert drop_torn_tail(path) is None and path.read_text() == '{"task_id": "a"}\n{"task_id": "b"}\n'
    assert atomic.drop_torn_tail(tmp_path / "absent.jsonl") is None

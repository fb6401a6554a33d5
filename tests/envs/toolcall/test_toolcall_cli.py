"""`python -m harness.run env=toolcall ...` as a user runs it: runs and leaderboard rows with the
suite in their own column, for the bundled suite (its test split has python tasks: Docker) and BFCL."""
from pathlib import Path

import pytest

from nextstate.atomic import read_jsonl
from nextstate.leaderboard import read_rows

pytestmark = pytest.mark.docker


@pytest.mark.slow
def test_oracle_and_noop_rows(tmp_path, harness_run):
    p = harness_run(tmp_path, "env=toolcall", "agent=oracle", "split=test")
    assert p.returncode == 0, p.stderr[-3000:]
    p = harness_run(tmp_path, "env=toolcall", "agent=noop", "split=test")
    assert p.returncode == 0, p.stderr[-3000:]
    p = harness_run(tmp_path, "env=toolcall", "agent=oracle", "env.suite=bfcl_multi_turn_base+bfcl_parallel",
                    "limit=30")
    assert p.returncode == 0, p.stderr[-3000:]
    _, rows = read_rows(tmp_path / "leaderboard.csv")
    got = [(r["env"], r["suite"], r["agent"], r["n_tasks"], float(r["success_rate"])) for r in rows]
    assert got == [("toolcall", "bundled", "oracle", "16", 1.0), ("toolcall", "bundled", "noop", "16", 0.0),
                   ("toolcall", "bfcl_multi_turn_base+bfcl_parallel", "oracle", "30", 1.0)]
    trajs = read_jsonl(Path(rows[0]["run_dir"]) / "trajectories.jsonl")
    labels = [s["info"]["step_label"] for t in trajs for s in t["steps"] if "step_label" in s["info"]]
    assert labels and all(lab["matches_reference"] and lab["executed_ok"] for lab in labels)


def test_unknown_suite_is_a_clear_error(tmp_path, harness_run):
    p = harness_run(tmp_path, "env=toolcall", "agent=oracle", "env.suite=bfcl_nope")
    assert p.returncode != 0 and "category 'nope' is not supported" in p.stderr

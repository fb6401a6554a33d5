"""A run stopped after an update's evaluation and log line, before its checkpoint, redoes that update on
resume: the redone evaluation replaces the file (it was appended: 240 lines for 120 episodes) and the
log keeps each iteration once (it held two iteration-7 lines, and the report read the later one)."""
import json

from nextstate.atomic import append_jsonl, read_jsonl
from nextstate.types import Trajectory
from trainers.setup import forget_after, write_evaluation


def test_a_redone_evaluation_replaces_the_earlier_reading(tmp_path):
    out = tmp_path / "eval_it8.jsonl"
    write_evaluation(out, [Trajectory(f"t{i}", "env", steps=[], outcome=1.0) for i in range(3)])
    write_evaluation(out, [Trajectory(f"t{i}", "env", steps=[], outcome=0.0) for i in range(3)])
    rows = read_jsonl(out)
    assert [(r["task_id"], r["outcome"]) for r in rows] == [("t0", 0.0), ("t1", 0.0), ("t2", 0.0)]


def test_resume_forgets_the_log_lines_past_the_checkpoint(tmp_path):
    log = tmp_path / "train_log.jsonl"
    for it, score in [(6, None), (7, 0.5)]:
        append_jsonl(log, {"iteration": it, "eval_success": score})
    forget_after(log, 6)  # the checkpoint holds iteration 6: iteration 7 is redone
    assert [r["iteration"] for r in read_jsonl(log)] == [6]
    append_jsonl(log, {"iteration": 7, "eval_success": 0.49})
    forget_after(log, 7)  # nothing past the checkpoint: the file is left as it is
    assert [(r["iteration"], r["eval_success"]) for r in read_jsonl(log)] == [(6, None), (7, 0.49)]
    assert json.loads(log.read_text().splitlines()[-1])["eval_success"] == 0.49

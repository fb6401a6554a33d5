"""The personal-agent experiment's report: scores.csv rows from run dirs (finished or still running),
the paper-shaped table recomputed from those rows alone (mean ± 95% CI, Δ paired by seed), and every
experiment config composes."""
import csv
import json
from pathlib import Path

import pytest
import yaml

from harness.reports.personalization import collect, collect_wants, feedback_label, table, wants_table, write
from nextstate.config import CONF_DIR, compose


def _run(root: Path, name: str, signal: str, seed: int, scores: dict[int, float], *, judge="oracle",
         hints="next_state", finished=True, topk=0) -> Path:
    d = root / name
    (d / ".hydra").mkdir(parents=True)
    cfg = {"seed": seed, "env": {"persona": "casual"}, "mode": {"name": "train", "iterations": max(scores)},
           "signal": {"name": signal, "opd_topk": topk},
           "judge": {"name": judge}, "hints": {"name": hints}}
    (d / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    last = max(scores)
    log = [{"iteration": u - 1, "eval_success": s} for u, s in scores.items() if 0 < u < last]
    if finished:
        (d / "metrics.json").write_text(json.dumps({"iterations": last, "success_before": scores[0],
                                                    "success_after": scores[last], "train_log": log}))
    else:
        (d / "train_log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in log))
        (d / "checkpoint").mkdir()
        (d / "checkpoint" / "state.json").write_text(json.dumps({"success_before": scores[0]}))
    return d


def test_rows_come_from_finished_and_running_runs(tmp_path):
    _run(tmp_path, "0", "outcome", 0, {0: 0.0, 4: 0.1, 8: 0.2}, topk=20)  # reads no teacher: no "+top20"
    _run(tmp_path, "1", "prm_opd", 0, {0: 0.0, 4: 0.3, 8: 0.9}, topk=20)
    _run(tmp_path, "2", "opd", 1, {0: 0.0, 4: 0.5, 8: 0.0}, finished=False)  # killed after update 4
    rows = collect([tmp_path])
    got = sorted((r["signal"], r["judge"], r["seed"], r["updates"], r["score"]) for r in rows)
    assert got == [("opd", "oracle", 1, 0, 0.0), ("opd", "oracle", 1, 4, 0.5),
                   ("outcome", "-", 0, 0, 0.0), ("outcome", "-", 0, 4, 0.1), ("outcome", "-", 0, 8, 0.2),
                   ("prm_opd+top20", "oracle", 0, 0, 0.0), ("prm_opd+top20", "oracle", 0, 4, 0.3),
                   ("prm_opd+top20", "oracle", 0, 8, 0.9)]
    with pytest.raises(SystemExit, match="in both"):
        collect([tmp_path, tmp_path])  # the same run twice is an error, not a double count


def test_a_run_dir_is_read_like_a_sweep_and_a_stray_file_is_a_clear_error(tmp_path):
    run = _run(tmp_path, "one", "prm", 2, {0: 0.1, 4: 0.3})
    assert sorted((r["seed"], r["updates"], r["score"]) for r in collect([run])) == [(2, 0, 0.1), (2, 4, 0.3)]
    log = tmp_path / "one.log"  # what a shell glob such as runs/brief_* brings along
    log.write_text("[train] update 1/16\n")
    with pytest.raises(SystemExit, match="one.log is not a scores.csv"):
        collect([run, log])


def test_feedback_names_the_judge_the_signal_used():
    cfg = lambda s, j="model", h="oracle": {"signal": {"name": s}, "judge": {"name": j}, "hints": {"name": h}}  # noqa: E731
    assert feedback_label(cfg("outcome")) == "-"
    assert feedback_label(cfg("prm", j="oracle")) == "oracle"
    assert feedback_label(cfg("opd", h="model")) == "model"
    assert feedback_label(cfg("prm_opd", j="oracle", h="model")) == "model"
    trained = cfg("prm_opd", h="model")
    trained["judge"]["model"] = "/runs/brief-judge/judge"  # mode=sft_judge's checkpoint: its own arm
    assert feedback_label(trained) == "model (sft)"
    trained["signal"]["name"] = "outcome"
    assert feedback_label(trained) == "-"  # outcome reads no judge, trained or not
    task_judge = cfg("prm", j="model_task")  # a general env's model judge: a model, not the oracle
    assert feedback_label(task_judge) == "model"
    task_judge["judge"]["model"] = "/runs/terminal/sft_judge/judge"
    assert feedback_label(task_judge) == "model (sft)"


def test_table_means_intervals_and_paired_deltas_by_hand(tmp_path):
    rows = [{"persona": "casual", "signal": sig, "judge": j, "seed": seed, "updates": u, "score": s, "run_dir": "x"}
            for sig, j, seed, u, s in [("outcome", "-", 0, 8, 0.2), ("outcome", "-", 1, 8, 0.4),
                                       ("prm", "oracle", 0, 8, 0.5), ("prm", "oracle", 1, 8, 0.9),
                                       ("prm", "oracle", 0, 0, 0.0), ("prm", "oracle", 1, 0, 0.0)]]
    md = table(rows, at=(8,))
    prm = next(line for line in md.splitlines() if "| prm |" in line)
    # mean 0.7, sd 0.2828, t(1) 12.706 -> half-width 12.706 * 0.2828 / sqrt(2) = 2.54;
    # paired deltas 0.3 and 0.5: mean 0.4, sd 0.1414 -> 12.706 * 0.1414 / sqrt(2) = 1.27
    assert "0.70 ± 2.54 (n=2)" in prm and "0.40 ± 1.27 (n=2)" in prm and "0.00 ± 0.00 (n=2)" in prm
    write(rows, tmp_path / "out")
    with open(tmp_path / "out" / "scores.csv", newline="") as f:
        back = list(csv.DictReader(f))
    assert {"persona", "signal", "judge", "seed", "updates", "score"} <= set(back[0])
    assert table([{**r, "seed": int(r["seed"]), "updates": int(r["updates"]), "score": float(r["score"])}
                  for r in back], at=(8,)) == md  # the table is recomputed from scores.csv alone
    assert (tmp_path / "out" / "curves.png").stat().st_size > 10_000


def _episodes(path: Path, wants: list[dict[str, bool]], infra: int = 0) -> None:
    eps = [{"task_id": f"t{i}", "infra_failure": False, "info": {"first_reply_wants": w}} for i, w in enumerate(wants)]
    eps += [{"task_id": "broken", "infra_failure": True, "info": {}}] * infra
    path.write_text("".join(json.dumps(e) + "\n" for e in eps))


def test_each_preference_is_reported_beside_the_score(tmp_path):
    d = _run(tmp_path / "sweep", "0", "prm", 0, {0: 0.0, 4: 0.0, 8: 0.5})
    yes, no = True, False
    _episodes(d / "eval_before.jsonl", [{"answers": yes, "short": no}, {"answers": yes, "short": no}])
    _episodes(d / "eval_it4.jsonl", [{"answers": no, "short": yes}, {"answers": yes, "short": no}], infra=1)
    _episodes(d / "eval_after.jsonl", [{"answers": yes, "short": yes}, {"answers": no, "short": yes}])
    (d / "eval_it4.jsonl.tmp").write_text("half written")  # not an evaluation
    wants = collect_wants([tmp_path / "sweep"])
    got = sorted((r["updates"], r["want"], r["rate"]) for r in wants)
    # the score stays at 0 from 0 to 4 updates while "short" goes 0 -> 1/2 (the infra failure not counted)
    assert got == [(0, "answers", 1.0), (0, "short", 0.0), (4, "answers", 0.5), (4, "short", 0.5),
                   (8, "answers", 0.5), (8, "short", 1.0)]
    assert "| casual | prm | oracle | short | 0.00 | 0.50 | 1.00 |" in wants_table(wants)

    out = tmp_path / "out"
    write(collect([tmp_path / "sweep"]), out, wants)
    assert "Per preference" in (out / "table.md").read_text()
    assert (out / "wants.png").stat().st_size > 10_000
    # a scores.csv brings the wants.csv beside it: a report can be redrawn from earlier results alone
    as_set = lambda rows: {tuple(sorted(r.items())) for r in rows}  # noqa: E731
    assert as_set(collect_wants([out / "scores.csv"])) == as_set(wants)


@pytest.mark.parametrize("name", sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml")))
def test_every_experiment_composes(name):
    cfg = compose([f"+experiment={name}"])
    assert cfg.mode.name and cfg.env.name

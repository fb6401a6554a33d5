"""The leaderboard CSV: schema, concurrent appends, malformed files reported and left untouched."""
import csv
import multiprocessing as mp

import pytest

from nextstate.leaderboard import COLUMNS, LeaderboardError, append_row, read_rows

REQUIRED = ["timestamp", "env", "split", "agent", "model", "signal", "seed", "n_tasks", "success_rate",
            "mean_steps", "infra_failures", "tokens", "wall_s", "run_dir", "git_commit"]


def _row(i):
    return {c: f"{c}{i}" for c in COLUMNS} | {"seed": i}


def test_schema_has_the_required_columns(tmp_path):
    path = tmp_path / "lb.csv"
    append_row(path, _row(0))
    header, rows = read_rows(path)
    assert all(c in header for c in REQUIRED)
    assert rows[0]["env"] == "env0"


def test_new_columns_extend_the_header(tmp_path):
    path = tmp_path / "lb.csv"
    append_row(path, _row(0))
    append_row(path, _row(1) | {"delta": 0.5})
    header, rows = read_rows(path)
    assert header[-1] == "delta" and rows[0]["delta"] == "" and rows[1]["delta"] == "0.5"


def _append_many(path, start):
    for i in range(start, start + 10):
        append_row(path, _row(i))


def test_concurrent_appends_lose_nothing(tmp_path):
    path = tmp_path / "lb.csv"
    procs = [mp.Process(target=_append_many, args=(path, k * 100)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    _, rows = read_rows(path)
    assert sorted(int(r["seed"]) for r in rows) == sorted(k * 100 + i for k in range(4) for i in range(10))


def test_truncated_row_is_reported_with_file_and_line(tmp_path):
    path = tmp_path / "lb.csv"
    append_row(path, _row(0))
    append_row(path, _row(1))
    text = path.read_text()
    path.write_text(text[: -len(text.splitlines()[-1]) // 2 - 1])  # cut the last row in half
    before = path.read_text()
    with pytest.raises(LeaderboardError, match=r"lb\.csv: line 3"):
        append_row(path, _row(2))
    assert path.read_text() == before


def test_missing_columns_are_reported(tmp_path):
    path = tmp_path / "lb.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([["timestamp", "success_rate"], ["x", "1"]])
    with pytest.raises(LeaderboardError, match="line 1: header lacks"):
        read_rows(path)


def test_a_control_character_in_a_value_keeps_the_file_readable(tmp_path):
    # a carriage return was written unquoted: the row split in two and every later run failed to read the file
    from nextstate.leaderboard import COLUMNS, append_row, read_rows

    path = tmp_path / "leaderboard.csv"
    row = {c: "x" for c in COLUMNS} | {"env": "terminal", "agent": "model", "seed": 0}
    append_row(path, row | {"model": "evil\rmodel", "run_dir": "/r/\n1", "suite": "a\x00b\ud800"})
    append_row(path, row | {"model": "plain"})
    header, rows = read_rows(path)
    assert [r["model"] for r in rows] == ["evil model", "plain"]
    assert rows[0]["run_dir"] == "/r/ 1" and rows[0]["suite"] == "a b\ufffd"

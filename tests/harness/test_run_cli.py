"""`python -m harness.run` as a user runs it: run dirs, leaderboard rows, kill -9 and resume."""
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nextstate.atomic import read_jsonl
from nextstate.leaderboard import read_rows
from tests.paths import ROOT
from tests.sampling import spread

pytestmark = pytest.mark.docker


def test_eval_run_writes_run_dir_and_leaderboard_row(tmp_path, harness_run):
    p = harness_run(tmp_path, "env=terminal", "agent=oracle", "split=test", "limit=2", "seed=3", "mode=eval")
    assert p.returncode == 0, p.stderr[-3000:]
    header, rows = read_rows(tmp_path / "leaderboard.csv")
    assert len(rows) == 1
    row = rows[0]
    assert (row["env"], row["agent"], row["split"], row["seed"], row["n_tasks"]) == (
        "terminal", "oracle", "test", "3", "2")
    assert float(row["success_rate"]) == 1.0 and row["infra_failures"] == "0"
    run_dir = Path(row["run_dir"])
    assert run_dir.name.endswith("__terminal__oracle__3")
    assert (run_dir / "config.yaml").exists() and (run_dir / "metrics.json").exists()
    assert len(read_jsonl(run_dir / "trajectories.jsonl")) == 2
    assert json.loads((run_dir / "metrics.json").read_text())["success_rate"] == 1.0
    assert "success rate 100.0%" in p.stdout


def test_unknown_agent_is_a_clear_error(tmp_path, harness_run):
    p = harness_run(tmp_path, "agent=nobody")
    assert p.returncode != 0 and "agent" in p.stderr and "nobody" in p.stderr


@pytest.mark.parametrize("overrides, says", spread([
    (["limit=-1"], "limit=-1: must be at least 1"),  # once ran every task but the last, without a word
    (["limit=0"], "limit=0: must be at least 1"),
    (["split=dev"], "split='dev': choose one of train, test, all"),
    (["seed=abc"], "seed='abc'"),
    (["parallel=0"], "parallel=0: must be at least 1"),
    (["env.max_steps=0"], "env.max_steps=0: must be at least 1"),  # once a leaderboard row of zeros
    (["env.obs_max_chars=-1"], "env.obs_max_chars=-1: must be at least 1"),
    (["model.max_new_tokens=0"], "model.max_new_tokens=0: must be at least 1"),
    (["mode=train", "mode.group_size=0"], "mode.group_size=0: must be at least 1"),
    (["mode=train", "mode.rollout_temperature=0"], "mode.rollout_temperature=0.0: must be above 0"),
    (["mode=train", "judge.m=0"], "judge.m=0: must be at least 1"),
    (["mode=async", "mode.batch_samples=0"], "mode.batch_samples=0: must be at least 1"),
    (["mode=train", "mode.lr_schedule=exponential"], "mode.lr_schedule=exponential: must be one of constant"),
    (["mode=train", "mode.lr_min_ratio=2"], "mode.lr_min_ratio=2.0: must be between 0 and 1"),
    (["mode=train", "mode.lr_warmup_steps=-1"], "mode.lr_warmup_steps=-1: must be at least 0"),
    (["mode=sft", "mode.eval_limit=-1"], "mode.eval_limit=-1: must be at least 1"),
    # ignored before: training evaluated every test task, and sampled rollouts at top_p 1.0
    (["mode=train", "limit=2"], "limit=2 selects the tasks of mode=eval; use mode.eval_limit=2"),
    (["mode=train", "model.top_p=0.9"], "model.top_p=0.9: training samples at top_p 1.0"),
], lambda case: " ".join(case[0]), fast=6))
def test_a_bad_number_stops_the_run_before_it_starts(tmp_path, overrides, says, harness_run):
    p = harness_run(tmp_path, "env=toolcall", "agent=oracle", *overrides)
    assert p.returncode != 0 and says in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "Loading weights" not in p.stdout + p.stderr  # no model, no tasks run
    assert not (tmp_path / "leaderboard.csv").exists()


@pytest.mark.slow
def test_kill_9_then_resume(tmp_path, docker, harness_run):
    env = dict(os.environ, NEXTSTATE_RESULTS=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "harness.run", "progress=false", "agent=oracle",
                             "split=train", "limit=4"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    traj_file = None
    while time.monotonic() < deadline:
        found = list((tmp_path / "runs").glob("*/trajectories.jsonl")) if (tmp_path / "runs").exists() else []
        if found and len(read_jsonl(found[0])) >= 1:
            traj_file = found[0]
            break
        time.sleep(0.05)
    assert traj_file is not None, "the run never finished an episode"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    n_done = len(read_jsonl(traj_file))
    assert n_done < 4 and not (tmp_path / "leaderboard.csv").exists()
    p = harness_run(tmp_path, "agent=oracle", "split=train", "limit=4", f"resume={traj_file.parent}")
    assert p.returncode == 0, p.stderr[-3000:]
    trajs = read_jsonl(traj_file)
    assert len(trajs) == 4 and len({t["task_id"] for t in trajs}) == 4  # nothing run twice
    _, rows = read_rows(tmp_path / "leaderboard.csv")
    assert rows[0]["n_tasks"] == "4" and float(rows[0]["success_rate"]) == 1.0
    # the killed run's container (if one was up) was reaped by the resumed run
    time.sleep(0.5)
    left = docker.containers.list(all=True, filters={"label": f"nextstate.run={traj_file.parent.name}"})
    assert not left


def _finished_run(tmp_path, harness_run, *overrides) -> Path:
    p = harness_run(tmp_path, "env=toolcall", "agent=oracle", "limit=2", *overrides)
    assert p.returncode == 0, p.stderr[-3000:]
    return Path(read_rows(tmp_path / "leaderboard.csv")[1][0]["run_dir"])


def test_resume_needs_a_run_there(tmp_path, harness_run):
    p = harness_run(tmp_path, "env=toolcall", "agent=oracle", f"resume={tmp_path / 'nowhere'}")
    assert p.returncode != 0 and "no run to resume" in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert not (tmp_path / "nowhere").exists() and not (tmp_path / "leaderboard.csv").exists()


@pytest.mark.slow
def test_resume_with_another_config_is_refused_with_the_runs_own_command(tmp_path, harness_run):
    run_dir = _finished_run(tmp_path, harness_run)
    p = harness_run(tmp_path, f"resume={run_dir}")  # the defaults: another env and agent
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "agent" in p.stderr and "env" in p.stderr
    assert f"python -m harness.run progress=false env=toolcall agent=oracle limit=2 resume={run_dir}" in p.stderr
    assert len(read_rows(tmp_path / "leaderboard.csv")[1]) == 1


@pytest.mark.slow
def test_a_run_recorded_before_a_key_existed_resumes_with_that_key_at_its_default(tmp_path, harness_run):
    """A config key added to the code after a run was recorded (its default keeps the old behaviour)
    does not stop the resume, and is named; setting it on the resume command changes the run: refused."""
    run_dir = _finished_run(tmp_path, harness_run)
    (run_dir / "metrics.json").unlink()  # as if killed before the end
    config = run_dir / "config.yaml"
    config.write_text("\n".join(line for line in config.read_text().splitlines() if "preempt_after_s" not in line))
    p = harness_run(tmp_path, "env=toolcall", "agent=oracle", "limit=2", "backend.preempt_after_s=5",
                    f"resume={run_dir}")
    assert p.returncode != 0 and "differs in: backend.preempt_after_s" in p.stderr, p.stderr[-2000:]
    p = harness_run(tmp_path, "env=toolcall", "agent=oracle", "limit=2", f"resume={run_dir}")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "new since that run, at their defaults: backend.preempt_after_s=2.0" in p.stderr
    assert len(read_rows(tmp_path / "leaderboard.csv")[1]) == 2


@pytest.mark.slow
def test_resuming_a_finished_run_files_no_second_row(tmp_path, harness_run):
    run_dir = _finished_run(tmp_path, harness_run)
    p = harness_run(tmp_path, "env=toolcall", "agent=oracle", "limit=2", "parallel=1", f"resume={run_dir}")
    assert p.returncode == 0 and "already finished" in p.stdout, p.stderr[-2000:]
    assert len(read_rows(tmp_path / "leaderboard.csv")[1]) == 1 and len(read_jsonl(run_dir / "trajectories.jsonl")) == 2


# The oracle held at the start of each episode until a gate file lets it go (tests/fixtures/gated_agent.py)
GATED_ORACLE = ["agent=oracle", "agent.name=gated_oracle",
                "agent._target_=tests.fixtures.gated_agent.GatedOracleAgent"]


@pytest.mark.slow
def test_ctrl_c_prints_the_command_that_resumes_the_same_run_dir(tmp_path):
    """Interrupted twice (the second time while resuming), each time the printed command names the
    run's own dir and overrides, and running it finishes the run. No race on the oracle's speed (the
    plain oracle once finished all four tasks before the signal landed): the gated oracle lets each
    process start one episode, so once that one is on disk the run is held in its next episode, and
    the interrupt always lands mid-run. The gate opens only after the resume command is printed."""
    env = dict(os.environ, NEXTSTATE_RESULTS=str(tmp_path))
    gate = tmp_path / "gate"
    overrides = ["progress=false", *GATED_ORACLE, f"+agent.gate={gate}", "split=train", "limit=4", "parallel=1"]
    command = [sys.executable, "-m", "harness.run", *overrides]
    run_dir, done = None, 0
    for _ in range(2):
        gate.write_text("1")
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            files = [run_dir / "trajectories.jsonl"] if run_dir else [*tmp_path.glob("runs/*/trajectories.jsonl")]
            if files and files[0].exists() and len(read_jsonl(files[0])) > done:
                run_dir = files[0].parent
                break
            time.sleep(0.05)
        assert proc.poll() is None and run_dir is not None, "the run ended or never finished an episode"
        done += 1
        assert len(read_jsonl(run_dir / "trajectories.jsonl")) == done < 4  # the next episode waits at the gate
        proc.send_signal(signal.SIGINT)
        printed = None
        for line in proc.stderr:  # the interrupt is handled once the resume command is printed ...
            if "resume with: " in line:
                printed = line.split("resume with: ")[1].strip()
                break
        gate.write_text("1000")  # ... then the held episode may go (into a closed env), and the process exits
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130 and printed is not None, err[-2000:]
        assert printed == shlex.join(["python", "-m", "harness.run", *overrides, f"resume={run_dir}"])
        assert len(read_jsonl(run_dir / "trajectories.jsonl")) == done  # the held episode filed nothing
        command = [sys.executable, *shlex.split(printed)[1:]]
    p = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    trajs = read_jsonl(run_dir / "trajectories.jsonl")
    assert len(trajs) == 4 and len({t["task_id"] for t in trajs}) == 4
    assert len(read_rows(tmp_path / "leaderboard.csv")[1]) == 1


@pytest.mark.slow
def test_a_run_dir_run_again_with_another_config_is_refused(tmp_path, harness_run):
    """A sweep's job dir (hydra.run.dir / hydra.sweep.dir) run again goes on only as the same run."""
    run_dir = tmp_path / "job"
    p = harness_run(tmp_path, "env=toolcall", "agent=oracle", "limit=2", f"hydra.run.dir={run_dir}")
    assert p.returncode == 0, p.stderr[-3000:]
    (run_dir / "metrics.json").unlink()  # as if killed before the end
    p = harness_run(tmp_path, "env=toolcall", "agent=noop", "limit=2", f"hydra.run.dir={run_dir}")
    assert p.returncode != 0 and "another config (differs in: agent._target_, agent.name)" in p.stderr, p.stderr[-2000:]
    assert "name: oracle" in (run_dir / "config.yaml").read_text()


@pytest.mark.slow
def test_a_run_that_graded_nothing_exits_non_zero_and_files_no_row(tmp_path, harness_run):
    # Docker unreachable: every terminal episode is an infra failure, and a 0% row once ranked as a result
    p = harness_run(tmp_path, "env=terminal", "agent=oracle", "limit=1", env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert p.returncode != 0
    assert "graded nothing: all 1 episodes were infra failures" in p.stderr, p.stderr[-2000:]
    assert not (tmp_path / "leaderboard.csv").exists() or not read_rows(tmp_path / "leaderboard.csv")[1]
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert not (run_dir / "metrics.json").exists()  # unfinished: resume= plays it again


@pytest.mark.slow
def test_sft_whose_demonstrations_never_ran_stops_before_fine_tuning(tmp_path, harness_run):
    # Docker unreachable: no oracle demonstration ran, so there is nothing to fine-tune on
    p = harness_run(tmp_path, "env=terminal", "mode=sft", "mode.eval_limit=1", env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert p.returncode == 1, p.stderr[-2000:]
    assert "episodes of the oracle demonstrations failed on infrastructure" in p.stderr, p.stderr[-2000:]
    assert "once it is back, resume with: python -m harness.run" in p.stderr and "Traceback" not in p.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert not (run_dir / "model").exists() and not (tmp_path / "leaderboard.csv").exists()


@pytest.mark.parametrize("overrides, says", [
    (["+unknwon=1"], "+unknwon: no such key"),
    (["limit=0"], "limit=0: must be at least 1"),
    (["env=chat", "env.persona=nobody"], "env.persona=nobody: unknown persona nobody"),
    (["env=terminal", "env.tasks_dir=/nonexistent"], "env.tasks_dir=/nonexistent: the task suite does not exist"),
    (["signal=outcome", "+signal.use_opd=true"], "signal.use_opd: no such setting"),  # the name picks what trains
])
def test_a_config_naming_nothing_is_one_line_and_leaves_no_run_dir(tmp_path, overrides, says, harness_run):
    p = harness_run(tmp_path, "agent=oracle", "limit=1", *overrides)
    assert p.returncode != 0 and says in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 3, p.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_an_empty_tasks_dir_is_one_line(tmp_path, harness_run):
    (tmp_path / "empty").mkdir()
    p = harness_run(tmp_path, "agent=oracle", "limit=1", f"env.tasks_dir={tmp_path / 'empty'}")
    assert p.returncode != 0 and "no task in it" in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]


def test_help_explains_the_public_keys(tmp_path, harness_run):
    p = harness_run(tmp_path, "--help")
    assert p.returncode == 0
    for words in ("env=terminal|toolcall|swe|gui|chat", "agent=model|oracle|noop|openai", "resume=<run dir>",
                  "results/leaderboard.csv", "experiment: demo"):
        assert words in p.stdout, words


def test_make_help_lists_the_targets():
    p = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    for target in ("demo", "test", "general", "personalization", "regress"):
        assert f"make {target} " in p.stdout, target


@pytest.mark.slow
def test_run_log_holds_the_runs_lines_and_the_bar_counts_steps(tmp_path, harness_run):
    p = harness_run(tmp_path, "env=toolcall", "agent=oracle", "limit=2", "progress=true")
    assert p.returncode == 0, p.stderr[-2000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    log = (run_dir / "run.log").read_text()
    assert "[nextstate] mode=eval env=toolcall agent=oracle" in log.splitlines()[0]
    assert "success rate 100.0%" in log and "\r" not in log
    assert "steps=" in p.stderr and "success=2" in p.stderr


@pytest.mark.slow
def test_a_sweep_says_how_many_runs_it_has_and_what_is_left(tmp_path, run_cli):
    p = run_cli("harness.run", "-m", "progress=false", "env=toolcall", "agent=oracle,noop", "limit=1", "seed=0,1",
                env={"NEXTSTATE_RESULTS": tmp_path}, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = [x for x in p.stdout.splitlines() if x.startswith("[sweep]")]
    assert lines[0].startswith("[sweep] 4 runs -> ")
    assert lines[1].startswith("[sweep] 1/4 runs finished after") and "left" in lines[1]
    assert lines[-1].startswith("[sweep] 4/4 runs finished after")

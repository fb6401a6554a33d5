"""mode=sft_judge on a general agent's env: the judge reads the task, learns each step's verifiable
labels as the oracle judge votes them, never from an episode that did not run, and a real run on the
terminal suite leaves a judge a training run can load."""
import json

import pytest
from omegaconf import OmegaConf

from agents.factory import model_path
from agents.serving.chat import render_prompt_ids
from nextstate.config import ModelConfig, compose, typed
from nextstate.types import Judgement, NextState, Step, Trajectory
from trainers.feedback.judge_accuracy import vote_scores
from trainers.feedback.model_judge import JudgeConfig, parse_vote, render
from trainers.feedback.oracle_judge import oracle_vote
from trainers.sft_step_judge import STEP_ANSWERS, labelled_steps, step_judge_samples

TASK = "Write the number of lines in notes.md to count.txt.\n\nYou are user `agent` in /app."


def _step(command: str, output: str, exit_code: int, **labels) -> Step:
    msgs = [{"role": "system", "content": "You are an agent in a Linux shell."}, {"role": "user", "content": TASK},
            {"role": "assistant", "content": "```bash\nls\n```"}, {"role": "user", "content": "notes.md"}]
    return Step(1, msgs, f"```bash\n{command}\n```", NextState("terminal", output, exit_code=exit_code, cwd="/app"),
                info={"step_label": labels} if labels else {})


RIGHT = _step("wc -l < notes.md > count.txt", "", 0, parsed=True, exit_ok=True, progress=True)
NO_PROGRESS = _step("echo done", "done", 0, parsed=True, exit_ok=True, progress=False)
FAILED = _step("wc -l < nots.md > count.txt", "bash: nots.md: No such file or directory", 1,
               parsed=True, exit_ok=False, progress=False)
UNLABELLED = _step("ls", "notes.md", 0)


def test_the_task_judge_reads_the_task_the_action_and_what_came_back(cfg):
    judge = typed(compose(["judge=model_task"]).judge, JudgeConfig)
    prompt = render(judge.template, FAILED)
    assert TASK in prompt and "wc -l < nots.md" in prompt
    assert "[exit code 1]\nbash: nots.md: No such file or directory" in prompt
    assert prompt.count("notes.md") == 1  # the task is the first user message, not a later observation
    # judge=model (OpenClaw-RL's judge) still never sees the task
    assert TASK not in render(typed(cfg.judge, JudgeConfig).template, FAILED)


def test_the_answers_are_the_oracle_votes():
    assert {v: parse_vote(a) for v, a in STEP_ANSWERS.items()} == {1: 1, -1: -1}
    assert [oracle_vote(s) for s in (RIGHT, NO_PROGRESS, FAILED, UNLABELLED)] == [1, -1, -1, 0]


def test_labelled_steps_skip_episodes_that_did_not_run_and_steps_without_labels():
    ran = Trajectory("t1", "terminal", steps=[UNLABELLED, RIGHT, NO_PROGRESS])
    broken = Trajectory("t2", "terminal", steps=[FAILED], infra_failure=True, infra_reason="docker exec cut")
    assert labelled_steps([ran, broken]) == [RIGHT, NO_PROGRESS]


def test_vote_scores_read_a_general_steps_labels():
    got = vote_scores([RIGHT, NO_PROGRESS, FAILED],
                      [Judgement(votes=(1, 1, None), score=1.0), Judgement(votes=(1, 1, 1), score=1.0),
                       Judgement(votes=(-1, -1, 0), score=-2 / 3)])
    assert got["satisfied_steps"] == 1 and got["accuracy"] == round(2 / 3, 3) and got["valid"] == round(8 / 9, 3)


@pytest.mark.model
def test_samples_are_the_task_judges_prompt_and_the_labels_answer(cfg):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path(typed(cfg.model, ModelConfig), cfg.paths.cache_dir))
    judge = typed(compose(["judge=model_task"]).judge, JudgeConfig)
    steps = [RIGHT, NO_PROGRESS, FAILED]
    for step, sample in zip(steps, step_judge_samples(steps, tokenizer, judge)):
        asked = [{"role": "system", "content": judge.system}, {"role": "user", "content": render(judge.template, step)}]
        assert sample.prompt_ids == render_prompt_ids(tokenizer, asked)  # what ModelJudge sends
        assert tokenizer.decode(sample.response_ids) == STEP_ANSWERS[oracle_vote(step)] + "<|im_end|>"


def test_the_judge_learns_the_grids_own_steps():
    """The judge is taught on the env, model and server the terminal grid runs: another suite's or
    step limit's steps would be another job."""
    judge_run, grid = compose(["+experiment=sft_judge_general_terminal"]), compose(["+experiment=general_terminal"])
    for part in ("env", "model", "backend"):
        assert OmegaConf.to_container(judge_run[part]) == OmegaConf.to_container(grid[part]), part
    assert judge_run.judge.name == "model_task"


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.model
def test_a_terminal_judge_is_trained_and_measured_end_to_end(harness_run, tmp_path):
    run_dir = tmp_path / "judge_run"
    done = harness_run(tmp_path, "+experiment=sft_judge_general_terminal", "model.init_from=null",
                       "mode.train_limit=3", "mode.eval_limit=2", "mode.sampled_replies=1", "mode.epochs=1",
                       "parallel=2", f"hydra.run.dir={run_dir}", timeout=540)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["env"] == "terminal" and metrics["judge"] == "model_task"
    assert metrics["train_tasks"] == 3 and metrics["test_tasks"] == 2
    # the oracle's steps alone give at least one right step per task
    assert metrics["train_right"] >= 3 and metrics["train_samples"] == metrics["train_steps"]
    for when in ("test_before", "test_after"):
        assert metrics[when]["steps"] == metrics["test_steps"] and 0 <= metrics[when]["valid"] <= 1
    assert (run_dir / "judge" / "config.json").is_file()  # what judge.model= loads
    assert "judge=model_task judge.model=" in done.stdout + done.stderr

"""mode=sft_judge's training data: the judge prompt exactly as the model judge renders it, the env's
verdict as the answer, and only train-split steps."""
import pytest

from agents.factory import model_path
from agents.serving.chat import render_prompt_ids
from nextstate.config import ModelConfig, typed
from nextstate.types import NextState, Step
from trainers.feedback.model_judge import JudgeConfig, parse_vote, render
from trainers.sft_judge import ANSWERS, judge_samples


def _step(reply: str, user: str, satisfied: bool) -> Step:
    return Step(0, [{"role": "user", "content": "plan my trip"}], reply, NextState("user", user),
                info={"step_label": {"satisfied": satisfied}})


def test_the_answers_parse_as_the_votes_the_verdicts_call_for():
    assert parse_vote(ANSWERS[True]) == 1 and parse_vote(ANSWERS[False]) == -1


@pytest.mark.model
def test_samples_are_the_model_judges_prompt_and_the_verdicts_answer(cfg):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path(typed(cfg.model, ModelConfig), cfg.paths.cache_dir))
    judge = typed(cfg.judge, JudgeConfig)
    steps = [_step("hey, try the coast road", "thanks!", True),
             _step("Certainly! Here are 5 options:", "too long", False)]
    samples = judge_samples(steps, tokenizer, judge)
    for step, sample in zip(steps, samples):
        asked = [{"role": "system", "content": judge.system}, {"role": "user", "content": render(judge.template, step)}]
        assert sample.prompt_ids == render_prompt_ids(tokenizer, asked)  # what ModelJudge sends
        assert step.action_text in tokenizer.decode(sample.prompt_ids)
        answer = tokenizer.decode(sample.response_ids)
        assert answer == ANSWERS[step.info["step_label"]["satisfied"]] + "<|im_end|>"
        assert len(sample.advantages) == len(sample.response_ids)

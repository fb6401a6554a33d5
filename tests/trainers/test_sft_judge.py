"""mode=sft_judge's training data: the judge prompt exactly as the model judge renders it, the env's
verdict as the answer, and only train-split steps; the hint prompt as the model hinter renders it, with
the wish the complaint names as the hint."""
import pytest

from agents.factory import model_path
from agents.serving.chat import render_prompt_ids
from nextstate.config import ModelConfig, typed
from nextstate.types import NextState, Step
from trainers.feedback.model_judge import HintConfig, JudgeConfig, best_hint, parse_hint, parse_vote, render
from trainers.sft_judge import ANSWERS, NO_HINT, hint_answer, hint_samples, judge_samples


def _step(reply: str, user: str, satisfied: bool, named_wish: str = "") -> Step:
    return Step(0, [{"role": "user", "content": "plan my trip"}], reply,
                NextState("user", user, fields={"named_wish": named_wish}),
                info={"step_label": {"satisfied": satisfied}})


def test_the_answers_parse_as_the_votes_the_verdicts_call_for():
    assert parse_vote(ANSWERS[True]) == 1 and parse_vote(ANSWERS[False]) == -1


def test_the_hint_answers_parse_as_the_hinter_reads_them():
    """What the hinter is taught must come back out of `best_hint` with the default `min_chars`, or the
    trained hinter's hints would be dropped as the untrained one's were."""
    wish = "Say it in one short sentence, under 20 words."
    assert parse_hint(hint_answer(wish)) == wish and parse_hint(NO_HINT) is None
    assert best_hint([NO_HINT, hint_answer(wish), "no box"], min_chars=10) == wish


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


@pytest.mark.model
def test_hint_samples_teach_the_named_wish_and_skip_what_has_none(cfg):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path(typed(cfg.model, ModelConfig), cfg.paths.cache_dir))
    hints = typed(cfg.hints, HintConfig)
    steps = [_step("Sure! Here are 5 options:", "too long", False, "Keep it under 30 words."),
             _step("hey, try the coast road", "thanks!", True),
             _step("Sure!", "hm", False, "")]  # a complaint naming no wish: nothing to teach
    samples = hint_samples(steps, tokenizer, hints)
    assert len(samples) == 2
    asked = [{"role": "system", "content": hints.system}, {"role": "user", "content": render(hints.template, steps[0])}]
    assert samples[0].prompt_ids == render_prompt_ids(tokenizer, asked)  # what ModelJudge.hints sends
    assert tokenizer.decode(samples[0].response_ids) == hint_answer("Keep it under 30 words.") + "<|im_end|>"
    assert tokenizer.decode(samples[1].response_ids) == NO_HINT + "<|im_end|>"

"""The typed Job a run gets: each judge and hint kind is typed into its own class, so a field that kind
does not have is refused by name, and the presets compose into the classes their kinds name."""
import pytest

from harness.job import compose_job
from nextstate.config import ConfigError
from trainers.feedback.model_judge import HintConfig, JudgeConfig, NextStateHintConfig
from trainers.feedback.oracle_judge import GivenHintConfig, OracleJudgeConfig


@pytest.mark.parametrize("overrides, judge_cls, hints_cls", [
    (["+experiment=general_toolcall"], OracleJudgeConfig, GivenHintConfig),
    (["+experiment=personalization"], OracleJudgeConfig, GivenHintConfig),
    (["+experiment=personal_chat"], JudgeConfig, HintConfig),
    (["mode=train", "hints=next_state"], JudgeConfig, NextStateHintConfig),
])
def test_each_kind_is_typed_into_its_own_class(overrides, judge_cls, hints_cls):
    job = compose_job(overrides)
    assert type(job.judge) is judge_cls and type(job.hints) is hints_cls


def test_the_personal_chat_preset_keeps_its_majority_vote():
    assert compose_job(["+experiment=personal_chat"]).judge.aggregate == "majority"


@pytest.mark.parametrize("overrides, says", [
    (["mode=train", "judge=oracle", "+judge.template=x"], "judge.template: judge=oracle has no such field "
                                                          "(its fields: name, m)"),
    (["mode=train", "hints=wish", "+hints.min_chars=3"], "hints.min_chars: hints=wish has no such field"),
    (["+experiment=personal_chat", "+feedback=oracle"], "judge.aggregate: judge=oracle has no such field"),
])
def test_a_field_the_kind_does_not_have_is_refused_by_name(overrides, says):
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)")):
        compose_job(overrides)

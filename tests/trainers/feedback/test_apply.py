"""Feedback on a batch: a judge whose answers mostly fail to parse (cut short by the server's request
deadline, or not ending in \\boxed{}) leaves those steps at score 0, out of the update; the run says so
instead of training on a fraction of its batch in silence."""
from nextstate.types import Judgement, NextState, Step
from trainers.feedback.apply import judge_and_teach
from trainers.signals import SignalConfig
from trainers.signals.steps import JudgedStep

PRM = SignalConfig("prm", w_rl=1.0, w_opd=0.0, baseline="none", opd_topk=0)


class _Judge:
    def __init__(self, votes):
        self._votes = votes

    def votes(self, steps, salt=0):
        return [Judgement(votes=v, score=0.0) for v in self._votes]


def _steps(n):
    return [JudgedStep("t", 0, i, [1], [2], [-0.1], 0.0, Step(i, [], "a", NextState("terminal", "", exit_code=0)))
            for i in range(n)]


def test_a_judge_whose_votes_mostly_fail_is_named(capsys):
    info = judge_and_teach(_steps(3), _Judge([(1, None, None), (None, None, None), (-1, None, None)]), None, PRM,
                           None, "", lambda g: None, salt=0)
    assert info["judge_votes"] == 2
    err = capsys.readouterr().out
    assert "2 of 9 judge votes parsed" in err and "request_deadline_s" in err


def test_a_judge_that_answers_is_quiet(capsys):
    judge_and_teach(_steps(2), _Judge([(1, 1, None), (-1, -1, -1)]), None, PRM, None, "", lambda g: None, salt=0)
    assert "judge votes parsed" not in capsys.readouterr().out

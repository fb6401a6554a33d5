"""The judge check's numbers, by hand: vote validity over all m x steps answers, accuracy of the
step score's sign against the user's verdict over the steps it scored, and the share scored; and the
hint check's: hints given and exact on complaints, silence on thanks."""
from nextstate.types import Judgement, NextState, Step
from trainers.feedback.judge_accuracy import hint_scores, vote_scores


def _step(satisfied: bool, named_wish: str = "") -> Step:
    return Step(0, [], "reply", NextState("user", "ok", fields={"named_wish": named_wish}),
                info={"step_label": {"satisfied": satisfied}})


def test_validity_accuracy_and_coverage():
    steps = [_step(True), _step(False), _step(False), _step(True)]
    judgements = [Judgement(votes=(1, 1, None), score=1.0),     # right
                  Judgement(votes=(1, -1, 1), score=1.0),       # wrong
                  Judgement(votes=(-1, None, None), score=-1.0),  # right
                  Judgement(votes=(None, None, None), score=0.0)]  # unscored: masked out of training
    got = vote_scores(steps, judgements)
    assert got["valid"] == 6 / 12 and got["scored"] == 0.75 and got["accuracy"] == round(2 / 3, 3)
    assert got["steps"] == 4 and got["satisfied_steps"] == 2 and got["votes"] == 12
    assert vote_scores(steps[:1], [Judgement(votes=(None,), score=0.0)])["accuracy"] is None


def test_wrong_steps_caught_and_false_alarms():
    """Of the 3 wrong steps the judge scores 1 below 0 (recall 1/3); of its 2 scores below 0, 1 is on a
    wrong step (precision 1/2). A judge that votes +1 everywhere has accuracy 0.4 here but recall 0."""
    steps = [_step(False), _step(False), _step(False), _step(True), _step(True)]
    judgements = [Judgement(votes=(-1,), score=-1.0), Judgement(votes=(1,), score=1.0),
                  Judgement(votes=(None,), score=0.0), Judgement(votes=(-1,), score=-1.0),
                  Judgement(votes=(1,), score=1.0)]
    got = vote_scores(steps, judgements)
    assert got["wrong_recall"] == round(1 / 3, 3) and got["wrong_precision"] == 0.5
    all_yes = vote_scores(steps, [Judgement(votes=(1,), score=1.0)] * 5)
    assert all_yes["accuracy"] == 0.4 and all_yes["wrong_recall"] == 0.0 and all_yes["wrong_precision"] is None


def test_hints_given_exact_and_silent():
    short = "Say it in one short sentence."
    steps = [_step(False, short), _step(False, short), _step(False, "No list."), _step(True), _step(True)]
    hints = [" say it in one short sentence. ",  # exact, case and space aside
             "Be brief.",                         # given, not the named wish
             None,                                # a complaint left without a hint
             None,                                # thanks, rightly silent
             "Answer it."]                        # a hint on thanks
    got = hint_scores(steps, hints)
    assert got == {"complained_steps": 3, "given": round(2 / 3, 3), "exact": round(1 / 3, 3), "silent": 0.5}
    assert hint_scores(steps[3:], hints[3:])["given"] is None  # no complaint: undefined, not 0

"""Judge parsing and voting on crafted outputs; hint selection; teacher context; judge accuracy."""
import pytest

from nextstate.types import NextState, Step
from trainers.feedback.judge_accuracy import judge_accuracy
from trainers.feedback.model_judge import (
    aggregate_votes,
    best_hint,
    fill,
    parse_hint,
    parse_vote,
    render,
    teacher_messages,
)


@pytest.mark.parametrize("text,vote", [
    ("The command failed with an error. \\boxed{-1}", -1),
    ("Looks good \\boxed{1}", 1),
    ("unclear \\boxed{0}", 0),
    ("first \\boxed{1} then reconsidered \\boxed{-1}", -1),  # the last answer counts
    ("boxed{1} without the backslash", 1),
    ("\\boxed{ +1 }", 1),
    ("\\boxed{2}", None),
    ("no answer at all", None),
    ("\\boxed{yes}", None),
])
def test_parse_vote(text, vote):
    assert parse_vote(text) == vote


def test_majority_ties_and_unparsable_give_zero():
    assert aggregate_votes([1, 1, -1], "majority") == 1.0
    assert aggregate_votes([1, -1, None], "majority") == 0.0  # tie
    assert aggregate_votes([None, None, None], "majority") == 0.0
    assert aggregate_votes([-1, -1, 0], "majority") == -1.0


def test_mean_of_valid_votes():
    assert aggregate_votes([1, 1, -1], "mean") == pytest.approx(1 / 3)
    assert aggregate_votes([1, None, 0], "mean") == 1.0  # 0 and unparsable are not valid votes
    assert aggregate_votes([None, 0], "mean") == 0.0
    with pytest.raises(ValueError):
        aggregate_votes([1], "median")


def test_hints_keep_longest_positive_over_ten_chars():
    texts = [
        "\\boxed{1} [HINT_START]Use cp, not mv.[HINT_END]",
        "\\boxed{1} [HINT_START]Short.[HINT_END]",  # 6 chars: too short
        "\\boxed{-1} [HINT_START]This hint belongs to a negative vote and is long.[HINT_END]",
        "\\boxed{1} [HINT_START]Quote the path because it contains spaces.[HINT_END]",
        "\\boxed{1} but no markers",
    ]
    assert parse_hint(texts[2]) is None and parse_hint(texts[4]) is None
    assert best_hint(texts, 10) == "Quote the path because it contains spaces."
    assert best_hint(texts[1:3], 10) is None  # no hint -> the sample is dropped from OPD


def test_templates_keep_literal_braces():
    assert fill("say \\boxed{1} about {action}", action="ls") == "say \\boxed{1} about ls"
    step = Step(0, [], "ls /nope", NextState(kind="terminal", text="No such file", exit_code=2))
    out = render("A={action} R={role} N={next_state} \\boxed{-1}", step)
    assert out == "A=ls /nope R=terminal output N=[exit code 2]\nNo such file \\boxed{-1}"


def test_teacher_context_appends_hint_to_last_user_message():
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "task"},
            {"role": "assistant", "content": "a1"}, {"role": "user", "content": "out1"}]
    step = Step(1, msgs, "a2", NextState(kind="terminal", text=""))
    t = teacher_messages(step, "use -r", "\n\n[user's hint / instruction]\n{hint}")
    assert t[-1]["content"] == "out1\n\n[user's hint / instruction]\nuse -r"
    assert t[:3] == msgs[:3] and msgs[-1]["content"] == "out1"  # the original is untouched


def test_judge_accuracy_precision_recall():
    pairs = [(-1.0, {"ok": False}), (-0.3, {"ok": True}), (1.0, {"ok": False}), (1.0, {"ok": True}),
             (-1.0, {"a": True, "b": False})]
    acc = judge_accuracy(pairs)  # TP=2 (rows 1,5), FP=1 (row 2), FN=1 (row 3)
    assert acc == {"precision": 2 / 3, "recall": 2 / 3, "n": 5}
    assert judge_accuracy([(1.0, {"ok": True})]) == {"precision": None, "recall": None, "n": 1}


def test_next_state_hint_is_what_came_back_clipped_and_short_replies_are_none():
    from trainers.feedback.model_judge import next_state_hint

    mk = lambda text: Step(0, [{"role": "user", "content": "q"}], "a", NextState(kind="user", text=text))  # noqa: E731
    assert next_state_hint(mk("  No - use wc -l for that.  "), 10) == "No - use wc -l for that."
    assert next_state_hint(mk("thanks"), 10) is None and next_state_hint(mk("0123456789"), 10) is None
    long = next_state_hint(mk("x" * 1000 + "y" * 1000), 10)
    assert long.startswith("x" * 750) and long.endswith("y" * 750) and "[...]" in long and len(long) < 1520


def test_the_wish_hinter_passes_the_envs_unmet_wishes_and_no_hint_when_none():
    from trainers.feedback.registry import HINTERS
    from trainers.signals import JudgedStep

    def mk(wish: str) -> JudgedStep:
        step = Step(0, [{"role": "user", "content": "q"}], "a", NextState(kind="user", text="Too long.",
                                                                           fields={"wish": wish}))
        return JudgedStep("g", 0, 0, [1], [2], [-0.5], 0.0, step)

    hinter = HINTERS["wish"].build(None)
    assert HINTERS["wish"].reads_labels and not HINTERS["wish"].needs_model  # an oracle: only where there are tasks
    assert hinter([mk("Keep it under 30 words."), mk("")]) == ["Keep it under 30 words.", None]
    terminal = JudgedStep("g", 0, 0, [1], [2], [-0.5], 0.0, Step(0, [], "ls", NextState(kind="shell", text="")))
    with pytest.raises(SystemExit, match="hints=wish needs an env"):  # not a silent run without OPD
        hinter([terminal])

"""The judges and hinters a run may choose, keyed by their config group's `name` (conf/judge/,
conf/hints/): one table instead of if-chains, and each entry says what it needs, so a run starts
the frozen server only when something reads it and refuses label-reading feedback where there are
no tasks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, Protocol, TypeVar

from nextstate.types import Judgement, Step
from trainers.feedback.model_judge import HintConfig, JudgeConfig, ModelJudge, NextStateHintConfig, next_state_hint
from trainers.feedback.oracle_judge import GivenHintConfig, OracleHints, OracleJudge, OracleJudgeConfig
from trainers.signals import JudgedStep


class StepJudge(Protocol):
    def votes(self, steps: list[Step], salt: int = 0) -> list[Judgement]: ...


Hinter = Callable[[list[JudgedStep]], list[str | None]]  # a hint (or None) per judged step


@dataclass
class FeedbackSources:
    """What feedback may read: the frozen model's judge (None when no frozen server runs), each train
    task's reference solution, and the configs."""

    model_judge: ModelJudge | None
    reference_actions: Callable[[str], list[str]]  # task id -> its reference solution
    judge_cfg: JudgeConfig | OracleJudgeConfig
    hints_cfg: HintConfig | NextStateHintConfig | GivenHintConfig


T = TypeVar("T")


@dataclass(frozen=True)
class FeedbackKind(Generic[T]):
    build: Callable[[FeedbackSources], T]
    config: type  # the class its conf/judge/ or conf/hints/ YAML is typed into: its own fields only
    needs_model: bool  # served by the frozen endpoint
    reads_labels: bool  # a task's labels or reference: only where there are tasks


def _model_hinter(s: FeedbackSources) -> Hinter:
    return lambda steps: s.model_judge.hints([st.step for st in steps])


def _oracle_hinter(s: FeedbackSources) -> Hinter:
    oracle = OracleHints(s.reference_actions)  # built only from each task's own reference solution
    return lambda steps: oracle.hints_for([st.group for st in steps], [st.step for st in steps])


def _wish_hinter(s: FeedbackSources) -> Hinter:
    """The env's statement of what the reply missed (chat personas: each unmet want's instruction), as a
    perfect hint extractor would read it from the complaint. An oracle: it reads the env's labels."""
    def hints(steps: list[JudgedStep]) -> list[str | None]:
        if any("wish" not in st.step.next_state.fields for st in steps):
            raise SystemExit("hints=wish needs an env whose next state states the user's wishes (env=chat); "
                             "use hints=oracle, model or next_state here")
        return [st.step.next_state.fields["wish"] or None for st in steps]

    return hints


def _next_state_hinter(s: FeedbackSources) -> Hinter:
    return lambda steps: [next_state_hint(st.step, s.hints_cfg.min_chars) for st in steps]


JUDGES: dict[str, FeedbackKind[StepJudge | None]] = {
    "model": FeedbackKind(lambda s: s.model_judge, JudgeConfig, needs_model=True, reads_labels=False),
    "model_task": FeedbackKind(lambda s: s.model_judge, JudgeConfig, needs_model=True, reads_labels=False),
    "oracle": FeedbackKind(lambda s: OracleJudge(s.judge_cfg.m), OracleJudgeConfig, needs_model=False,
                           reads_labels=True),
}
HINTERS: dict[str, FeedbackKind[Hinter]] = {
    "model": FeedbackKind(_model_hinter, HintConfig, needs_model=True, reads_labels=False),
    "oracle": FeedbackKind(_oracle_hinter, GivenHintConfig, needs_model=False, reads_labels=True),
    "next_state": FeedbackKind(_next_state_hinter, NextStateHintConfig, needs_model=False, reads_labels=False),
    "wish": FeedbackKind(_wish_hinter, GivenHintConfig, needs_model=False, reads_labels=True),
}


def choose(table: dict[str, FeedbackKind[T]], group: str, name: str) -> FeedbackKind[T]:
    """The table's entry for `name`, or an exit naming the choices (`hints=nope` stops the run at once)."""
    if name not in table:
        raise SystemExit(f"{group}={name} is unknown ({' | '.join(table)})")
    return table[name]

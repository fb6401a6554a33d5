"""Controls that separate the signal from the judge: votes from the env's verifiable step labels
(`judge=oracle`) and hints from the task's own reference solution (`hints=oracle`). With them a sweep
shows what each signal could do with a perfect judge, and what the model judge's errors cost."""
from __future__ import annotations

from dataclasses import dataclass

from nextstate.types import Judgement, Step


@dataclass
class OracleJudgeConfig:
    """`judge=oracle`: the step label is the vote, so there is nothing to sample or prompt."""

    name: str
    m: int  # votes recorded per step (all the label's)


@dataclass
class GivenHintConfig:
    """`hints=oracle` and `hints=wish`: the hint is given (the task's reference, the user's wishes), not
    extracted, so all there is to set is how the teacher reads it."""

    name: str
    teacher_suffix: str  # appended to the last user message; `{hint}` is the hint


def oracle_vote(step: Step) -> int:
    """+1 when every verifiable label of the step holds, -1 when one fails, 0 when it has none."""
    labels = step.info.get("step_label")
    if not labels:
        return 0
    return 1 if all(bool(v) for v in labels.values()) else -1


class OracleJudge:
    def __init__(self, m: int = 1):
        self.m = m

    def votes(self, steps: list[Step], salt: int = 0) -> list[Judgement]:
        out = []
        for s in steps:
            v = oracle_vote(s)
            out.append(Judgement(votes=(v,) * self.m, score=float(v), raw=("oracle",)))
        return out


def oracle_hint(reference_actions: list[str], step_index: int) -> str | None:
    """The reference reply for this step, stated as an instruction; None past the reference's end."""
    if step_index >= len(reference_actions):
        return None
    ref = reference_actions[step_index].strip()
    return f"The correct reply at this point is:\n{ref}" if ref else None


class OracleHints:
    """Built only from the current task's reference, fetched when a step of that task first needs it
    (some envs compute a reference by solving a private copy of the episode)."""

    def __init__(self, reference_of):
        self._reference_of = reference_of
        self._cache: dict[str, list[str]] = {}

    def hints_for(self, task_ids: list[str], steps: list[Step]) -> list[str | None]:
        out = []
        for t, s in zip(task_ids, steps):
            if t not in self._cache:
                self._cache[t] = list(self._reference_of(t))
            out.append(oracle_hint(self._cache[t], s.index))
        return out

"""What a training run has done so far. Checkpointed beside the weights (state.json), so a resumed run
continues its counts, its curve and its schedule exactly where the killed one stopped."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields


@dataclass
class RunState:
    iteration: int = -1  # the last finished update (-1: none yet)
    success_before: float | None = None  # the evaluation before training (None: no tasks, mode=proxy)
    train_episodes: int = 0
    train_samples: int = 0
    tokens: int = 0
    judge_votes: int = 0
    hints_accepted: int = 0
    step_scores: list[float] = field(default_factory=list)  # each judged step's majority score
    judge_pairs: list[list] = field(default_factory=list)  # [score, the step's label] where tasks label steps
    curve: list[list[float]] = field(default_factory=list)  # [train episodes, test success]
    dropped_stale: int = 0  # async and proxy: samples too many versions behind the trainer
    groups_started: int = 0  # async: the number of the next group to roll out
    open_from: int = 0  # proxy: the first session step not trained on yet

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RunState:
        """A checkpoint's state; keys it lacks (written by a mode that does not count them) start at 0."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
